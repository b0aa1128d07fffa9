//! Failover rules and channel health (README, *Channels: failover and
//! health*): what moves a call to the next channel, that nothing from a
//! failed attempt reaches the client, and how traffic follows health.

use crate::billing::{ledger, request_id, usage_row};
use crate::common::*;
use serde_json::{json, Value};
use upstream_sim::Fault;

/// A config of `channels` and their models, each at 1 CNY per 1M tokens.
fn config(channels: &[Channel], adapters: Vec<(&'static str, &'static str)>) -> Setup {
    let mut extra: String = channels.iter().map(Channel::toml).collect();
    let mut models: Vec<&str> = channels
        .iter()
        .flat_map(|c| c.models.iter().copied())
        .collect();
    models.sort_unstable();
    models.dedup();
    for m in models {
        extra.push_str(&format!(
            "[[models]]\nname = {m:?}\ninput_price = \"1\"\noutput_price = \"1\"\n\n"
        ));
    }
    Setup {
        default_models: false,
        adapters,
        extra,
        ..Setup::default()
    }
}

/// Two channels for every model: the misbehaving test guest first, a
/// healthy OpenAI channel after it.
fn guest_then_backup() -> Setup {
    const MODELS: &[&str] = &["trap", "garbage", "garbage-response", "loop"];
    config(
        &[
            Channel {
                adapter: "misbehave",
                models: MODELS,
                priority: 10,
                ..Channel::sim("misbehaving")
            },
            Channel {
                models: MODELS,
                upstream: Some("sim-chat"),
                ..Channel::sim("backup")
            },
        ],
        vec![("adapters", "openai"), ("test-guests", "misbehave")],
    )
}

