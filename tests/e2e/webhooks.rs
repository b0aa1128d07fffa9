//! Signed, durable webhooks for video tasks (spec §6, §2.4), against a real
//! HTTP receiver on loopback.

use crate::common::*;
use axum::http::{HeaderMap, StatusCode};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct Hit {
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Hit {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// A webhook receiver: records every delivery and answers from a plan
/// (status, delay), then 200.
#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    pub hits: Arc<Mutex<Vec<Hit>>>,
    plan: Arc<Mutex<VecDeque<(u16, Duration)>>>,
}

impl Receiver {
    pub async fn start() -> Receiver {
        let hits: Arc<Mutex<Vec<Hit>>> = Arc::default();
        let plan: Arc<Mutex<VecDeque<(u16, Duration)>>> = Arc::default();
        let (h, p) = (hits.clone(), plan.clone());
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: HeaderMap, body: axum::body::Bytes| {
                let (h, p) = (h.clone(), p.clone());
                async move {
                    h.lock().unwrap().push(Hit {
                        headers: headers
                            .iter()
                            .map(|(k, v)| {
                                (k.as_str().to_string(), v.to_str().unwrap_or("").to_string())
                            })
                            .collect(),
                        body: body.to_vec(),
                    });
                    let (status, delay) = p
                        .lock()
                        .unwrap()
                        .pop_front()
                        .unwrap_or((200, Duration::ZERO));
                    tokio::time::sleep(delay).await;
                    StatusCode::from_u16(status).unwrap()
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver { url, hits, plan }
    }

    pub fn answer(&self, status: u16, times: usize) {
        let mut p = self.plan.lock().unwrap();
        for _ in 0..times {
            p.push_back((status, Duration::ZERO));
        }
    }

    pub fn answer_slowly(&self, status: u16, delay: Duration) {
        self.plan.lock().unwrap().push_back((status, delay));
    }

    pub fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }

    /// Waits (bounded) until at least `n` deliveries arrived.
    pub async fn wait_for(&self, n: usize) -> Vec<Hit> {
        for _ in 0..500 {
            let h = self.hits();
            if h.len() >= n {
                return h;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("expected {n} deliveries, got {}", self.hits().len());
    }
}

/// Verifies a signature with independent code: Python's `hmac`.
fn python_verifies(secret: &str, timestamp: &str, body: &[u8], signature: &str) -> Option<bool> {
    use std::io::Write;
    let script = "import hmac,hashlib,sys\n\
secret,ts,sig=sys.argv[1:4]\n\
body=sys.stdin.buffer.read()\n\
mac='sha256='+hmac.new(secret.encode(),ts.encode()+b'.'+body,hashlib.sha256).hexdigest()\n\
sys.exit(0 if hmac.compare_digest(mac,sig) else 1)\n";
    let mut child = std::process::Command::new("python3")
        .args(["-c", script, secret, timestamp, signature])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .ok()?;
    child.stdin.take()?.write_all(body).ok()?;
    Some(child.wait().ok()?.success())
}

async fn task_with_hook(env: &Env, key: &str, prompt: &str, hook: Value) -> String {
    let mut body = json!({"model": "video-fast", "prompt": prompt, "seconds": "4"});
    if let (Value::Object(b), Value::Object(h)) = (&mut body, hook) {
        b.extend(h);
    }
    let resp = env.post(key, "/v1/videos", body).await;
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    v["id"].as_str().unwrap().to_string()
}

async fn rich_key(env: &Env) -> String {
    let a = env.account("100").await;
    env.token_with(&a, json!({})).await.1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_task_sends_one_signed_event_that_pythons_hmac_verifies_with_either_secret() {
    let env = Env::start().await;
    let rx = Receiver::start().await;
    let key = rich_key(&env).await;
    let id = task_with_hook(
        &env,
        &key,
        "signed",
        json!({"webhook_url": rx.url, "webhook_secret": "new-secret", "webhook_secret_prev": "old-secret"}),
    )
    .await;
    let task = env.run_to_end(&key, &id).await;
    env.dispatch().await;
    let hits = rx.wait_for(1).await;
    assert_eq!(hits.len(), 1, "exactly one event");
    let hit = &hits[0];
    let ev = hit.json();
    assert!(ev["event_id"].as_str().unwrap().starts_with("evt_"));
    assert_eq!(ev["event"], "video.completed");
    assert_eq!(ev["task_id"], id.as_str());
    assert_eq!(ev["status"], "completed");
    assert_eq!(ev["progress"], "100%");
    assert_eq!(ev["model"], "video-fast");
    assert!(ev["fail_reason"].is_null());
    assert_eq!(ev["created_at"], task["created_at"]);
    assert_eq!(ev["attempt"], 1);
    let ts = hit.header("x-webhook-timestamp").unwrap().to_string();
    assert_eq!(ev["timestamp"].to_string(), ts);
    assert_eq!(hit.header("x-webhook-event-id"), ev["event_id"].as_str());
    assert_eq!(hit.header("x-webhook-signature-algorithm"), Some("sha256"));
    let sig = hit.header("x-webhook-signature").unwrap();
    let prev = hit.header("x-webhook-signature-prev").unwrap();
    assert!(sig.starts_with("sha256=") && prev.starts_with("sha256=") && sig != prev);
    // The body sent is byte for byte the body signed.
    assert!(gateway::webhooks::signer::verify(
        "new-secret",
        ts.parse().unwrap(),
        &hit.body,
        sig,
        ts.parse().unwrap(),
        300
    ));
    match (
        python_verifies("new-secret", &ts, &hit.body, sig),
        python_verifies("old-secret", &ts, &hit.body, prev),
        python_verifies("old-secret", &ts, &hit.body, sig),
    ) {
        (Some(a), Some(b), Some(c)) => assert!(a && b && !c, "python: new={a} prev={b} cross={c}"),
        _ => eprintln!("python3 not available: independent signature check skipped"),
    }
    // Nothing more is sent.
    env.clock.advance_secs(100_000);
    env.dispatch().await;
    assert_eq!(rx.hits().len(), 1);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_receiver_gets_the_whole_retry_schedule_then_the_event_is_dead() {
    let env = Env::start().await;
    let rx = Receiver::start().await;
    rx.answer(500, 7);
    let key = rich_key(&env).await;
    let id = task_with_hook(
        &env,
        &key,
        "retry",
        json!({"webhook_url": rx.url, "webhook_secret": "s"}),
    )
    .await;
    env.run_to_end(&key, &id).await;
    env.dispatch().await;
    rx.wait_for(1).await;
    for (n, delay) in [30, 120, 600, 3600, 21_600, 86_400].into_iter().enumerate() {
        env.clock.advance_secs(delay - 1);
        env.dispatch().await;
        assert_eq!(rx.hits().len(), n + 1, "not before the {delay} s delay");
        env.clock.advance_secs(1);
        env.dispatch().await;
        rx.wait_for(n + 2).await;
    }
    let hits = rx.hits();
    assert_eq!(hits.len(), 7, "the first attempt and six retries");
    let first_id = hits[0].json()["event_id"].clone();
    for (i, h) in hits.iter().enumerate() {
        assert_eq!(h.json()["attempt"], i as u64 + 1);
        assert_eq!(h.json()["event_id"], first_id, "the same event every time");
    }
    let (_, dead) = env
        .admin(reqwest::Method::GET, "/admin/v1/webhooks?state=dead", None)
        .await;
    assert_eq!(dead["data"][0]["event_id"], first_id);
    assert_eq!(dead["data"][0]["attempts"], 7);
    env.clock.advance_secs(1_000_000);
    env.dispatch().await;
    assert_eq!(rx.hits().len(), 7, "a dead event is not retried");

    // The console's resend.
    let eid = first_id.as_str().unwrap();
    let (s, _) = env
        .admin(
            reqwest::Method::POST,
            &format!("/admin/v1/webhooks/{eid}/resend"),
            None,
        )
        .await;
    assert_eq!(s, 200);
    env.dispatch().await;
    let hits = rx.wait_for(8).await;
    assert_eq!(hits[7].json()["attempt"], 8);
    let (_, ev) = env
        .admin(
            reqwest::Method::GET,
            &format!("/admin/v1/webhooks/{eid}"),
            None,
        )
        .await;
    assert_eq!(ev["state"], "delivered");

    // Retention: a delivered event is kept 7 days after delivery, then the
    // sweep removes it.
    kept_then_swept(&env, eid, 7 * 86_400).await;
    env.stop().await;
}

async fn sweep(env: &Env) -> Value {
    let (status, swept) = env
        .admin(reqwest::Method::POST, "/admin/v1/retention/sweep", None)
        .await;
    assert_eq!(status, 200);
    swept
}

/// The event survives a sweep one second before `kept_secs` from now, and
/// is removed by the sweep at `kept_secs`.
async fn kept_then_swept(env: &Env, event_id: &str, kept_secs: i64) {
    let path = format!("/admin/v1/webhooks/{event_id}");
    env.clock.advance_secs(kept_secs - 1);
    assert_eq!(sweep(env).await["webhook_events"], 0);
    assert_eq!(env.admin(reqwest::Method::GET, &path, None).await.0, 200);
    env.clock.advance_secs(1);
    assert_eq!(sweep(env).await["webhook_events"], 1);
    assert_eq!(env.admin(reqwest::Method::GET, &path, None).await.0, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_event_is_kept_thirty_days_then_swept() {
    let env = Env::start().await;
    let rx = Receiver::start().await;
    rx.answer(500, 7);
    let key = rich_key(&env).await;
    let id = task_with_hook(&env, &key, "dies", json!({"webhook_url": rx.url})).await;
    env.run_to_end(&key, &id).await;
    env.dispatch().await;
    rx.wait_for(1).await;
    for (n, delay) in [30, 120, 600, 3600, 21_600, 86_400].into_iter().enumerate() {
        env.clock.advance_secs(delay);
        env.dispatch().await;
        rx.wait_for(n + 2).await;
    }
    let (_, dead) = env
        .admin(reqwest::Method::GET, "/admin/v1/webhooks?state=dead", None)
        .await;
    let eid = dead["data"][0]["event_id"].as_str().unwrap().to_string();
    assert!(dead["data"][0]["dead_at"].is_i64());
    kept_then_swept(&env, &eid, 30 * 86_400).await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_500s_then_200_is_exactly_four_attempts() {
    let env = Env::start().await;
    let rx = Receiver::start().await;
    rx.answer(500, 3);
    let key = rich_key(&env).await;
    let id = task_with_hook(
        &env,
        &key,
        "four",
        json!({"webhook_url": rx.url, "webhook_secret": "s"}),
    )
    .await;
    env.run_to_end(&key, &id).await;
    for _ in 0..10 {
        env.dispatch().await;
        env.clock.advance_secs(86_400);
    }
    let hits = rx.hits();
    assert_eq!(hits.len(), 4);
    assert_eq!(hits[3].json()["attempt"], 4);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_sent_for_a_task_without_a_url() {
    let env = Env::start().await;
    let rx = Receiver::start().await;
    let key = rich_key(&env).await;
    let id = task_with_hook(&env, &key, "quiet", json!({})).await;
    env.run_to_end(&key, &id).await;
    env.dispatch().await;
    let (_, all) = env
        .admin(reqwest::Method::GET, "/admin/v1/webhooks", None)
        .await;
    assert_eq!(all["data"], json!([]));
    assert!(rx.hits().is_empty());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_and_expired_tasks_are_reported_as_video_failed() {
    let env = Env::start().await;
    let rx = Receiver::start().await;
    let key = rich_key(&env).await;
    let hook = json!({"webhook_url": rx.url, "webhook_secret": "s"});
    let rejected = task_with_hook(&env, &key, "no [[sim:reject]]", hook.clone()).await;
    let failed = task_with_hook(&env, &key, "no [[sim:fail]]", hook.clone()).await;
    let stuck = task_with_hook(&env, &key, "zz [[sim:never]]", hook).await;
    env.run_to_end(&key, &rejected).await;
    env.run_to_end(&key, &failed).await;
    env.clock.advance_secs(6 * 3600);
    env.poll().await;
    env.dispatch().await;
    let hits = rx.wait_for(3).await;
    let by_task = |id: &str| {
        hits.iter()
            .map(Hit::json)
            .find(|e| e["task_id"] == id)
            .unwrap()
    };
    for (id, prefix) in [
        (&rejected, "content_rejected: "),
        (&failed, "video_generation_failed: "),
        (&stuck, "task_expired: "),
    ] {
        let e = by_task(id);
        assert_eq!(e["event"], "video.failed");
        assert_eq!(e["status"], "failed");
        assert!(
            e["fail_reason"].as_str().unwrap().starts_with(prefix),
            "{e}"
        );
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_targets_work_and_a_url_without_secret_is_sent_unsigned() {
    let env = Env::start().await;
    let rx = Receiver::start().await;
    let key = rich_key(&env).await;
    let resp = env
        .http
        .post(env.url("/v1/videos"))
        .bearer_auth(&key)
        .header("x-webhook-url", &rx.url)
        .header("x-webhook-secret", "from-header")
        .json(&json!({"model": "video-fast", "prompt": "headers"}))
        .send()
        .await
        .unwrap();
    let signed = resp.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let unsigned = task_with_hook(&env, &key, "plain", json!({"webhook_url": rx.url})).await;
    env.run_to_end(&key, &signed).await;
    env.run_to_end(&key, &unsigned).await;
    env.dispatch().await;
    let hits = rx.wait_for(2).await;
    for h in hits {
        let e = h.json();
        if e["task_id"] == signed.as_str() {
            let ts = h.header("x-webhook-timestamp").unwrap().parse().unwrap();
            assert!(gateway::webhooks::signer::verify(
                "from-header",
                ts,
                &h.body,
                h.header("x-webhook-signature").unwrap(),
                ts,
                300
            ));
        } else {
            assert!(h.header("x-webhook-signature").is_none());
            assert!(h.header("x-webhook-event-id").is_some());
        }
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_and_metadata_targets_are_refused_at_submission() {
    let strict = Env::with(Setup {
        webhooks: "allow_private_targets = false".into(),
        ..Setup::default()
    })
    .await;
    let account = strict.account("100").await;
    let (_, key) = strict.token_with(&account, json!({})).await;
    for url in [
        "http://127.0.0.1:9/hook",
        "http://10.0.0.5/hook",
        "http://[::1]/x",
        "http://169.254.169.254/latest",
    ] {
        let resp = strict
            .post(
                &key,
                "/v1/videos",
                json!({"model": "video-fast", "prompt": "p", "webhook_url": url}),
            )
            .await;
        assert_eq!(resp.status(), 400, "{url}");
        let v: Value = resp.json().await.unwrap();
        assert!(
            v["message"]
                .as_str()
                .unwrap()
                .starts_with("invalid_request:"),
            "{v}"
        );
    }
    assert_eq!(
        strict.balance(&account).await.0,
        50_000_000,
        "nothing charged"
    );
    strict.stop().await;

    // The operator setting allows private receivers, never cloud metadata.
    let env = Env::start().await;
    let key = rich_key(&env).await;
    let resp = env.post(&key, "/v1/videos", json!({"model": "video-fast", "prompt": "p", "webhook_url": "http://169.254.169.254/x"})).await;
    assert_eq!(resp.status(), 400);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_receiver_times_out_and_delays_no_one_else() {
    let env = Env::with(Setup {
        webhooks: "timeout_secs = 1".into(),
        ..Setup::default()
    })
    .await;
    let slow = Receiver::start().await;
    slow.answer_slowly(200, Duration::from_secs(5));
    let fast = Receiver::start().await;
    let key = rich_key(&env).await;
    let a = task_with_hook(&env, &key, "slow", json!({"webhook_url": slow.url})).await;
    let b = task_with_hook(&env, &key, "fast", json!({"webhook_url": fast.url})).await;
    env.run_to_end(&key, &a).await;
    env.run_to_end(&key, &b).await;
    let started = std::time::Instant::now();
    let dispatching = env.dispatch();
    let fast_hit = async {
        fast.wait_for(1).await;
        started.elapsed()
    };
    let (_, fast_after) = tokio::join!(dispatching, fast_hit);
    assert!(
        fast_after < Duration::from_secs(1),
        "the fast receiver waited {fast_after:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the slow one was cut off by the timeout"
    );
    // The slow delivery is recorded as a failed first attempt, due again later.
    let mut ev = Value::Null;
    for _ in 0..300 {
        let (_, pending) = env
            .admin(
                reqwest::Method::GET,
                "/admin/v1/webhooks?state=pending",
                None,
            )
            .await;
        ev = pending["data"][0].clone();
        if ev["attempts"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(ev["attempts"], 1, "{ev}");
    assert!(
        ev["last_error"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("time"),
        "{ev}"
    );
    env.stop().await;
}
