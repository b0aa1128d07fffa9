//! The Anthropic and Gemini vendor APIs over HTTP, the per-vendor key
//! schemes, `retry-after` on 429s, truncated streams and recorded usage.

use std::time::Duration;

use serde_json::{json, Value};
use upstream_sim::{SimOptions, SimServer};

const KEY: &str = "sk-sim-test";

async fn sim() -> SimServer {
    upstream_sim::start(
        "127.0.0.1:0".parse().expect("addr"),
        SimOptions {
            api_key: Some(KEY.into()),
            ..SimOptions::default()
        },
    )
    .await
    .expect("start simulator")
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client")
}

fn messages(sim: &SimServer, body: Value) -> reqwest::RequestBuilder {
    http()
        .post(format!("{}/messages", sim.base_url()))
        .header("x-api-key", KEY)
        .header("anthropic-version", "2023-06-01")
        .json(&body)
}

fn gemini(sim: &SimServer, action: &str, body: Value) -> reqwest::RequestBuilder {
    http()
        .post(format!(
            "{}/v1beta/models/sim-gemini:{action}",
            sim.root_url()
        ))
        .header("x-goog-api-key", KEY)
        .json(&body)
}

/// `(event name, data)` of an SSE body.
async fn events(resp: reqwest::Response) -> Vec<(Option<String>, String)> {
    let text = resp.text().await.expect("body");
    text.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let mut name = None;
            let mut data = String::new();
            for line in e.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = Some(n.to_owned());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push_str(d);
                }
            }
            (name, data)
        })
        .collect()
}

#[tokio::test]
async fn anthropic_plain_and_stream() {
    let sim = sim().await;
    let body = json!({"model": "sim-claude", "max_tokens": 100, "system": "be brief",
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [{"role": "user", "content": "hello there friend"}]});
    let v: Value = messages(&sim, body.clone())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["type"], "message");
    assert_eq!(v["stop_reason"], "end_turn");
    assert_eq!(v["content"][0]["type"], "thinking");
    assert_eq!(
        v["content"][0]["signature"],
        upstream_sim::anthropic_signature(v["content"][0]["thinking"].as_str().unwrap())
    );
    assert!(v["content"][1]["text"]
        .as_str()
        .unwrap()
        .starts_with("Simulated reply to: hello there friend."));
    // system (2+1) read from cache; first user turn's 3 words written to it.
    assert_eq!(v["usage"]["cache_read_input_tokens"], 3);
    assert_eq!(v["usage"]["cache_creation_input_tokens"], 3);
    assert_eq!(v["usage"]["input_tokens"], 3 + 4 - 3 - 3);
    assert_eq!(
        sim.requests().last().unwrap().usage.as_ref(),
        Some(&v["usage"])
    );

    let mut stream = body;
    stream["stream"] = json!(true);
    let evs = events(messages(&sim, stream).send().await.unwrap()).await;
    let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_deref().unwrap()).collect();
    assert_eq!(names[..2], ["message_start", "ping"]);
    assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);
    for (n, d) in &evs {
        let d: Value = serde_json::from_str(d).unwrap();
        assert_eq!(d["type"], n.as_deref().unwrap(), "the data names its event");
    }
    assert!(evs.iter().any(|(_, d)| d.contains("signature_delta")));
}

#[tokio::test]
async fn anthropic_headers_and_signatures_are_checked() {
    let sim = sim().await;
    let ok = json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]});
    let no_version = http()
        .post(format!("{}/messages", sim.base_url()))
        .header("x-api-key", KEY)
        .json(&ok)
        .send()
        .await
        .unwrap();
    assert_eq!(no_version.status(), 400);
    let bearer = http()
        .post(format!("{}/messages", sim.base_url()))
        .bearer_auth(KEY)
        .header("anthropic-version", "2023-06-01")
        .json(&ok)
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status(), 401, "the Messages API takes x-api-key");
    let v: Value = bearer.json().await.unwrap();
    assert_eq!(v["error"]["type"], "authentication_error");
    let bad_sig = json!({"model": "m", "max_tokens": 5, "messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "QUFB"}]},
        {"role": "user", "content": "y"}]});
    assert_eq!(messages(&sim, bad_sig).send().await.unwrap().status(), 400);
}

