import Glibc

/// A failed file-system call of the token store, naming the call, the path and the errno text.
package struct TokenStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The call that failed, e.g. `rename`.
    package let call: String
    /// The path it was given (never a secret).
    package let path: String
    /// The errno value.
    package let errnoCode: CInt

    /// An error for `call` on `path` failing with `errnoCode`.
    package init(call: String, path: String, errnoCode: CInt) {
        self.call = call
        self.path = path
        self.errnoCode = errnoCode
    }

    /// "rename(/state/tokens.json.tmp) failed: Permission denied (errno 13)".
    package var description: String {
        "\(call)(\(path)) failed: \(String(cString: strerror(errnoCode))) (errno \(errnoCode))"
    }
}
