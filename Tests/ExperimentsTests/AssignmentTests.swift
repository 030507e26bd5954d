import Config
import Testing

@testable import Experiments

private func plan(
    _ weights: [(String, Double)], salt: String = "2026-11", enabled: Bool = true,
    start: Double? = nil, end: Double? = nil
) -> ExperimentPlan {
    ExperimentPlan(
        ExperimentConfiguration(
            name: "onboarding-v2", variants: weights.map { .init(name: $0.0, weight: $0.1) },
            salt: salt, enabled: enabled, start: start, end: end))
}

/// Synthetic subjects shaped like the real ones: pennkeys and installation ids.
private let subjects: [String] = (0..<100_000).map {
    $0 % 2 == 0 ? "pennkey\($0)" : "install-\($0 &* 2_654_435_761 % 1_000_003)-\($0)"
}

struct AssignmentTests {
    static let splits: [[(String, Double)]] = [
        [("control", 50), ("new", 50)],
        [("control", 10), ("new", 90)],
        [("a", 20), ("b", 30), ("c", 50)],
        [("a", 1), ("b", 1), ("c", 1), ("d", 0), ("e", 1)],
    ]

    @Test("over 100,000 subjects each variant's share is within ±1 percentage point of its weight", arguments: splits)
    func distribution(weights: [(String, Double)]) {
        let p = plan(weights)
        var counts: [String: Int] = [:]
        for s in subjects { counts[p.variant(for: s, at: 0), default: 0] += 1 }
        let total = weights.reduce(0) { $0 + $1.1 }
        var report: [String] = []
        for (name, weight) in weights {
            let share = Double(counts[name, default: 0]) / Double(subjects.count)
            report.append("\(name) \(weight / total * 100)% → \(share * 100)%")
            #expect(abs(share - weight / total) <= 0.01, "\(name): \(share) vs \(weight / total)")
        }
        print("distribution:", report.joined(separator: ", "))
    }

    @Test("the same subject gets the same variant every time; salt and name reshuffle")
    func sticky() {
        let p = plan([("control", 50), ("new", 50)])
        for s in subjects.prefix(1000) { #expect(p.variant(for: s, at: 0) == p.variant(for: s, at: 1e9)) }
        let other = plan([("control", 50), ("new", 50)], salt: "2026-12")
        let differing = subjects.prefix(10_000).filter { p.variant(for: $0, at: 0) != other.variant(for: $0, at: 0) }
            .count
        #expect(abs(Double(differing) / 10_000 - 0.5) < 0.03)
    }

    @Test("50/50 → 40/60 moves only the 10% between the boundaries, all of them control → new")
    func weightChangeTwoVariants() {
        let before = plan([("control", 50), ("new", 50)])
        let after = plan([("control", 40), ("new", 60)])
        var moved = 0
        for s in subjects where before.variant(for: s, at: 0) != after.variant(for: s, at: 0) {
            moved += 1
            #expect(before.variant(for: s, at: 0) == "control" && after.variant(for: s, at: 0) == "new")
        }
        let share = Double(moved) / Double(subjects.count)
        print("weight change 50/50 → 40/60 moved \(share * 100)% (expected 10%)")
        #expect(abs(share - 0.10) <= 0.01)
    }

    @Test("moving weight between neighbours b → c leaves a's subjects alone and moves only b's edge")
    func weightChangeNeighbours() {
        let before = plan([("a", 20), ("b", 40), ("c", 40)])
        let after = plan([("a", 20), ("b", 30), ("c", 50)])
        var moved = 0
        for s in subjects {
            let (x, y) = (before.variant(for: s, at: 0), after.variant(for: s, at: 0))
            guard x != y else { continue }
            moved += 1
            #expect(x == "b" && y == "c")
        }
        let share = Double(moved) / Double(subjects.count)
        print("weight change 20/40/40 → 20/30/50 moved \(share * 100)% (expected 10%)")
        #expect(abs(share - 0.10) <= 0.01)
    }

    @Test("outside start/end or disabled everyone gets the first variant; inside the hash decides")
    func window() {
        let p = plan([("control", 1), ("new", 99)], start: 1000, end: 2000)
        let hashed = subjects.prefix(200).map { p.variant(for: $0, at: 1000) }
        #expect(hashed.filter { $0 == "new" }.count > 150)
        for s in subjects.prefix(200) {
            #expect(p.variant(for: s, at: 999.9) == "control")
            #expect(p.variant(for: s, at: 2000) == "control")
        }
        #expect(p.isRunning(at: 1000) && p.isRunning(at: 1999.9) && !p.isRunning(at: 2000) && !p.isRunning(at: 999))
        let off = plan([("control", 1), ("new", 99)], enabled: false)
        #expect(subjects.prefix(200).allSatisfy { off.variant(for: $0, at: 1500) == "control" })
        #expect(ExperimentSet([]).nextChange(after: 0) == nil)
    }

    @Test("an override wins (also while inactive); one naming a variant that no longer exists is ignored")
    func overrides() {
        let set = ExperimentSet([
            ExperimentConfiguration(
                name: "e", variants: [.init(name: "a", weight: 0), .init(name: "b", weight: 1)],
                enabled: false)
        ])
        var overrides = ExperimentOverrides()
        #expect(
            set.assignments(subject: "s", now: 0, overrides: overrides) == [
                .init(experiment: "e", variant: "a", reason: .inactive)
            ])
        overrides.set("b", for: "e")
        #expect(
            set.assignments(subject: "s", now: 0, overrides: overrides) == [
                .init(experiment: "e", variant: "b", reason: .override)
            ])
        overrides.set("gone", for: "e")
        #expect(set.assignment(set.plans[0], subject: "s", now: 0, overrides: overrides).reason == .inactive)
        #expect(ExperimentOverrides(json: overrides.json) == overrides)
        let cleared = overrides.clear("e")
        let again = overrides.clear("e")
        #expect(cleared && !again)
    }

    @Test("the header lists every experiment in config order")
    func header() {
        let set = ExperimentSet([
            ExperimentConfiguration(name: "one", variants: [.init(name: "x", weight: 1)]),
            ExperimentConfiguration(
                name: "two", variants: [.init(name: "y", weight: 0), .init(name: "z", weight: 1)], start: 50),
        ])
        #expect(set.headerValue(subject: "s", now: 0, overrides: .init()) == "one=x; two=y")
        #expect(set.headerValue(subject: "s", now: 50, overrides: .init()) == "one=x; two=z")
        #expect(set.nextChange(after: 0) == 50 && set.nextChange(after: 50) == nil)
    }
}

struct ExposureLogTests {
    @Test("one claim per subject, experiment and variant per day; a new day starts over; released claims come back")
    func perDay() {
        var log = ExposureLog()
        let day = ExposureLog.day(of: 1_793_491_200 + 86_399)
        #expect(day == ExposureLog.day(of: 1_793_491_200))
        func claim(_ subject: String, _ variant: String, _ day: Int) -> Bool {
            log.claim(subject: subject, experiment: "e", variant: variant, day: day)
        }
        #expect(claim("jdoe", "a", day) == true)
        #expect(claim("jdoe", "a", day) == false)
        #expect(claim("jdoe", "b", day) == true)
        #expect(claim("other", "a", day) == true)
        #expect(ExposureLog(json: log.json) == log)
        log.release(subject: "jdoe", experiment: "e", variant: "a", day: day)
        #expect(claim("jdoe", "a", day) == true)
        #expect(claim("jdoe", "a", day + 1) == true)
        #expect(claim("jdoe", "a", day + 1) == false)
        #expect(ExposureLog(json: nil) == ExposureLog())
    }
}
