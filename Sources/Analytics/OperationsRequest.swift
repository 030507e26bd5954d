import JSON

/// The body of `…/operations/begin`, `…/finish` and `…/cancel`:
/// `{"path":"testing.operationview","operation":"testing","cancelOn":["background"]}`.
///
/// `path` is optional (absent, null or empty: the global operation); key rules
/// are applied later by ``AnalyticsKeys``. Unknown members are rejected.
public struct OperationRequest: Sendable, Equatable {
    /// The view path, as given; nil when absent or null.
    public var path: String?
    /// The operation's name.
    public var operation: String
    /// Phases that cancel the operation, in order, without repeats; empty unless begun with them.
    public var cancelOn: [AppPhase]

    /// A request as given.
    public init(path: String?, operation: String, cancelOn: [AppPhase] = []) {
        self.path = path
        self.operation = operation
        self.cancelOn = cancelOn
    }

    /// Parses a body; `cancelOn` is accepted only when `requireCancelOnAllowed` (begin), else it is an unknown field.
    public static func parse(
        _ body: [UInt8], requireCancelOnAllowed: Bool
    ) -> Result<OperationRequest, EventsRequestError> {
        Result { () throws(EventsRequestError) in
            let fields = requireCancelOnAllowed ? ["path", "operation", "cancelOn"] : ["path", "operation"]
            let members = try AnalyticsRequestBody.object(body, fields: fields)
            let path = try members["path"].map { v throws(EventsRequestError) in
                try AnalyticsRequestBody.string(v, field: "path", index: nil)
            }
            guard let operation = members["operation"] else { throw EventsRequestError(nil, "operation: missing") }
            let name = try AnalyticsRequestBody.string(operation, field: "operation", index: nil)
            if name.isEmpty { throw EventsRequestError(nil, "operation: is empty") }
            var phases: [AppPhase] = []
            if let cancelOn = members["cancelOn"] {
                guard let list = cancelOn.arrayValue else {
                    throw EventsRequestError(
                        nil, "cancelOn: must be an array of phases, got \(cancelOn.kindDescription)")
                }
                for item in list {
                    let phase = try AppPhase.parse(item, field: "cancelOn")
                    if !phases.contains(phase) { phases.append(phase) }
                }
            }
            return OperationRequest(path: path, operation: name, cancelOn: phases)
        }
    }
}

/// The body of `…/phase`: `{"phase":"background"}`.
public enum PhaseRequest {
    /// The phase the app entered.
    public static func parse(_ body: [UInt8]) -> Result<AppPhase, EventsRequestError> {
        Result { () throws(EventsRequestError) in
            let members = try AnalyticsRequestBody.object(body, fields: ["phase"])
            guard let phase = members["phase"] else { throw EventsRequestError(nil, "phase: missing") }
            return try AppPhase.parse(phase, field: "phase")
        }
    }
}

extension AppPhase {
    fileprivate static func parse(_ value: JSONValue, field: String) throws(EventsRequestError) -> AppPhase {
        let names = AppPhase.allCases.map(\.rawValue).joined(separator: ", ")
        guard let text = value.stringValue, let phase = AppPhase(rawValue: text) else {
            let got = value.stringValue.map { jsonQuoted($0) } ?? value.kindDescription
            throw EventsRequestError(nil, "\(field): must be one of \(names), got \(got)")
        }
        return phase
    }
}

/// Shared checks for the analytics request bodies.
enum AnalyticsRequestBody {
    /// The body's top-level object, nulls dropped, every member one of `fields`.
    static func object(_ body: [UInt8], fields: [String]) throws(EventsRequestError) -> [String: JSONValue] {
        let document: JSONValue
        do {
            document = try JSONValue.parse(body)
        } catch {
            throw EventsRequestError(nil, "body: not valid JSON (\(error))")
        }
        guard let object = document.objectValue else {
            throw EventsRequestError(nil, "body: must be a JSON object, got \(document.kindDescription)")
        }
        return try members(object, fields: fields, index: nil)
    }

    /// The members of `object` that are not null; an unknown name is an error at `index`.
    static func members(
        _ object: JSONObject, fields: [String], index: Int?
    ) throws(EventsRequestError) -> [String: JSONValue] {
        var members: [String: JSONValue] = [:]
        for (name, value) in object {
            guard fields.contains(name) else {
                let expected = fields.joined(separator: ", ")
                throw EventsRequestError(index, "\(jsonQuoted(name)): unknown field; expected one of \(expected)")
            }
            if !value.isNull { members[name] = value }
        }
        return members
    }

    /// `value` as a string, else an error naming `field`.
    static func string(_ value: JSONValue, field: String, index: Int?) throws(EventsRequestError) -> String {
        guard let text = value.stringValue else {
            throw EventsRequestError(index, "\(field): must be a string, got \(value.kindDescription)")
        }
        return text
    }
}
