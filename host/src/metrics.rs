//! Prometheus metrics: what the gateway counts and times, rendered in the
//! Prometheus text format at `GET /metrics` on the admin listener.
//!
//! Each gateway owns its own recorder (`metrics-exporter-prometheus`'s
//! `PrometheusRecorder`, held in [`Metrics`]) rather than installing one
//! process-wide, so several gateways in one process (the end-to-end tests)
//! count apart. Series are registered through the recorder directly; the
//! registry is a sharded hash map, so a record is a key lookup and an
//! atomic add, and a series whose labels never change is registered once
//! and kept as a handle. The series every call records (its request, its
//! vendor's answer time, what it was charged) are kept as handles too, in
//! [`Kept`] maps by their label values, so a call records them without
//! building a key for each (a `Vec` of labels, a `String` per model or
//! channel) or looking it up in the registry. That took about 2 µs of
//! CPU off a call at 32 connections (two release gateways, each in front
//! of its own mock, loaded at once in pairs of 8-s runs: 17 of 18 pairs
//! lower; see `docs/performance.md`).
//! No series is ever removed from the recorder (no idle timeout is set),
//! so a kept handle always counts in the series the registry renders.
//!
//! Cardinality is bounded by construction: no label carries a token,
//! an account, a request id or a raw path. `route` is the route's template
//! (`/v1/videos/{id}`), `model` a configured model or `other` / `none`,
//! `channel` and `plugin` come from the config and the loaded components,
//! `code` and `reason` from the gateway's own error codes (a code a guest
//! invents that is not a plain short identifier counts as `other`).
//!
//! Histograms are kept as buckets; [`Metrics::upkeep`] (run every few
//! seconds by the server) folds their samples in even when nobody scrapes.

use crate::billing::usage::Usage;
use metrics::{Counter, Gauge, Histogram, Key, Label, Metadata, Recorder, SharedString, Unit};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};
use std::borrow::Borrow;
use std::hash::Hash;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// The `model` label of a request that named no model (or was refused
/// before its body was read).
pub const NO_MODEL: &str = "none";
/// The `model` label of a model name the config does not list.
pub const OTHER_MODEL: &str = "other";

/// Latency buckets, in seconds: from a fast guest call (100 µs) to a long
/// upstream answer (10 min).
const BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];

/// The series, by name (README, *Metrics*).
pub mod names {
    pub const REQUESTS: &str = "gateway_requests_total";
    pub const REQUEST_DURATION: &str = "gateway_request_duration_seconds";
    pub const UPSTREAM_DURATION: &str = "gateway_upstream_duration_seconds";
    pub const GUEST_CALL_DURATION: &str = "gateway_guest_call_duration_seconds";
    pub const UPSTREAM_ERRORS: &str = "gateway_upstream_errors_total";
    pub const TOKENS: &str = "gateway_tokens_total";
    pub const QUOTA_CHARGED: &str = "gateway_quota_charged_total";
    pub const HOLDS_OPEN: &str = "gateway_holds_open";
    pub const VIDEO_TASKS: &str = "gateway_video_tasks_total";
    pub const WEBHOOK_DELIVERIES: &str = "gateway_webhook_deliveries_total";
    pub const REFUSALS: &str = "gateway_refusals_total";
    pub const PLUGIN_RELOADS: &str = "gateway_plugin_reloads_total";
}

/// A response extension: the model a call named, for the request counter
/// (set by the text handler; see [`model_label`]).
#[derive(Clone, Debug)]
pub struct ModelLabel(pub SharedString);

/// One gateway's metrics; cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    holds_open: Gauge,
    reloads_loaded: Counter,
    reloads_refused: Counter,
    /// A request's count and time, by route, model, status and protocol.
    requests: Kept<RequestLabels, (Counter, Histogram)>,
    /// A vendor answer's time, by channel.
    upstream: Kept<Box<str>, Histogram>,
    /// What a settled call was charged, by model.
    charged: Kept<Box<str>, Charged>,
}

