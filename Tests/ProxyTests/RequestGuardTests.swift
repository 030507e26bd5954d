import Config
import HTTP1
import Testing

@testable import Proxy

private let access = AccessPolicy(allowedHosts: ["localhost", "127.0.0.1"], apiKey: "k3y")

/// A request as the handler checks it: what the guards read from its head, and its target split.
private struct Checked {
    let request: GuardedRequest
    let target: RequestTarget
}

extension RequestGuard {
    fileprivate func refusal(_ checked: Checked) -> ProxyError? {
        refusal(checked.request, target: checked.target, access: access)
    }

    fileprivate static func firstRefusal(_ guards: GuardList, _ checked: Checked) -> (RequestGuard, ProxyError)? {
        firstRefusal(guards, checked.request, target: checked.target, access: access)
    }
}

private func request(
    _ method: String = "GET", _ target: String = "/api/x",
    _ fields: [String] = ["Host: localhost", "X-Proxy-Key: k3y"],
    http10: Bool = false
) -> Checked {
    let text = "\(method) \(target) HTTP/1.\(http10 ? 0 : 1)\r\n" + fields.map { $0 + "\r\n" }.joined() + "\r\n"
    var parser = HTTPRequestHeadParser()
    let bytes = Array(text.utf8)
    guard case .complete(let head, _) = bytes.withUnsafeBytes({ parser.parse($0) }) else {
        fatalError("test head did not parse: \(text)")
    }
    let target = RequestTarget(head.target)
    return Checked(request: GuardedRequest(head: head, target: target, access: access), target: target)
}

private let routes = [
    RouteConfiguration(
        name: "api", path: "/api", upstream: UpstreamURL.parse("https://api.example/")!, credential: .accessToken),
    RouteConfiguration(name: "open", path: "/open", upstream: UpstreamURL.parse("https://open.example/")!),
]

@Suite("RequestGuard")
struct RequestGuardTests {
    @Test("the guard lists keep their order: every request, then the scope's own")
    func order() {
        let every: [RequestGuard] = [.noTrace, .noUserinfo, .hostsAgree, .hostAllowed, .proxyKey]
        #expect(Array(RequestGuard.probe) == [.noTrace])
        #expect(Array(RequestGuard.any) == every)
        #expect(Array(RequestGuard.platform) == every + [.originAllowed, .sameSiteOrNavigation])
        #expect(Array(RequestGuard.credentialedRoute) == every + [.originAllowed, .sameSite, .hostPresent])
    }

    @Test("a guard list runs its guards in declaration order, each once, and knows which it holds")
    func guardListIsOrdered() {
        let list: GuardList = [.noUserinfo, .proxyKey] + [.sameSite, .hostPresent]
        #expect(Array(list) == [.noUserinfo, .proxyKey, .sameSite, .hostPresent])
        #expect(list.contains(.proxyKey) && !list.contains(.noTrace) && !list.contains(.sameSiteOrNavigation))
        #expect(Array(GuardList()) == [])
        #expect(Array(GuardList(arrayLiteral: RequestGuard.allCases.last!)) == [RequestGuard.allCases.last!])
    }

