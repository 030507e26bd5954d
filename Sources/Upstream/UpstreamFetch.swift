/// A whole response, for small control calls (token endpoint, discovery, userinfo).
public struct FetchedResponse: Sendable {
    /// Status code.
    public var status: Int
    /// Header fields.
    public var headers: [(name: String, value: String)]
    /// The body, at most `UpstreamClient.maxFetchBytes`.
    public var body: [UInt8]

    /// The first value of `name` (ASCII case-insensitive).
    public func first(_ name: String) -> String? { UpstreamResponseHead(status: status, headers: headers).first(name) }
}

extension UpstreamClient {
    /// Largest body `fetch` keeps; a larger one fails the fetch.
    public static let maxFetchBytes = 1 << 20

    /// Sends `request` with an optional small body and calls `completion` on this loop with the
    /// whole response. Redirects are not followed (IdP endpoints answer directly).
    public func fetch(
        _ request: UpstreamRequest, body: [UInt8]?,
        completion: @escaping (Result<FetchedResponse, UpstreamError>) -> Void
    ) {
        var request = request
        var requestBody: RequestBody?
        if let body {
            let source = RequestBody(replayLimit: 0)
            body.withUnsafeBytes { source.append($0) }
            source.finish()
            requestBody = source
            request.hasBody = true
            request.bodyLength = body.count
        }
        let collector = FetchCollector(completion: completion)
        _ = start(request, body: requestBody, delegate: collector)
    }
}

/// Gathers one fetch's response.
private final class FetchCollector: UpstreamTransferDelegate {
    private var head: UpstreamResponseHead?
    private var body: [UInt8] = []
    private var tooLarge = false
    private let completion: (Result<FetchedResponse, UpstreamError>) -> Void

    init(completion: @escaping (Result<FetchedResponse, UpstreamError>) -> Void) { self.completion = completion }

    func transfer(_ transfer: UpstreamTransfer, receivedHead head: UpstreamResponseHead) { self.head = head }

    func transfer(_ transfer: UpstreamTransfer, receivedBody bytes: UnsafeRawBufferPointer) -> Bool {
        if body.count + bytes.count > UpstreamClient.maxFetchBytes {
            tooLarge = true
        } else {
            body.append(contentsOf: bytes)
        }
        return true
    }

    func transfer(_ transfer: UpstreamTransfer, completedWith error: UpstreamError?) {
        if let error { return completion(.failure(error)) }
        guard let head, !tooLarge else {
            return completion(
                .failure(
                    .unreachable(
                        tooLarge ? "response larger than \(UpstreamClient.maxFetchBytes) bytes" : "no response")))
        }
        completion(.success(FetchedResponse(status: head.status, headers: head.headers, body: body)))
    }
}
