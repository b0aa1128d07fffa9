//! Durability: the gateway is killed with SIGKILL in the middle of a load of
//! billed calls and restarted. No charge a client saw settle is lost, no hold
//! is left open, and the ledger still adds up.

use crate::common::*;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_load_loses_no_settled_charge_and_leaves_no_hold() {
    let sim = start_sim().await;
    let dir = tempfile::tempdir().unwrap();
    let config = process_config(dir.path(), &sim.base_url(), "");
    let http = reqwest::Client::new();

    let gw = GatewayProcess::start(&config);
    let (account, key) = gw.account_and_key(&http, "100").await;

    // Sixteen clients call back to back; the gateway is killed once a few
    // hundred calls have completed, with many more in flight.
    let seen: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut workers = Vec::new();
    for w in 0..16 {
        let (http, base, key, seen, stop) = (
            http.clone(),
            gw.public.clone(),
            key.clone(),
            seen.clone(),
            stop.clone(),
        );
        workers.push(tokio::spawn(async move {
            for n in 0..10_000 {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                if let Some(ok) = billed_call(&http, &base, &key, w * 10_000 + n).await {
                    seen.lock().unwrap().push(ok);
                }
            }
        }));
    }
    let started = Instant::now();
    while seen.lock().unwrap().len() < 300 && started.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    gw.kill();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in workers {
        let _ = w.await;
    }
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.len() >= 300,
        "the load ran ({} calls completed)",
        seen.len()
    );

    let gw = GatewayProcess::start(&config);
    let books = gw.books(&http, &account).await;
    assert_eq!(books.holds, json!([]), "no hold survives the restart");
    let a = &books.account;
    assert_eq!(a["balance"], a["ledger_sum"]);
    let rows = &books.usage;
    for (rid, u) in &seen {
        let row = rows
            .iter()
            .find(|r| r["request_id"] == rid.as_str())
            .unwrap_or_else(|| {
                panic!("the charge for {rid}, which the client saw complete, was lost")
            });
        assert_eq!(row["cost"], expected_cost(u), "{rid}");
    }
    let charged: i64 = rows.iter().map(|r| r["cost"].as_i64().unwrap()).sum();
    assert_eq!(50_000_000 - a["balance"].as_i64().unwrap(), charged);
    // More rows than completed calls: calls in flight at the kill whose
    // settlement was logged but whose answer never reached the client.
    eprintln!(
        "crash test: {} calls completed before the kill, {} charged after restart",
        seen.len(),
        rows.len()
    );
    gw.kill();
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn video_tasks_and_webhook_events_survive_sigkill() {
    use crate::webhooks::Receiver;
    let sim = start_sim().await;
    let rx = Receiver::start().await;
    // The first delivery hangs: the gateway is killed in the middle of it.
    rx.answer_slowly(200, Duration::from_secs(30));
    let dir = tempfile::tempdir().unwrap();
    let config = process_config(dir.path(), &sim.base_url(), "");
    let http = reqwest::Client::new();
    let post = |gw: &GatewayProcess, path: &str, body: Value| {
        let (http, base) = (http.clone(), gw.admin.clone());
        let path = path.to_string();
        async move { admin_at(&http, &base, reqwest::Method::POST, &path, Some(body)).await }
    };

    let gw = GatewayProcess::start(&config);
    let (account, key) = gw.account_and_key(&http, "100").await;
    let submit = |gw: &GatewayProcess, body: Value| {
        let (http, base, key) = (http.clone(), gw.public.clone(), key.clone());
        async move {
            let v: Value = http
                .post(format!("http://{base}/v1/videos"))
                .bearer_auth(&key)
                .json(&body)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            v["id"].as_str().unwrap().to_string()
        }
    };
    let hooked = submit(&gw, json!({"model": "video-fast", "prompt": "hooked", "webhook_url": rx.url, "webhook_secret": "s"})).await;
    let stuck = submit(
        &gw,
        json!({"model": "video-fast", "prompt": "slow [[sim:never]]"}),
    )
    .await;
    // Drive the poller until the hooked task completes; its event's first
    // delivery then starts (and hangs in the receiver).
    for _ in 0..10 {
        post(&gw, "/admin/v1/clock/advance", json!({"secs": 5})).await;
        post(&gw, "/admin/v1/video/poll", json!({})).await;
    }
    let first = rx.wait_for(1).await;
    let event_id = first[0].json()["event_id"].clone();
    // One more task, accepted but not yet sent upstream when the gateway dies.
    let queued = submit(
        &gw,
        json!({"model": "video-fast", "prompt": "queued", "seconds": "8"}),
    )
    .await;
    gw.kill();

    let gw = GatewayProcess::start(&config);
    let task = |id: &str| {
        let (http, base, key, id) = (http.clone(), gw.public.clone(), key.clone(), id.to_string());
        async move {
            let v: Value = http
                .get(format!("http://{base}/v1/videos/{id}"))
                .bearer_auth(&key)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            v
        }
    };
    assert_eq!(task(&hooked).await["status"], "completed");
    // The event survived: delivered again, same id, as its first recorded
    // attempt. (The restarted manual clock starts at real time, behind where
    // the first run had moved it.)
    post(&gw, "/admin/v1/clock/advance", json!({"secs": 120})).await;
    post(&gw, "/admin/v1/webhooks/dispatch", json!({})).await;
    let hits = rx.wait_for(2).await;
    assert_eq!(hits[1].json()["event_id"], event_id);
    assert_eq!(hits[1].json()["attempt"], 1);
    // In-flight tasks resume: the queued one completes, the stuck one expires.
    for _ in 0..10 {
        post(&gw, "/admin/v1/clock/advance", json!({"secs": 5})).await;
        post(&gw, "/admin/v1/video/poll", json!({})).await;
    }
    assert_eq!(task(&queued).await["status"], "completed");
    assert_eq!(task(&stuck).await["status"], "in_progress");
    post(&gw, "/admin/v1/clock/advance", json!({"secs": 6 * 3600})).await;
    post(&gw, "/admin/v1/video/poll", json!({})).await;
    assert_eq!(task(&stuck).await["status"], "expired");
    let a = admin_at(
        &http,
        &gw.admin,
        reqwest::Method::GET,
        &format!("/admin/v1/accounts/{account}"),
        None,
    )
    .await;
    assert_eq!(a["balance"], a["ledger_sum"]);
    assert_eq!(
        a["balance"],
        50_000_000 - 4 * 700_000 - 8 * 700_000,
        "the two completed tasks, nothing else"
    );
    let holds = admin_at(
        &http,
        &gw.admin,
        reqwest::Method::GET,
        "/admin/v1/holds",
        None,
    )
    .await;
    assert_eq!(holds["data"], json!([]));
    gw.kill();
    sim.shutdown().await;
}
