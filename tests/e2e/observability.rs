//! Metrics and traces (issue 14, items 4 and 5).
//!
//! Metrics: an in-process gateway (its own recorder, so other tests'
//! gateways in this process do not count here) serves calls of every kind —
//! answered, refused as invalid, failed upstream, rate-limited, a video task
//! with a webhook delivery, a plugin reload — and `GET /metrics` on the
//! admin listener is parsed as Prometheus text; each series moved by what
//! the calls did, with the right labels.
//!
//! Traces: the tracing subscriber is process-wide, so the gateway runs as
//! its own process (the real binary) with `[tracing] otlp_endpoint` pointed
//! at an OTLP/HTTP receiver in this test; the spans it exports are decoded
//! with `opentelemetry-proto` and their tree checked, with the client's
//! trace kept and its context passed on to the vendor. (The gateway also
//! flushes its queue when it stops; the test waits for the scheduled export
//! instead, which does not depend on how fast a loaded machine stops it.)

use crate::common::*;
use crate::webhooks::Receiver;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prometheus_parse::{Scrape, Value as Sampled};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use upstream_sim::Fault;

/// `GET /metrics` with the admin key, parsed.
async fn scrape(env: &Env) -> Scrape {
    let resp = env
        .http
        .get(env.admin_url("/metrics"))
        .bearer_auth(ADMIN_KEY)
        .send()
        .await
        .expect("the admin listener answers");
    assert_eq!(resp.status(), 200);
    let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
    assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
    let text = resp.text().await.unwrap();
    let lines = text.lines().map(|l| Ok(l.to_string()));
    Scrape::parse(lines).expect("the exposition parses")
}

/// The sum of the samples of `metric` whose labels include `labels` (a
/// counter, gauge or untyped sample; 0 when there is none).
fn value(s: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    s.samples
        .iter()
        .filter(|x| x.metric == metric)
        .filter(|x| labels.iter().all(|(k, v)| x.labels.get(k) == Some(v)))
        .map(|x| match &x.value {
            Sampled::Counter(v) | Sampled::Gauge(v) | Sampled::Untyped(v) => *v,
            Sampled::Histogram(b) => b.iter().map(|c| c.count).fold(0.0, f64::max),
            Sampled::Summary(_) => 0.0,
        })
        .sum()
}

