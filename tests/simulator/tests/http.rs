//! In-process HTTP tests: the simulator as the gateway's tests will use it.

use std::future::Future;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use serde_json::{json, Value};
use upstream_sim::{Fault, SimServer};

mod common;
use common::{sim, within, KEY};

/// Every test is bounded: a regression must fail, not hang CI.
async fn bounded<T>(f: impl Future<Output = T>) -> T {
    within(10, f).await
}

fn chat(sim: &SimServer, body: &Value) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .post(format!("{}/chat/completions", sim.base_url()))
        .bearer_auth(KEY)
        .json(body)
}

fn ask(text: &str) -> Value {
    json!({"model": "sim-chat", "messages": [{"role": "user", "content": text}]})
}

/// Reads a whole SSE body and returns its `data:` payloads.
async fn sse_payloads(resp: reqwest::Response) -> (Vec<String>, usize) {
    let mut reads = 0;
    let mut raw = Vec::new();
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        raw.extend_from_slice(&chunk.expect("body chunk"));
        reads += 1;
    }
    let text = String::from_utf8(raw).expect("utf-8 stream");
    let payloads = text
        .split("\n\n")
        .filter_map(|ev| ev.strip_prefix("data: "))
        .map(str::to_owned)
        .collect();
    (payloads, reads)
}