    @Test(
        "each guard refuses with its own status and code, and passes a clean request",
        arguments: [
            (RequestGuard.noTrace, request("TRACE"), 405, "method_not_allowed"),
            (.noTrace, request("track"), 405, "method_not_allowed"),
            (
                .noTrace, request("POST", "/api/x", ["Host: localhost", "X-HTTP-Method-Override: trace"]), 405,
                "method_not_allowed"
            ),
            (.noUserinfo, request("GET", "http://localhost@evil.example/api"), 400, "invalid_target"),
            (.hostsAgree, request("GET", "http://other.example/api", ["Host: localhost"]), 400, "host_mismatch"),
            (.hostAllowed, request("GET", "/api", ["Host: evil.example"]), 403, "host_not_allowed"),
            (.hostAllowed, request("GET", "http://evil.example/api", [], http10: true), 403, "host_not_allowed"),
            (.proxyKey, request("GET", "/api", ["Host: localhost"]), 401, "proxy_key_required"),
            (.proxyKey, request("GET", "/api", ["Host: localhost", "X-Proxy-Key: wrong"]), 401, "proxy_key_required"),
            (
                .originAllowed, request("GET", "/api", ["Host: localhost", "Origin: http://evil.example"]), 403,
                "origin_not_allowed"
            ),
            (.originAllowed, request("GET", "/api", ["Host: localhost", "Origin: null"]), 403, "origin_not_allowed"),
            (
                .sameSite, request("GET", "/api", ["Host: localhost", "Sec-Fetch-Site: cross-site"]), 403,
                "cross_site_request"
            ),
            (
                .sameSiteOrNavigation,
                request("GET", "/_platform/auth", ["Host: localhost", "Sec-Fetch-Site: cross-site"]), 403,
                "cross_site_request"
            ),
            (.hostPresent, request("GET", "/api", [], http10: true), 400, "host_required"),
        ])
    fileprivate func refusals(check: RequestGuard, refused: Checked, status: Int, code: String) {
        let error = check.refusal(refused)
        #expect(error?.status == status)
        #expect(error?.errorCode == code)
        #expect(check.refusal(request()) == nil)
    }

    @Test(
        "the login and callback are exempt from Sec-Fetch-Site on /_platform, nothing else",
        arguments: ["/_platform/login", "/_platform/callback"])
    func navigationTargets(path: String) {
        let navigation = request("GET", path, ["Host: localhost", "Sec-Fetch-Site: cross-site"])
        #expect(RequestGuard.sameSiteOrNavigation.refusal(navigation) == nil)
        #expect(RequestGuard.sameSite.refusal(navigation) == .crossSiteRequest)
    }

    @Test(
        "only a navigation to the login or callback is exempt: a cross-site img or fetch is refused",
        arguments: ["/_platform/login", "/_platform/callback"])
    func subresourcesAreNotNavigations(path: String) {
        let navigate = request(
            "GET", path, ["Host: localhost", "Sec-Fetch-Site: cross-site", "Sec-Fetch-Mode: navigate"])
        #expect(RequestGuard.sameSiteOrNavigation.refusal(navigate) == nil)
        for mode in ["no-cors", "cors", "same-origin", "websocket"] {
            let load = request(
                "GET", path, ["Host: localhost", "Sec-Fetch-Site: cross-site", "Sec-Fetch-Mode: \(mode)"])
            #expect(RequestGuard.sameSiteOrNavigation.refusal(load) == .crossSiteRequest)
        }
    }

    @Test(
        "a frame of another site is no top-level navigation: the login and callback in one are refused",
        arguments: ["/_platform/login", "/_platform/callback"])
    func framesAreNotTopLevelNavigations(path: String) {
        for dest in ["iframe", "frame", "embed", "object", "fencedframe", " IFrame ", "document, iframe"] {
            for site in ["cross-site", "same-site"] {
                let framed = request(
                    "GET", path,
                    [
                        "Host: localhost", "Sec-Fetch-Site: \(site)", "Sec-Fetch-Mode: navigate",
                        "Sec-Fetch-Dest: \(dest)",
                    ])
                #expect(RequestGuard.sameSiteOrNavigation.refusal(framed) == .crossSiteRequest, "\(dest) \(site)")
            }
            let own = request(
                "GET", path,
                [
                    "Host: localhost", "Sec-Fetch-Site: same-origin", "Sec-Fetch-Mode: navigate",
                    "Sec-Fetch-Dest: \(dest)",
                ])
            #expect(RequestGuard.sameSiteOrNavigation.refusal(own) == nil)
        }
        for dest in ["document", "empty", "Document"] {
            let page = request(
                "GET", path,
                [
                    "Host: localhost", "Sec-Fetch-Site: cross-site", "Sec-Fetch-Mode: navigate",
                    "Sec-Fetch-Dest: \(dest)",
                ])
            #expect(RequestGuard.sameSiteOrNavigation.refusal(page) == nil, "\(dest)")
        }
    }

