//! Token controls (spec §5): status, expiry, model and IP whitelists, quota cap.

use crate::common::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_deleted_and_expired_tokens_are_401_invalid_token() {
    let env = Env::start().await;
    let account = env.account("5").await;
    let m = reqwest::Method::POST;

    let (id, key) = env.token_with(&account, json!({})).await;
    assert_eq!(
        env.chat(&key, user("gpt-4o-mini", "hi")).await.status(),
        200
    );
    let (s, v) = env
        .admin(m.clone(), &format!("/admin/v1/tokens/{id}/disable"), None)
        .await;
    assert_eq!((s, v["status"].as_str()), (200, Some("disabled")));
    let (code, msg) = envelope(env.chat(&key, user("gpt-4o-mini", "hi")).await, 401).await;
    assert_eq!(code, "invalid_api_key");
    assert!(msg.starts_with("Invalid token"));

    let (id, key) = env.token_with(&account, json!({})).await;
    let (s, _) = env
        .admin(
            reqwest::Method::DELETE,
            &format!("/admin/v1/tokens/{id}"),
            None,
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(
        envelope(env.chat(&key, user("gpt-4o-mini", "hi")).await, 401)
            .await
            .0,
        "invalid_api_key"
    );
    // A deleted token no longer shows in the account's list.
    let (_, list) = env
        .admin(
            reqwest::Method::GET,
            &format!("/admin/v1/tokens?account={account}"),
            None,
        )
        .await;
    assert!(list["data"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["id"] != id.as_str()));

    let now = env.clock.now_secs();
    let (_, key) = env
        .token_with(&account, json!({"expires_at": now + 60}))
        .await;
    assert_eq!(
        env.chat(&key, user("gpt-4o-mini", "hi")).await.status(),
        200
    );
    env.clock.advance_secs(60);
    assert_eq!(
        envelope(env.chat(&key, user("gpt-4o-mini", "hi")).await, 401)
            .await
            .0,
        "invalid_api_key"
    );
    env.stop().await;
}

use gateway::clock::Clock as _;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_outside_the_whitelist_is_403_token_model_denied() {
    let env = Env::start().await;
    let account = env.account("5").await;
    let (_, key) = env
        .token_with(&account, json!({"models": ["qwen-plus"]}))
        .await;
    assert_eq!(env.chat(&key, user("qwen-plus", "hi")).await.status(), 200);
    let (code, msg) = envelope(env.chat(&key, user("gpt-4o-mini", "hi")).await, 403).await;
    assert_eq!(code, "token_model_denied");
    assert!(msg.contains("gpt-4o-mini"));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_address_outside_the_ip_whitelist_is_403_token_ip_denied() {
    let env = Env::start().await;
    let account = env.account("5").await;
    let (_, elsewhere) = env
        .token_with(&account, json!({"ips": ["10.9.8.0/24"]}))
        .await;
    let (code, msg) = envelope(env.chat(&elsewhere, user("gpt-4o-mini", "hi")).await, 403).await;
    assert_eq!(code, "token_ip_denied");
    assert!(msg.contains("127.0.0.1"));
    let (_, here) = env
        .token_with(&account, json!({"ips": ["127.0.0.1"]}))
        .await;
    assert_eq!(
        env.chat(&here, user("gpt-4o-mini", "hi")).await.status(),
        200
    );
    // X-Forwarded-For from an untrusted peer is ignored.
    let resp = env
        .http
        .post(env.url("/v1/chat/completions"))
        .bearer_auth(&elsewhere)
        .header("x-forwarded-for", "10.9.8.7")
        .json(&user("gpt-4o-mini", "hi"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_proxy_the_forwarded_address_is_checked() {
    let trusting = Env::with(Setup {
        top: "trusted_proxies = [\"127.0.0.1\"]".into(),
        ..Setup::default()
    })
    .await;
    let account = trusting.account("5").await;
    let (_, key) = trusting
        .token_with(&account, json!({"ips": ["10.9.8.0/24"]}))
        .await;
    let via_proxy = |xff: &'static str| {
        trusting
            .http
            .post(trusting.url("/v1/chat/completions"))
            .bearer_auth(&key)
            .header("x-forwarded-for", xff)
            .json(&user("gpt-4o-mini", "hi"))
            .send()
    };
    assert_eq!(via_proxy("10.9.8.7").await.unwrap().status(), 200);
    assert_eq!(via_proxy("192.0.2.1").await.unwrap().status(), 403);
    // A client's forged line first, the proxy's own appended after it: the
    // proxy's is the one believed.
    let forged = trusting
        .http
        .post(trusting.url("/v1/chat/completions"))
        .bearer_auth(&key)
        .header("x-forwarded-for", "10.9.8.7")
        .header("x-forwarded-for", "192.0.2.1")
        .json(&user("gpt-4o-mini", "hi"))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
    trusting.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_token_quota_is_403_token_quota_exhausted() {
    let env = Env::start().await;
    let account = env.account("5").await;
    // 0.002 CNY = 1000 quota: enough for one small call's hold, not for more.
    let (id, key) = env
        .token_with(&account, json!({"quota_cny": "0.002"}))
        .await;
    let mut small = user("gpt-4o-mini", "hi");
    small["max_tokens"] = json!(100);
    assert_eq!(env.chat(&key, small.clone()).await.status(), 200);
    let mut big = small.clone();
    big["max_tokens"] = json!(1000);
    let (code, msg) = envelope(env.chat(&key, big).await, 403).await;
    assert_eq!(code, "token_quota_exhausted");
    assert!(msg.contains("0.002 CNY"), "{msg}");
    let (_, t) = env
        .admin(
            reqwest::Method::GET,
            &format!("/admin/v1/tokens/{id}"),
            None,
        )
        .await;
    assert!(t["used"].as_i64().unwrap() > 0);
    env.stop().await;
}