/// The label values of a request's series (`gateway_requests_total`'s; the
/// duration's are route and protocol).
type RequestLabels = (SharedString, SharedString, u16, &'static str);

/// A model's charge series: its tokens by kind, then its quota.
struct Charged {
    input: Counter,
    cache_read: Counter,
    cache_write: Counter,
    output: Counter,
    quota: Counter,
}

/// Series handles kept by their label values. Bounded as the labels are
/// (see the module's doc): configured models and channels, route
/// templates, known statuses and protocols.
struct Kept<K, V> {
    map: RwLock<foldhash::HashMap<K, V>>,
}

impl<K: Hash + Eq, V> Kept<K, V> {
    fn new() -> Self {
        Kept {
            map: RwLock::new(foldhash::HashMap::default()),
        }
    }

    /// Calls `record` with the handles kept for `key`, registered first
    /// by `register` when there are none yet. A poisoned lock is used as
    /// it is: a map of handles has no invariant a panic could break.
    fn with<Q>(&self, key: &Q, register: impl FnOnce() -> (K, V), record: impl FnOnce(&V))
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        {
            let map = self.map.read().unwrap_or_else(|e| e.into_inner());
            if let Some(v) = map.get(key) {
                return record(v);
            }
        }
        let (k, v) = register();
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        record(map.entry(k).or_insert(v));
    }
}

