import Config
import Glibc
import HTTP1

/// What the guards read from one request's head, found once: the fields in one pass, the Host
/// where the parser found it, its host checked on the head's bytes. The head is read here and not
/// kept (a copy of it retains its arrays on every request); nor are the split target and the
/// access policy, which the guards are given beside it (a copy of each retains its parts).
struct GuardedRequest {
    /// `Sec-Fetch-*`, `Origin`, `X-Proxy-Key` and the method-override fields.
    let screened: RequestScreen.Fields
    /// Whether the head has a Host field.
    let hasHost: Bool
    /// Whether that Host names an allowed host (false without one).
    let hostIsAllowed: Bool
    /// The Host value as a string, made only when the target names an authority too (absolute
    /// form): `hostsAgree` compares the two.
    let hostHeader: String?
    /// The method is TRACE or TRACK in any spelling.
    let methodIsTrace: Bool

    /// What the guards read from `head` (whose target is `target`) under `access`.
    init(head: borrowing HTTPRequestHead, target: borrowing RequestTarget, access: borrowing AccessPolicy) {
        screened = RequestScreen.fields(head)
        if let host = head.hostValue {
            hasHost = true
            hostIsAllowed = head.withBytes(of: host) { access.hostAllowed(bytes: $0) }
            hostHeader =
                target.authority == nil ? nil : head.withBytes(of: host) { String(decoding: $0, as: UTF8.self) }
        } else {
            (hasHost, hostIsAllowed, hostHeader) = (false, false, nil)
        }
        methodIsTrace = head.methodIsIgnoringCase("TRACE") || head.methodIsIgnoringCase("TRACK")
    }
}

/// One local-security check (docs/security.md): passes, or names the
/// error the request is refused with. `ProxyHandler.handle` evaluates the ordered list of the
/// request's `RequestScope` in one place, before anything is answered or forwarded.
enum RequestGuard: Int, CaseIterable {
    /// TRACE/TRACK, or a method-override field naming them: a TRACE echo would hand the
    /// injected credentials back to the caller; an upstream may treat `trace` like TRACE.
    case noTrace
    /// `http://127.0.0.1:80@evil.com/` would pass a host check on its first part.
    case noUserinfo
    /// Two different hosts in one request (absolute-form target and Host) is the shape of a
    /// routing-confusion attack.
    case hostsAgree
    /// The Host (or the target's authority) is in `allowedHosts`: defeats DNS rebinding.
    case hostAllowed
    /// `X-Proxy-Key`, when `apiKey` is set: other local processes.
    case proxyKey
    /// A present `Origin` names an allowed host: cross-site requests from a browser.
    case originAllowed
    /// `Sec-Fetch-Site` does not mark the request as cross-site (`RequestScreen.refusesCrossSite`).
    case sameSite
    /// As `sameSite`, except for top-level navigations to the endpoints other sites send a
    /// browser to (login, callback); a frame is held to `sameSite`.
    case sameSiteOrNavigation
    /// HTTP/1.0 may omit Host, which would skip the allowed-hosts check.
    case hostPresent

    /// The error this guard refuses `request` (whose target is `target`) with under `access`, or
    /// nil when it passes.
    @inline(__always)
    func refusal(_ request: borrowing GuardedRequest, target: borrowing RequestTarget, access: borrowing AccessPolicy)
        -> ProxyError?
    {
        switch self {
        case .noTrace:
            guard request.methodIsTrace || request.screened.overridesToTrace else { return nil }
            return .methodNotAllowed("GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS")
        case .noUserinfo:
            guard let authority = target.authority, authority.contains("@") else { return nil }
            return .userinfoInTarget
        case .hostsAgree:
            guard let authority = target.authority, let host = request.hostHeader,
                authority.lowercased() != host.lowercased()
            else { return nil }
            return .hostMismatch
        case .hostAllowed:
            // The target's authority, else the Host value (as it is: a Substring made of it retains it).
            if let authority = target.authority { return access.hostAllowed(authority) ? nil : .hostNotAllowed }
            return request.hasHost && !request.hostIsAllowed ? .hostNotAllowed : nil
        case .proxyKey:
            guard access.apiKey != nil else { return nil }
            return access.keyAccepted(request.screened.proxyKey) ? nil : .proxyKeyRequired
        case .originAllowed:
            guard let origin = request.screened.origin, !access.originAllowed(origin) else { return nil }
            return .originNotAllowed
        case .sameSite, .sameSiteOrNavigation:
            if self == .sameSiteOrNavigation && RequestScreen.navigationTargets.contains(target.path)
                && RequestScreen.isTopLevelNavigation(
                    fetchMode: request.screened.fetchMode,
                    fetchDest: request.screened.fetchDest)
            {
                return nil
            }
            let crossSite = RequestScreen.refusesCrossSite(
                fetchSite: request.screened.fetchSite, origin: request.screened.origin,
                access: access)
            return crossSite ? .crossSiteRequest : nil
        case .hostPresent:
            return !request.hasHost && target.authority == nil ? .hostRequired : nil
        }
    }

    /// Whether a refusal is logged under the route (or `_platform`) the guard protects; the
    /// checks every request passes are logged unrouted.
    var isScoped: Bool {
        switch self {
        case .noTrace, .noUserinfo, .hostsAgree, .hostAllowed, .proxyKey: false
        case .originAllowed, .sameSite, .sameSiteOrNavigation, .hostPresent: true
        }
    }

    /// The first guard of `guards` that refuses `request`, in order.
    static func firstRefusal(
        _ guards: GuardList, _ request: borrowing GuardedRequest, target: borrowing RequestTarget,
        access: borrowing AccessPolicy
    ) -> (RequestGuard, ProxyError)? {
        for check in guards {
            if let error = check.refusal(request, target: target, access: access) { return (check, error) }
        }
        return nil
    }

