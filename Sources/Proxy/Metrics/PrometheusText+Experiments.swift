import Experiments

extension PrometheusText {
    /// Assignments served by `/_platform/experiments` reads and exposures recorded, by experiment and variant.
    static func render(experiments counters: ExperimentCounters) -> String {
        let (assignments, exposures) = counters.snapshot()
        var out = ""
        header(
            &out, "platform_proxy_experiment_assignments_total", "counter",
            "Assignments returned by /_platform/experiments reads, by experiment and variant.")
        for (key, value) in assignments.sorted(by: { $0.key < $1.key }) {
            out +=
                "platform_proxy_experiment_assignments_total{experiment=\"\(escape(key.experiment))\",variant=\"\(escape(key.variant))\"} \(value)\n"
        }
        header(
            &out, "platform_proxy_experiment_exposures_total", "counter",
            "Exposure events committed to the analytics queue, by experiment and variant.")
        for (key, value) in exposures.sorted(by: { $0.key < $1.key }) {
            out +=
                "platform_proxy_experiment_exposures_total{experiment=\"\(escape(key.experiment))\",variant=\"\(escape(key.variant))\"} \(value)\n"
        }
        return out
    }
}
