/// Why and where a JSON document failed to parse.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure, for code that branches on it.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Kind: Sendable, Hashable {
            case unexpectedEnd, unexpectedCharacter, invalidLiteral, invalidNumber
            case numberOutOfRange, invalidString, invalidEscape, invalidUnicode
            case duplicateKey, trailingComma, trailingData, tooDeep
        }
        private let kind: Kind

        /// The input ended inside a value.
        public static let unexpectedEnd = Code(kind: .unexpectedEnd)
        /// A byte that cannot start or continue a value here.
        public static let unexpectedCharacter = Code(kind: .unexpectedCharacter)
        /// A misspelt `true`, `false` or `null`.
        public static let invalidLiteral = Code(kind: .invalidLiteral)
        /// A number that breaks the grammar (leading zero, missing digits).
        public static let invalidNumber = Code(kind: .invalidNumber)
        /// A number too large for a `Double`.
        public static let numberOutOfRange = Code(kind: .numberOutOfRange)
        /// An unescaped control character or unterminated string.
        public static let invalidString = Code(kind: .invalidString)
        /// A backslash escape that JSON does not define.
        public static let invalidEscape = Code(kind: .invalidEscape)
        /// Malformed UTF-8 or a lone UTF-16 surrogate.
        public static let invalidUnicode = Code(kind: .invalidUnicode)
        /// An object names the same key twice.
        public static let duplicateKey = Code(kind: .duplicateKey)
        /// A comma before `]` or `}`.
        public static let trailingComma = Code(kind: .trailingComma)
        /// Bytes after the top-level value.
        public static let trailingData = Code(kind: .trailingData)
        /// Arrays and objects nested deeper than the limit.
        public static let tooDeep = Code(kind: .tooDeep)

        /// The code's name.
        public var description: String { "\(kind)" }
    }

    /// What kind of failure.
    public var code: Code
    /// A plain-English sentence saying what is wrong.
    public var message: String
    /// 1-based line of the offending byte.
    public var line: Int
    /// 1-based column of the offending character (counted in Unicode scalars).
    public var column: Int
    /// 0-based byte offset of the offending byte.
    public var offset: Int

    /// An error at a position.
    public init(code: Code, message: String, line: Int, column: Int, offset: Int) {
        self.code = code
        self.message = message
        self.line = line
        self.column = column
        self.offset = offset
    }

    /// "line 3, column 7: expected ',' or '}'".
    public var description: String { "line \(line), column \(column): \(message)" }
}
