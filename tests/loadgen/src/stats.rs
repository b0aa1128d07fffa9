//! Counting outcomes and turning them into the report `make bench` reads.

use std::time::Duration;

use anyhow::Context as _;
use hdrhistogram::Histogram;
use serde::Serialize;

/// Longest latency the histogram tracks exactly (larger ones saturate).
const MAX_TRACKED_US: u64 = 120_000_000;
/// Distinct error descriptions kept to explain a failed run.
const MAX_NOTES: usize = 5;

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_TRACKED_US, 3).expect("constant histogram bounds are valid")
}

/// One worker's (or, merged, the whole run's) results.
pub struct Tally {
    /// Latencies of successful requests, in µs.
    pub latencies: Histogram<u64>,
    pub ok: u64,
    pub non_2xx: u64,
    pub transport_errors: u64,
    pub notes: Vec<String>,
}

impl Tally {
    pub fn new() -> Self {
        Self {
            latencies: new_histogram(),
            ok: 0,
            non_2xx: 0,
            transport_errors: 0,
            notes: Vec::new(),
        }
    }

    pub fn note(&mut self, what: String) {
        if self.notes.len() < MAX_NOTES && !self.notes.contains(&what) {
            self.notes.push(what);
        }
    }

    pub fn merge(&mut self, other: Tally) -> anyhow::Result<()> {
        self.latencies
            .add(&other.latencies)
            .context("merging latency histograms")?;
        self.ok += other.ok;
        self.non_2xx += other.non_2xx;
        self.transport_errors += other.transport_errors;
        for n in other.notes {
            self.note(n);
        }
        Ok(())
    }
}

/// The JSON line; field order is the documented output order.
#[derive(Debug, PartialEq, Serialize)]
pub struct Report {
    pub label: String,
    pub requests: u64,
    pub errors: u64,
    pub duration_s: f64,
    pub rps: f64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    pub non_2xx: u64,
    pub transport_errors: u64,
}

impl Report {
    pub fn new(label: &str, tally: &Tally, window: Duration) -> Self {
        let requests = tally.ok + tally.non_2xx + tally.transport_errors;
        let duration_s = window.as_secs_f64();
        let h = &tally.latencies;
        let pct = |q: f64| {
            if h.is_empty() {
                0
            } else {
                h.value_at_quantile(q)
            }
        };
        Self {
            label: label.to_owned(),
            requests,
            errors: tally.non_2xx + tally.transport_errors,
            duration_s: round2(duration_s),
            rps: if duration_s > 0.0 {
                round2(requests as f64 / duration_s)
            } else {
                0.0
            },
            p50_us: pct(0.50),
            p90_us: pct(0.90),
            p99_us: pct(0.99),
            max_us: if h.is_empty() { 0 } else { h.max() },
            non_2xx: tally.non_2xx,
            transport_errors: tally.transport_errors,
        }
    }

    /// More than 1% failed, or nothing was measured at all.
    pub fn failed(&self) -> bool {
        self.requests == 0 || self.errors * 100 > self.requests
    }

    pub fn human(&self) -> String {
        format!(
            "{}: {} requests in {:.2}s = {:.1} req/s; errors {} ({} non-2xx, {} transport); \
             latency p50 {} p90 {} p99 {} max {}",
            self.label,
            self.requests,
            self.duration_s,
            self.rps,
            self.errors,
            self.non_2xx,
            self.transport_errors,
            ms(self.p50_us),
            ms(self.p90_us),
            ms(self.p99_us),
            ms(self.max_us),
        )
    }

    pub fn json(&self) -> anyhow::Result<String> {
        Ok(serde_json::to_string(self)?)
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn ms(us: u64) -> String {
    format!("{:.2}ms", us as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(latencies: &[u64], non_2xx: u64, transport: u64) -> Tally {
        let mut t = Tally {
            ok: latencies.len() as u64,
            non_2xx,
            transport_errors: transport,
            ..Tally::new()
        };
        for &l in latencies {
            t.latencies.saturating_record(l);
        }
        t
    }

    #[test]
    fn report_numbers_and_json_order() {
        let lat: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        let r = Report::new("direct", &tally(&lat, 0, 0), Duration::from_secs(4));
        assert_eq!((r.requests, r.errors, r.rps), (100, 0, 25.0));
        assert!((49_000..=51_000).contains(&r.p50_us), "{}", r.p50_us);
        assert!((99_000..=100_100).contains(&r.max_us), "{}", r.max_us);
        assert!(!r.failed());
        let json = r.json().expect("json");
        assert!(json.starts_with(r#"{"label":"direct","requests":100,"errors":0,"duration_s":4.0,"rps":25.0,"p50_us":"#), "{json}");
        assert!(r
            .human()
            .starts_with("direct: 100 requests in 4.00s = 25.0 req/s; errors 0"));
    }

    #[test]
    fn failure_threshold_is_one_percent() {
        let lat = vec![1000; 99];
        assert!(!Report::new("x", &tally(&lat, 1, 0), Duration::from_secs(1)).failed());
        assert!(Report::new("x", &tally(&lat, 1, 1), Duration::from_secs(1)).failed());
        assert!(Report::new("x", &tally(&[], 0, 0), Duration::from_secs(1)).failed());
    }

    #[test]
    fn merge_adds_everything() {
        let mut a = tally(&[1000, 2000], 1, 0);
        a.note("HTTP 500".into());
        let mut b = tally(&[3000], 0, 2);
        b.note("HTTP 500".into());
        b.note("transport: reset".into());
        a.merge(b).expect("merge");
        assert_eq!((a.ok, a.non_2xx, a.transport_errors), (3, 1, 2));
        assert_eq!(a.latencies.len(), 3);
        assert_eq!(
            a.notes,
            vec!["HTTP 500".to_owned(), "transport: reset".to_owned()]
        );
    }
}
