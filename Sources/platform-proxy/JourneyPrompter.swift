import JSON

/// Turns a journey step's callbacks into answers: from an answers file (JSON map of prompt or
/// input name → value) for scripts, or by asking at the terminal.
struct JourneyPrompter {
    /// The answers file's map, when running from one.
    let file: JSONObject?
    /// Where the answers file is (for messages).
    let filePath: String?

    /// Why a step could not be answered.
    struct Unanswerable: Error {
        let message: String
    }

    /// Shows the step and collects its answers (input name → value).
    func answers(for node: JSONValue) throws(Unanswerable) -> JSONObject {
        if let header = node["header"]?.stringValue, !header.isEmpty { LoginCommands.say("== \(header) ==") }
        if let description = node["description"]?.stringValue, !description.isEmpty { LoginCommands.say(description) }
        var answers = JSONObject()
        for callback in node["callbacks"]?.arrayValue ?? [] {
            try answer(callback, into: &answers)
        }
        return answers
    }

    private func answer(_ callback: JSONValue, into answers: inout JSONObject) throws(Unanswerable) {
        let type = callback["type"]?.stringValue ?? ""
        let inputs = (callback["inputs"]?.arrayValue ?? []).compactMap { $0["name"]?.stringValue }
        let prompt = callback["prompt"]?.stringValue ?? ""
        switch type {
        case "TextOutputCallback":
            // messageType 4 is a script for browsers: nothing for a terminal.
            guard callback["messageType"]?.stringValue != "4" else { return }
            let kind =
                ["0": "info", "1": "warning", "2": "error"][callback["messageType"]?.stringValue ?? "0"] ?? "info"
            LoginCommands.say("[\(kind)] \(callback["message"]?.stringValue ?? "")")
            return
        case "PollingWaitCallback":
            let seconds = Double(callback["waitTimeMs"]?.doubleValue ?? 5000) / 1000
            LoginCommands.say("… \(callback["message"]?.stringValue ?? "waiting") (\(seconds) s)")
            return
        case "SuspendedTextOutputCallback":
            LoginCommands.say(callback["message"]?.stringValue ?? "The journey is suspended.")
            return
        case "HiddenValueCallback", "MetadataCallback":
            return
        default:
            break
        }
        for policy in callback["inputs"]?.arrayValue?.first?["failedPolicies"]?.arrayValue ?? [] {
            LoginCommands.say("  ! \(Self.describePolicy(policy))")
        }
        if let terms = callback["terms"]?.stringValue {
            LoginCommands.say("Terms (version \(callback["version"]?.stringValue ?? "?")):\n\(terms)")
        }
        if let message = callback["message"]?.stringValue, type == "ConsentMappingCallback" {
            LoginCommands.say(message)
        }
        for (index, name) in inputs.enumerated() where !name.hasSuffix("validateOnly") {
            let label = label(type: type, prompt: prompt, callback: callback, input: name, index: index)
            answers[name] = try value(type: type, label: label, name: name, prompt: prompt, callback: callback)
        }
    }

    private func label(type: String, prompt: String, callback: JSONValue, input: String, index: Int) -> String {
        switch type {
        case "KbaCreateCallback": return index == 0 ? "\(prompt.isEmpty ? "Security question" : prompt)" : "Answer"
        case "TermsAndConditionsCallback": return "Accept the terms"
        case "ConsentMappingCallback": return "Share with \(callback["displayName"]?.stringValue ?? "this application")"
        case "ConfirmationCallback" where prompt.isEmpty: return "Choose"
        default: return prompt.isEmpty ? input : prompt
        }
    }

    private func value(type: String, label: String, name: String, prompt: String, callback: JSONValue)
        throws(Unanswerable) -> JSONValue
    {
        let choices = (callback["choices"] ?? callback["options"])?.arrayValue?.compactMap(\.stringValue)
        let boolean = ["BooleanAttributeInputCallback", "TermsAndConditionsCallback", "ConsentMappingCallback"]
            .contains(type)
        if let file {
            guard let given = file[name] ?? file[label] ?? (prompt.isEmpty ? nil : file[prompt]) else {
                throw Unanswerable(
                    message:
                        "\(filePath ?? "the answers file") has no answer for the prompt \"\(label)\" (input \(name), \(type))."
                )
            }
            if let choices, case .string(let text) = given, let index = choices.firstIndex(of: text) {
                return .number(JSONNumber(index))
            }
            return given
        }
        if let choices {
            for (index, choice) in choices.enumerated() { LoginCommands.say("  \(index + 1)) \(choice)") }
            let line = try ask("\(label) [1-\(choices.count)]: ", secret: false)
            guard let number = Int(line.trimmingCharacters(in: " ")), number >= 1, number <= choices.count else {
                throw Unanswerable(message: "\"\(line)\" is not one of the numbers 1 to \(choices.count).")
            }
            return .number(JSONNumber(number - 1))
        }
        if boolean {
            let line = try ask("\(label) (y/n): ", secret: false).lowercased()
            return .bool(["y", "yes", "true", "1"].contains(line.trimmingCharacters(in: " ")))
        }
        if type == "NumberAttributeInputCallback", let number = Double(try ask("\(label): ", secret: false)) {
            return .number(JSONNumber(number))
        }
        let secret = callback["secret"]?.boolValue == true
        return .string(try ask("\(label): ", secret: secret))
    }

    private func ask(_ prompt: String, secret: Bool) throws(Unanswerable) -> String {
        guard let line = TerminalInput.readLine(prompt: prompt, secret: secret) else {
            throw Unanswerable(
                message: "the input ended before the prompt \"\(prompt.trimmingCharacters(in: ": "))\" was answered.")
        }
        return line
    }

    /// `LENGTH_BASED (min-password-length: 8)`.
    static func describePolicy(_ policy: JSONValue) -> String {
        let requirement = policy["policyRequirement"]?.stringValue ?? policy.serialized()
        let params =
            policy["params"]?.objectValue.map { object in object.map { "\($0.key): \($0.value.serialized())" } } ?? []
        return params.isEmpty ? requirement : "\(requirement) (\(params.joined(separator: ", ")))"
    }
}

extension String {
    /// The string without leading and trailing characters from `set`.
    fileprivate func trimmingCharacters(in set: String) -> String {
        let drop = Set(set)
        var slice = Substring(self)
        while let first = slice.first, drop.contains(first) { slice.removeFirst() }
        while let last = slice.last, drop.contains(last) { slice.removeLast() }
        return String(slice)
    }
}
