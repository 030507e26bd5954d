import Config
import Synchronization

/// The run-time mock mode of each route (`POST /_platform/mock`), readable by every loop without
/// a lock. A config reload starts from the configured modes again.
public final class MockSwitchboard: Sendable {
    /// What a switch asked for.
    public enum Mode: Int, Sendable, CaseIterable {
        /// As configured (no switch).
        case configured = 0
        /// Answer from the mock folder.
        case replay = 1
        /// Forward and write 2xx bodies to the folder.
        case record = 2
        /// Forward; ignore the folder.
        case off = 3

        /// `replay`, `record` or `off`.
        public init?(name: String) {
            switch name {
            case "replay": self = .replay
            case "record": self = .record
            case "off": self = .off
            default: return nil
            }
        }
    }

    private let cells: [String: Cell]

    private final class Cell: Sendable {
        let mode = Atomic<Int>(0)
    }

    /// One switch per route name.
    public init(routes: [RouteConfiguration]) {
        cells = Dictionary(uniqueKeysWithValues: routes.map { ($0.name, Cell()) })
    }

    /// The switch of `route`.
    public func mode(of route: String) -> Mode {
        Mode(rawValue: cells[route]?.mode.load(ordering: .relaxed) ?? 0) ?? .configured
    }

    /// Sets the switch of `route`; false if there is no such route.
    @discardableResult
    public func set(_ mode: Mode, for route: String) -> Bool {
        guard let cell = cells[route] else { return false }
        cell.mode.store(mode.rawValue, ordering: .relaxed)
        return true
    }
}
