import Glibc

/// Why a listener could not be set up, naming the address (a struct over a private enum code, so
/// new reasons are additive).
public struct ListenError: Error, Sendable, Equatable, CustomStringConvertible {
    private enum Code: Sendable, Equatable { case inUse, notASocket, cannotBind }
    private let code: Code
    /// The address as configured, e.g. `127.0.0.1:8080` or `unix:/run/proxy.sock`.
    public let address: String
    /// What the system said, when it said something.
    public let detail: String

    private init(_ code: Code, _ address: String, _ detail: String) {
        self.code = code
        self.address = address
        self.detail = detail
    }

    /// Another process listens there (a second `serve` with the same address).
    public static func inUse(_ address: BindAddress) -> Self { Self(.inUse, address.description, "") }
    /// A `unix:` path holds something other than a socket; it is never removed.
    public static func notASocket(_ address: BindAddress, kind: String) -> Self {
        Self(.notASocket, address.description, kind)
    }
    /// Any other failure, with the call and errno text.
    public static func cannotBind(_ address: BindAddress, _ error: IOError) -> Self {
        error.errnoCode == EADDRINUSE ? .inUse(address) : Self(.cannotBind, address.description, error.description)
    }

    /// Whether another process holds the address.
    public var isInUse: Bool { code == .inUse }

    public var description: String {
        switch code {
        case .inUse: "address \(address) already in use"
        case .notASocket: "cannot listen on \(address): \(detail) is in the way (only a stale socket is ever removed)"
        case .cannotBind: "cannot listen on \(address): \(detail)"
        }
    }
}
