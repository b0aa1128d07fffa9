//! The asynchronous video API end to end (spec §2.1–§2.5, §3, §4.2,
//! §4.4b–§4.6, §7.3, §8), through the genvideo adapter against the
//! simulator's task API, with the clock moved by the test.

use crate::common::*;
use gateway::clock::Clock as _;
use serde_json::{json, Value};

/// Asserts envelope 2 (gateway validation of a video request) and returns
/// its message.
async fn validation(resp: reqwest::Response, stable_code: &str) -> String {
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["code"], "invalid_parameters", "{v}");
    assert!(v["data"].is_null());
    let msg = v["message"].as_str().unwrap().to_string();
    assert!(msg.starts_with(&format!("{stable_code}:")), "{msg}");
    assert!(msg.contains("(request id: req_"));
    msg
}

fn video(prompt: &str, seconds: &str) -> Value {
    json!({"model": "video-fast", "prompt": prompt, "seconds": seconds})
}

async fn submit(env: &Env, key: &str, body: Value) -> reqwest::Response {
    env.post(key, "/v1/videos", body).await
}

async fn submit_ok(env: &Env, key: &str, body: Value) -> Value {
    let resp = submit(env, key, body).await;
    assert_eq!(resp.status(), 200);
    resp.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_publish_each_models_real_limits_and_aliases() {
    let env = Env::start().await;
    let key = env.key().await;
    let v: Value = env.get_json(&key, "/v1/capabilities").await;
    assert_eq!(v["object"], "list");
    let by = |m: &str| {
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["model"] == m)
            .cloned()
            .unwrap()
    };
    assert_eq!(by("Gen-2.0-fast")["durations"], json!([4, 12]));
    assert_eq!(by("Gen-2.5-test")["durations"], json!([2, 30]));
    assert_eq!(
        by("Gen-2.5-test")["resolutions"].as_array().unwrap().len(),
        4
    );
    assert_eq!(by("video-fast")["alias_of"], "Gen-2.0-fast");
    assert_eq!(by("video-quality")["alias_of"], "Gen-2.0");
    assert_eq!(by("video-pro")["alias_of"], "Gen-2.5-test");
    assert_eq!(by("video-pro")["durations"], json!([2, 30]));
    assert!(by("Gen-2.0")["status"] == "stable" && by("Gen-2.0").get("alias_of").is_none());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_models_can_be_switched_off() {
    let env = Env::with(Setup {
        video: "disable_test_models = true".into(),
        ..Setup::default()
    })
    .await;
    let key = env.key().await;
    let caps: Value = env.get_json(&key, "/v1/capabilities").await;
    let names: Vec<&str> = caps["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["model"].as_str().unwrap())
        .collect();
    assert!(
        !names
            .iter()
            .any(|n| n.ends_with("-test") || *n == "video-pro"),
        "{names:?}"
    );
    assert!(names.contains(&"video-fast"));
    let models: Value = env.get_json(&key, "/v1/models").await;
    assert!(!models.to_string().contains("-test"));
    let (code, _) = envelope(
        submit(&env, &key, json!({"model": "Gen-2.5-test", "prompt": "p"})).await,
        404,
    )
    .await;
    assert_eq!(code, "model_not_found");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quote_locks_a_price_for_thirty_minutes() {
    let env = Env::start().await;
    let key = env.key().await;
    let resp = env
        .post(
            &key,
            "/v1/videos/quote",
            json!({"model": "video-fast", "seconds": "4"}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let q: Value = resp.json().await.unwrap();
    assert!(q["quote_id"].as_str().unwrap().starts_with("quote_"));
    assert_eq!(q["currency"], "CNY");
    assert_eq!(q["model"], "video-fast");
    assert_eq!(q["seconds"], 4);
    assert_eq!(q["unit_price"], 1.4);
    assert_eq!(q["estimated_cost"], 5.6);
    assert_eq!(q["quota"], 2_800_000);
    assert_eq!(q["duration_limit"], json!({"min": 4, "max": 12}));
    assert_eq!(
        q["expires_at"].as_i64().unwrap(),
        env.clock.now_secs() + 1800
    );
    // Defaults to 4 seconds.
    let q: Value = env
        .post(&key, "/v1/videos/quote", json!({"model": "Gen-2.5-test"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (q["seconds"].as_i64(), q["unit_price"].as_f64()),
        (Some(4), Some(1.87))
    );

    validation(
        env.post(
            &key,
            "/v1/videos/quote",
            json!({"model": "video-fast", "seconds": "13"}),
        )
        .await,
        "invalid_duration",
    )
    .await;
    validation(
        env.post(
            &key,
            "/v1/videos/quote",
            json!({"model": "video-fast", "size": "1792x1024"}),
        )
        .await,
        "invalid_resolution",
    )
    .await;
    let (code, _) = envelope(
        env.post(&key, "/v1/videos/quote", json!({"model": "sora-9"}))
            .await,
        404,
    )
    .await;
    assert_eq!(code, "model_not_found");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_submissions_are_refused_by_the_gateway_and_cost_nothing() {
    let env = Env::start().await;
    let account = env.account("100").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"model": "video-fast", "prompt": "p", "seconds": "3"}),
            "invalid_duration",
        ),
        (
            json!({"model": "video-fast", "prompt": "p", "duration": 13}),
            "invalid_duration",
        ),
        (
            json!({"model": "video-pro", "prompt": "p", "seconds": "31"}),
            "invalid_duration",
        ),
        (
            json!({"model": "video-fast", "prompt": "p", "seconds": 4}),
            "invalid_parameters",
        ),
        (
            json!({"model": "video-fast", "prompt": "p", "size": "1792x1024"}),
            "invalid_resolution",
        ),
        (
            json!({"model": "video-fast", "prompt": "p", "resolution": "1080p"}),
            "invalid_resolution",
        ),
        (
            json!({"model": "video-fast", "prompt": "p", "resolution": "480p"}),
            "invalid_resolution",
        ),
        (
            json!({"model": "video-fast", "prompt": "p", "ratio": "4:3"}),
            "invalid_ratio",
        ),
        (
            json!({"model": "video-fast", "prompt": "p", "size": "1280x720", "ratio": "9:16"}),
            "invalid_ratio",
        ),
        (
            json!({"model": "video-fast", "seconds": "4"}),
            "invalid_request",
        ),
    ];
    for (body, code) in cases {
        let msg = validation(submit(&env, &key, body.clone()).await, code).await;
        assert!(
            !msg.contains("genvideo"),
            "no internal plugin names in validation errors: {msg}"
        );
    }
    let msg = validation(
        submit(
            &env,
            &key,
            json!({"model": "video-fast", "prompt": "p", "seconds": 4}),
        )
        .await,
        "invalid_parameters",
    )
    .await;
    assert!(
        msg.contains("a number cannot be read into the string field `seconds`"),
        "{msg}"
    );
    let (code, _) = envelope(
        submit(&env, &key, json!({"model": "nope", "prompt": "p"})).await,
        404,
    )
    .await;
    assert_eq!(code, "model_not_found");
    assert_eq!(
        env.sim.video_task_count(),
        0,
        "nothing reached the upstream"
    );
    let (balance, sum) = env.balance(&account).await;
    assert_eq!((balance, sum), (50_000_000, 50_000_000));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_runs_from_queued_to_completed_and_settles_the_seconds_generated() {
    let env = Env::start().await;
    let account = env.account("100").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let t = submit_ok(&env, &key, video("a cat surfing", "4")).await;
    assert!(t["id"].as_str().unwrap().starts_with("task_"));
    assert_eq!(t["object"], "video");
    assert_eq!(t["model"], "video-fast");
    assert_eq!(t["status"], "queued");
    assert_eq!(t["progress"], 0, "an integer at submission");
    assert_eq!(t["created_at"].as_i64().unwrap(), env.clock.now_secs());
    assert_eq!(t["billing"]["quota"]["reserved"], 2_800_000);
    assert_eq!(t["billing"]["reserved"], 5.6);
    let id = t["id"].as_str().unwrap().to_string();
    let (balance, _) = env.balance(&account).await;
    assert_eq!(
        balance,
        50_000_000 - 2_800_000,
        "the full price is held at submission"
    );

    let polled = env.task(&key, &id).await;
    assert!(
        polled["progress"].is_string(),
        "a percentage string when polled"
    );

    let done = env.run_to_end(&key, &id).await;
    assert_eq!(done["status"], "completed");
    assert_eq!(done["progress"], "100%");
    assert_eq!(done["requested_duration"], 4);
    assert_eq!(done["actual_duration"], 4);
    let completed_at = done["completed_at"].as_i64().unwrap();
    assert_eq!(done["expires_at"].as_i64().unwrap(), completed_at + 86_400);
    let b = &done["billing"];
    assert_eq!(b["currency"], "CNY");
    assert_eq!(b["unit_price"], 1.4);
    assert_eq!(b["seconds"], 4);
    assert_eq!(
        (
            b["reserved"].as_f64(),
            b["settled"].as_f64(),
            b["refunded"].as_f64()
        ),
        (Some(5.6), Some(5.6), Some(0.0))
    );
    assert_eq!(
        b["quota"],
        json!({"reserved": 2_800_000, "settled": 2_800_000, "refunded": 0})
    );
    assert!(done["error"].is_null());
    let (balance, sum) = env.balance(&account).await;
    assert_eq!(
        (balance, sum),
        (50_000_000 - 2_800_000, 50_000_000 - 2_800_000)
    );
    // What went upstream: the concrete model, the seconds, the size.
    let sent = env
        .sim
        .requests()
        .into_iter()
        .find(|r| r.method == "POST" && r.path.contains("/video/tasks"))
        .unwrap();
    let sent = sent.json().unwrap();
    assert_eq!(
        (
            sent["model"].as_str(),
            sent["duration"].as_i64(),
            sent["size"].as_str()
        ),
        (Some("Gen-2.0-fast"), Some(4), Some("1280x720"))
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multipart_submissions_are_accepted_like_the_openai_sdk_sends_them() {
    let env = Env::start().await;
    let key = env.token_with(&env.account("100").await, json!({})).await.1;
    let form = reqwest::multipart::Form::new()
        .text("model", "video-fast")
        .text("prompt", "waves at dusk")
        .text("seconds", "8")
        .text("size", "720x1280");
    let resp = env
        .http
        .post(env.url("/v1/videos"))
        .bearer_auth(&key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let t: Value = resp.json().await.unwrap();
    assert_eq!(
        (t["seconds"].as_str(), t["size"].as_str()),
        (Some("8"), Some("720x1280"))
    );
    let image = reqwest::multipart::Form::new()
        .text("model", "video-fast")
        .text("prompt", "p")
        .part(
            "input_reference",
            reqwest::multipart::Part::bytes(vec![1, 2, 3]).file_name("a.png"),
        );
    let resp = env
        .http
        .post(env.url("/v1/videos"))
        .bearer_auth(&key)
        .multipart(image)
        .send()
        .await
        .unwrap();
    validation(resp, "invalid_request").await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_balance_short_of_the_full_price_is_402_and_creates_no_task() {
    let env = Env::start().await;
    let account = env.account("5").await; // 4 s of video-fast costs 5.6 CNY
    let (_, key) = env.token_with(&account, json!({})).await;
    let (code, msg) = envelope(submit(&env, &key, video("p", "4")).await, 402).await;
    assert_eq!(code, "insufficient_user_quota");
    assert!(msg.contains("must reserve 5.6 CNY"), "{msg}");
    assert_eq!(env.sim.video_task_count(), 0);
    let (balance, sum) = env.balance(&account).await;
    assert_eq!((balance, sum), (2_500_000, 2_500_000));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unfinished_tasks_and_daily_spend_are_capped_per_account() {
    let env = Env::with(Setup {
        video: "max_unfinished_per_account = 2\ndaily_budget_cny = \"20\"".into(),
        ..Setup::default()
    })
    .await;
    let account = env.account("100").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    submit_ok(&env, &key, video("a", "4")).await;
    submit_ok(&env, &key, video("b", "4")).await;
    let resp = submit(&env, &key, video("c", "4")).await;
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "user_concurrency_limit");
    assert_eq!(
        (
            body["error"]["current"].as_i64(),
            body["error"]["limit"].as_i64()
        ),
        (Some(2), Some(2))
    );

    // Another account: 12 + 8 CNY is within 20, the next 5.6 is not.
    let other = env.account("100").await;
    let (_, key2) = env.token_with(&other, json!({})).await;
    let t = submit_ok(
        &env,
        &key2,
        json!({"model": "video-fast", "prompt": "x", "seconds": "8"}),
    )
    .await; // 11.2
    env.run_to_end(&key2, t["id"].as_str().unwrap()).await;
    let resp = submit(&env, &key2, video("y", "8")).await; // +11.2 > 20
    assert_eq!(resp.status(), 429);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "daily_budget_exceeded");
    assert_eq!(
        (
            body["error"]["spent_today"].as_f64(),
            body["error"]["limit"].as_f64()
        ),
        (Some(11.2), Some(20.0))
    );
    // Tomorrow the budget is fresh.
    env.clock.advance_secs(86_400);
    submit_ok(&env, &key2, video("y", "8")).await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotes_are_checked_at_submission() {
    let env = Env::start().await;
    let account = env.account("100").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let (_, other_key) = env.token_with(&account, json!({})).await;
    let quote = |seconds: &'static str| {
        let (env, key) = (&env, key.clone());
        async move {
            let q: Value = env
                .post(
                    &key,
                    "/v1/videos/quote",
                    json!({"model": "video-fast", "seconds": seconds}),
                )
                .await
                .json()
                .await
                .unwrap();
            q["quote_id"].as_str().unwrap().to_string()
        }
    };
    let with_quote = |q: &str, model: &str, seconds: &str| json!({"model": model, "prompt": "p", "seconds": seconds, "quote_id": q});

    let (code, _) = envelope(
        submit(&env, &key, with_quote("quote_nope", "video-fast", "4")).await,
        404,
    )
    .await;
    assert_eq!(code, "quote_not_found");
    let q = quote("4").await;
    let (code, _) = envelope(
        submit(&env, &other_key, with_quote(&q, "video-fast", "4")).await,
        403,
    )
    .await;
    assert_eq!(code, "quote_token_mismatch");
    let (code, _) = envelope(
        submit(&env, &key, with_quote(&q, "video-quality", "4")).await,
        409,
    )
    .await;
    assert_eq!(code, "quote_model_mismatch");
    let (code, _) = envelope(
        submit(&env, &key, with_quote(&q, "video-fast", "8")).await,
        409,
    )
    .await;
    assert_eq!(code, "quote_duration_mismatch");
    let t = submit_ok(&env, &key, with_quote(&q, "video-fast", "4")).await;
    assert_eq!(t["quote_id"], q.as_str());
    let (code, _) = envelope(
        submit(&env, &key, with_quote(&q, "video-fast", "4")).await,
        409,
    )
    .await;
    assert_eq!(code, "quote_already_used");

    let q = quote("4").await;
    env.clock.advance_secs(1801);
    let (code, _) = envelope(
        submit(&env, &key, with_quote(&q, "video-fast", "4")).await,
        410,
    )
    .await;
    assert_eq!(code, "quote_expired");

    // A price change since the quote: 409 with both prices, no silent re-pricing.
    let q = quote("4").await;
    let mut stored = env.gw.state.store.quote(&q).unwrap().unwrap();
    stored.unit_price = 495_000; // as if quoted at 0.99 CNY/s, the withdrawn price
    env.gw.state.store.put_quote(stored).await.unwrap();
    let resp = submit(&env, &key, with_quote(&q, "video-fast", "4")).await;
    assert_eq!(resp.status(), 409);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "quote_price_changed");
    assert_eq!(
        (
            body["error"]["old_price"].as_f64(),
            body["error"]["new_price"].as_f64()
        ),
        (Some(0.99), Some(1.4))
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_submissions_with_one_quote_exactly_one_succeeds() {
    let env = Env::start().await;
    let account = env.account("100").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let q: Value = env
        .post(&key, "/v1/videos/quote", json!({"model": "video-fast"}))
        .await
        .json()
        .await
        .unwrap();
    let body = json!({"model": "video-fast", "prompt": "p", "quote_id": q["quote_id"]});
    let (a, b) = tokio::join!(
        submit(&env, &key, body.clone()),
        submit(&env, &key, body.clone())
    );
    let mut statuses = [a.status().as_u16(), b.status().as_u16()];
    statuses.sort();
    assert_eq!(statuses, [200, 409]);
    let (balance, _) = env.balance(&account).await;
    assert_eq!(balance, 50_000_000 - 2_800_000, "held once");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotes_and_idempotency_records_are_swept_after_their_windows() {
    let env = Env::start().await;
    let account = env.account("100").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let q: Value = env
        .post(
            &key,
            "/v1/videos/quote",
            json!({"model": "video-fast", "seconds": "4"}),
        )
        .await
        .json()
        .await
        .unwrap();
    let quote_id = q["quote_id"].as_str().unwrap().to_string();
    let body = json!({"model": "video-fast", "prompt": "p", "seconds": "4", "quote_id": quote_id});
    let first = env
        .http
        .post(env.url("/v1/videos"))
        .bearer_auth(&key)
        .header("idempotency-key", "keep-me-a-day")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 200);
    let sweep = || async {
        let (status, swept) = env
            .admin(reqwest::Method::POST, "/admin/v1/retention/sweep", None)
            .await;
        assert_eq!(status, 200);
        swept
    };
    let store = &env.gw.state.store;
    let records = || {
        (
            store.quote(&quote_id).unwrap().is_some(),
            store
                .idempotency(&account, "keep-me-a-day")
                .unwrap()
                .is_some(),
        )
    };

    // The quote expires after 30 minutes and is kept a day longer; the key
    // de-duplicates for 24 hours.
    env.clock.advance_secs(24 * 3600 - 1);
    let swept = sweep().await;
    assert_eq!(
        (
            swept["quotes"].as_u64(),
            swept["idempotency_records"].as_u64()
        ),
        (Some(0), Some(0))
    );
    assert_eq!(records(), (true, true));
    env.clock.advance_secs(1);
    assert_eq!(sweep().await["idempotency_records"], 1);
    assert_eq!(records(), (true, false));
    env.clock.advance_secs(1800);
    assert_eq!(sweep().await["quotes"], 1);
    assert_eq!(records(), (false, false));
    let (code, _) = envelope(submit(&env, &key, body).await, 404).await;
    assert_eq!(code, "quote_not_found", "a swept quote is no longer known");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_keys_replay_the_first_answer() {
    let env = Env::start().await;
    let account = env.account("100").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let send = |k: &'static str, body: Value| {
        env.http
            .post(env.url("/v1/videos"))
            .bearer_auth(&key)
            .header("idempotency-key", k)
            .json(&body)
            .send()
    };
    let first = send(
        "order-1",
        json!({"model": "video-fast", "prompt": "p", "duration": 4}),
    )
    .await
    .unwrap();
    assert_eq!(first.status(), 200);
    assert!(first.headers().get("idempotency-replayed").is_none());
    let first: Value = first.json().await.unwrap();
    // `seconds: "4"` is the same request as `duration: 4`.
    let again = send(
        "order-1",
        json!({"model": "video-fast", "prompt": "p", "seconds": "4"}),
    )
    .await
    .unwrap();
    assert_eq!(again.status(), 200);
    assert_eq!(again.headers()["idempotency-replayed"], "true");
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["id"], first["id"]);
    let (code, _) = envelope(
        send("order-1", json!({"model": "video-fast", "prompt": "other"}))
            .await
            .unwrap(),
        409,
    )
    .await;
    assert_eq!(code, "idempotency_key_reuse");
    let long: &'static str = Box::leak("k".repeat(201).into_boxed_str());
    assert_eq!(
        send(long, json!({"model": "video-fast", "prompt": "p"}))
            .await
            .unwrap()
            .status(),
        400
    );
    // Keys are scoped to the account.
    let (_, key2) = env.token_with(&env.account("100").await, json!({})).await;
    let theirs: Value = env
        .http
        .post(env.url("/v1/videos"))
        .bearer_auth(&key2)
        .header("idempotency-key", "order-1")
        .json(&json!({"model": "video-fast", "prompt": "p", "duration": 4}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_ne!(theirs["id"], first["id"]);
    // After 24 h the key starts afresh.
    env.clock.advance_secs(86_400);
    let later: Value = send(
        "order-1",
        json!({"model": "video-fast", "prompt": "p", "duration": 4}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_ne!(later["id"], first["id"]);
    let reserves = ledger_entries(&env, &account, "reserve").await;
    assert_eq!(
        reserves, 2,
        "one hold per task created: the first and the one after 24 h"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_identical_submissions_create_one_task_and_hold_once() {
    let env = Env::start().await;
    let account = env.account("100").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let body = json!({"model": "video-fast", "prompt": "race", "seconds": "4"});
    let calls = (0..50).map(|_| {
        env.http
            .post(env.url("/v1/videos"))
            .bearer_auth(&key)
            .header("idempotency-key", "race-1")
            .json(&body)
            .send()
    });
    let answers = futures_util::future::join_all(calls).await;
    let mut ids = std::collections::HashSet::new();
    let mut replayed = 0;
    for a in answers {
        let a = a.unwrap();
        assert_eq!(a.status(), 200);
        replayed += a.headers().get("idempotency-replayed").is_some() as usize;
        let v: Value = a.json().await.unwrap();
        ids.insert(v["id"].as_str().unwrap().to_string());
    }
    assert_eq!(ids.len(), 1, "one task");
    assert_eq!(replayed, 49);
    let reserves = ledger_entries(&env, &account, "reserve").await;
    assert_eq!(reserves, 1, "held once");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_refusals_and_expiry_refund_everything() {
    let env = Env::start().await;
    let account = env.account("100").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let failed = submit_ok(&env, &key, video("boom [[sim:fail]]", "4")).await;
    let rejected = submit_ok(&env, &key, video("bad [[sim:reject]]", "4")).await;
    let stuck = submit_ok(&env, &key, video("slow [[sim:never]]", "4")).await;
    let good = submit_ok(&env, &key, video("fine", "8")).await;

    let f = env.run_to_end(&key, failed["id"].as_str().unwrap()).await;
    assert_eq!(f["status"], "failed");
    assert_eq!(f["error"]["code"], "video_generation_failed");
    assert!(f["error"]["message"].is_string());
    assert_eq!(f["billing"]["settled"], 0.0);
    assert_eq!(f["billing"]["refunded"], 5.6);
    assert!(f["actual_duration"].is_null());
    let r = env.run_to_end(&key, rejected["id"].as_str().unwrap()).await;
    assert_eq!(r["status"], "rejected");
    assert_eq!(r["error"]["code"], "content_rejected");
    assert_eq!(r["billing"]["quota"]["settled"], 0);
    let g = env.run_to_end(&key, good["id"].as_str().unwrap()).await;
    assert_eq!(g["status"], "completed");

    // Six hours without a final state: expired, reversed.
    let s_id = stuck["id"].as_str().unwrap();
    env.poll().await;
    assert_eq!(env.task(&key, s_id).await["status"], "in_progress");
    env.clock.advance_secs(6 * 3600);
    env.poll().await;
    let s = env.task(&key, s_id).await;
    assert_eq!(s["status"], "expired");
    assert_eq!(s["error"]["code"], "task_expired");
    assert_eq!(s["billing"]["refunded"], 5.6);

    let (balance, sum) = env.balance(&account).await;
    assert_eq!(balance, sum, "balance == Σ ledger");
    assert_eq!(
        balance,
        50_000_000 - 8 * 700_000,
        "only the completed 8 s were charged"
    );
    let (_, holds) = env
        .admin(reqwest::Method::GET, "/admin/v1/holds", None)
        .await;
    assert_eq!(holds["data"], json!([]));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_are_private_to_their_account_and_cancel_is_501() {
    let env = Env::start().await;
    let key = env.token_with(&env.account("100").await, json!({})).await.1;
    let t = submit_ok(&env, &key, video("mine", "4")).await;
    let id = t["id"].as_str().unwrap();
    let stranger = env.key().await;
    let resp = env.get(&stranger, &format!("/v1/videos/{id}")).await;
    assert_eq!(envelope(resp, 404).await.0, "not_found");
    let resp = env.get(&key, "/v1/videos/task_unknown").await;
    assert_eq!(envelope(resp, 404).await.0, "not_found");
    let resp = env
        .post(&key, &format!("/v1/videos/{id}/cancel"), json!({}))
        .await;
    let (code, msg) = envelope(resp, 501).await;
    assert_eq!(code, "upstream_cancel_unsupported");
    assert!(msg.contains("cancel"));
    // An unfinished task tells pollers when to come back.
    let resp = env.get(&key, &format!("/v1/videos/{id}")).await;
    assert!(resp.headers().get("openai-poll-after-ms").is_some());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_is_downloadable_in_its_window_and_at_most_max_downloads_times() {
    let env = Env::with(Setup {
        video: "max_downloads = 3".into(),
        ..Setup::default()
    })
    .await;
    let account = env.account("100").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let t = submit_ok(&env, &key, video("content", "4")).await;
    let id = t["id"].as_str().unwrap().to_string();
    let get = |range: Option<&'static str>| {
        let mut r = env
            .http
            .get(env.url(&format!("/v1/videos/{id}/content")))
            .bearer_auth(&key)
            .header("accept", "application/binary");
        if let Some(range) = range {
            r = r.header("range", range);
        }
        r.send()
    };
    let (code, _) = envelope(get(None).await.unwrap(), 410).await;
    assert_eq!(code, "artifact_gone", "not before completion");
    env.run_to_end(&key, &id).await;

    let full = get(None).await.unwrap();
    assert_eq!(full.status(), 200);
    assert_eq!(full.headers()["content-type"], "video/mp4");
    let bytes = full.bytes().await.unwrap();
    assert!(bytes.len() > 100 && &bytes[4..8] == b"ftyp", "an MP4");
    let part = get(Some("bytes=0-99")).await.unwrap();
    assert_eq!(part.status(), 206);
    assert!(part.headers()["content-range"]
        .to_str()
        .unwrap()
        .starts_with("bytes 0-99/"));
    assert_eq!(part.bytes().await.unwrap(), bytes.slice(0..100));
    let third = get(None).await.unwrap();
    assert_eq!(third.status(), 200);
    let (code, msg) = envelope(get(None).await.unwrap(), 410).await;
    assert_eq!(code, "artifact_gone");
    assert!(msg.contains("3 times"), "{msg}");

    let t2 = submit_ok(&env, &key, video("window", "4")).await;
    let id2 = t2["id"].as_str().unwrap();
    env.run_to_end(&key, id2).await;
    env.clock.advance_secs(86_400);
    let resp = env.get(&key, &format!("/v1/videos/{id2}/content")).await;
    let (code, msg) = envelope(resp, 410).await;
    assert_eq!(code, "artifact_gone");
    assert!(msg.contains("window"), "{msg}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_content_failures_are_502_with_their_own_codes() {
    let env = Env::start().await;
    let account = env.account("100").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let auth = submit_ok(&env, &key, video("x [[sim:content_auth]]", "4")).await;
    let hang = submit_ok(&env, &key, video("y [[sim:content_hang]]", "4")).await;
    for (t, code) in [
        (auth, "artifact_upstream_auth_failed"),
        (hang, "artifact_upstream_timeout"),
    ] {
        let id = t["id"].as_str().unwrap();
        env.run_to_end(&key, id).await;
        let resp = env.get(&key, &format!("/v1/videos/{id}/content")).await;
        assert_eq!(envelope(resp, 502).await.0, code);
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_without_a_working_channel_is_503_and_costs_nothing() {
    // No video adapter loaded: the channel cannot serve.
    let env = Env::with(Setup {
        adapters: vec![("adapters", "openai")],
        ..Setup::default()
    })
    .await;
    let account = env.account("100").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let (code, _) = envelope(submit(&env, &key, video("p", "4")).await, 503).await;
    assert_eq!(code, "no_available_channel");
    assert_eq!(env.balance(&account).await.0, 50_000_000);
    env.stop().await;
}
