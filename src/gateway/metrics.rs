//! Gateway counters and their Prometheus text exposition (format 0.0.4) for `/metrics`.
//! Counters are plain atomics the router, workers and delivery code bump; rendering reads
//! them together with the adapter registry and the store's writer statistics.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use super::adapter_health::{AdapterHealth, AdapterState};
use crate::state::WriterStats;

/// Everything the gateway counts. All fields are monotonic counters except the `*_depth`
/// gauges, which their owners set.
#[derive(Debug, Default)]
pub struct GatewayMetrics {
    pub events_in: AtomicU64,
    pub duplicates_dropped: AtomicU64,
    pub replies_out: AtomicU64,
    pub send_failures: AtomicU64,
    pub turns_started: AtomicU64,
    pub turns_completed: AtomicU64,
    pub turns_failed: AtomicU64,
    pub agent_errors: AtomicU64,
    /// Turns that panicked and were answered with an incident id instead.
    pub turn_panics: AtomicU64,
    /// Inbound items an adapter could not decode, kept in `hermesd_dead_letters`.
    pub dead_letters: AtomicU64,
    pub router_queue_depth: AtomicU64,
    pub delivery_queue_depth: AtomicU64,
    /// Replies owed (pending or being sent) in the ledger, as the janitor last counted.
    pub owed_replies: AtomicU64,
}

impl GatewayMetrics {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn incr(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The exposition text; `writer` is absent before the store opens.
    pub fn render(&self, adapters: &AdapterHealth, writer: Option<&WriterStats>) -> String {
        let mut out = Exposition::default();
        let counters: [(&str, &str, &AtomicU64); 8] = [
            (
                "events_in_total",
                "Inbound platform events accepted.",
                &self.events_in,
            ),
            (
                "duplicates_dropped_total",
                "Inbound events dropped as redeliveries.",
                &self.duplicates_dropped,
            ),
            (
                "replies_out_total",
                "Outbound messages delivered to platforms.",
                &self.replies_out,
            ),
            (
                "send_failures_total",
                "Outbound messages that failed after retries.",
                &self.send_failures,
            ),
            (
                "turns_started_total",
                "Agent turns started.",
                &self.turns_started,
            ),
            (
                "turns_completed_total",
                "Agent turns completed.",
                &self.turns_completed,
            ),
            (
                "turns_failed_total",
                "Agent turns that ended in an error.",
                &self.turns_failed,
            ),
            (
                "agent_errors_total",
                "Errors reported by agent workers.",
                &self.agent_errors,
            ),
        ];
        for (name, help, value) in counters {
            out.single(name, "counter", help, load(value));
        }
        out.single(
            "turn_panics_total",
            "counter",
            "Agent turns that panicked; each was answered and its session freed.",
            load(&self.turn_panics),
        );
        out.single(
            "dead_letters_total",
            "counter",
            "Inbound items an adapter could not decode, kept as dead letters.",
            load(&self.dead_letters),
        );
        out.single(
            "router_queue_depth",
            "gauge",
            "Events waiting for the router.",
            load(&self.router_queue_depth),
        );
        out.single(
            "delivery_queue_depth",
            "gauge",
            "Replies waiting for delivery.",
            load(&self.delivery_queue_depth),
        );
        out.single(
            "owed_replies",
            "gauge",
            "Replies recorded but not yet delivered, counted each minute.",
            load(&self.owed_replies),
        );

        let snapshot = adapters.snapshot();
        out.header(
            "adapter_state",
            "gauge",
            "1 for the adapter's current state, 0 otherwise.",
        );
        for (adapter, status) in &snapshot {
            for state in AdapterState::ALL {
                let labels = format!(
                    "adapter=\"{}\",state=\"{}\"",
                    escape(adapter),
                    state.as_str()
                );
                out.sample("adapter_state", &labels, u64::from(status.state == state));
            }
        }
        out.header(
            "adapter_restarts_total",
            "counter",
            "Supervisor restarts of the adapter.",
        );
        for (adapter, status) in &snapshot {
            let labels = format!("adapter=\"{}\"", escape(adapter));
            out.sample("adapter_restarts_total", &labels, status.restarts);
        }

        if let Some(writer) = writer {
            let writer_counters: [(&str, &str, &AtomicU64); 4] = [
                (
                    "store_commits_total",
                    "state.db transactions committed.",
                    &writer.commits,
                ),
                (
                    "store_writes_total",
                    "Writes committed to state.db.",
                    &writer.writes,
                ),
                (
                    "store_failed_writes_total",
                    "Writes state.db refused or could not make.",
                    &writer.failed_writes,
                ),
                (
                    "store_lock_retries_total",
                    "Batches retried because state.db was locked.",
                    &writer.lock_retries,
                ),
            ];
            for (name, help, value) in writer_counters {
                out.single(name, "counter", help, load(value));
            }
            let latency_sum = load(&writer.latency_micros_total) as f64 / 1e6;
            let latency_max = load(&writer.latency_micros_max) as f64 / 1e6;
            out.single_f64(
                "store_write_latency_seconds_total",
                "counter",
                "Sum of write-queue-to-commit latencies.",
                latency_sum,
            );
            out.single_f64(
                "store_write_latency_seconds_max",
                "gauge",
                "Longest write-queue-to-commit latency.",
                latency_max,
            );
        }
        out.text
    }
}

fn load(value: &AtomicU64) -> u64 {
    value.load(Ordering::Relaxed)
}

/// Label values escape backslash, double quote and newline.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[derive(Default)]
struct Exposition {
    text: String,
}

const PREFIX: &str = "hermesd_";

impl Exposition {
    fn header(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {PREFIX}{name} {help}");
        let _ = writeln!(self.text, "# TYPE {PREFIX}{name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &str, value: u64) {
        let _ = writeln!(self.text, "{PREFIX}{name}{{{labels}}} {value}");
    }

    fn single(&mut self, name: &str, kind: &str, help: &str, value: u64) {
        self.header(name, kind, help);
        let _ = writeln!(self.text, "{PREFIX}{name} {value}");
    }

    fn single_f64(&mut self, name: &str, kind: &str, help: &str, value: f64) {
        self.header(name, kind, help);
        let _ = writeln!(self.text, "{PREFIX}{name} {value}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_headers_before_samples_and_escapes_labels() {
        let metrics = GatewayMetrics::new();
        GatewayMetrics::incr(&metrics.events_in);
        GatewayMetrics::incr(&metrics.events_in);
        let adapters = AdapterHealth::new();
        adapters.register("odd\"name");
        let writer = WriterStats::default();
        writer
            .latency_micros_total
            .store(1_500_000, Ordering::Relaxed);
        let text = metrics.render(&adapters, Some(&writer));
        assert!(text.contains("hermesd_events_in_total 2\n"), "{text}");
        assert!(
            text.contains("hermesd_adapter_state{adapter=\"odd\\\"name\",state=\"starting\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("hermesd_store_write_latency_seconds_total 1.5\n"),
            "{text}"
        );
        let mut typed = std::collections::HashSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                typed.insert(rest.split(' ').next().unwrap_or_default().to_owned());
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().unwrap_or_default();
                assert!(typed.contains(name), "sample before its TYPE: {line}");
            }
        }
    }
}