    @Test("an absolute-form target stands in for a missing Host; a present Host needs no target authority")
    func hostPresent() {
        #expect(RequestGuard.hostPresent.refusal(request("GET", "http://localhost/api", [], http10: true)) == nil)
        #expect(RequestGuard.hostPresent.refusal(request("GET", "/api", ["Host: localhost"], http10: true)) == nil)
    }

    @Test(
        "the Host the parser found is checked in any case of name and value, port ignored; every Origin and X-Proxy-Key line counts"
    )
    func fieldsFoundInOnePass() {
        #expect(
            RequestGuard.hostAllowed.refusal(request("GET", "/api", ["HOST: LocalHost:8080", "X-Proxy-Key: k3y"]))
                == nil)
        #expect(RequestGuard.hostAllowed.refusal(request("GET", "/api", ["host: evil.example:80"])) == .hostNotAllowed)
        #expect(RequestGuard.hostAllowed.refusal(request("GET", "/api", ["Host:   localhost   "])) == nil)
        #expect(RequestGuard.hostsAgree.refusal(request("GET", "http://LOCALHOST/api", ["Host: localhost"])) == nil)
        #expect(
            RequestGuard.hostsAgree.refusal(request("GET", "http://localhost/api", ["Host: localhost:81"]))
                == .hostMismatch)
        let origins = request(
            "GET", "/api", ["Host: localhost", "origin: http://evil.example", "Origin: http://localhost"])
        #expect(RequestGuard.originAllowed.refusal(origins) == .originNotAllowed)
        // A second line cannot hide behind a first that passes: both are read, joined.
        let originsSwapped = request(
            "GET", "/api", ["Host: localhost", "ORIGIN: http://localhost", "Origin: http://evil.example"])
        #expect(RequestGuard.originAllowed.refusal(originsSwapped) == .originNotAllowed)
        let sameOriginTwice = request(
            "GET", "/api", ["Host: localhost", "Origin: http://localhost", "Origin: http://localhost"])
        #expect(RequestGuard.originAllowed.refusal(sameOriginTwice) == .originNotAllowed)
        let keys = request("GET", "/api", ["Host: localhost", "x-proxy-KEY: k3y", "X-Proxy-Key: wrong"])
        #expect(RequestGuard.proxyKey.refusal(keys) == .proxyKeyRequired)
        #expect(RequestGuard.proxyKey.refusal(request("GET", "/api", ["Host: localhost", "x-proxy-KEY: k3y"])) == nil)
        let keysSwapped = request("GET", "/api", ["Host: localhost", "X-Proxy-Key: wrong", "X-Proxy-Key: k3y"])
        #expect(RequestGuard.proxyKey.refusal(keysSwapped) == .proxyKeyRequired)
    }

    @Test(
        "the first failing guard in order decides: TRACE before the host, the host before the key, the key before Origin"
    )
    func firstRefusalWins() {
        let many = request("TRACE", "/api", ["Host: evil.example", "Origin: http://evil.example"])
        #expect(RequestGuard.firstRefusal(RequestGuard.credentialedRoute, many)?.1.errorCode == "method_not_allowed")
        let badHost = request("GET", "/api", ["Host: evil.example", "Origin: http://evil.example"])
        #expect(RequestGuard.firstRefusal(RequestGuard.credentialedRoute, badHost)?.0 == .hostAllowed)
        let noKey = request("GET", "/api", ["Host: localhost", "Origin: http://evil.example"])
        #expect(RequestGuard.firstRefusal(RequestGuard.credentialedRoute, noKey)?.0 == .proxyKey)
        let badOrigin = request("GET", "/api", ["Host: localhost", "X-Proxy-Key: k3y", "Origin: http://evil.example"])
        #expect(RequestGuard.firstRefusal(RequestGuard.credentialedRoute, badOrigin)?.0 == .originAllowed)
        #expect(RequestGuard.firstRefusal(RequestGuard.any, badOrigin) == nil)
        #expect(RequestGuard.firstRefusal(RequestGuard.credentialedRoute, request()) == nil)
    }

    @Test("refusals by the checks every request passes are logged unrouted; the scope's own under the scope")
    func scopedRefusals() {
        for check in RequestGuard.allCases {
            #expect(check.isScoped == !RequestGuard.any.contains(check), "\(check)")
        }
    }
}

