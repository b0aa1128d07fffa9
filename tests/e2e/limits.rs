//! Rate limit per source address and text concurrency per group (spec §8).

use crate::common::*;
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_after_the_limit_in_the_window_is_429_with_retry_after() {
    let env = Env::with(Setup {
        limits: "rate_limit_requests = 5\nrate_limit_window_secs = 180".into(),
        ..Setup::default()
    })
    .await;
    let key = env.key().await;
    let get = || env.http.get(env.url("/v1/models")).bearer_auth(&key).send();
    for i in 0..5 {
        assert_eq!(get().await.unwrap().status(), 200, "request {}", i + 1);
    }
    let refused = get().await.unwrap();
    let retry_after: i64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    // The window, and at most one of its 64 slices more (2.8 s).
    assert!(retry_after > 0 && retry_after <= 183, "{retry_after}");
    let (code, msg) = envelope(refused, 429).await;
    assert_eq!(code, "rate_limit_exceeded");
    assert!(msg.contains("5 per 180 s"), "{msg}");
    // Every endpoint counts, even an unauthenticated one.
    assert_eq!(
        env.http
            .get(env.url("/v1/models"))
            .send()
            .await
            .unwrap()
            .status(),
        429
    );
    // A client that waits what it was told is let in.
    env.clock.advance_secs(retry_after);
    assert_eq!(get().await.unwrap().status(), 200);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_proxy_each_forwarded_address_has_its_own_window() {
    let env = Env::with(Setup {
        top: "trusted_proxies = [\"127.0.0.0/8\"]".into(),
        limits: "rate_limit_requests = 3".into(),
        ..Setup::default()
    })
    .await;
    let key = env.key().await;
    let from = |ip: &str| {
        env.http
            .get(env.url("/v1/models"))
            .bearer_auth(&key)
            .header("x-forwarded-for", ip.to_string())
            .send()
    };
    for _ in 0..3 {
        assert_eq!(from("198.51.100.1").await.unwrap().status(), 200);
    }
    assert_eq!(from("198.51.100.1").await.unwrap().status(), 429);
    assert_eq!(from("198.51.100.2").await.unwrap().status(), 200);
    // IPv6 clients are counted per /64: rotating addresses inside one does
    // not buy a new window; the next /64 has its own.
    for i in 1..=3 {
        assert_eq!(
            from(&format!("2001:db8:1:2::{i}")).await.unwrap().status(),
            200
        );
    }
    let (code, msg) = envelope(from("2001:db8:1:2:ffff::9").await.unwrap(), 429).await;
    assert_eq!(code, "rate_limit_exceeded");
    assert!(msg.contains("2001:db8:1:2::"), "{msg}");
    assert_eq!(from("2001:db8:1:3::1").await.unwrap().status(), 200);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_group_gets_429_group_concurrency_limit() {
    let env = Env::with(Setup {
        limits: "group_concurrency = { vip = 1 }".into(),
        ..Setup::default()
    })
    .await;
    let (s, a) = env
        .admin(
            reqwest::Method::POST,
            "/admin/v1/accounts",
            Some(json!({"name": "v", "group": "vip"})),
        )
        .await;
    assert_eq!(s, 200);
    let (_, key) = env.token_with(a["id"].as_str().unwrap(), json!({})).await;
    let mut slow = user("gpt-4o-mini", "slowly [[sim:chunk_delay_ms=20]]");
    slow["stream"] = json!(true);
    let streaming = env.chat(&key, slow).await;
    assert_eq!(streaming.status(), 200);
    let (code, msg) = envelope(env.chat(&key, user("gpt-4o-mini", "hi")).await, 429).await;
    assert_eq!(code, "group_concurrency_limit");
    assert!(msg.contains("vip"));
    // Other groups are not limited.
    let other = env.key().await;
    assert_eq!(
        env.chat(&other, user("gpt-4o-mini", "hi")).await.status(),
        200
    );
    let _ = streaming.text().await;
    // The slot frees once the stream is settled.
    let mut ok = false;
    for _ in 0..200 {
        if env.chat(&key, user("gpt-4o-mini", "hi")).await.status() == 200 {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(ok, "the group's slot was released");
    env.stop().await;
}