fn requests(s: &Scrape, route: &str, model: &str, status: &str, protocol: &str) -> f64 {
    value(
        s,
        "gateway_requests_total",
        &[
            ("route", route),
            ("model", model),
            ("status", status),
            ("protocol", protocol),
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_count_every_kind_of_call_with_bounded_labels() {
    let env = Env::with(Setup {
        limits: "rate_limit_requests = 40\nrate_limit_window_secs = 180".into(),
        ..Setup::default()
    })
    .await;
    // The endpoint wants the admin key, like every admin call.
    let anonymous = env
        .http
        .get(env.admin_url("/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let a = env.account("100").await;
    let key = env.token_with(&a, json!({})).await.1;
    let before = scrape(&env).await;

    // One answered chat call.
    let ok = env.chat(&key, user("gpt-4o-mini", "hello")).await;
    assert_eq!(ok.status(), 200);
    let answer: Value = ok.json().await.unwrap();
    let usage = &answer["usage"];
    // A model the config does not list: its name never becomes a label.
    let unknown = env.chat(&key, user("no-such-model-123", "hi")).await;
    assert_eq!(unknown.status(), 404);
    // An invalid request: its head unreadable, so no model is known.
    let invalid = env
        .post(
            &key,
            "/v1/chat/completions",
            json!({"model": "gpt-4o-mini", "messages": "x"}),
        )
        .await;
    assert_eq!(invalid.status(), 400);
    // The vendor fails: counted against the channel, with its code.
    env.sim.push_fault(Fault::Status(503), 1);
    let failed = env.chat(&key, user("gpt-4o-mini", "hello")).await;
    let failed_status = failed.status().as_u16().to_string();
    assert!(failed.status().is_server_error(), "{failed_status}");
    let failed_code = failed.json::<Value>().await.unwrap()["error"]["code"]
        .as_str()
        .unwrap()
        .to_string();

    // A video task, whose hold is open until it ends, with a webhook that
    // fails once and is then delivered.
    let rx = Receiver::start().await;
    rx.answer(500, 1);
    let resp = env
        .post(
            &key,
            "/v1/videos",
            json!({"model": "video-fast", "prompt": "p", "seconds": "4", "webhook_url": rx.url, "webhook_secret": "s"}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let task: Value = resp.json().await.unwrap();
    let id = task["id"].as_str().unwrap().to_string();
    let while_running = scrape(&env).await;
    assert_eq!(value(&while_running, "gateway_holds_open", &[]), 1.0);
    assert_eq!(
        value(
            &while_running,
            "gateway_video_tasks_total",
            &[("state", "queued")]
        ),
        1.0
    );
    let done = env.run_to_end(&key, &id).await;
    assert_eq!(done["status"], "completed");
    env.dispatch().await;
    env.clock.advance_secs(30);
    env.dispatch().await;
    assert_eq!(rx.wait_for(2).await.len(), 2);

    // A plugin folder change with a file that is not a component.
    std::fs::write(
        env.dir.path().join("adapters").join("broken.wasm"),
        b"not wasm",
    )
    .unwrap();
    let (s, v) = env
        .admin(reqwest::Method::POST, "/admin/v1/plugins/reload", None)
        .await;
    assert_eq!((s, &v["reloaded"]), (200, &json!(true)), "{v}");

    // Rate-limited: the window allows 40 requests from this address.
    let mut limited = 0;
    for _ in 0..40 {
        let r = env.get(&key, "/v1/models").await;
        if r.status() == 429 {
            limited += 1;
            break;
        }
    }
    assert_eq!(limited, 1, "the rate limit was reached");

    let after = scrape(&env).await;
    let moved = |f: &dyn Fn(&Scrape) -> f64| f(&after) - f(&before);
    let chat = "/v1/chat/completions";
    assert_eq!(
        moved(&|s| requests(s, chat, "gpt-4o-mini", "200", "openai-chat")),
        1.0
    );
    assert_eq!(
        moved(&|s| requests(s, chat, "other", "404", "openai-chat")),
        1.0
    );
    assert_eq!(
        moved(&|s| requests(s, chat, "none", "400", "openai-chat")),
        1.0
    );
    assert_eq!(
        moved(&|s| requests(s, chat, "gpt-4o-mini", &failed_status, "openai-chat")),
        1.0
    );
    assert_eq!(
        moved(&|s| requests(s, "/v1/videos", "none", "200", "none")),
        1.0
    );
    assert_eq!(
        moved(&|s| requests(s, "/v1/models", "none", "429", "none")),
        1.0
    );
    assert!(
        !after
            .samples
            .iter()
            .any(|x| x.labels.get("model") == Some("no-such-model-123")),
        "an unknown model's name is not a label"
    );
    assert!(
        !after
            .samples
            .iter()
            .any(|x| x.labels.get("route").is_some_and(|r| r.contains(&id))),
        "routes are templates, not paths"
    );
    // Latency: every request timed; the two vendor calls and their guest
    // calls too.
    assert!(
        moved(&|s| value(
            s,
            "gateway_request_duration_seconds_count",
            &[("route", chat), ("protocol", "openai-chat")]
        )) >= 4.0
    );
    assert!(
        moved(&|s| value(
            s,
            "gateway_upstream_duration_seconds_count",
            &[("channel", "sim")]
        )) >= 2.0
    );
    assert!(
        moved(&|s| value(
            s,
            "gateway_guest_call_duration_seconds_count",
            &[("plugin", "openai")]
        )) >= 3.0
    );
    // The vendor's failure, by channel and code.
    assert_eq!(
        moved(&|s| value(
            s,
            "gateway_upstream_errors_total",
            &[("channel", "sim"), ("code", &failed_code)]
        )),
        1.0
    );
    // Tokens and quota of the answered call (the failed one billed nothing).
    let prompt = usage["prompt_tokens"].as_f64().unwrap();
    let output = usage["completion_tokens"].as_f64().unwrap();
    let tokens = |kind: &'static str| {
        move |s: &Scrape| {
            value(
                s,
                "gateway_tokens_total",
                &[("model", "gpt-4o-mini"), ("kind", kind)],
            )
        }
    };
    assert_eq!(moved(&tokens("input")), prompt);
    assert_eq!(moved(&tokens("output")), output);
    assert_eq!(
        moved(&|s| value(
            s,
            "gateway_quota_charged_total",
            &[("model", "gpt-4o-mini")]
        )),
        expected_cost(usage) as f64
    );
    // The video task's states, its hold closed, the webhook's two attempts.
    assert_eq!(
        moved(&|s| value(s, "gateway_video_tasks_total", &[("state", "completed")])),
        1.0
    );
    assert_eq!(value(&after, "gateway_holds_open", &[]), 0.0);
    for outcome in ["failed", "delivered"] {
        assert_eq!(
            moved(&|s| value(
                s,
                "gateway_webhook_deliveries_total",
                &[("outcome", outcome)]
            )),
            1.0,
            "{outcome}"
        );
    }
    assert_eq!(
        moved(&|s| value(
            s,
            "gateway_refusals_total",
            &[("reason", "rate_limit_exceeded")]
        )),
        1.0
    );
    assert_eq!(
        moved(&|s| value(s, "gateway_plugin_reloads_total", &[("result", "refused")])),
        1.0
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_may_be_open_on_the_loopback_admin_listener() {
    let env = Env::with(Setup {
        extra: "[metrics]\nrequire_admin_key = false\n".into(),
        ..Setup::default()
    })
    .await;
    let resp = env
        .http
        .get(env.admin_url("/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.text().await.unwrap().contains("gateway_holds_open 0"));
    env.stop().await;
}

/// An OTLP/HTTP receiver: every span of every export it is sent.
#[derive(Clone)]
struct Collector {
    endpoint: String,
    spans: Arc<Mutex<Vec<Span>>>,
}

impl Collector {
    async fn start() -> Collector {
        use prost::Message;
        let spans: Arc<Mutex<Vec<Span>>> = Arc::default();
        let kept = spans.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: axum::body::Bytes| {
                let kept = kept.clone();
                async move {
                    let req =
                        ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf export");
                    let mut kept = kept.lock().unwrap();
                    for rs in req.resource_spans {
                        for ss in rs.scope_spans {
                            kept.extend(ss.spans);
                        }
                    }
                    (
                        [("content-type", "application/x-protobuf")],
                        Vec::<u8>::new(),
                    )
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Collector { endpoint, spans }
    }

    /// A gateway process config that exports its spans here.
    fn gateway_config(&self, dir: &std::path::Path, sim_url: &str) -> std::path::PathBuf {
        process_config(
            dir,
            sim_url,
            &format!("[tracing]\notlp_endpoint = \"{}\"\n", self.endpoint),
        )
    }

    /// Every span received once each of `trace_ids` has its request span
    /// (a call's last to end; the batch exporter sends every few seconds,
    /// so the wait is bounded, not fixed), or when the wait runs out.
    async fn spans_of(&self, trace_ids: &[&str]) -> Vec<Span> {
        let mut spans = Vec::new();
        for _ in 0..120 {
            spans = self.spans.lock().unwrap().clone();
            let done = trace_ids.iter().all(|trace_id| {
                spans
                    .iter()
                    .any(|s| hex(&s.trace_id) == *trace_id && s.name == "POST /v1/chat/completions")
            });
            if done {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        spans
    }
}

/// A gateway process exporting its spans to a [`Collector`], in front of
/// the simulator, with an account's key: the setting of the trace tests.
struct Traced {
    sim: upstream_sim::SimServer,
    collector: Collector,
    /// The gateway's data folder, removed when the test ends.
    _dir: tempfile::TempDir,
    gw: GatewayProcess,
    http: reqwest::Client,
    key: String,
}

impl Traced {
    async fn start() -> Traced {
        let sim = start_sim().await;
        let collector = Collector::start().await;
        let dir = tempfile::tempdir().unwrap();
        let config = collector.gateway_config(dir.path(), &sim.base_url());
        let gw = GatewayProcess::start(&config);
        let http = reqwest::Client::new();
        let (_, key) = gw.account_and_key(&http, "5").await;
        Traced {
            sim,
            collector,
            _dir: dir,
            gw,
            http,
            key,
        }
    }
}

/// An id as lowercase hex, as `traceparent` writes it.
fn hex(id: &[u8]) -> String {
    id.iter().map(|x| format!("{x:02x}")).collect()
}

fn attr(span: &Span, key: &str) -> Option<String> {
    let v = span.attributes.iter().find(|kv| kv.key == key)?;
    Some(match v.value.as_ref()?.value.as_ref()? {
        AnyValue::StringValue(s) => s.clone(),
        AnyValue::IntValue(i) => i.to_string(),
        AnyValue::BoolValue(b) => b.to_string(),
        AnyValue::DoubleValue(d) => d.to_string(),
        other => format!("{other:?}"),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_is_one_trace_under_the_clients_parent_and_the_vendor_gets_its_context() {
    let t = Traced::start().await;
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let client_span = "00f067aa0ba902b7";
    let resp = t
        .http
        .post(format!("http://{}/v1/chat/completions", t.gw.public))
        .bearer_auth(&t.key)
        .header("traceparent", format!("00-{trace_id}-{client_span}-01"))
        .header("tracestate", "vendor=abc")
        .json(&user("gpt-4o-mini", "trace me"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    // The call's whole tree: the last span to end is the request's.
    let spans = t.collector.spans_of(&[trace_id]).await;
    t.gw.signal("TERM");
    let ours: Vec<&Span> = spans
        .iter()
        .filter(|s| hex(&s.trace_id) == trace_id)
        .collect();
    let named =
        |name: &str| -> Vec<&Span> { ours.iter().copied().filter(|s| s.name == name).collect() };
    let request = named("POST /v1/chat/completions");
    assert_eq!(request.len(), 1, "one request span: {:?}", names(&spans));
    let request = request[0];
    assert_eq!(
        hex(&request.parent_span_id),
        client_span,
        "the client's span is the parent"
    );
    assert_eq!(
        attr(request, "http.route").as_deref(),
        Some("/v1/chat/completions")
    );
    assert_eq!(
        attr(request, "gateway.client_protocol").as_deref(),
        Some("openai-chat")
    );
    assert_eq!(
        attr(request, "gateway.model").as_deref(),
        Some("gpt-4o-mini")
    );
    assert_eq!(
        attr(request, "http.response.status_code").as_deref(),
        Some("200")
    );
    let child_of = |s: &Span, parent: &Span| s.parent_span_id == parent.span_id;
    for name in ["auth", "reserve", "attempt", "settle"] {
        let found = named(name);
        assert_eq!(found.len(), 1, "{name}: {:?}", names(&spans));
        assert!(
            child_of(found[0], request),
            "{name} is a child of the request"
        );
    }
    let attempt = named("attempt")[0];
    assert_eq!(attr(attempt, "gateway.channel").as_deref(), Some("sim"));
    let upstream = named("upstream");
    assert_eq!(upstream.len(), 1);
    assert!(child_of(upstream[0], attempt));
    let guests = named("guest");
    let calls: Vec<String> = guests.iter().filter_map(|g| attr(g, "call")).collect();
    // The answer of a passthrough is the host's to finish (the adapter
    // asks for its splice): only the request is the guest's.
    assert!(
        calls.iter().any(|c| c == "translate_request"),
        "translate_request in {calls:?}"
    );
    assert!(
        !calls.iter().any(|c| c == "translate_response"),
        "no translate_response in {calls:?}"
    );
    assert!(guests.iter().all(|g| child_of(g, attempt)));
    assert!(guests
        .iter()
        .all(|g| attr(g, "plugin").as_deref() == Some("openai")));
    // No secret in any attribute.
    for s in &ours {
        for kv in &s.attributes {
            let v = attr(s, &kv.key).unwrap_or_default();
            assert!(
                !v.contains(&t.key) && !v.contains(SIM_KEY),
                "{}: {v}",
                kv.key
            );
        }
    }
    // The vendor got the upstream span's context, in the client's trace.
    let seen = t
        .sim
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.path.starts_with("/v1/chat/completions"))
        .expect("the simulator got the call");
    let traceparent = seen.header("traceparent").expect("traceparent sent on");
    assert_eq!(
        traceparent,
        format!("00-{trace_id}-{}-01", hex(&upstream[0].span_id))
    );
    assert_eq!(seen.header("tracestate"), Some("vendor=abc"));
    t.sim.shutdown().await;
}

/// A finished stream gives its adapter instance back, as a plain call does:
/// the calls after it take the warm instance instead of instantiating the
/// adapter again. Read from the `guest` spans of each call's own trace
/// (the instantiation is one, `call = instantiate`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_stream_gives_its_instance_back_for_the_next_call() {
    let t = Traced::start().await;
    // One trace per call: a stream, a stream, a plain call.
    let calls = [
        ("0af7651916cd43dd8448eb211c80319c", true),
        ("0af7651916cd43dd8448eb211c80319d", true),
        ("0af7651916cd43dd8448eb211c80319e", false),
    ];
    for (trace_id, stream) in calls {
        let mut body = user("gpt-4o-mini", "reuse me");
        body["stream"] = json!(stream);
        let resp = t
            .http
            .post(format!("http://{}/v1/chat/completions", t.gw.public))
            .bearer_auth(&t.key)
            .header("traceparent", format!("00-{trace_id}-00f067aa0ba902b7-01"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let text = resp.text().await.unwrap();
        assert_eq!(text.contains("[DONE]"), stream, "{text}");
    }
    let trace_ids: Vec<&str> = calls.iter().map(|(trace_id, _)| *trace_id).collect();
    let spans = t.collector.spans_of(&trace_ids).await;
    t.gw.signal("TERM");
    let guest_calls = |trace_id: &str| -> Vec<String> {
        spans
            .iter()
            .filter(|s| hex(&s.trace_id) == trace_id && s.name == "guest")
            .filter_map(|s| attr(s, "call"))
            .collect()
    };
    for (trace_id, stream) in &calls[1..] {
        let guests = guest_calls(trace_id);
        // A stream's first events are the host's (spliced), so the call's
        // own trace shows the translator made, not a push, and the second
        // stream, alike to the first, gets the host's request
        // (`relay::alike`); the plain call, the first of its kind, shows
        // the request's translation, and no answer's (the host's too).
        let (expected, not) = if *stream {
            ("constructor", "translate_request")
        } else {
            ("translate_request", "constructor")
        };
        assert!(
            guests.iter().any(|c| c == expected),
            "{expected} in {guests:?}"
        );
        assert!(!guests.iter().any(|c| c == not), "{not} in {guests:?}");
        assert!(
            !guests.iter().any(|c| c == "translate_response"),
            "the host finishes a passthrough's ordinary answer: {guests:?}"
        );
        assert!(
            !guests.iter().any(|c| c == "instantiate"),
            "the call after a finished one instantiated its adapter: {guests:?}"
        );
    }
    t.sim.shutdown().await;
}

fn names(spans: &[Span]) -> Vec<String> {
    spans.iter().map(|s| s.name.clone()).collect()
}

/// A streamed chunk without what differs between two calls (`id`,
/// `created`).
fn chunk_without_ids(data: &str) -> Value {
    let mut v: Value = serde_json::from_str(data).unwrap_or(Value::String(data.into()));
    if let Some(o) = v.as_object_mut() {
        o.remove("id");
        o.remove("created");
    }
    v
}

/// A stream whose last events come with its end (`[[sim:whole]]`: the
/// vendor's whole stream in one write, so every event is read with the end)
/// is ended in one guest call, `finish` with the finishing chunk, the usage
/// report and `[DONE]` as its `rest`: two calls in all with the translator's
/// making (the request is the host's, the call being alike to the one
/// before it), where a push for each of those events, `finish` and the
/// translator's drop made six. The client gets
/// the same events as from a stream read event by event, and the same bill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_whose_last_events_come_with_its_end_takes_one_guest_call_to_end() {
    let env = Env::start().await;
    let account = env.account("100").await;
    let key = env.token_with(&account, json!({})).await.1;
    let calls = |s: &Scrape| {
        value(
            s,
            "gateway_guest_call_duration_seconds_count",
            &[("plugin", "openai")],
        )
    };
    // Each with one directive, so that the prompts count alike.
    let mut body = user("gpt-4o-mini", "tell me a story [[sim:crlf]]");
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});

    let (balance_before, _) = env.balance(&account).await;
    let paced = sse_data(env.chat(&key, body.clone()).await).await;
    let (balance_paced, _) = env.balance(&account).await;
    let before = scrape(&env).await;
    body["messages"][0]["content"] = json!("tell me a story [[sim:whole]]");
    let whole = sse_data(env.chat(&key, body).await).await;
    let after = scrape(&env).await;
    let (balance_whole, ledger) = env.balance(&account).await;

    assert_eq!(calls(&after) - calls(&before), 2.0);
    assert_eq!(whole.last().map(String::as_str), Some("[DONE]"));
    assert_eq!(
        whole
            .iter()
            .map(|d| chunk_without_ids(d))
            .collect::<Vec<_>>(),
        paced
            .iter()
            .map(|d| chunk_without_ids(d))
            .collect::<Vec<_>>(),
        "the same events, ended by `finish`"
    );
    let usage = chunk_without_ids(&whole[whole.len() - 2])["usage"].clone();
    assert!(usage["completion_tokens"].as_u64().unwrap() > 0, "{usage}");
    // Billed alike, and the books add up.
    assert!(balance_paced < balance_before);
    assert_eq!(
        balance_paced - balance_whole,
        balance_before - balance_paced
    );
    assert_eq!(balance_whole, ledger);
    env.stop().await;
}

/// A call alike to one before it (the same `request-ctx` but for its
/// request id) gets its vendor request from the host, on the adapter's word
/// (`relay::alike`): a plain passthrough call then takes no guest call at
/// all, and the vendor gets the very request the adapter made for the
/// first. A stream alike to another gets the same request too, and the
/// usage chunk exactly when its client asked for it (the state the host's
/// edit gives).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_alike_to_one_before_it_takes_no_guest_call_for_its_request() {
    let env = Env::start().await;
    let key = env.key().await;
    let calls = |s: &Scrape| {
        value(
            s,
            "gateway_guest_call_duration_seconds_count",
            &[("plugin", "openai")],
        )
    };
    let mut body = user("gpt-4o-mini", "hello [[sim:words=3]]");
    body["temperature"] = json!(1e-4);
    body["vendor_knob"] = json!({"x": [1, 2]});
    // The adapter instantiated once, by a call of another model (not alike).
    assert_eq!(
        env.chat(&key, user("qwen-plus", "warm up")).await.status(),
        200
    );
    let before = scrape(&env).await;
    assert_eq!(env.chat(&key, body.clone()).await.status(), 200);
    let first = scrape(&env).await;
    assert_eq!(env.chat(&key, body.clone()).await.status(), 200);
    let second = scrape(&env).await;
    assert_eq!(
        calls(&first) - calls(&before),
        1.0,
        "the request's translation"
    );
    assert_eq!(
        calls(&second) - calls(&first),
        0.0,
        "none: the host's request and answer"
    );

    for asked in [true, false] {
        let mut body = body.clone();
        body["stream"] = json!(true);
        if asked {
            body["stream_options"] = json!({"include_usage": true});
        }
        for _ in 0..2 {
            let events = sse_data(env.chat(&key, body.clone()).await).await;
            assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
            let usage_chunk = events
                .iter()
                .filter_map(|d| serde_json::from_str::<Value>(d).ok())
                .any(|c| c["usage"].is_object() && c["choices"] == json!([]));
            assert_eq!(usage_chunk, asked, "{events:?}");
        }
    }

    let bodies: Vec<Value> = env
        .sim
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap())
        .filter(|b| b["vendor_knob"].is_object())
        .collect();
    assert_eq!(bodies.len(), 6);
    for pair in bodies.chunks(2) {
        assert_eq!(pair[0], pair[1], "the host's request is the adapter's");
    }
    assert_eq!(bodies[0]["model"], json!("sim-chat"));
    assert_eq!(bodies[0]["vendor_knob"], json!({"x": [1, 2]}));
    assert_eq!(bodies[2]["stream_options"], json!({"include_usage": true}));
    assert_eq!(bodies[4]["stream_options"], json!({"include_usage": true}));
    env.stop().await;
}