static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        // Bucket bounds are constants, so the builder cannot refuse them;
        // if it ever did, the summaries it falls back to still render.
        let builder = PrometheusBuilder::new();
        let builder = match builder.set_buckets(BUCKETS) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!("metrics: histogram buckets refused ({e}); using summaries");
                PrometheusBuilder::new()
            }
        };
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        describe(&recorder);
        let counter = |name: &'static str, labels: &'static [Label]| {
            recorder.register_counter(&Key::from_static_parts(name, labels), &METADATA)
        };
        static LOADED: [Label; 1] = [Label::from_static_parts("result", "loaded")];
        static REFUSED: [Label; 1] = [Label::from_static_parts("result", "refused")];
        let reloads_loaded = counter(names::PLUGIN_RELOADS, &LOADED);
        let reloads_refused = counter(names::PLUGIN_RELOADS, &REFUSED);
        let holds_open =
            recorder.register_gauge(&Key::from_static_name(names::HOLDS_OPEN), &METADATA);
        Metrics {
            inner: Arc::new(Inner {
                recorder,
                handle,
                holds_open,
                reloads_loaded,
                reloads_refused,
                requests: Kept::new(),
                upstream: Kept::new(),
                charged: Kept::new(),
            }),
        }
    }

    fn counter(&self, name: &'static str, labels: Vec<Label>) -> Counter {
        self.inner
            .recorder
            .register_counter(&Key::from_parts(name, labels), &METADATA)
    }

    fn histogram(&self, name: &'static str, labels: Vec<Label>) -> Histogram {
        self.inner
            .recorder
            .register_histogram(&Key::from_parts(name, labels), &METADATA)
    }

    /// One request of the public API, when its answer head is ready: by
    /// route template, model, status and client protocol; and its time.
    pub fn request(
        &self,
        route: SharedString,
        model: SharedString,
        status: u16,
        protocol: &'static str,
        took: Duration,
    ) {
        let key = (route, model, status, protocol);
        let register = || {
            let (route, model, status, protocol) = key.clone();
            let count = self.counter(
                names::REQUESTS,
                vec![
                    Label::new("route", route.clone()),
                    Label::new("model", model),
                    Label::new("status", status_label(status)),
                    Label::from_static_parts("protocol", protocol),
                ],
            );
            let time = self.histogram(
                names::REQUEST_DURATION,
                vec![
                    Label::new("route", route),
                    Label::from_static_parts("protocol", protocol),
                ],
            );
            (key.clone(), (count, time))
        };
        self.inner.requests.with(&key, register, |(count, time)| {
            count.increment(1);
            time.record(took.as_secs_f64());
        });
    }

    /// A vendor's answer head arrived (or did not) after `took`.
    pub fn upstream(&self, channel: &str, took: Duration) {
        let register = || {
            let label = Label::new("channel", channel.to_string());
            (
                channel.into(),
                self.histogram(names::UPSTREAM_DURATION, vec![label]),
            )
        };
        self.inner
            .upstream
            .with(channel, register, |time| time.record(took.as_secs_f64()));
    }

    /// A channel's attempt failed with `code` (the adapter's mapping of
    /// the vendor's error, or the gateway's transport code).
    pub fn upstream_error(&self, channel: &str, code: &str) {
        self.counter(
            names::UPSTREAM_ERRORS,
            vec![
                Label::new("channel", channel.to_string()),
                Label::new("code", code_label(code)),
            ],
        )
        .increment(1);
    }

    /// The series of a plugin's guest call times (any export of any
    /// component), each recorded in seconds; a guest store keeps it for its
    /// calls (see `plugins::sandbox`).
    pub fn guest_call_time(&self, plugin: &Arc<str>) -> Histogram {
        self.inner.recorder.register_histogram(
            &Key::from_parts(
                names::GUEST_CALL_DURATION,
                vec![Label::new("plugin", SharedString::from(plugin.clone()))],
            ),
            &METADATA,
        )
    }

    /// A settled call of a configured model: the tokens billed by kind and
    /// the quota charged.
    pub fn charged(&self, model: &str, usage: Option<&Usage>, quota: i64) {
        if usage.is_none() && quota <= 0 {
            return;
        }
        let register = || {
            let tokens = |kind: &'static str| {
                self.counter(
                    names::TOKENS,
                    vec![
                        Label::new("model", model.to_string()),
                        Label::from_static_parts("kind", kind),
                    ],
                )
            };
            let series = Charged {
                input: tokens("input"),
                cache_read: tokens("cache_read"),
                cache_write: tokens("cache_write"),
                output: tokens("output"),
                quota: self.counter(
                    names::QUOTA_CHARGED,
                    vec![Label::new("model", model.to_string())],
                ),
            };
            (model.into(), series)
        };
        self.inner.charged.with(model, register, |series| {
            if let Some(u) = usage {
                // A handle registers its series at once; a kind is added
                // to only when billed, so an unused one renders 0.
                for (counter, n) in [
                    (&series.input, u.input_tokens),
                    (&series.cache_read, u.cache_read_tokens),
                    (&series.cache_write, u.cache_write_tokens),
                    (&series.output, u.output_tokens),
                ] {
                    if n > 0 {
                        counter.increment(n);
                    }
                }
            }
            if quota > 0 {
                series.quota.increment(quota as u64);
            }
        });
    }

    /// A video task entered `state` (`queued`, `in_progress`, a final one).
    pub fn video_task(&self, state: &'static str) {
        self.counter(
            names::VIDEO_TASKS,
            vec![Label::from_static_parts("state", state)],
        )
        .increment(1);
    }

    /// One webhook delivery attempt: `delivered`, `failed` (to be retried)
    /// or `dead` (its last attempt failed).
    pub fn webhook_delivery(&self, outcome: &'static str) {
        self.counter(
            names::WEBHOOK_DELIVERIES,
            vec![Label::from_static_parts("outcome", outcome)],
        )
        .increment(1);
    }

    /// A request refused by a limit or a cap, by its error code.
    pub fn refusal(&self, reason: &'static str) {
        self.counter(
            names::REFUSALS,
            vec![Label::from_static_parts("reason", reason)],
        )
        .increment(1);
    }

    /// The plugin folders were reloaded; `refused` when some file in them
    /// was not loaded.
    pub fn plugin_reload(&self, refused: bool) {
        if refused {
            self.inner.reloads_refused.increment(1);
        } else {
            self.inner.reloads_loaded.increment(1);
        }
    }

    /// The exposition, with the gauges read now (`holds_open`: the holds
    /// the ledger keeps open).
    pub fn render(&self, holds_open: usize) -> String {
        self.inner.holds_open.set(holds_open as f64);
        self.inner.handle.render()
    }

    /// Folds histogram samples into their buckets (bounded memory between
    /// scrapes).
    pub fn upkeep(&self) {
        self.inner.handle.run_upkeep();
    }
}

