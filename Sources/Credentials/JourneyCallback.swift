import JSON

/// One callback of an AM journey step, as the server sent it, with the proxy's normalised view
/// for apps (`offered`) and the filling of its inputs from an app's answers.
public struct JourneyCallback: Sendable, Equatable {
    /// The server's callback object, kept whole so unknown types round-trip.
    public let raw: JSONObject

    /// Wraps a callback object.
    public init(raw: JSONObject) { self.raw = raw }

    /// `PasswordCallback`, `ChoiceCallback`, …; empty when the server gave none.
    public var type: String { raw["type"]?.stringValue ?? "" }

    /// The outputs as name → value, in the server's order.
    public var outputs: [(name: String, value: JSONValue)] { Self.pairs(raw["output"]) }

    /// The inputs as name → value (the server's default), in order.
    public var inputs: [(name: String, value: JSONValue)] { Self.pairs(raw["input"]) }

    /// The output named `name`.
    public func output(_ name: String) -> JSONValue? { outputs.first { $0.name == name }?.value }

    /// Types whose answer is a secret: read without echo, never logged.
    public var isSecret: Bool { ["PasswordCallback", "ValidatedCreatePasswordCallback"].contains(type) }

    /// Whether the user has something to answer (a non-empty input other than a validate-only flag).
    public var asksUser: Bool {
        ![
            "HiddenValueCallback", "MetadataCallback", "PollingWaitCallback", "TextOutputCallback",
            "SuspendedTextOutputCallback",
        ].contains(type) && !inputs.isEmpty
    }

    /// Milliseconds a `PollingWaitCallback` asks to wait before the step is sent back.
    public var waitTimeMs: Int? {
        guard type == "PollingWaitCallback", let value = output("waitTime") else { return nil }
        if let n = value.int64Value { return Int(n) }
        return value.stringValue.flatMap { Int($0) }
    }

    /// The normalised callback for apps: `type`, `prompt`, `inputs`, type-specific fields and `raw`.
    public var offered: JSONValue {
        var object = JSONObject()
        object["type"] = .string(type)
        object["prompt"] = output("prompt") ?? .null
        let failed = output("failedPolicies").map(Self.decodedPolicies)
        object["inputs"] = .array(
            inputs.map { input in
                var entry = JSONObject()
                entry["name"] = .string(input.name)
                entry["value"] = input.value
                // Policy failures belong to the value input, not to its validate-only twin.
                if let failed, !input.name.hasSuffix("validateOnly") { entry["failedPolicies"] = failed }
                return .object(entry)
            })
        for (name, value) in outputs where name != "prompt" {
            switch name {
            case "waitTime": object["waitTimeMs"] = waitTimeMs.map { .number(JSONNumber($0)) } ?? value
            case "failedPolicies", "policies": object[name] = Self.decodedPolicies(value)
            default: object[name] = value
            }
        }
        if isSecret { object["secret"] = true }
        object["raw"] = .object(raw)
        return .object(object)
    }

    /// This callback with every input named in `answers` set; `used` collects the names taken.
    func filled(with answers: JSONObject, used: inout Set<String>) -> JSONObject {
        guard case .array(let items)? = raw["input"] else { return raw }
        var filled = raw
        filled["input"] = .array(
            items.map { item in
                guard var input = item.objectValue, let name = input["name"]?.stringValue, let answer = answers[name]
                else { return item }
                used.insert(name)
                input["value"] = Self.coerce(answer, like: input["value"])
                return .object(input)
            })
        return filled
    }

    /// An answer in the type the server's default has: `"true"` for a boolean input, `"2"` for a number.
    static func coerce(_ answer: JSONValue, like current: JSONValue?) -> JSONValue {
        switch (current, answer) {
        case (.bool?, .string(let text)) where text == "true" || text == "false": .bool(text == "true")
        case (.number?, .string(let text)) where Int64(text) != nil: .number(JSONNumber(Int64(text)!))
        default: answer
        }
    }

    /// AM sends policies and failures as JSON text inside strings; apps get them as objects.
    static func decodedPolicies(_ value: JSONValue) -> JSONValue {
        switch value {
        case .array(let items): .array(items.map(decodedPolicies))
        case .string(let text): (try? JSONValue.parse(text)).flatMap { $0.objectValue != nil ? $0 : nil } ?? value
        default: value
        }
    }

    private static func pairs(_ list: JSONValue?) -> [(name: String, value: JSONValue)] {
        (list?.arrayValue ?? []).compactMap { item in
            guard let name = item["name"]?.stringValue else { return nil }
            return (name, item["value"] ?? .null)
        }
    }

    public static func == (a: JourneyCallback, b: JourneyCallback) -> Bool { a.raw == b.raw }
}
