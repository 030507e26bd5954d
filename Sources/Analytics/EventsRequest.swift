import JSON

/// One accepted value, ready for the queue.
public struct AnalyticsValue: Sendable, Equatable {
    /// The full key, root-prefixed.
    public var key: String
    /// The value as text ("1" by default).
    public var value: String
    /// When it happened, Unix seconds.
    public var timestamp: Int64

    /// A value as given.
    public init(key: String, value: String, timestamp: Int64) {
        self.key = key
        self.value = value
        self.timestamp = timestamp
    }
}

/// The body of `POST /_platform/analytics/events`.
///
/// `{"events":[{"path":"dining.kcech","event":"buttonPressed","value":"1"},{"key":"dining.kcech.appear"}]}`:
/// each event is either the `event` form (`path` + `event`) or the `key` form;
/// `value` (a string, or a number kept as its literal) defaults to "1";
/// `timestamp` (Unix seconds, floored) defaults to now. A `null` member counts
/// as absent; unknown members are rejected.
public enum EventsRequest {
    /// What one request may hold (`analytics.maxEventsPerRequest`, `analytics.maxValueBytes`).
    public struct Limits: Sendable, Equatable {
        /// Most events in one request. Default 1000.
        public var maxEvents: Int
        /// Longest value, in UTF-8 bytes. Default 1024.
        public var maxValueBytes: Int

        /// Limits with the documented defaults unless given.
        public init(maxEvents: Int = 1000, maxValueBytes: Int = 1024) {
            self.maxEvents = maxEvents
            self.maxValueBytes = maxValueBytes
        }
    }
    /// How far past `now` a timestamp may lie, in seconds (clock skew, not milliseconds by mistake).
    public static let maxFutureSeconds: Int64 = 86_400

    /// The names an event may have, in the order an error lists them.
    static let fields = ["path", "event", "key", "value", "timestamp"]

    /// The values in request order, or the first problem; `now` is Unix seconds.
    public static func parse(
        _ body: [UInt8], keys: AnalyticsKeys, now: Int64, limits: Limits = Limits()
    ) -> Result<[AnalyticsValue], EventsRequestError> {
        Result { () throws(EventsRequestError) in
            let object = try AnalyticsRequestBody.object(body, fields: ["events"])
            guard let events = object["events"] else { throw EventsRequestError(nil, "events: missing") }
            guard let list = events.arrayValue else {
                throw EventsRequestError(nil, "events: must be an array, got \(events.kindDescription)")
            }
            if list.count > limits.maxEvents {
                throw EventsRequestError(
                    nil, "events: at most \(limits.maxEvents) per request, got \(list.count)", tooLarge: true)
            }
            var values: [AnalyticsValue] = []
            values.reserveCapacity(list.count)
            for (index, event) in list.enumerated() {
                let value = try value(event, index: index, keys: keys, now: now)
                let bytes = value.value.utf8.count
                if bytes > limits.maxValueBytes {
                    throw EventsRequestError(
                        index, "value: \(bytes) bytes; the limit is \(limits.maxValueBytes)", tooLarge: true)
                }
                values.append(value)
            }
            return values
        }
    }

    private static func value(
        _ event: JSONValue, index: Int, keys: AnalyticsKeys, now: Int64
    ) throws(EventsRequestError) -> AnalyticsValue {
        guard let object = event.objectValue else {
            throw EventsRequestError(index, "must be an object, got \(event.kindDescription)")
        }
        let members = try EventMembers(object, index: index)
        let key = try self.key(members, index: index, keys: keys)
        let value: String
        switch members.value {
        case nil: value = "1"
        case .string(let text)?: value = text
        case .number(let number)?: value = number.text
        case let other?:
            throw EventsRequestError(index, "value: must be a string or a number, got \(other.kindDescription)")
        }
        let timestamp =
            try members.timestamp.map { v throws(EventsRequestError) in
                try self.timestamp(v, index: index, now: now)
            } ?? now
        return AnalyticsValue(key: key, value: value, timestamp: timestamp)
    }

