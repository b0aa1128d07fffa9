//! Authentication and the error envelope (spec §5, §7.1), and `GET /v1/models`.

use crate::common::*;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_wrong_or_unknown_keys_are_401_invalid_token() {
    let env = Env::start().await;
    let body = user("gpt-4o-mini", "hi");
    let no_key = env
        .http
        .post(env.url("/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let cases = vec![
        no_key,
        env.chat("sk-not-a-real-key", body.clone()).await,
        env.chat("", body.clone()).await,
        env.http
            .post(env.url("/v1/chat/completions"))
            .header("authorization", "Basic Zm9vOmJhcg==")
            .json(&body)
            .send()
            .await
            .unwrap(),
    ];
    for resp in cases {
        let (code, msg) = envelope(resp, 401).await;
        assert_eq!(code, "invalid_api_key");
        assert!(msg.starts_with("Invalid token"), "{msg}");
    }
    assert!(env.sim.requests().is_empty());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_and_x_api_key_both_authenticate() {
    let env = Env::start().await;
    let key = env.key().await;
    let by_bearer = env.get(&key, "/v1/models").await;
    assert_eq!(by_bearer.status(), 200);
    let by_header = env
        .http
        .get(env.url("/v1/models"))
        .header("x-api-key", &key)
        .send()
        .await
        .unwrap();
    assert_eq!(by_header.status(), 200);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_model_has_a_real_created_time() {
    let env = Env::with(Setup {
        extra: r#"
[[channels]]
name = "sim-dated"
adapter = "openai"
base_url = "{SIM_URL}"
key = "env:E2E_SIM_KEY"
models = ["dated-model"]
model_map = { "dated-model" = "sim-chat" }

[[models]]
name = "dated-model"
input_price = "1"
output_price = "1"
created = 1700000000
"#
        .into(),
        ..Setup::default()
    })
    .await;
    use gateway::clock::Clock as _;
    let started = env.clock.now_secs();
    let key = env.key().await;
    let v: Value = env.get_json(&key, "/v1/models").await;
    let models = v["data"].as_array().unwrap();
    for m in models {
        let expected = if m["id"] == "dated-model" {
            1_700_000_000
        } else {
            started
        };
        assert_eq!(m["created"], expected, "{m}");
    }
    let one: Value = env.get_json(&key, "/v1/models/dated-model").await;
    assert_eq!(one["created"], 1_700_000_000);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_lists_the_enabled_models_in_the_list_wrapper() {
    let env = Env::start().await;
    let key = env.key().await;
    let v: Value = env.get_json(&key, "/v1/models").await;
    assert_eq!(v["object"], "list");
    let ids: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "claude-sonnet-4-5",
            "claude-thinker",
            "claude-reasoner",
            "gemini-2.5-flash",
            "gemini-thinker",
            "gemini-reasoner",
            "gpt-4o-mini",
            "deepseek-reasoner",
            "qwen-plus",
            "thinker",
            "text-embedding-3-small",
            "gemini-embedding-001",
            "gpt-image-1",
            "tts-1",
            "whisper-1",
            "omni-moderation-latest",
            "rerank-v1",
            "Gen-2.0-fast",
            "Gen-2.0",
            "Gen-2.0-test",
            "Gen-2.5-test",
            "video-fast",
            "video-quality",
            "video-pro"
        ]
    );
    for m in v["data"].as_array().unwrap() {
        assert_eq!(m["object"], "model");
        assert!(m["owned_by"].is_string());
    }
    // A token with a model whitelist sees only its models.
    let account = env.account("1").await;
    let (_, limited) = env
        .token_with(&account, json!({"models": ["qwen-plus"]}))
        .await;
    let v: Value = env.get_json(&limited, "/v1/models").await;
    assert_eq!(v["data"].as_array().unwrap().len(), 1);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_response_has_a_request_id_and_framework_errors_use_the_envelope() {
    let env = Env::start().await;
    let key = env.key().await;
    let ok = env.chat(&key, user("gpt-4o-mini", "hi")).await;
    assert!(ok.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .starts_with("req_"));
    let unknown = env.get(&key, "/v1/nope").await;
    assert_eq!(envelope(unknown, 404).await.0, "not_found");
    let wrong_method = env
        .http
        .delete(env.url("/v1/models"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(envelope(wrong_method, 405).await.0, "method_not_allowed");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_is_413_in_the_envelope() {
    let env = Env::with(Setup {
        limits: "max_body_bytes = 1024".into(),
        ..Setup::default()
    })
    .await;
    let key = env.key().await;
    let resp = env
        .chat(&key, user("gpt-4o-mini", &"word ".repeat(1000)))
        .await;
    let (code, msg) = envelope(resp, 413).await;
    assert_eq!(code, "request_too_large");
    assert!(msg.contains("1024"));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_needs_the_admin_key() {
    let env = Env::start().await;
    let resp = env
        .http
        .get(env.admin_url("/admin/v1/accounts"))
        .bearer_auth("wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(envelope(resp, 401).await.0, "invalid_api_key");
    let (status, _) = env
        .admin(reqwest::Method::GET, "/admin/v1/accounts", None)
        .await;
    assert_eq!(status, 200);
    env.stop().await;
}
