//! The plugin sandbox: guests that loop, grow memory without bound, trap, or
//! return garbage fail only their own request, with a 502 envelope within
//! their deadline, and the gateway keeps serving.

use crate::common::*;
use serde_json::json;
use std::time::{Duration, Instant};

fn misbehaving() -> Setup {
    Setup {
        adapters: vec![("adapters", "openai"), ("test-guests", "misbehave")],
        extra: r#"
[[channels]]
name = "misbehaving"
adapter = "misbehave"
base_url = "{SIM_URL}"
key = "env:E2E_SIM_KEY"
models = ["loop", "oom", "trap", "garbage", "garbage-response", "loop-stream", "alike-lies", "fine"]
model_map = { "fine" = "sim-chat" }

[[models]]
name = "loop"
input_price = "1"
output_price = "1"
[[models]]
name = "oom"
input_price = "1"
output_price = "1"
[[models]]
name = "trap"
input_price = "1"
output_price = "1"
[[models]]
name = "garbage"
input_price = "1"
output_price = "1"
[[models]]
name = "garbage-response"
input_price = "1"
output_price = "1"
[[models]]
name = "loop-stream"
input_price = "1"
output_price = "1"
[[models]]
name = "alike-lies"
input_price = "1"
output_price = "1"
[[models]]
name = "fine"
input_price = "1"
output_price = "1"
"#
        .into(),
        ..Setup::default()
    }
}

