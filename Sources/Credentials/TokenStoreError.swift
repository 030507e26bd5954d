import Glibc

/// A failed file-system call of the token store, naming the call, the path and the errno text.
public struct TokenStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The call that failed, e.g. `rename`.
    public let call: String
    /// The path it was given (never a secret).
    public let path: String
    /// The errno value.
    public let errnoCode: CInt

    /// An error for `call` on `path` failing with `errnoCode`.
    public init(call: String, path: String, errnoCode: CInt) {
        self.call = call
        self.path = path
        self.errnoCode = errnoCode
    }

    /// "rename(/state/tokens.json.tmp) failed: Permission denied (errno 13)".
    public var description: String {
        "\(call)(\(path)) failed: \(String(cString: strerror(errnoCode))) (errno \(errnoCode))"
    }
}
