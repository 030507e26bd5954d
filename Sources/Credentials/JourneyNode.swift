import JSON

/// What an app is told after each turn of a journey (the Journey SDK's node kinds).
public enum JourneyNode: Sendable, Equatable {
    /// A step to answer; `step` is filled in by the owner with a fresh opaque id.
    case next(JourneyStep)
    /// The server said no; `retry` is the tree started again, when that worked, so the app may answer again.
    case error(message: String, body: JSONValue, retry: JourneyStep?)
    /// Nothing to answer: network, parse or server failure.
    case failure(String)
    /// The tree ended; `tokens` says whether tokens were stored (false with `noSession`).
    case success(tokens: Bool)

    /// The JSON for apps; `step` is the opaque id of `next` or `retry`, `user` the new subject.
    public func json(journey: String, step: String?, user: String?) -> JSONValue {
        var object = JSONObject()
        switch self {
        case .next(let next):
            object["node"] = "continue"
            object["step"] = step.map(JSONValue.string) ?? .null
            object["journey"] = .string(journey)
            for (key, value) in next.offered { object[key] = value }
            if next.isSuspended { object["suspended"] = true }
        case .error(let message, let body, let retry):
            object["node"] = "error"
            object["journey"] = .string(journey)
            object["message"] = .string(message)
            object["code"] = body["code"] ?? .null
            object["reason"] = body["reason"] ?? .null
            object["input"] = body
            if let retry {
                object["step"] = step.map(JSONValue.string) ?? .null
                for (key, value) in retry.offered { object[key] = value }
            }
        case .failure(let cause):
            object["node"] = "failure"
            object["journey"] = .string(journey)
            object["cause"] = .string(cause)
        case .success(let tokens):
            object["node"] = "success"
            object["journey"] = .string(journey)
            object["user"] = user.map(JSONValue.string) ?? .null
            object["tokens"] = .bool(tokens)
        }
        return .object(object)
    }

    /// The step an app may answer next, if any.
    public var answerable: JourneyStep? {
        switch self {
        case .next(let step): step
        case .error(_, _, let retry): retry
        case .failure, .success: nil
        }
    }

    /// One word for logs and the event stream.
    public var kind: String {
        switch self {
        case .next: "continue"
        case .error: "error"
        case .failure: "failure"
        case .success: "success"
        }
    }
}