/// The `model` label for a model name a client sent: itself when the
/// catalog lists it, else [`OTHER_MODEL`].
pub fn model_label(catalog: &crate::state::Catalog, name: &str) -> SharedString {
    if catalog.models.contains_key(name) || catalog.video_models.contains_key(name) {
        SharedString::from(name.to_string())
    } else {
        SharedString::const_str(OTHER_MODEL)
    }
}

/// A status code as a label value, without an allocation for the usual ones.
fn status_label(status: u16) -> SharedString {
    const KNOWN: &[(u16, &str)] = &[
        (200, "200"),
        (201, "201"),
        (204, "204"),
        (206, "206"),
        (400, "400"),
        (401, "401"),
        (402, "402"),
        (403, "403"),
        (404, "404"),
        (405, "405"),
        (408, "408"),
        (409, "409"),
        (410, "410"),
        (413, "413"),
        (429, "429"),
        (500, "500"),
        (501, "501"),
        (502, "502"),
        (503, "503"),
        (504, "504"),
    ];
    match KNOWN.iter().find(|(s, _)| *s == status) {
        Some((_, text)) => SharedString::const_str(text),
        None => SharedString::from(status.to_string()),
    }
}

/// An error code as a label value: a plain identifier of up to 48
/// characters, else `other` (guests map vendor errors to codes).
fn code_label(code: &str) -> SharedString {
    let plain = !code.is_empty()
        && code.len() <= 48
        && code
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.');
    if plain {
        SharedString::from(code.to_string())
    } else {
        SharedString::const_str("other")
    }
}