/// The call fails with a 502 adapter error, quickly, and both the same
/// component and another one serve the next request.
async fn fails_alone(env: &Env, key: &str, model: &str, expect_in_message: &str) {
    let started = Instant::now();
    let (code, msg) = envelope(env.chat(key, user(model, "hi")).await, 502).await;
    let took = started.elapsed();
    assert_eq!(code, "adapter_error", "{model}: {msg}");
    assert!(msg.contains(expect_in_message), "{model}: {msg}");
    // Deadline 200 ms; the tokio backstop is 450 ms. Generous for a busy CI box.
    assert!(took < Duration::from_secs(3), "{model} took {took:?}");
    assert_eq!(
        env.chat(key, user("fine", "hi")).await.status(),
        200,
        "same component, next request"
    );
    assert_eq!(
        env.chat(key, user("gpt-4o-mini", "hi")).await.status(),
        200,
        "other component"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_that_loops_forever_hits_its_cpu_deadline() {
    let env = Env::with(misbehaving()).await;
    let key = env.key().await;
    fails_alone(&env, &key, "loop", "CPU deadline of 200 ms").await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_that_grows_memory_without_bound_hits_its_memory_limit() {
    let env = Env::with(misbehaving()).await;
    let key = env.key().await;
    fails_alone(&env, &key, "oom", "memory limit of 32 MiB").await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_that_traps_fails_only_its_request() {
    let env = Env::with(misbehaving()).await;
    let key = env.key().await;
    fails_alone(&env, &key, "trap", "crashed").await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_that_returns_garbage_is_refused() {
    let env = Env::with(misbehaving()).await;
    let key = env.key().await;
    fails_alone(&env, &key, "garbage", "invalid answer").await;
    fails_alone(&env, &key, "garbage-response", "invalid answer").await;
    // Nothing garbage reached the upstream.
    assert!(env
        .sim
        .requests()
        .iter()
        .all(|r| r.path.starts_with("/v1/")));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_that_loops_mid_stream_ends_that_stream_with_an_error() {
    let env = Env::with(misbehaving()).await;
    let key = env.key().await;
    // `loop-stream` translates the role chunk and the first words, then
    // loops on the third event.
    let mut body = user("loop-stream", "hi");
    body["stream"] = json!(true);
    let started = Instant::now();
    let data = sse_data(env.chat(&key, body).await).await;
    assert!(started.elapsed() < Duration::from_secs(3));
    let last: serde_json::Value = serde_json::from_str(data.last().unwrap()).unwrap();
    assert_eq!(last["error"]["code"], "adapter_error");
    assert!(!data.iter().any(|d| d == "[DONE]"));
    assert_eq!(env.chat(&key, user("fine", "hi")).await.status(), 200);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_guest_call_costs_nothing() {
    let env = Env::with(misbehaving()).await;
    let account = env.account("1").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    for model in ["loop", "oom", "trap", "garbage"] {
        env.chat(&key, user(model, "hi")).await;
    }
    let (balance, ledger_sum) = env.balance(&account).await;
    assert_eq!(balance, 500_000, "1 CNY untouched");
    assert_eq!(balance, ledger_sum);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn components_dropped_into_the_folder_are_picked_up_without_restart() {
    let env = Env::with(Setup {
        adapters: vec![],
        ..Setup::default()
    })
    .await;
    let key = env.key().await;
    // No adapter loaded yet: the model has no working channel.
    let (code, _) = envelope(env.chat(&key, user("gpt-4o-mini", "hi")).await, 503).await;
    assert_eq!(code, "no_available_channel");
    std::fs::copy(
        component("adapters", "openai"),
        env.dir.path().join("adapters/openai.wasm"),
    )
    .unwrap();
    let (status, v) = env
        .admin(reqwest::Method::POST, "/admin/v1/plugins/reload", None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(v["reloaded"], true);
    assert!(v["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "openai"));
    assert_eq!(
        env.chat(&key, user("gpt-4o-mini", "hi")).await.status(),
        200
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_is_not_a_component_is_refused_and_the_rest_load() {
    let env = Env::start().await;
    std::fs::write(
        env.dir.path().join("adapters/broken.wasm"),
        b"\0asm not really",
    )
    .unwrap();
    let (_, v) = env
        .admin(reqwest::Method::POST, "/admin/v1/plugins/reload", None)
        .await;
    let names: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"openai") && !names.contains(&"broken"),
        "{names:?}"
    );
    let key = env.key().await;
    assert_eq!(
        env.chat(&key, user("gpt-4o-mini", "hi")).await.status(),
        200
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_built_for_the_old_contract_is_refused_naming_both_versions() {
    let env = Env::with(Setup {
        adapters: vec![("adapters", "openai"), ("test-guests", "old-contract")],
        ..Setup::default()
    })
    .await;
    let (_, v) = env
        .admin(reqwest::Method::GET, "/admin/v1/plugins", None)
        .await;
    assert!(
        !v["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "old-contract"),
        "{v}"
    );
    let refused = v["refused"].as_array().unwrap();
    assert_eq!(refused.len(), 1, "{v}");
    let why = refused[0]["reason"].as_str().unwrap();
    assert!(
        why.contains("@0.1.0") && why.contains("@0.2.0"),
        "the reason names both versions: {why}"
    );
    assert!(refused[0]["source"]
        .as_str()
        .unwrap()
        .ends_with("old-contract.wasm"));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_template_adapter_dropped_into_a_running_gateway_serves_its_channel() {
    let env = Env::with(Setup {
        extra: r#"
[[channels]]
name = "acme"
adapter = "template"
base_url = "{SIM_URL}"
key = "env:E2E_SIM_KEY"
models = ["acme-chat"]
model_map = { "acme-chat" = "sim-chat" }
options = { tenant = "acme-corp" }

[[models]]
name = "acme-chat"
input_price = "1"
output_price = "1"
"#
        .into(),
        ..Setup::default()
    })
    .await;
    let key = env.key().await;
    let (code, _) = envelope(env.chat(&key, user("acme-chat", "hi")).await, 503).await;
    assert_eq!(code, "no_available_channel", "not loaded yet");
    std::fs::copy(
        component("examples", "template"),
        env.dir.path().join("adapters/template.wasm"),
    )
    .unwrap();
    let (status, _) = env
        .admin(reqwest::Method::POST, "/admin/v1/plugins/reload", None)
        .await;
    assert_eq!(status, 200);
    // Every client protocol now reaches the new vendor.
    let resp = env.chat(&key, user("acme-chat", "hi")).await;
    assert_eq!(resp.status(), 200);
    let sent = env.sim.requests().pop().unwrap();
    assert_eq!(
        sent.header("x-tenant"),
        Some("acme-corp"),
        "the channel option became a header"
    );
    let messages = crate::common::protocols::Client::Messages
        .ask(
            &env.http,
            &env.url(""),
            &key,
            &crate::common::protocols::Ask::new("acme-chat", "hello"),
        )
        .await;
    assert_eq!(messages.status, 200);
    assert!(messages.text.starts_with("Simulated reply to: hello."));
    env.stop().await;
}

/// An adapter that says calls alike to one get the host's edit of their
/// body as their vendor request, and sends another body, is caught on its
/// first call and not taken at its word again: every request of its calls,
/// the first and those alike to it, is the adapter's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adapter_whose_word_on_alike_calls_is_wrong_translates_every_request() {
    let env = Env::with(misbehaving()).await;
    let key = env.key().await;
    for _ in 0..3 {
        assert_eq!(env.chat(&key, user("alike-lies", "hi")).await.status(), 200);
    }
    let bodies: Vec<String> = env
        .sim
        .requests()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).to_string())
        .filter(|b| b.contains(r#""model":"alike-lies""#))
        .collect();
    assert_eq!(bodies.len(), 3, "{bodies:?}");
    assert!(
        bodies.iter().all(|b| b.contains(r#""lie":true"#)),
        "a request the host built itself would not have the adapter's extra member: {bodies:?}"
    );
    env.stop().await;
}