#[tokio::test]
async fn plain_completion_is_deterministic_and_recorded() {
    bounded(async {
        let sim = sim().await;
        let body = json!({"model": "gpt-whatever", "max_tokens": 4, "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hello there simulator"}]});
        let resp = chat(&sim, &body).send().await.expect("send");
        assert_eq!(resp.status(), 200);
        let v: Value = resp.json().await.expect("json");
        assert_eq!(v["object"], "chat.completion");
        assert_eq!(v["model"], "gpt-whatever");
        assert_eq!(v["id"], "chatcmpl-sim-1");
        assert_eq!(
            v["choices"][0]["message"]["content"],
            "Simulated reply to: hello"
        );
        assert_eq!(v["choices"][0]["finish_reason"], "length");
        assert_eq!(
            v["usage"],
            json!({"prompt_tokens": 7, "completion_tokens": 4, "total_tokens": 11,
                   "prompt_tokens_details": {"cached_tokens": 3},
                   "completion_tokens_details": {"reasoning_tokens": 0}})
        );

        let recorded = sim.requests();
        assert_eq!(recorded.len(), 1);
        assert_eq!(recorded[0].method, "POST");
        assert_eq!(recorded[0].path, "/v1/chat/completions");
        assert_eq!(
            recorded[0].header("authorization"),
            Some("Bearer sk-sim-test")
        );
        assert_eq!(recorded[0].json(), Some(body));
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn streamed_with_usage() {
    bounded(async {
        let sim = sim().await;
        let body = json!({"model": "sim-reasoner", "stream": true, "max_tokens": 10,
            "stream_options": {"include_usage": true},
            "messages": [{"role": "user", "content": "think hard"}]});
        let resp = chat(&sim, &body).send().await.expect("send");
        assert_eq!(resp.status(), 200);
        assert_eq!(
            resp.headers()["content-type"].to_str().expect("ascii"),
            "text/event-stream"
        );
        let (payloads, reads) = sse_payloads(resp).await;
        assert_eq!(payloads.last().map(String::as_str), Some("[DONE]"));
        let chunks: Vec<Value> = payloads[..payloads.len() - 1]
            .iter()
            .map(|p| serde_json::from_str(p).expect("chunk json"))
            .collect();
        // role + 8 reasoning + 2 content + finish + usage
        assert_eq!(chunks.len(), 13);
        assert!(reads > 1, "events should arrive in separate reads");
        let field = |f: &str| -> String {
            chunks
                .iter()
                .filter_map(|c| c["choices"][0]["delta"][f].as_str())
                .collect()
        };
        assert_eq!(
            field("reasoning_content"),
            "Let me think about this step by step."
        );
        assert_eq!(field("content"), "Simulated reply");
        assert!(chunks.iter().all(|c| c["id"] == chunks[0]["id"]));
        assert_eq!(chunks[11]["choices"][0]["finish_reason"], "length");
        assert!(chunks[..12].iter().all(|c| c["usage"].is_null()));
        assert_eq!(chunks[12]["choices"], json!([]));
        assert_eq!(chunks[12]["usage"]["completion_tokens"], 10);
        assert_eq!(
            chunks[12]["usage"]["completion_tokens_details"]["reasoning_tokens"],
            8
        );
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn queued_faults_apply_in_order() {
    bounded(async {
        let sim = sim().await;
        sim.push_fault(Fault::Status(429), 1);
        let control = reqwest::Client::new()
            .post(format!("http://{}/_sim/faults", sim.addr()))
            .json(&json!({"fault": "status", "status": "429-quota"}))
            .send()
            .await
            .expect("control");
        assert_eq!(control.status(), 200);

        let first = chat(&sim, &ask("hi")).send().await.expect("send");
        assert_eq!(first.status(), 429);
        let v: Value = first.json().await.expect("json");
        assert_eq!(v["error"]["type"], "rate_limit_error");
        assert_eq!(v["error"]["code"], "rate_limit_exceeded");

        let second = chat(&sim, &ask("hi")).send().await.expect("send");
        assert_eq!(second.status(), 429);
        let v: Value = second.json().await.expect("json");
        assert_eq!(v["error"]["code"], "insufficient_quota");

        let third = chat(&sim, &ask("hi")).send().await.expect("send");
        assert_eq!(third.status(), 200);
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn wrong_key_is_rejected_and_still_recorded() {
    bounded(async {
        let sim = sim().await;
        let resp = reqwest::Client::new()
            .get(format!("{}/models", sim.base_url()))
            .bearer_auth("sk-wrong")
            .send()
            .await
            .expect("send");
        assert_eq!(resp.status(), 401);
        let v: Value = resp.json().await.expect("json");
        assert_eq!(
            v,
            json!({"error": {"message": "Incorrect API key provided.",
                "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}})
        );
        let recorded = sim.requests();
        assert_eq!(recorded.len(), 1);
        assert_eq!(recorded[0].header("authorization"), Some("Bearer sk-wrong"));

        let ok = reqwest::Client::new()
            .get(format!("{}/models", sim.base_url()))
            .bearer_auth(KEY)
            .send()
            .await
            .expect("send");
        let v: Value = ok.json().await.expect("json");
        assert_eq!(v["data"][1]["id"], "sim-reasoner");
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn control_endpoints_list_and_clear_requests() {
    bounded(async {
        let sim = sim().await;
        let http = reqwest::Client::new();
        let bad = chat(&sim, &json!({"model": "x"}))
            .send()
            .await
            .expect("send");
        assert_eq!(bad.status(), 400);
        let missing = http
            .get(format!("{}/nope?x=1", sim.base_url()))
            .bearer_auth(KEY)
            .send()
            .await
            .expect("send");
        assert_eq!(missing.status(), 404);

        let control = format!("http://{}/_sim/requests", sim.addr());
        let list: Value = http
            .get(&control)
            .send()
            .await
            .expect("list")
            .json()
            .await
            .expect("json");
        let list = list.as_array().expect("array");
        assert_eq!(list.len(), 2, "control calls are not recorded: {list:?}");
        assert_eq!(list[0]["body"], r#"{"model":"x"}"#);
        assert_eq!(list[0]["headers"]["authorization"], "Bearer sk-sim-test");
        assert_eq!(list[1]["path"], "/v1/nope?x=1");

        let cleared = http.delete(&control).send().await.expect("clear");
        assert!(cleared.status().is_success());
        assert!(sim.requests().is_empty());
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn cut_aborts_mid_body() {
    bounded(async {
        let sim = sim().await;
        let resp = chat(&sim, &ask("please [[sim:cut]]"))
            .send()
            .await
            .expect("headers");
        assert_eq!(resp.status(), 200);
        assert!(resp.bytes().await.is_err(), "non-streamed body must fail");

        sim.push_fault(Fault::Cut, 1);
        let mut body = ask("please");
        body["stream"] = json!(true);
        let resp = chat(&sim, &body).send().await.expect("headers");
        let mut stream = resp.bytes_stream();
        let mut received = Vec::new();
        let mut failed = false;
        while let Some(item) = stream.next().await {
            match item {
                Ok(b) => received.extend_from_slice(&b),
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        assert!(failed, "streamed body must fail");
        let text = String::from_utf8_lossy(&received);
        assert_eq!(text.matches("data: ").count(), 4, "{text}");
        assert!(!text.contains("[DONE]"));
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn malformed_and_framing_directives() {
    bounded(async {
        let sim = sim().await;
        let resp = chat(&sim, &ask("[[sim:malformed]]"))
            .send()
            .await
            .expect("send");
        assert_eq!(resp.status(), 200);
        assert_eq!(
            resp.text().await.expect("body"),
            r#"{"id":"chatcmpl-broken","choices":["#
        );

        let mut body = ask("hi [[sim:crlf,fragment]] [[sim:comments]]");
        body["stream"] = json!(true);
        let resp = chat(&sim, &body).send().await.expect("send");
        let text = resp.text().await.expect("body");
        assert!(text.starts_with("data: {"));
        assert!(text.contains("\r\n\r\n: keep-alive\r\n\r\ndata: "));
        assert!(text.ends_with("data: [DONE]\r\n\r\n"));
        assert!(!text.replace("\r\n", "").contains('\n'));
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn latency_then_answer() {
    bounded(async {
        let sim = sim().await;
        let started = Instant::now();
        let resp = chat(&sim, &ask("slow [[sim:latency_ms=150]]"))
            .send()
            .await
            .expect("send");
        assert_eq!(resp.status(), 200);
        assert!(started.elapsed() >= Duration::from_millis(150));
        let v: Value = resp.json().await.expect("json");
        let content = v["choices"][0]["message"]["content"].as_str().unwrap_or("");
        assert!(
            content.starts_with("Simulated reply to: slow."),
            "{content}"
        );
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn chunk_delay_paces_every_event() {
    bounded(async {
        let sim = sim().await;
        let mut body = ask("paced [[sim:words=5,chunk_delay_ms=40]]");
        body["stream"] = json!(true);
        let started = Instant::now();
        let resp = chat(&sim, &body).send().await.expect("send");
        assert_eq!(resp.status(), 200);
        let (payloads, reads) = sse_payloads(resp).await;
        // role, 5 words, finish, [DONE]: 7 pauses between 8 events.
        assert_eq!(payloads.len(), 8);
        assert_eq!(payloads.last().map(String::as_str), Some("[DONE]"));
        assert!(started.elapsed() >= Duration::from_millis(7 * 40));
        assert!(
            reads >= 8,
            "each paced event arrives on its own: {reads} reads"
        );
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn delta_delay_paces_from_the_second_delta() {
    bounded(async {
        let sim = sim().await;
        let mut body = ask("paced [[sim:words=4,delta_delay_ms=60]]");
        body["stream"] = json!(true);
        let started = Instant::now();
        let resp = chat(&sim, &body).send().await.expect("send");
        assert_eq!(resp.status(), 200);
        // Arrival time of every read, and what it held.
        let mut reads: Vec<(Duration, String)> = Vec::new();
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.expect("body chunk");
            reads.push((
                started.elapsed(),
                String::from_utf8_lossy(&chunk).into_owned(),
            ));
        }
        let first_delta = reads
            .iter()
            .find(|(_, text)| text.contains(r#""content":"Simulated "#))
            .map(|(t, _)| *t)
            .expect("a first delta");
        let end = reads.last().map(|(t, _)| *t).expect("reads");
        let text: String = reads.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(text.matches("data: ").count(), 1 + 4 + 1 + 1);
        assert!(text.ends_with("data: [DONE]\n\n"));
        // Three pauses after the first delta, none before it.
        assert!(end - first_delta >= Duration::from_millis(3 * 60));
        assert!(
            first_delta < end - first_delta,
            "the first delta came after {first_delta:?}, the rest took {:?}",
            end - first_delta
        );
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn hang_ends_at_shutdown() {
    bounded(async {
        let sim = sim().await;
        sim.push_fault(Fault::Hang, 1);
        let request = chat(&sim, &ask("hello")).send();
        let pending = tokio::spawn(request);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!pending.is_finished(), "hang must not answer");
        let started = Instant::now();
        sim.shutdown().await;
        assert!(started.elapsed() < Duration::from_secs(2));
        // Either a 503 or a dropped connection is fine; it must just end.
        let _ = pending.await;
    })
    .await;
}