    private static func key(
        _ members: EventMembers, index: Int, keys: AnalyticsKeys
    ) throws(EventsRequestError) -> String {
        let result: Result<String, AnalyticsKeyError>
        if let key = members.key {
            if members.path != nil || members.event != nil {
                throw EventsRequestError(index, "key: the key form cannot also carry path or event")
            }
            result = keys.normalize(try AnalyticsRequestBody.string(key, field: "key", index: index))
        } else {
            guard let path = members.path else {
                let missing = members.event == nil ? "key, or path and event" : "path"
                throw EventsRequestError(index, "\(missing): missing")
            }
            guard let event = members.event else { throw EventsRequestError(index, "event: missing") }
            result = keys.eventKey(
                path: try AnalyticsRequestBody.string(path, field: "path", index: index),
                event: try AnalyticsRequestBody.string(event, field: "event", index: index))
        }
        switch result {
        case .success(let key): return key
        case .failure(let error): throw EventsRequestError(index, error.message)
        }
    }

    private static func timestamp(_ value: JSONValue, index: Int, now: Int64) throws(EventsRequestError) -> Int64 {
        guard let number = value.numberValue else {
            throw EventsRequestError(index, "timestamp: must be a number of Unix seconds, got \(value.kindDescription)")
        }
        let latest = now + maxFutureSeconds
        let floored = number.double.rounded(.down)
        let seconds: Int64
        // Clamp as Double before converting, so a huge or fractional literal cannot trap.
        if let exact = number.int64 {
            seconds = exact
        } else if floored < 1 {
            seconds = 0
        } else if floored > Double(latest) {
            seconds = latest + 1
        } else {
            seconds = Int64(floored)
        }
        if seconds <= 0 { throw EventsRequestError(index, "timestamp: must be after 1970 (greater than 0)") }
        if seconds > latest {
            let problem = "is more than a day in the future; it is Unix seconds"
            throw EventsRequestError(index, "timestamp: \(number.text) \(problem)")
        }
        return seconds
    }
}

/// One event object's members, nulls dropped, as `AnalyticsRequestBody.members` would give them:
/// five known names are five fields, so an event costs no dictionary and no hashing of its keys.
private struct EventMembers {
    var path: JSONValue?
    var event: JSONValue?
    var key: JSONValue?
    var value: JSONValue?
    var timestamp: JSONValue?

    init(_ object: JSONObject, index: Int) throws(EventsRequestError) {
        for (name, member) in object {
            let present: JSONValue? = member.isNull ? .none : .some(member)
            switch name {
            case "path": path = present
            case "event": event = present
            case "key": key = present
            case "value": value = present
            case "timestamp": timestamp = present
            default:
                let expected = EventsRequest.fields.joined(separator: ", ")
                throw EventsRequestError(index, "\(jsonQuoted(name)): unknown field; expected one of \(expected)")
            }
        }
    }
}

/// Why an events or operations body was refused (a 400).
public struct EventsRequestError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The offending event's position in `events`; nil for problems with the body as a whole.
    public let index: Int?
    /// What was wrong, starting with the field ("timestamp: must be …").
    public let message: String
    /// Whether a size limit was exceeded (a 413 rather than a 400).
    public let tooLarge: Bool

    /// An error for the event at `index` (nil: the whole body).
    public init(index: Int?, message: String, tooLarge: Bool = false) {
        self.index = index
        self.message = message
        self.tooLarge = tooLarge
    }

    init(_ index: Int?, _ message: String, tooLarge: Bool = false) {
        self.init(index: index, message: message, tooLarge: tooLarge)
    }

    /// `events[3]: timestamp: …`, or the bare message for body-level problems.
    public var description: String {
        index.map { "events[\($0)]: \(message)" } ?? message
    }
}
