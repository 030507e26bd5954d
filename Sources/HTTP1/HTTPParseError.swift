/// Why a request was refused by the parser: every smuggling defence is a named case.
///
/// A struct over a private enum so that new cases are additive (docs/architecture.md, "Errors are
/// structs over private enum codes").
public struct HTTPParseError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: String, Sendable {
        case invalidRequestLine, invalidMethod, invalidTarget, invalidVersion, unsupportedVersion
        case bareCR, bareLF, obsFold, whitespaceBeforeColon, invalidHeaderName, invalidHeaderValue
        case headTooLarge, tooManyHeaders
        case missingHost, duplicateHost, invalidHost
        case contentLengthWithTransferEncoding, transferEncodingOnHTTP10, transferEncodingNotChunked
        case chunkedTwice, unsupportedTransferCoding, invalidContentLength, differingContentLengths
        case contentLengthOverflow, invalidChunkSize, chunkSizeOverflow, invalidChunkExtension
        case chunkExtensionTooLong, missingChunkTerminator, invalidTrailer, trailerTooLarge
        case connectNotSupported, unsupportedExpectation
    }

    private let code: Code
    private init(_ code: Code) { self.code = code }

    /// The request line is not `method SP target SP version CRLF`.
    public static let invalidRequestLine = Self(.invalidRequestLine)
    /// The method is not a token.
    public static let invalidMethod = Self(.invalidMethod)
    /// The target has bytes outside visible ASCII, or a form the method does not allow.
    public static let invalidTarget = Self(.invalidTarget)
    /// The version is not `HTTP/<digit>.<digit>`.
    public static let invalidVersion = Self(.invalidVersion)
    /// A well-formed version other than 1.0 and 1.1.
    public static let unsupportedVersion = Self(.unsupportedVersion)
    /// A CR not followed by LF.
    public static let bareCR = Self(.bareCR)
    /// An LF not preceded by CR.
    public static let bareLF = Self(.bareLF)
    /// A header line starting with whitespace (obsolete line folding).
    public static let obsFold = Self(.obsFold)
    /// Whitespace between a field name and its colon.
    public static let whitespaceBeforeColon = Self(.whitespaceBeforeColon)
    /// A field name that is empty or not a token, or a line without a colon.
    public static let invalidHeaderName = Self(.invalidHeaderName)
    /// A field value with a control character.
    public static let invalidHeaderValue = Self(.invalidHeaderValue)
    /// The head is larger than the configured limit.
    public static let headTooLarge = Self(.headTooLarge)
    /// More header fields than the configured limit.
    public static let tooManyHeaders = Self(.tooManyHeaders)
    /// An HTTP/1.1 request without Host.
    public static let missingHost = Self(.missingHost)
    /// Host given more than once.
    public static let duplicateHost = Self(.duplicateHost)
    /// Host is not `uri-host [":" port]`.
    public static let invalidHost = Self(.invalidHost)
    /// Both Content-Length and Transfer-Encoding: the classic CL.TE / TE.CL smuggling shape.
    public static let contentLengthWithTransferEncoding = Self(.contentLengthWithTransferEncoding)
    /// Transfer-Encoding on an HTTP/1.0 request, which 1.0 peers would not honour.
    public static let transferEncodingOnHTTP10 = Self(.transferEncodingOnHTTP10)
    /// A coding list that does not end in `chunked`.
    public static let transferEncodingNotChunked = Self(.transferEncodingNotChunked)
    /// `chunked` listed more than once.
    public static let chunkedTwice = Self(.chunkedTwice)
    /// A coding other than `chunked` (we forward bodies undecoded, so we accept chunked alone).
    public static let unsupportedTransferCoding = Self(.unsupportedTransferCoding)
    /// Content-Length that is not `1*DIGIT`.
    public static let invalidContentLength = Self(.invalidContentLength)
    /// Content-Length given twice (or as a list).
    public static let differingContentLengths = Self(.differingContentLengths)
    /// Content-Length beyond 2^62.
    public static let contentLengthOverflow = Self(.contentLengthOverflow)
    /// A chunk size that is not hex digits.
    public static let invalidChunkSize = Self(.invalidChunkSize)
    /// A chunk size beyond 2^62.
    public static let chunkSizeOverflow = Self(.chunkSizeOverflow)
    /// A chunk extension that is not `;name[=value]`.
    public static let invalidChunkExtension = Self(.invalidChunkExtension)
    /// Chunk extensions longer than the limit.
    public static let chunkExtensionTooLong = Self(.chunkExtensionTooLong)
    /// Chunk data not followed by CRLF (more or fewer bytes than declared).
    public static let missingChunkTerminator = Self(.missingChunkTerminator)
    /// A malformed trailer field.
    public static let invalidTrailer = Self(.invalidTrailer)
    /// Trailers larger than the head limit.
    public static let trailerTooLarge = Self(.trailerTooLarge)
    /// CONNECT: a reverse proxy does not tunnel.
    public static let connectNotSupported = Self(.connectNotSupported)
    /// An Expect value other than 100-continue.
    public static let unsupportedExpectation = Self(.unsupportedExpectation)

    /// The HTTP status the server answers with.
    public var status: Int {
        switch code {
        case .headTooLarge, .tooManyHeaders: 431
        case .unsupportedVersion: 505
        case .connectNotSupported: 501
        case .unsupportedExpectation: 417
        default: 400
        }
    }

    /// The snake_case code of the JSON error body.
    public var errorCode: String {
        switch code {
        case .headTooLarge, .tooManyHeaders: "header_too_large"
        case .unsupportedVersion: "http_version_not_supported"
        case .connectNotSupported: "method_not_supported"
        case .unsupportedExpectation: "expectation_failed"
        default: "bad_request"
        }
    }

    /// A short human reason naming the defence, e.g. `invalidChunkSize`.
    public var reason: String { code.rawValue }

    /// The human sentence of the JSON error body.
    public var message: String {
        switch code {
        case .headTooLarge: "The request head is larger than the proxy accepts."
        case .tooManyHeaders: "The request has more header fields than the proxy accepts."
        case .unsupportedVersion: "Only HTTP/1.x is supported."
        case .connectNotSupported: "CONNECT is not supported by a reverse proxy."
        case .unsupportedExpectation: "Only Expect: 100-continue is supported."
        default: "The request is malformed (\(code.rawValue))."
        }
    }

    public var description: String { "HTTPParseError.\(code.rawValue)" }
}
