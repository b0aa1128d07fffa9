//! A gateway with one runtime thread (`worker_threads = 1`, tokio's
//! current-thread scheduler, as the bench runs it): every task of the
//! process, from accepting connections to the background jobs, runs on that
//! one thread. It serves concurrent plain and streamed calls, lets the streams
//! in flight finish when told to stop, and its books add up after a restart.

use crate::common::*;
use serde_json::json;
use std::time::Duration;

const ONE_THREAD: &str = "worker_threads = 1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_runtime_thread_serves_concurrent_calls_drains_on_sigterm_and_keeps_the_books() {
    let sim = start_sim().await;
    let dir = tempfile::tempdir().unwrap();
    let config = process_config_full(dir.path(), &sim.base_url(), ONE_THREAD, "", "");
    let http = reqwest::Client::new();
    let mut gw = GatewayProcess::start(&config);
    let (account, key) = gw.account_and_key(&http, "100").await;

    // Twelve clients at once (every third call streamed): all complete.
    let mut clients = Vec::new();
    for c in 0..12 {
        let (http, base, key) = (http.clone(), gw.public.clone(), key.clone());
        clients.push(tokio::spawn(async move {
            let mut usages = Vec::new();
            for n in 0..15 {
                let i = c * 15 + n;
                let (_, usage) = billed_call(&http, &base, &key, i)
                    .await
                    .unwrap_or_else(|| panic!("call {i} did not complete"));
                usages.push(usage);
            }
            usages
        }));
    }
    let mut usages = Vec::new();
    for c in clients {
        usages.extend(c.await.unwrap());
    }
    assert_eq!(usages.len(), 180);

    // Four slow streams are in flight (their first chunk has arrived) when
    // the process is told to stop: each still ends with `[DONE]`, then the
    // process exits cleanly.
    let slow = "drain me [[sim:words=12,delta_delay_ms=25]]";
    let mut streams = Vec::new();
    let (started_tx, mut started_rx) = tokio::sync::mpsc::channel::<()>(4);
    for _ in 0..4 {
        let body = json!({"model": "gpt-4o-mini", "max_tokens": 200, "stream": true,
            "messages": [{"role": "user", "content": slow}]});
        let resp = http
            .post(format!("http://{}/v1/chat/completions", gw.public))
            .bearer_auth(&key)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let started = started_tx.clone();
        streams.push(tokio::spawn(async move {
            let mut resp = resp;
            let mut text = String::new();
            let mut told = false;
            while let Ok(Some(chunk)) = resp.chunk().await {
                text.push_str(&String::from_utf8_lossy(&chunk));
                if !told && text.contains("data: ") {
                    told = true;
                    let _ = started.send(()).await;
                }
            }
            text
        }));
    }
    for _ in 0..4 {
        tokio::time::timeout(Duration::from_secs(10), started_rx.recv())
            .await
            .expect("every slow stream started");
    }
    gw.signal("TERM");
    for s in streams {
        let text = s.await.unwrap();
        let usage = finished_stream_usage(&text)
            .unwrap_or_else(|| panic!("a stream in flight at SIGTERM did not finish: {text}"));
        usages.push(usage);
    }
    let status = gw.exit_within(Duration::from_secs(15)).await;
    assert!(
        status.is_some_and(|s| s.success()),
        "the process exited cleanly: {status:?}"
    );

    // Restarted (one thread again): no hold is left, the ledger adds up and
    // every completed call is charged what its usage says, once.
    let gw = GatewayProcess::start(&config);
    let books = gw.books(&http, &account).await;
    assert_eq!(books.holds, json!([]), "no hold survives the restart");
    let (a, rows) = (&books.account, &books.usage);
    assert_eq!(a["balance"], a["ledger_sum"]);
    assert_eq!(rows.len(), usages.len(), "one usage row per completed call");
    let expected: i64 = usages.iter().map(expected_cost).sum();
    let charged: i64 = rows.iter().map(|r| r["cost"].as_i64().unwrap()).sum();
    assert_eq!(charged, expected);
    assert_eq!(50_000_000 - a["balance"].as_i64().unwrap(), charged);
    gw.kill();
    sim.shutdown().await;
}