    /// Probes (container and kubelet) carry no key and name the pod IP as Host: only TRACE is refused.
    static let probe: GuardList = [.noTrace]
    /// Every other request: uncredentialed routes and paths no route matches.
    static let any: GuardList = [.noTrace, .noUserinfo, .hostsAgree, .hostAllowed, .proxyKey]
    /// `/_platform/`: a browser page on another site must not drive the control endpoints.
    static let platform: GuardList = any + [.originAllowed, .sameSiteOrNavigation]
    /// The console page's own files (docs/console.md): every guard of `platform` but the key,
    /// which the page asks for and sends on its requests (a navigation cannot carry it); no
    /// top-level navigation from another site either.
    static let consoleAsset: GuardList = [
        .noTrace, .noUserinfo, .hostsAgree, .hostAllowed, .originAllowed, .sameSite, .hostPresent,
    ]
    /// Routes that inject credentials.
    static let credentialedRoute: GuardList = any + [.originAllowed, .sameSite, .hostPresent]
}

/// An ordered list of guards, held as one bit per guard. Every list runs its guards in the order
/// they are declared in `RequestGuard` (a list written in another order stops the process when
/// it is made), so the bits say the whole list; and a value with no array behind it is not
/// retained per request by every loop (nothing shared is written).
struct GuardList: Sequence, Equatable, ExpressibleByArrayLiteral {
    private var bits: UInt32 = 0

    init(arrayLiteral guards: RequestGuard...) {
        for check in guards { append(check) }
    }

    /// Adds `check` at the end: it must come after every guard already in the list.
    private mutating func append(_ check: RequestGuard) {
        precondition(
            bits >> check.rawValue == 0, "guard lists run in RequestGuard's declaration order, each guard once")
        bits |= 1 << check.rawValue
    }

    /// `lhs`'s guards, then `rhs`'s.
    static func + (lhs: GuardList, rhs: GuardList) -> GuardList {
        var list = lhs
        for check in rhs { list.append(check) }
        return list
    }

    struct Iterator: IteratorProtocol {
        var rest: UInt32

        mutating func next() -> RequestGuard? {
            guard rest != 0 else { return nil }
            let position = rest.trailingZeroBitCount
            rest &= rest - 1
            return RequestGuard(rawValue: position)
        }
    }

    func makeIterator() -> Iterator { Iterator(rest: bits) }
}

/// What a request is for, decided from its path before the guards: it chooses their list.
enum RequestScope {
    /// `/_platform/health` or `/_platform/ready`.
    case probe(Probe)
    /// Any other `/_platform` path: answered by the proxy, never proxied.
    case platform
    /// The console page's HTML, script or style sheet (`ProxyHandler.consoleAssets`).
    case consoleAsset
    /// A configured route (by reference: its settings are not copied per request), with the
    /// rest of the path after its prefix.
    case route(CompiledRoute, rest: Substring)
    /// No route matches.
    case unrouted

    /// Both are lent (an initializer's parameters are otherwise its own: the router's arrays and
    /// the path were retained for the call).
    init(path: borrowing Substring, router: borrowing Router) {
        if Self.isPlatformPath(path) {
            self =
                Probe(path: copy path).map { .probe($0) }
                ?? (ProxyHandler.consoleAssets[copy path] != nil ? .consoleAsset : .platform)
        } else if let (route, rest) = router.match(path) {
            self = .route(route, rest: rest)
        } else {
            self = .unrouted
        }
    }

    /// Whether `path` is `/_platform` or below it, compared as bytes: every request asks, and
    /// most are not.
    static func isPlatformPath(_ path: Substring) -> Bool {
        let prefix: StaticString = "/_platform"
        return path.withUTF8Bytes { bytes in
            guard bytes.count >= prefix.utf8CodeUnitCount, let base = bytes.baseAddress,
                memcmp(base, prefix.utf8Start, prefix.utf8CodeUnitCount) == 0
            else { return false }
            return bytes.count == prefix.utf8CodeUnitCount || bytes[prefix.utf8CodeUnitCount] == UInt8(ascii: "/")
        }
    }

    /// Whether the proxy answers the request itself (a probe or another `/_platform` path).
    var isPlatform: Bool {
        switch self {
        case .probe, .platform, .consoleAsset: true
        case .route, .unrouted: false
        }
    }

    /// The ordered guards of this scope.
    var guards: GuardList {
        switch self {
        case .probe: RequestGuard.probe
        case .platform: RequestGuard.platform
        case .consoleAsset: RequestGuard.consoleAsset
        case .route(let route, _): route.config.credential == .none ? RequestGuard.any : RequestGuard.credentialedRoute
        case .unrouted: RequestGuard.any
        }
    }

    /// The route name the request is logged under once its scope is known.
    var routeName: String? {
        switch self {
        case .probe: Probe.route
        case .platform, .consoleAsset: "_platform"
        case .route(let route, _): route.config.name
        case .unrouted: nil
        }
    }
}

/// The runtime's router and access policy, read where they are: passed from a runtime the
/// caller holds, each of their arrays was retained and released around the call.
extension ProxyRuntime {
    /// What a request for `path` is for.
    func scope(of path: borrowing Substring) -> RequestScope { RequestScope(path: path, router: router) }

    /// The first guard of `guards` that refuses the request of `head` and `target`, in order.
    func firstRefusal(
        _ guards: GuardList, head: borrowing HTTPRequestHead,
        target: borrowing RequestTarget
    ) -> (RequestGuard, ProxyError)? {
        RequestGuard.firstRefusal(
            guards, GuardedRequest(head: head, target: target, access: access), target: target, access: access)
    }
}