/// The charges in an account's ledger (one per billed text call).
fn settlements(ledger: &Value) -> usize {
    ledger["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "charge")
        .count()
}

/// The call was answered by `channel`, billed once, and the books add up.
async fn answered_once_by(env: &Env, account: &str, rid: &str, channel: &str) {
    let row = usage_row(env, rid).await;
    assert_eq!(row["status"], 200, "{row}");
    assert_eq!(row["channel"], channel, "{row}");
    let l = ledger(env, account).await;
    assert_eq!(l["balance"], l["ledger_sum"]);
    let settles = settlements(&l);
    let calls = env
        .admin(reqwest::Method::GET, "/admin/v1/usage?limit=1000", None)
        .await
        .1["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["account_id"] == account)
        .count();
    assert_eq!(settles, calls, "one settlement per call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adapter_that_traps_runs_out_of_time_or_cannot_translate_moves_the_call_on() {
    let env = Env::with(guest_then_backup()).await;
    let account = env.account("5").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    // trap: traps translating the request; loop: runs out of time; garbage:
    // a request the host refuses; garbage-response: a 2xx answer it cannot
    // translate. (A stream whose first event cannot be translated is
    // covered below with a malformed vendor stream.)
    for (model, stream) in [
        ("trap", false),
        ("trap", true),
        ("loop", false),
        ("garbage", false),
        ("garbage-response", false),
    ] {
        let mut body = user(model, "hello");
        body["stream"] = json!(stream);
        let resp = env.chat(&key, body).await;
        assert_eq!(resp.status(), 200, "{model} stream={stream}");
        let rid = request_id(&resp);
        if stream {
            let payloads = sse_data(resp).await;
            assert_eq!(payloads.last().map(String::as_str), Some("[DONE]"));
            assert!(
                payloads.iter().all(|p| !p.contains("\"error\"")),
                "{model}: {payloads:?}"
            );
        } else {
            let v: Value = resp.json().await.unwrap();
            assert!(v["choices"][0]["message"]["content"].is_string(), "{v}");
        }
        answered_once_by(&env, &account, &rid, "backup").await;
    }
    env.stop().await;
}

/// Two plain OpenAI channels on the simulator, tried in order.
fn first_then_second() -> Setup {
    config(
        &[
            Channel {
                priority: 10,
                ..Channel::sim("first")
            },
            Channel::sim("second"),
        ],
        Setup::default().adapters,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_fails_before_its_first_event_falls_back_without_leaking_anything() {
    let env = Env::with(first_then_second()).await;
    let account = env.account("5").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let mut body = user("m", "hello");
    body["stream"] = json!(true);
    let reference = sse_data(env.chat(&key, body.clone()).await).await;
    // The first channel's 200 stream opens with a chunk that is not JSON:
    // nothing has gone out, so the second channel answers, and the client
    // sees one clean stream.
    for fault in [Fault::Malformed, Fault::Status(503)] {
        env.sim.clear_requests();
        env.sim.push_fault(fault.clone(), 1);
        let resp = env.chat(&key, body.clone()).await;
        assert_eq!(resp.status(), 200);
        let rid = request_id(&resp);
        let payloads = sse_data(resp).await;
        assert_eq!(payloads.len(), reference.len(), "{fault:?}: {payloads:?}");
        assert!(
            payloads.iter().all(|p| !p.contains("error")),
            "{payloads:?}"
        );
        assert_eq!(env.sim.requests().len(), 2, "{fault:?}: tried twice");
        answered_once_by(&env, &account, &rid, "second").await;
    }
    // A plain 2xx answer that is not JSON: the same.
    env.sim.push_fault(Fault::Malformed, 1);
    let resp = env.chat(&key, user("m", "hello")).await;
    assert_eq!(resp.status(), 200);
    let rid = request_id(&resp);
    answered_once_by(&env, &account, &rid, "second").await;
    // The two answers that could not be translated are counted against
    // the channel that sent them.
    let first = channel_view(&env, "first").await;
    assert_eq!(first["untranslatable"], 2, "{first}");
    assert_eq!(first["failures"], 3, "{first}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_vendors_retry_after_reaches_the_client_when_every_channel_refuses() {
    let env = Env::with(first_then_second()).await;
    let key = env.key().await;
    env.sim.push_fault(Fault::Status(500), 1);
    env.sim.push_fault(Fault::Status(429), 1);
    let resp = env.chat(&key, user("m", "hello")).await;
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "7");
    assert_eq!(resp.headers()["retry-after-ms"], "7000");
    assert_eq!(env.sim.requests().len(), 2);
    env.stop().await;
}

/// The admin view of one channel.
async fn channel_view(env: &Env, name: &str) -> Value {
    let (s, v) = env
        .admin(reqwest::Method::GET, "/admin/v1/channels", None)
        .await;
    assert_eq!(s, 200);
    v["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no channel {name} in {v}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traffic_leaves_a_failing_channel_and_splits_by_weight_with_every_call_billed_once() {
    const TASKS: usize = 12;
    const CALLS: usize = 10;
    let failing = start_sim().await;
    let slow = start_sim().await;
    failing.push_fault(Fault::Status(500), 100_000);
    slow.push_fault(
        Fault::Latency(std::time::Duration::from_millis(120)),
        100_000,
    );
    let env = Env::with(config(
        &[
            Channel {
                url: failing.base_url(),
                ..Channel::sim("failing")
            },
            Channel {
                url: slow.base_url(),
                ..Channel::sim("slow")
            },
            Channel {
                weight: 2,
                ..Channel::sim("healthy")
            },
        ],
        Setup::default().adapters,
    ))
    .await;
    let account = env.account("50").await;
    let (_, key) = env.token_with(&account, json!({})).await;

    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let (http, url, key) = (
            env.http.clone(),
            env.url("/v1/chat/completions"),
            key.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for i in 0..CALLS {
                let stream = (t + i) % 2 == 0;
                let resp = http
                    .post(&url)
                    .bearer_auth(&key)
                    .json(&json!({"model": "m", "stream": stream,
                                  "messages": [{"role": "user", "content": "hello"}]}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(resp.status(), 200);
                ids.push(request_id(&resp));
                let text = resp.text().await.unwrap();
                assert!(!text.contains("\"error\""), "{text}");
            }
            ids
        }));
    }
    let mut ids = Vec::new();
    for t in tasks {
        ids.extend(t.await.unwrap());
    }
    assert_eq!(ids.len(), TASKS * CALLS, "no call lost");

    // Every call answered once, by the slow or the healthy channel, and
    // billed once: one usage row and one settlement each, books adding up.
    let mut by_channel: std::collections::HashMap<String, usize> = Default::default();
    for rid in &ids {
        let row = usage_row(&env, rid).await;
        assert_eq!(row["status"], 200, "{row}");
        *by_channel
            .entry(row["channel"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    let l = ledger(&env, &account).await;
    assert_eq!(l["balance"], l["ledger_sum"]);
    assert_eq!(settlements(&l), ids.len(), "one settlement per call");
    eprintln!("calls by channel: {by_channel:?}");
    assert_eq!(by_channel.get("failing"), None);
    let (slow_calls, healthy_calls) = (by_channel["slow"], by_channel["healthy"]);
    assert_eq!(slow_calls + healthy_calls, ids.len());
    // Weight 2 against 1: the healthy channel takes about two thirds.
    assert!(healthy_calls > slow_calls, "{by_channel:?}");

    // The failing channel rests after 3 failures: it was tried at most
    // once per call in flight beyond those, not once per call.
    let f = channel_view(&env, "failing").await;
    assert_eq!(f["state"], "resting", "{f}");
    let tried = f["attempts"].as_u64().unwrap();
    assert!((3..=3 + TASKS as u64).contains(&tried), "{f}");
    assert_eq!(f["recent_error_rate"], 1.0);
    let s = channel_view(&env, "slow").await;
    let h = channel_view(&env, "healthy").await;
    assert_eq!(
        (s["state"].as_str(), h["state"].as_str()),
        (Some("healthy"), Some("healthy"))
    );
    assert!(
        s["latency_ms_mean"].as_u64().unwrap() >= 120
            && h["latency_ms_mean"].as_u64().unwrap() < s["latency_ms_mean"].as_u64().unwrap(),
        "{s} {h}"
    );

    // The failing channel recovers; once its rest is over one call probes
    // it, and its answer brings it back into the rotation.
    failing.clear_faults();
    env.clock.advance_secs(30);
    for _ in 0..40 {
        let r = env.chat(&key, user("m", "hello")).await;
        assert_eq!(r.status(), 200);
        if channel_view(&env, "failing").await["state"] == "healthy" {
            break;
        }
    }
    let f = channel_view(&env, "failing").await;
    assert_eq!(f["state"], "healthy", "{f}");
    assert_eq!(f["consecutive_failures"], 0);
    failing.shutdown().await;
    slow.shutdown().await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_whose_key_the_vendor_refuses_is_disabled_until_enabled() {
    let env = Env::with(config(
        &[
            Channel {
                key: "sk-not-the-simulators",
                priority: 10,
                ..Channel::sim("bad-key")
            },
            Channel::sim("good"),
        ],
        Setup::default().adapters,
    ))
    .await;
    let key = env.key().await;
    for _ in 0..3 {
        let r = env.chat(&key, user("m", "hello")).await;
        assert_eq!(r.status(), 200);
    }
    // Tried once: the vendor's 401 disabled it.
    let b = channel_view(&env, "bad-key").await;
    assert_eq!(b["state"], "disabled", "{b}");
    assert!(b["reason"].as_str().unwrap().contains("401"), "{b}");
    assert_eq!(b["attempts"], 1);
    let (s, v) = env
        .admin(
            reqwest::Method::POST,
            "/admin/v1/channels/bad-key/enable",
            Some(json!({})),
        )
        .await;
    assert_eq!((s, v["state"].as_str()), (200, Some("healthy")), "{v}");
    let (s, _) = env
        .admin(
            reqwest::Method::POST,
            "/admin/v1/channels/nope/enable",
            Some(json!({})),
        )
        .await;
    assert_eq!(s, 404);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_changes_a_channels_key_brings_it_back_and_others_keep_their_health() {
    let bad = Channel {
        key: "sk-not-the-simulators",
        priority: 10,
        ..Channel::sim("bad-key")
    };
    let env = Env::with(config(
        &[bad, Channel::sim("good")],
        Setup::default().adapters,
    ))
    .await;
    let key = env.key().await;
    assert_eq!(env.chat(&key, user("m", "hello")).await.status(), 200);
    assert_eq!(channel_view(&env, "bad-key").await["state"], "disabled");
    let good_attempts = channel_view(&env, "good").await["attempts"].clone();
    // The same file again: nothing about the channel changed, it stays out.
    let (s, v) = env.reload_with(&env.config_text).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(channel_view(&env, "bad-key").await["state"], "disabled");
    // Its key fixed: it starts healthy and serves; the other channel's
    // counts carry over.
    let fixed = env
        .config_text
        .replace("sk-not-the-simulators", "env:E2E_SIM_KEY");
    let (s, v) = env.reload_with(&fixed).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(channel_view(&env, "bad-key").await["state"], "healthy");
    assert_eq!(channel_view(&env, "good").await["attempts"], good_attempts);
    let resp = env.chat(&key, user("m", "hello")).await;
    assert_eq!(resp.status(), 200);
    let row = usage_row(&env, &request_id(&resp)).await;
    assert_eq!(row["channel"], "bad-key");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_opens_with_an_error_event_falls_back_without_leaking_anything() {
    // An OpenAI vendor's role chunk then `{"error": ...}`, and Anthropic's
    // `message_start` then `overloaded_error`: nothing of it reaches the
    // client, the second channel answers.
    for (adapter, upstream) in [("openai", None), ("anthropic", Some("sim-claude"))] {
        let env = Env::with(config(
            &[
                Channel {
                    adapter,
                    upstream,
                    priority: 10,
                    ..Channel::sim("first")
                },
                Channel {
                    adapter,
                    upstream,
                    ..Channel::sim("second")
                },
            ],
            Setup::default().adapters,
        ))
        .await;
        let account = env.account("5").await;
        let (_, key) = env.token_with(&account, json!({})).await;
        let mut body = user("m", "hello");
        body["stream"] = json!(true);
        env.sim.push_fault(Fault::ErrorEvent, 1);
        let resp = env.chat(&key, body).await;
        assert_eq!(resp.status(), 200, "{adapter}");
        let rid = request_id(&resp);
        let payloads = sse_data(resp).await;
        assert_eq!(
            payloads.last().map(String::as_str),
            Some("[DONE]"),
            "{adapter}"
        );
        assert!(
            payloads.iter().all(|p| !p.contains("error")),
            "{adapter}: {payloads:?}"
        );
        let roles = payloads.iter().filter(|p| p.contains("\"role\"")).count();
        assert_eq!(
            roles, 1,
            "{adapter}: one opening chunk, the answering channel's"
        );
        assert_eq!(env.sim.requests().len(), 2, "{adapter}");
        answered_once_by(&env, &account, &rid, "second").await;
        assert_eq!(channel_view(&env, "first").await["failures"], 1);
        env.stop().await;
    }
}
