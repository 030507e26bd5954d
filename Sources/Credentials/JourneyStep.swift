import JSON

/// A step of an AM journey: the callbacks to answer and the opaque `authId` that must go back
/// with them. The `authId` stays inside the proxy; apps see `offered`.
public struct JourneyStep: Sendable, Equatable {
    /// The server's step object (authId, callbacks, header, description, stage).
    public let raw: JSONObject
    /// The callbacks, in order.
    public let callbacks: [JourneyCallback]

    /// A step from the server's object; nil without `authId` or with malformed callbacks.
    public init?(_ object: JSONObject) {
        guard object["authId"]?.stringValue != nil else { return nil }
        let list = object["callbacks"] ?? .array([])
        guard let items = list.arrayValue else { return nil }
        var callbacks: [JourneyCallback] = []
        for item in items {
            guard let callback = item.objectValue, callback["type"]?.stringValue != nil else { return nil }
            callbacks.append(JourneyCallback(raw: callback))
        }
        raw = object
        self.callbacks = callbacks
    }

    /// The page header, description and stage the tree author gave, if any.
    public var header: String? { raw["header"]?.stringValue }
    /// See `header`.
    public var description: String? { raw["description"]?.stringValue }
    /// See `header`.
    public var stage: String? { raw["stage"]?.stringValue }

    /// True when nothing is asked of the user and a polling wait says when to send the step back.
    public var isPollingOnly: Bool { pollingWaitMs != nil && !callbacks.contains { $0.asksUser } }
    /// The longest polling wait of the step, in milliseconds.
    public var pollingWaitMs: Int? { callbacks.compactMap(\.waitTimeMs).max() }
    /// True when the journey was suspended (a "magic link" resumes it).
    public var isSuspended: Bool { callbacks.contains { $0.type == "SuspendedTextOutputCallback" } }

    /// The fields apps see for this step: `header`, `description`, `stage`, `callbacks` (no authId).
    public var offered: [(String, JSONValue)] {
        [
            ("header", raw["header"] ?? .null), ("description", raw["description"] ?? .null),
            ("stage", raw["stage"] ?? .null),
            ("callbacks", .array(callbacks.map(\.offered))),
        ]
    }

    /// The request body answering this step: the step object with each named input set.
    /// Fails naming an answer that matches no input, so a typo is not silently dropped.
    public func answered(_ answers: JSONObject) -> Result<JSONValue, JourneyAnswerError> {
        var used = Set<String>()
        var body = raw
        body["callbacks"] = .array(callbacks.map { .object($0.filled(with: answers, used: &used)) })
        let unknown = answers.keys.filter { !used.contains($0) }
        guard unknown.isEmpty else {
            let names = callbacks.flatMap { $0.inputs.map(\.name) }
            return .failure(
                JourneyAnswerError(
                    message: "No input of this step is named \(unknown.map { "\"\($0)\"" }.joined(separator: ", ")); "
                        + "its inputs are \(names.isEmpty ? "none" : names.map { "\"\($0)\"" }.joined(separator: ", "))."
                ))
        }
        return .success(.object(body))
    }
}

/// Answers that do not fit the step they were given for.
public struct JourneyAnswerError: Error, Sendable, Equatable {
    /// The sentence for the app.
    public let message: String
}

/// What AM answered to an authenticate request, classified like the Journey SDK's nodes.
public enum JourneyReply: Sendable, Equatable {
    /// The next step.
    case step(JourneyStep)
    /// The tree ended in success; `tokenId` is the session (nil with `noSession`).
    case success(tokenId: String?)
    /// The server said no (401 and other 4xx with AM's `{code, reason, message}`): wrong
    /// password, expired authId, a policy. The body is kept for the app.
    case refused(message: String, body: JSONValue)
    /// Nothing to answer: unreachable, 5xx, or a body that is not AM's shape.
    case failed(String)

    /// Classifies an HTTP answer from `/authenticate`.
    public static func parse(status: Int, body: [UInt8]) -> JourneyReply {
        if status >= 500 || status == 408 || status == 429 { return .failed("AM answered HTTP \(status)") }
        guard let json = try? JSONValue.parse(body), let object = json.objectValue else {
            return .failed("AM's answer (HTTP \(status)) is not a JSON object")
        }
        if (400...499).contains(status) {
            let message = object["message"]?.stringValue ?? object["reason"]?.stringValue ?? "HTTP \(status)"
            return .refused(message: message, body: json)
        }
        guard (200...299).contains(status) else { return .failed("AM answered HTTP \(status)") }
        if object["authId"] != nil {
            return JourneyStep(object).map(JourneyReply.step) ?? .failed("AM's step has malformed callbacks")
        }
        if object["successUrl"] != nil || object["tokenId"] != nil {
            return .success(tokenId: object["tokenId"]?.stringValue)
        }
        return .failed("AM's answer is neither a step nor a success")
    }
}