fn describe(r: &PrometheusRecorder) {
    let d = |name: &'static str, unit: Option<Unit>, help: &'static str| {
        r.describe_counter(name.into(), unit, SharedString::const_str(help));
    };
    let h = |name: &'static str, help: &'static str| {
        r.describe_histogram(
            name.into(),
            Some(Unit::Seconds),
            SharedString::const_str(help),
        );
    };
    d(
        names::REQUESTS,
        None,
        "Public API requests by route template, model, status and client protocol.",
    );
    h(
        names::REQUEST_DURATION,
        "Time from a request's arrival to its answer's head, by route and client protocol.",
    );
    h(
        names::UPSTREAM_DURATION,
        "Time from sending a vendor request to its answer's head, by channel.",
    );
    h(
        names::GUEST_CALL_DURATION,
        "Time of one WebAssembly guest call, by component.",
    );
    d(
        names::UPSTREAM_ERRORS,
        None,
        "Failed channel attempts by channel and error code.",
    );
    d(
        names::TOKENS,
        None,
        "Tokens billed by model and kind (input, cache_read, cache_write, output).",
    );
    d(
        names::QUOTA_CHARGED,
        None,
        "Quota units charged for text calls, by model.",
    );
    r.describe_gauge(
        names::HOLDS_OPEN.into(),
        None,
        SharedString::const_str("Reservations (holds) open now."),
    );
    d(names::VIDEO_TASKS, None, "Video tasks entering each state.");
    d(
        names::WEBHOOK_DELIVERIES,
        None,
        "Webhook delivery attempts by outcome (delivered, failed, dead).",
    );
    d(
        names::REFUSALS,
        None,
        "Requests refused by a rate limit, a concurrency cap or a spending cap, by error code.",
    );
    d(
        names::PLUGIN_RELOADS,
        None,
        "Reloads of the plugin folders, by result (loaded; refused: some file was not loaded).",
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_instance_counts_on_its_own_and_renders_prometheus_text() {
        let (a, b) = (Metrics::new(), Metrics::new());
        a.refusal("rate_limit_exceeded");
        a.refusal("rate_limit_exceeded");
        b.refusal("rate_limit_exceeded");
        a.request(
            SharedString::const_str("/v1/chat/completions"),
            SharedString::const_str("gpt-4o-mini"),
            200,
            "openai-chat",
            Duration::from_millis(3),
        );
        let text = a.render(2);
        assert!(
            text.contains("gateway_refusals_total{reason=\"rate_limit_exceeded\"} 2"),
            "{text}"
        );
        assert!(text.contains("gateway_holds_open 2"), "{text}");
        assert!(text.contains("# TYPE gateway_request_duration_seconds histogram"));
        assert!(text.contains(
            "gateway_requests_total{route=\"/v1/chat/completions\",model=\"gpt-4o-mini\",status=\"200\",protocol=\"openai-chat\"} 1"
        ), "{text}");
        assert!(b
            .render(0)
            .contains("gateway_refusals_total{reason=\"rate_limit_exceeded\"} 1"));
    }

    #[test]
    fn kept_handles_count_in_the_series_the_registry_renders() {
        let m = Metrics::new();
        let route = || SharedString::const_str("/v1/chat/completions");
        let model = || SharedString::const_str("gpt-4o-mini");
        for status in [200, 429, 200] {
            m.request(
                route(),
                model(),
                status,
                "openai-chat",
                Duration::from_millis(3),
            );
        }
        m.request(
            route(),
            model(),
            200,
            "anthropic-messages",
            Duration::from_millis(3),
        );
        for channel in ["sim", "other", "sim"] {
            m.upstream(channel, Duration::from_millis(1));
        }
        let usage = |input_tokens, output_tokens| Usage {
            input_tokens,
            output_tokens,
            ..Usage::default()
        };
        m.charged("gpt-4o-mini", Some(&usage(10, 5)), 7);
        m.charged("gpt-4o-mini", Some(&usage(1, 2)), 3);
        m.charged("gpt-4o", Some(&usage(4, 0)), 0);
        // Nothing billed: no series of its own.
        m.charged("unbilled", None, 0);
        let text = m.render(0);
        let has = |line: &str| assert!(text.contains(line), "{line}\n{text}");
        let series = "route=\"/v1/chat/completions\",model=\"gpt-4o-mini\"";
        has(&format!(
            "gateway_requests_total{{{series},status=\"200\",protocol=\"openai-chat\"}} 2"
        ));
        has(&format!(
            "gateway_requests_total{{{series},status=\"429\",protocol=\"openai-chat\"}} 1"
        ));
        has(&format!(
            "gateway_requests_total{{{series},status=\"200\",protocol=\"anthropic-messages\"}} 1"
        ));
        has("gateway_request_duration_seconds_count{route=\"/v1/chat/completions\",protocol=\"openai-chat\"} 3");
        has("gateway_upstream_duration_seconds_count{channel=\"sim\"} 2");
        has("gateway_upstream_duration_seconds_count{channel=\"other\"} 1");
        has("gateway_tokens_total{model=\"gpt-4o-mini\",kind=\"input\"} 11");
        has("gateway_tokens_total{model=\"gpt-4o-mini\",kind=\"output\"} 7");
        has("gateway_tokens_total{model=\"gpt-4o-mini\",kind=\"cache_read\"} 0");
        has("gateway_quota_charged_total{model=\"gpt-4o-mini\"} 10");
        has("gateway_tokens_total{model=\"gpt-4o\",kind=\"input\"} 4");
        has("gateway_quota_charged_total{model=\"gpt-4o\"} 0");
        assert!(!text.contains("unbilled"), "{text}");
    }

    #[test]
    fn labels_stay_bounded() {
        assert_eq!(code_label("upstream_timeout").as_ref(), "upstream_timeout");
        assert_eq!(code_label("Bad Code {with} stuff").as_ref(), "other");
        assert_eq!(code_label(&"x".repeat(100)).as_ref(), "other");
        assert_eq!(status_label(429).as_ref(), "429");
        assert_eq!(status_label(418).as_ref(), "418");
    }
}
