//! Reloading channels, models and prices from the config file while serving
//! (`POST /admin/v1/reload`, `SIGHUP`): the next call uses the new file, an
//! invalid file changes nothing, and a call in flight finishes on the config
//! it started with.

use crate::billing::{ledger, request_id, usage_row};
use crate::common::*;
use futures_util::StreamExt;
use serde_json::{json, Value};

/// gpt-4o-mini's prices in the test config, and the ones a reload brings.
const OLD_PRICES: &str =
    "name = \"gpt-4o-mini\"\nowned_by = \"openai\"\ninput_price = \"1\"\noutput_price = \"4\"\ncached_input_price = \"0.25\"";
const NEW_PRICES: &str =
    "name = \"gpt-4o-mini\"\nowned_by = \"openai\"\ninput_price = \"2\"\noutput_price = \"8\"\ncached_input_price = \"0.5\"";

/// Quota per 1M tokens (input, cached input, output) at 500 000 quota per CNY.
const OLD: [i64; 3] = [500_000, 125_000, 2_000_000];
const NEW: [i64; 3] = [1_000_000, 250_000, 4_000_000];
/// gpt-new: 3 / 6 CNY, cached input at the input price.
const GPT_NEW: [i64; 3] = [1_500_000, 1_500_000, 3_000_000];

/// A new model on a new channel, both served by the simulator.
fn new_model_and_channel(sim_url: &str) -> String {
    let channel = Channel {
        url: sim_url.into(),
        models: &["gpt-new"],
        upstream: Some("sim-chat"),
        ..Channel::sim("sim-new")
    };
    format!(
        "{}[[models]]\nname = \"gpt-new\"\ninput_price = \"3\"\noutput_price = \"6\"\n",
        channel.toml()
    )
}

/// What a usage row's own token counts cost at `prices`, each part rounded up.
fn cost_at(row: &Value, prices: [i64; 3]) -> i64 {
    let per_million = |tokens: i64, price: i64| (tokens * price + 999_999) / 1_000_000;
    let input = row["input_tokens"].as_i64().unwrap();
    let cached = row["cached_tokens"].as_i64().unwrap();
    let output = row["output_tokens"].as_i64().unwrap();
    per_million(input - cached, prices[0])
        + per_million(cached, prices[1])
        + per_million(output, prices[2])
}

/// One plain chat call that must succeed; returns its usage row.
async fn charged_call(env: &Env, key: &str, model: &str) -> Value {
    let resp = env.chat(key, user(model, "price check")).await;
    assert_eq!(resp.status(), 200, "{model}");
    let rid = request_id(&resp);
    let _ = resp.text().await.unwrap();
    usage_row(env, &rid).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_brings_new_prices_models_and_channels_to_the_next_call() {
    let env = Env::start().await;
    let account = env.account("5").await;
    let (_, key) = env.token_with(&account, json!({})).await;

    let before = charged_call(&env, &key, "gpt-4o-mini").await;
    assert_eq!(before["cost"], cost_at(&before, OLD));
    let (code, _) = envelope(env.chat(&key, user("gpt-new", "hi")).await, 404).await;
    assert_eq!(code, "model_not_found");

    assert!(env.config_text.contains(OLD_PRICES));
    let text = format!(
        "{}\n{}",
        env.config_text
            .replace(OLD_PRICES, NEW_PRICES)
            .replace("upstream_timeout_secs = 5", "upstream_timeout_secs = 6"),
        new_model_and_channel(&env.sim.base_url())
    );
    let (status, v) = env.reload_with(&text).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["reloaded"], true);
    // The limits section changed too: not applied, and said so.
    assert_eq!(v["restart_needed"], json!(["[limits]"]));

    let repriced = charged_call(&env, &key, "gpt-4o-mini").await;
    assert_eq!(repriced["channel"], "sim");
    assert_eq!(repriced["cost"], cost_at(&repriced, NEW));
    assert_ne!(repriced["cost"], cost_at(&repriced, OLD));

    let added = charged_call(&env, &key, "gpt-new").await;
    assert_eq!(added["channel"], "sim-new");
    assert_eq!(added["cost"], cost_at(&added, GPT_NEW));

    // Listed, with the time it was first served recorded like at start-up.
    let models = env.get_json(&key, "/v1/models").await;
    let listed = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "gpt-new")
        .cloned()
        .expect("gpt-new is listed");
    assert!(listed["created"].as_i64().unwrap() > 0, "{listed}");

    // The books add up at the prices each call was made at.
    let spent: i64 = [&before, &repriced, &added]
        .iter()
        .map(|r| r["cost"].as_i64().unwrap())
        .sum();
    let l = ledger(&env, &account).await;
    assert_eq!(l["balance"], l["ledger_sum"]);
    assert_eq!(l["balance"].as_i64().unwrap(), 2_500_000 - spent);
    env.stop().await;
}

