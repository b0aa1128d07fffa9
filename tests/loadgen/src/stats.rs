//! Counting outcomes and turning them into the report `make bench` reads.

use std::collections::BTreeMap;
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
    /// Latencies of successful requests, in µs (streams: until the end).
    pub latencies: Histogram<u64>,
    /// Streams: time to the first content delta, in µs.
    pub ttft: Histogram<u64>,
    /// Streams: events received during the measured window, whichever
    /// request they belong to (so they match the CPU read over the window).
    pub frames: u64,
    pub ok: u64,
    /// Successful requests during the warm-up (they leave usage rows too).
    pub warmup_ok: u64,
    pub non_2xx: u64,
    pub transport_errors: u64,
    pub notes: Vec<String>,
}

impl Tally {
    pub fn new() -> Self {
        Self {
            latencies: new_histogram(),
            ttft: new_histogram(),
            frames: 0,
            ok: 0,
            warmup_ok: 0,
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
        self.ttft
            .add(&other.ttft)
            .context("merging time-to-first-token histograms")?;
        self.frames += other.frames;
        self.ok += other.ok;
        self.warmup_ok += other.warmup_ok;
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
    /// Successful requests during the warm-up, not counted above.
    pub warmup_ok: u64,
    /// Streams only: events received during the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frames: Option<u64>,
    /// Streams only: time to the first content delta.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_p50_us: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_p99_us: Option<u64>,
    /// `--cpu` groups: clock ticks used during the window.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub cpu_ticks: BTreeMap<String, u64>,
}

fn quantile(h: &Histogram<u64>, q: f64) -> u64 {
    if h.is_empty() {
        0
    } else {
        h.value_at_quantile(q)
    }
}

impl Report {
    /// `stream`: the requests were streams (adds frames and time to first
    /// token).
    pub fn new(label: &str, tally: &Tally, window: Duration, stream: bool) -> Self {
        let requests = tally.ok + tally.non_2xx + tally.transport_errors;
        let duration_s = window.as_secs_f64();
        let h = &tally.latencies;
        let pct = |q: f64| quantile(h, q);
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
            warmup_ok: tally.warmup_ok,
            frames: stream.then_some(tally.frames),
            ttft_p50_us: stream.then(|| quantile(&tally.ttft, 0.50)),
            ttft_p99_us: stream.then(|| quantile(&tally.ttft, 0.99)),
            cpu_ticks: BTreeMap::new(),
        }
    }

    /// More than 1% failed, or nothing was measured at all.
    pub fn failed(&self) -> bool {
        self.requests == 0 || self.errors * 100 > self.requests
    }

    pub fn human(&self) -> String {
        let mut line = format!(
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
        );
        if let (Some(frames), Some(p50), Some(p99)) =
            (self.frames, self.ttft_p50_us, self.ttft_p99_us)
        {
            line.push_str(&format!(
                "; {frames} frames; first token p50 {} p99 {}",
                ms(p50),
                ms(p99)
            ));
        }
        line
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
        let r = Report::new("direct", &tally(&lat, 0, 0), Duration::from_secs(4), false);
        assert_eq!((r.requests, r.errors, r.rps), (100, 0, 25.0));
        assert!((49_000..=51_000).contains(&r.p50_us), "{}", r.p50_us);
        assert!((99_000..=100_100).contains(&r.max_us), "{}", r.max_us);
        assert!(!r.failed());
        let json = r.json().expect("json");
        assert!(json.starts_with(r#"{"label":"direct","requests":100,"errors":0,"duration_s":4.0,"rps":25.0,"p50_us":"#), "{json}");
        assert!(r
            .human()
            .starts_with("direct: 100 requests in 4.00s = 25.0 req/s; errors 0"));
        assert!(
            json.ends_with(r#""non_2xx":0,"transport_errors":0,"warmup_ok":0}"#),
            "{json}"
        );
    }

    #[test]
    fn stream_reports_add_frames_ttft_and_cpu() {
        let mut t = tally(&[1_300_000, 1_400_000], 0, 0);
        t.frames = 134;
        t.warmup_ok = 5;
        for us in [900, 1100] {
            t.ttft.saturating_record(us);
        }
        let mut r = Report::new("stream", &t, Duration::from_secs(2), true);
        r.cpu_ticks.insert("server".into(), 12);
        assert_eq!((r.frames, r.warmup_ok), (Some(134), 5));
        let (p50, p99) = (r.ttft_p50_us.expect("p50"), r.ttft_p99_us.expect("p99"));
        assert!(
            (899..=901).contains(&p50) && (1099..=1101).contains(&p99),
            "{p50} {p99}"
        );
        let json = r.json().expect("json");
        assert!(
            json.contains(r#""warmup_ok":5,"frames":134,"ttft_p50_us":"#)
                && json.ends_with(r#""cpu_ticks":{"server":12}}"#),
            "{json}"
        );
        assert!(
            r.human().contains("134 frames; first token p50 0.90ms"),
            "{}",
            r.human()
        );
    }

    #[test]
    fn failure_threshold_is_one_percent() {
        let lat = vec![1000; 99];
        let report = |t: &Tally| Report::new("x", t, Duration::from_secs(1), false);
        assert!(!report(&tally(&lat, 1, 0)).failed());
        assert!(report(&tally(&lat, 1, 1)).failed());
        assert!(report(&tally(&[], 0, 0)).failed());
    }

    #[test]
    fn merge_adds_everything() {
        let mut a = tally(&[1000, 2000], 1, 0);
        a.note("HTTP 500".into());
        a.frames = 3;
        let mut b = tally(&[3000], 0, 2);
        b.frames = 4;
        b.warmup_ok = 2;
        b.ttft.saturating_record(10);
        b.note("HTTP 500".into());
        b.note("transport: reset".into());
        a.merge(b).expect("merge");
        assert_eq!((a.ok, a.non_2xx, a.transport_errors), (3, 1, 2));
        assert_eq!(a.latencies.len(), 3);
        assert_eq!((a.frames, a.warmup_ok, a.ttft.len()), (7, 2, 1));
        assert_eq!(
            a.notes,
            vec!["HTTP 500".to_owned(), "transport: reset".to_owned()]
        );
    }
}
