import Config
import EventLoop
import HTTP1
import HTTPServer
import Upstream

extension ProxyHandler {
    /// The `Upgrade` protocol a request asks for first (`token`: lowercased, without a version;
    /// `value`: as sent), when it asks for one the way RFC 9110 §7.8 has it: an `Upgrade` field and
    /// `upgrade` among the `Connection` options, in any of its `Connection` fields (one list, §5.3).
    /// Only that first protocol is offered upstream: the route's `upgrades` decided on it, and an
    /// upstream offered the rest of the list could switch to one the route does not tunnel.
    /// Nil for every other request (the parser noted the field, so none is searched).
    static func requestedUpgrade(_ head: borrowing HTTPRequestHead) -> (token: String, value: String)? {
        guard let range = head.upgradeValue else { return nil }
        var asked = false
        for index in 0..<head.fieldCount where !asked && head.nameEquals(index, connectionName) {
            let options = head.value(at: index).split(separator: ",")
            asked = options.contains { $0.trimmingCharacters().lowercased() == "upgrade" }
        }
        guard asked, let first = head.string(range).split(separator: ",").first?.trimmingCharacters(), !first.isEmpty
        else { return nil }
        let token = first.split(separator: "/", omittingEmptySubsequences: false)[0].lowercased()
        return token.isEmpty ? nil : (token, String(first))
    }

    /// `connection`, as `HTTPRequestHead.nameEquals` compares names.
    private static let connectionName = Array("connection".utf8)

    /// The loop's tunnel table, made on first use.
    var tunnels: TunnelTable {
        if let table = tunnelTable { return table }
        let table = TunnelTable(client: upstream, admission: tunnelAdmission)
        table.handler = self
        tunnelTable = table
        return table
    }

    /// The upgrade a routed request asks for when its route tunnels that protocol (`upgrades`, the
    /// route's); any other `Upgrade`, any upgrade asked for on a request with a body (a
    /// WebSocket handshake has none; RFC 9110 §7.8 lets a server ignore `Upgrade`), and one in an
    /// HTTP/1.0 request (which §7.8 has a server ignore), is dropped as a hop-by-hop field and the
    /// request forwarded as usual. Only the route's list is passed: the
    /// whole configuration would be copied per request.
    static func tunnelledUpgrade(_ head: borrowing HTTPRequestHead, upgrades: borrowing [String]) -> (
        token: String, value: String
    )? {
        guard case .some = head.upgradeValue, head.framing == .none, head.version == .http11,
            let upgrade = requestedUpgrade(head),
            upgrades.contains(upgrade.token)
        else { return nil }
        return upgrade
    }

    /// Mock replay and record cannot carry a tunnel: refused with a clear error.
    func upgradeRefusal(_ upgrade: String, route: RouteConfiguration, mockMode: MockConfiguration.Mode?) -> ProxyError?
    {
        guard let mockMode, mockMode != .off else { return nil }
        return .upgradeNotAllowed(
            "The route \(route.name) is in mock \(mockMode.rawValue) mode, which cannot carry a tunnel (\(upgrade)).")
    }

    /// Opens a tunnel for an upgrade request whose credentials are decided: the handshake is the
    /// request as it would be forwarded (the same header policy and injected lines), with the
    /// upgrade fields put back, sent over a libcurl connect-only connection. `echoMasker` masks the
    /// route's token in the upstream's answer (a 101's head, a refusal), as in any response
    /// (frames are not masked).
    func startTunnel(
        _ context: ExchangeContext, _ plan: ForwardPlan, injected: InjectedLines, generation: UInt64,
        upgrade: (token: String, value: String), echoMasker: EchoMasker?
    ) {
        let exchange = context.exchange
        guard tunnels.admit(peer: exchange.peer) else {
            metrics.tunnelClosed(route: plan.compiled.config.name, reason: "too_many_tunnels", wasOpen: false)
            return fail(context, .tooManyTunnels)
        }
        let route = plan.compiled.config
        let url = plan.url()
        let requestID = context.requestID
        var supplies: SuppliedFields?
        let lines = plan.slot.upstreamLines(
            exchange.head, peer: exchange.peer, requestID: requestID,
            removing: RouteSlot.RemovedFields(experiments: false, identity: false),
            supplies: &supplies)
        var handshake: [UInt8] = []
        handshake.reserveCapacity(1024)
        handshake.append(contentsOf: "\(exchange.head.method) \(url.path)".utf8)
        if let query = url.query { handshake.append(contentsOf: "?\(query)".utf8) }
        handshake.append(contentsOf: " HTTP/1.1\r\nHost: \(url.hostPort)\r\n".utf8)
        lines.appendHead(to: &handshake)
        injected.lines.appendHead(to: &handshake)
        handshake.append(contentsOf: "Connection: Upgrade\r\nUpgrade: \(upgrade.value)\r\n\r\n".utf8)
        let identity = Tunnel.Identity(
            requestID: requestID, route: route.name,
            path: plan.compiled.prefix == "/" ? String(plan.rest) : plan.compiled.prefix + plan.rest,
            provider: route.credential == .none ? nil : plan.slot.provider.name,
            generation: generation,
            peer: exchange.peer, upgrade: upgrade.token, upstream: url.origin,
            idleTimeout: route.tunnelIdleTimeoutSeconds, answerTimeout: route.timeoutSeconds)
        let tunnel = Tunnel(
            context: context, identity: identity, handshake: handshake, table: tunnels,
            answerMasker: echoMasker)
        tunnels.add(tunnel)
        tunnel.start(
            origin: url.origin, tls: plan.slot.route.tls, connector: tunnels.connector,
            connectTimeout: route.timeoutSeconds)
    }

    /// A provider's login ended: its tunnels close (they carry its token).
    func withdrawTunnels(provider: String, reason: String) {
        guard let tunnelTable, tunnelTable.count > 0 else { return }
        tunnelTable.withdraw(reason: reason) { $0.provider == provider }
    }

    /// New tokens of `provider`: if an upstream refused its tokens up to some generation, the
    /// tunnels carrying one of those close (the new tokens replaced a refused one).
    func withdrawRefusedTunnels(provider: String, generation: UInt64) {
        guard let tunnelTable, tunnelTable.count > 0,
            let refused = TunnelTable.refusedGeneration(provider: provider), refused < generation
        else { return }
        tunnelTable.withdraw(reason: "token_refused") { $0.provider == provider && $0.generation <= refused }
    }

    /// A reload installed `runtime`: tunnels whose path no longer routes to their route (the
    /// route is gone, its `path` changed, another route took the path), or whose route now names
    /// another upstream or provider, close.
    func withdrawMovedTunnels() {
        guard let tunnelTable, tunnelTable.count > 0 else { return }
        let router = runtime.router
        tunnelTable.withdraw(reason: "route_changed") { identity in
            guard let route = router.match(identity.path[...])?.route.config, route.name == identity.route
            else { return true }
            let provider = route.credential == .none ? nil : (route.provider ?? NamedProvider.defaultName)
            return route.upstream?.origin != identity.upstream
                || (identity.provider != nil && provider != identity.provider)
        }
    }

    /// Stopping: every tunnel says goodbye, within the shutdown grace.
    func withdrawAllTunnels() {
        guard let tunnelTable, tunnelTable.count > 0 else { return }
        tunnelTable.withdraw(reason: "shutting_down", within: tunnelAdmission.shutdownGrace) { _ in true }
    }
}