@Suite("RequestScope")
struct RequestScopeTests {
    private let router = Router(routes: routes)

    @Test("probes, /_platform, routes and unrouted paths get their own guard lists and log names")
    func scopes() {
        let probe = RequestScope(path: "/_platform/health", router: router)
        #expect(probe.guards == RequestGuard.probe)
        #expect(probe.routeName == Probe.route)
        for path in ["/_platform", "/_platform/auth", "/_platform/nothing"] {
            let scope = RequestScope(path: Substring(path), router: router)
            #expect(scope.guards == RequestGuard.platform, "\(path)")
            #expect(scope.routeName == "_platform")
        }
        let credentialed = RequestScope(path: "/api/v1", router: router)
        #expect(credentialed.guards == RequestGuard.credentialedRoute)
        #expect(credentialed.routeName == "api")
        let open = RequestScope(path: "/open", router: router)
        #expect(open.guards == RequestGuard.any)
        #expect(open.routeName == "open")
        let none = RequestScope(path: "/elsewhere", router: router)
        #expect(none.guards == RequestGuard.any)
        #expect(none.routeName == nil)
        #expect(RequestScope(path: "/_platformX", router: router).routeName == nil)
        #expect(RequestScope(path: "/_platfor", router: router).routeName == nil)
        // A path is a slice of the request target: the byte comparison starts where it does.
        let target = "/x/_platform/ready?q"
        let slice = target[target.index(target.startIndex, offsetBy: 2)..<target.firstIndex(of: "?")!]
        #expect(RequestScope(path: slice, router: router).guards == RequestGuard.probe)
    }
}

@Suite("Console scope")
struct ConsoleScopeTests {
    private let router = Router(routes: routes)

    @Test("only the console page's three files skip the key; its data and every other /_platform path keep it")
    func consoleAssetsSkipTheKeyOnly() {
        for path in ["/_platform/console", "/_platform/console/app.js", "/_platform/console/app.css"] {
            let scope = RequestScope(path: Substring(path), router: router)
            #expect(scope.guards == RequestGuard.consoleAsset, "\(path)")
            #expect(!scope.guards.contains(.proxyKey))
            #expect(scope.routeName == "_platform")
        }
        for path in [
            "/_platform/console/state", "/_platform/console/requests", "/_platform/console/", "/_platform/console/x.js",
        ] {
            #expect(RequestScope(path: Substring(path), router: router).guards == RequestGuard.platform, "\(path)")
        }
    }

    @Test(
        "the page's files are refused to a cross-site frame or fetch and to another Origin, served to a keyless same-origin load"
    )
    func consoleAssetsRefuseOtherSites() {
        let list = RequestGuard.consoleAsset
        let keyless = request(
            "GET", "/_platform/console", ["Host: localhost", "Sec-Fetch-Site: none", "Sec-Fetch-Mode: navigate"])
        #expect(RequestGuard.firstRefusal(list, keyless) == nil)
        let framed = request(
            "GET", "/_platform/console", ["Host: localhost", "Sec-Fetch-Site: cross-site", "Sec-Fetch-Dest: iframe"])
        #expect(RequestGuard.firstRefusal(list, framed)?.0 == .sameSite)
        let navigated = request(
            "GET", "/_platform/console",
            [
                "Host: localhost", "Sec-Fetch-Site: cross-site",
                "Sec-Fetch-Mode: navigate", "Sec-Fetch-Dest: document",
            ])
        #expect(RequestGuard.firstRefusal(list, navigated)?.0 == .sameSite)
        let foreign = request("GET", "/_platform/console/app.js", ["Host: localhost", "Origin: http://evil.example"])
        #expect(RequestGuard.firstRefusal(list, foreign)?.0 == .originAllowed)
        let rebinding = request("GET", "/_platform/console", ["Host: evil.example"])
        #expect(RequestGuard.firstRefusal(list, rebinding)?.0 == .hostAllowed)
    }
}