#[tokio::test]
async fn gemini_plain_and_sse() {
    let sim = sim().await;
    let body = json!({"contents": [{"role": "user", "parts": [{"text": "why is the sky blue"}]}],
        "systemInstruction": {"parts": [{"text": "be brief"}]},
        "generationConfig": {"thinking_config": {"include_thoughts": true}}});
    let v: Value = gemini(&sim, "generateContent", body.clone())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let parts = &v["candidates"][0]["content"]["parts"];
    assert_eq!(parts[0]["thought"], true);
    assert_eq!(
        parts[1]["thoughtSignature"],
        upstream_sim::gemini_signature()
    );
    assert_eq!(v["candidates"][0]["finishReason"], "STOP");
    assert_eq!(v["usageMetadata"]["cachedContentTokenCount"], 3);
    assert_eq!(v["usageMetadata"]["thoughtsTokenCount"], 8);

    let resp = http()
        .post(format!(
            "{}/v1beta/models/sim-gemini:streamGenerateContent?alt=sse&key={KEY}",
            sim.root_url()
        ))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "?key= works too");
    let evs = events(resp).await;
    assert!(evs.iter().all(|(n, d)| n.is_none() && d != "[DONE]"));
    let last: Value = serde_json::from_str(&evs.last().unwrap().1).unwrap();
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    assert!(last["usageMetadata"]["promptTokenCount"].is_u64());
    let first: Value = serde_json::from_str(&evs[0].1).unwrap();
    assert!(
        first.get("usageMetadata").is_none(),
        "usage only on the last chunk"
    );
}

#[tokio::test]
async fn every_429_says_when_to_retry() {
    let sim = sim().await;
    let chat = http()
        .post(format!("{}/chat/completions", sim.base_url()))
        .bearer_auth(KEY)
        .json(&json!({"messages": [{"role": "user", "content": "x [[sim:status=429]]"}]}))
        .send()
        .await
        .unwrap();
    let anth = messages(
        &sim,
        json!({"max_tokens": 5, "messages": [{"role": "user", "content": "x [[sim:status=429]]"}]}),
    )
    .send()
    .await
    .unwrap();
    let gem = gemini(
        &sim,
        "generateContent",
        json!({"contents": [{"parts": [{"text": "x [[sim:status=429]]"}]}]}),
    )
    .send()
    .await
    .unwrap();
    for r in [chat, anth, gem] {
        assert_eq!(r.status(), 429);
        assert_eq!(r.headers()["retry-after"], "7");
    }
}

#[tokio::test]
async fn truncated_streams_end_cleanly_without_their_finish_marker() {
    let sim = sim().await;
    let chat = http()
        .post(format!("{}/chat/completions", sim.base_url()))
        .bearer_auth(KEY)
        .json(&json!({"stream": true, "messages": [{"role": "user", "content": "x [[sim:truncate]]"}]}))
        .send()
        .await
        .unwrap();
    let evs = events(chat).await;
    assert_eq!(evs.len(), 4);
    assert!(evs
        .iter()
        .all(|(_, d)| d != "[DONE]" && !d.contains("\"finish_reason\":\"stop\"")));
    let anth = messages(&sim, json!({"max_tokens": 50, "stream": true, "messages": [{"role": "user", "content": "x [[sim:truncate]]"}]}))
        .send()
        .await
        .unwrap();
    let evs = events(anth).await;
    assert_eq!(evs.len(), 4);
    assert!(evs
        .iter()
        .all(|(n, _)| n.as_deref() != Some("message_stop")));
    let gem = gemini(
        &sim,
        "streamGenerateContent?alt=sse",
        json!({"contents": [{"parts": [{"text": "x [[sim:truncate]]"}]}]}),
    )
    .send()
    .await
    .unwrap();
    let evs = events(gem).await;
    assert_eq!(evs.len(), 4);
    assert!(evs.iter().all(|(_, d)| !d.contains("finishReason")));
}