/// Posts the reload and returns the refusal's (code, message), checking the
/// standard envelope.
async fn refused(env: &Env, text: &str) -> (String, String) {
    let path = env.dir.path().join("gateway.toml");
    std::fs::write(&path, text).unwrap();
    let resp = env
        .http
        .post(env.admin_url("/admin/v1/reload"))
        .bearer_auth(ADMIN_KEY)
        .send()
        .await
        .unwrap();
    envelope(resp, 422).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_config_file_is_refused_and_the_old_one_keeps_serving() {
    let env = Env::start().await;
    let account = env.account("5").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let sim = env.sim.base_url();
    let good_addition = new_model_and_channel(&sim);
    let base = env.config_text.replace(OLD_PRICES, NEW_PRICES);

    let cases = [
        (
            format!("{base}{good_addition}\n[[models]\nname = \"x\""),
            "gateway.toml",
        ),
        (
            format!("{base}{}", good_addition.replace("\"openai\"", "\"nope\"")),
            "adapter `nope`, which is not loaded",
        ),
        (
            format!(
                "{base}{}",
                good_addition.replace(
                    "output_price = \"6\"",
                    "output_price = \"6\"\npolicies = [\"nope\"]"
                )
            ),
            "policy `nope`, which is not loaded",
        ),
        (
            format!("{base}{good_addition}{good_addition}"),
            "listed twice",
        ),
        (
            format!(
                "{base}{}",
                good_addition.replace("input_price = \"3\"", "input_price = \"three\"")
            ),
            "input_price",
        ),
    ];
    for (text, says) in &cases {
        let (code, message) = refused(&env, text).await;
        assert_eq!(code, "config_invalid");
        assert!(message.contains("was not reloaded"), "{message}");
        assert!(message.contains(says), "`{says}` missing from: {message}");

        // Nothing of the refused file serves; the old prices still do.
        let (code, _) = envelope(env.chat(&key, user("gpt-new", "hi")).await, 404).await;
        assert_eq!(code, "model_not_found");
        let row = charged_call(&env, &key, "gpt-4o-mini").await;
        assert_eq!(row["cost"], cost_at(&row, OLD));
    }
    let l = ledger(&env, &account).await;
    assert_eq!(l["balance"], l["ledger_sum"]);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_call_in_flight_during_a_reload_finishes_on_its_old_prices() {
    let env = Env::start().await;
    let account = env.account("5").await;
    let (_, key) = env.token_with(&account, json!({})).await;

    // About three seconds of stream: a word every 30 ms.
    let mut body = user(
        "gpt-4o-mini",
        "tell a long story [[sim:words=100, chunk_delay_ms=30]]",
    );
    body["stream"] = json!(true);
    let resp = env.chat(&key, body).await;
    assert_eq!(resp.status(), 200);
    let rid = request_id(&resp);
    let mut stream = resp.bytes_stream();
    let mut text = String::new();
    let first = stream.next().await.expect("a first chunk").unwrap();
    text.push_str(&String::from_utf8_lossy(&first));

    let (status, v) = env
        .reload_with(&env.config_text.replace(OLD_PRICES, NEW_PRICES))
        .await;
    assert_eq!(status, 200, "{v}");
    // The call was still in flight across the reload: its hold is open.
    let (_, holds) = env
        .admin(reqwest::Method::GET, "/admin/v1/holds", None)
        .await;
    assert_eq!(holds["data"].as_array().unwrap().len(), 1, "{holds}");

    while let Some(chunk) = stream.next().await {
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    assert!(text.contains("data: [DONE]"), "the stream finished whole");
    let row = usage_row(&env, &rid).await;
    assert_eq!(row["status"], 200);
    assert_eq!(row["cost"], cost_at(&row, OLD));

    let next = charged_call(&env, &key, "gpt-4o-mini").await;
    assert_eq!(next["cost"], cost_at(&next, NEW));
    let l = ledger(&env, &account).await;
    assert_eq!(l["balance"], l["ledger_sum"]);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_a_running_gateway_process_and_refuses_a_broken_file() {
    let sim = start_sim().await;
    let dir = tempfile::tempdir().unwrap();
    let path = process_config(dir.path(), &sim.base_url(), "");
    let gw = GatewayProcess::start(&path);
    let http = reqwest::Client::new();
    let (_, key) = gw.account_and_key(&http, "5").await;
    let chat = |model: &str| {
        http.post(format!("http://{}/v1/chat/completions", gw.public))
            .bearer_auth(&key)
            .json(&user(model, "hello"))
            .send()
    };
    assert_eq!(chat("gpt-new").await.unwrap().status(), 404);

    let original = std::fs::read_to_string(&path).unwrap();
    let grown = format!("{original}{}", new_model_and_channel(&sim.base_url()));
    std::fs::write(&path, &grown).unwrap();
    gw.signal("HUP");
    gw.wait_for_log("config reloaded").await;
    assert_eq!(chat("gpt-new").await.unwrap().status(), 200);

    std::fs::write(&path, format!("{grown}\n[[models]\n")).unwrap();
    gw.signal("HUP");
    let line = gw.wait_for_log("config reload refused").await;
    assert!(line.contains("gateway.toml"), "{line}");
    assert_eq!(chat("gpt-new").await.unwrap().status(), 200);
    assert_eq!(chat("gpt-4o-mini").await.unwrap().status(), 200);
    let mut gw = gw;
    assert!(gw.child.try_wait().unwrap().is_none(), "still running");
    drop(gw);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_cli_reloads_the_config() {
    let env = Env::start().await;
    let key = env.key().await;
    std::fs::write(
        env.dir.path().join("gateway.toml"),
        format!(
            "{}{}",
            env.config_text,
            new_model_and_channel(&env.sim.base_url())
        ),
    )
    .unwrap();
    let e = &env;
    let out = tokio::task::block_in_place(|| {
        std::process::Command::new(env!("CARGO_BIN_EXE_gateway"))
            .args(["admin", "reload", "--json"])
            .env("GATEWAY_ADMIN_URL", format!("http://{}", e.gw.admin_addr))
            .env("GATEWAY_ADMIN_KEY", ADMIN_KEY)
            .output()
            .unwrap()
    });
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["reloaded"], true);
    assert_eq!(env.chat(&key, user("gpt-new", "hi")).await.status(), 200);

    std::fs::write(env.dir.path().join("gateway.toml"), "not toml [").unwrap();
    let out = tokio::task::block_in_place(|| {
        std::process::Command::new(env!("CARGO_BIN_EXE_gateway"))
            .args(["admin", "reload"])
            .env("GATEWAY_ADMIN_URL", format!("http://{}", e.gw.admin_addr))
            .env("GATEWAY_ADMIN_KEY", ADMIN_KEY)
            .output()
            .unwrap()
    });
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("was not reloaded"), "{err}");
    assert_eq!(env.chat(&key, user("gpt-new", "hi")).await.status(), 200);
    env.stop().await;
}
