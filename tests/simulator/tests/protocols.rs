//! The Anthropic and Gemini vendor APIs over HTTP, the per-vendor key
//! schemes, `retry-after` on 429s, truncated streams and recorded usage.

use std::time::Duration;

use serde_json::{json, Value};
use upstream_sim::SimServer;

mod common;
use common::{sim, KEY};

/// A request sent, its JSON answer read.
trait JsonAnswer {
    async fn json_answer(self) -> Value;
}

impl JsonAnswer for reqwest::RequestBuilder {
    async fn json_answer(self) -> Value {
        self.send().await.unwrap().json().await.unwrap()
    }
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
    let v: Value = messages(&sim, body.clone()).json_answer().await;
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
        .json_answer()
        .await;
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

/// Every event before the finish marker, then the protocol's error event
/// where the marker would be; the same words as the whole answer's.
#[tokio::test]
async fn streams_that_fail_midway_send_their_text_then_an_error_event() {
    let sim = sim().await;
    let chat = |prompt: &str| {
        http()
            .post(format!("{}/chat/completions", sim.base_url()))
            .bearer_auth(KEY)
            .json(&json!({"stream": true, "messages": [{"role": "user", "content": prompt}]}))
            .send()
    };
    let whole = comparable(events(chat("x").await.unwrap()).await);
    let evs = comparable(events(chat("x [[sim:error_midway]]").await.unwrap()).await);
    // The finishing chunk and `[DONE]` (no usage asked for) are replaced.
    assert_eq!(evs[..evs.len() - 1], whole[..whole.len() - 2]);
    assert!(evs.last().unwrap().1.get("error").is_some());

    let anth = |prompt: &str| {
        messages(
            &sim,
            json!({"max_tokens": 50, "stream": true, "messages": [{"role": "user", "content": prompt}]}),
        )
        .send()
    };
    let whole = comparable(events(anth("x").await.unwrap()).await);
    let evs = comparable(events(anth("x [[sim:error_midway]]").await.unwrap()).await);
    let marker = whole
        .iter()
        .position(|(n, _)| n.as_deref() == Some("message_delta"))
        .unwrap();
    assert_eq!(evs[..evs.len() - 1], whole[..marker]);
    assert_eq!(evs.last().unwrap().0.as_deref(), Some("error"));

    let gem = |prompt: &str| {
        gemini(
            &sim,
            "streamGenerateContent?alt=sse",
            json!({"contents": [{"parts": [{"text": prompt}]}]}),
        )
        .send()
    };
    let whole = comparable(events(gem("x").await.unwrap()).await);
    let evs = comparable(events(gem("x [[sim:error_midway,whole]]").await.unwrap()).await);
    let marker = whole
        .iter()
        .position(|(_, d)| {
            d.get("candidates")
                .is_some_and(|c| c[0].get("finishReason").is_some())
        })
        .unwrap();
    assert_eq!(evs[..evs.len() - 1], whole[..marker]);
    assert!(evs.last().unwrap().1.get("error").is_some());
    // Nothing was reported, so nothing is recorded.
    let failed: Vec<_> = sim
        .requests()
        .into_iter()
        .filter(|r| String::from_utf8_lossy(&r.body).contains("error_midway"))
        .collect();
    assert_eq!(failed.len(), 3);
    assert!(failed.iter().all(|r| r.usage.is_none()));
}

/// Events as JSON without what differs between two answers to the same
/// words: their ids, creation times and Anthropic's opening usage (`[DONE]`
/// as a JSON string).
fn comparable(evs: Vec<(Option<String>, String)>) -> Vec<(Option<String>, Value)> {
    evs.into_iter()
        .map(|(name, data)| {
            let mut v = serde_json::from_str(&data).unwrap_or(Value::String(data));
            if let Some(o) = v.as_object_mut() {
                for key in ["id", "created", "responseId"] {
                    o.remove(key);
                }
                // Anthropic's opening usage counts the prompt, directive and all.
                if let Some(m) = o.get_mut("message").and_then(Value::as_object_mut) {
                    m.remove("id");
                    m.remove("usage");
                }
            }
            (name, v)
        })
        .collect()
}

/// The parsed JSON of each `data:` payload (all of them must be JSON).
fn json_events(evs: &[(Option<String>, String)]) -> Vec<Value> {
    evs.iter()
        .map(|(_, d)| serde_json::from_str(d).expect("event json"))
        .collect()
}

async fn post_fault(sim: &SimServer, spec: Value) {
    let resp = http()
        .post(format!("http://{}/_sim/faults", sim.addr()))
        .json(&spec)
        .send()
        .await
        .expect("queue fault");
    assert_eq!(resp.status(), 200);
}

#[tokio::test]
async fn anthropic_stream_event_sequence_and_block_indexes() {
    let sim = sim().await;
    let body = json!({"model": "sim-reasoner", "max_tokens": 12, "stream": true,
        "messages": [{"role": "user", "content": "tell me more"}]});
    let resp = messages(&sim, body).send().await.unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let evs = events(resp).await;
    assert!(evs.iter().all(|(n, _)| n.is_some()), "every event is named");
    let data = json_events(&evs);
    let names: Vec<&str> = data.iter().map(|d| d["type"].as_str().unwrap()).collect();
    let mut expected = vec!["message_start", "ping", "content_block_start"];
    expected.extend(["content_block_delta"; 9]);
    expected.extend(["content_block_stop", "content_block_start"]);
    expected.extend(["content_block_delta"; 4]);
    expected.extend(["content_block_stop", "message_delta", "message_stop"]);
    assert_eq!(names, expected);
    let start = &data[0]["message"];
    assert_eq!(start["id"], "msg_sim_1");
    assert_eq!(start["content"], json!([]));
    assert!(start["stop_reason"].is_null() && start["stop_sequence"].is_null());
    assert_eq!(start["usage"]["output_tokens"], 1);
    assert_eq!(
        start["usage"]["input_tokens"],
        4 - 3,
        "minus the cache write"
    );
    let thinking: String = data
        .iter()
        .filter_map(|d| d["delta"]["thinking"].as_str())
        .collect();
    assert_eq!(thinking, "Let me think about this step by step.");
    let sig = data
        .iter()
        .find_map(|d| d["delta"]["signature"].as_str())
        .unwrap();
    assert_eq!(sig, upstream_sim::anthropic_signature(&thinking));
    let text: String = data
        .iter()
        .filter_map(|d| d["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, "Simulated reply to: tell");
    let indexes: Vec<u64> = data
        .iter()
        .filter(|d| d["type"] == "content_block_start")
        .map(|d| d["index"].as_u64().unwrap())
        .collect();
    assert_eq!(indexes, [0, 1]);
    let delta = &data[data.len() - 2];
    assert_eq!(delta["delta"]["stop_reason"], "max_tokens");
    assert_eq!(delta["usage"]["output_tokens"], 12);
    let recorded = sim.requests().last().unwrap().usage.clone().unwrap();
    assert_eq!(
        recorded,
        json!({"input_tokens": 1, "output_tokens": 12,
               "cache_creation_input_tokens": 3, "cache_read_input_tokens": 0})
    );
}

#[tokio::test]
async fn anthropic_errors_are_in_its_envelope() {
    let sim = sim().await;
    let ok = json!({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}]});
    let no_version = http()
        .post(format!("{}/messages", sim.base_url()))
        .header("x-api-key", KEY)
        .json(&ok)
        .send()
        .await
        .unwrap();
    let v: Value = no_version.json().await.unwrap();
    assert_eq!(
        v,
        json!({"type": "error", "error": {"type": "invalid_request_error",
               "message": "anthropic-version: header is required"}})
    );
    let no_key = http()
        .post(format!("{}/messages", sim.base_url()))
        .header("anthropic-version", "2023-06-01")
        .json(&ok)
        .send()
        .await
        .unwrap();
    assert_eq!(no_key.status(), 401);
    let no_max = messages(&sim, json!({"messages": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(no_max.status(), 400);
    let v: Value = no_max.json().await.unwrap();
    assert_eq!(v["error"]["type"], "invalid_request_error");
    let overloaded = messages(
        &sim,
        json!({"max_tokens": 5, "messages": [{"role": "user", "content": "x [[sim:status=529]]"}]}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(overloaded.status(), 529);
    let v: Value = overloaded.json().await.unwrap();
    assert_eq!(v["error"]["type"], "overloaded_error");
    // The quota fault: Anthropic's "credit balance" 400.
    post_fault(&sim, json!({"fault": "quota"})).await;
    let broke = messages(&sim, ok).send().await.unwrap();
    assert_eq!(broke.status(), 400);
    let v: Value = broke.json().await.unwrap();
    assert_eq!(
        v["error"]["message"],
        "Your credit balance is too low to access the Anthropic API."
    );
    assert!(sim.requests().iter().all(|r| r.usage.is_none()));
    let unknown = http()
        .post(format!("{}/messages/nope", sim.base_url()))
        .header("x-api-key", KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    let v: Value = unknown.json().await.unwrap();
    assert_eq!(v["error"]["type"], "not_found_error");
}

#[tokio::test]
async fn anthropic_thinking_signature_round_trip() {
    let sim = sim().await;
    let first = json!({"model": "sim-claude", "max_tokens": 100,
        "thinking": {"type": "enabled", "budget_tokens": 2000},
        "messages": [{"role": "user", "content": "why is the sky blue"}]});
    let v: Value = messages(&sim, first.clone()).json_answer().await;
    let mut next = first;
    next["messages"].as_array_mut().unwrap().extend([
        json!({"role": "assistant", "content": v["content"]}),
        json!({"role": "user", "content": "and at sunset"}),
    ]);
    let good = messages(&sim, next.clone()).send().await.unwrap();
    assert_eq!(good.status(), 200);
    let answer: Value = good.json().await.unwrap();
    assert!(answer["content"][1]["text"]
        .as_str()
        .unwrap()
        .starts_with("Simulated reply to: and at sunset."));
    // Thinking and signatures are no prompt text: system-less, so
    // user (5+1) + assistant (the reply's words + 1) + user (3+1).
    let reply = v["content"][1]["text"].as_str().unwrap();
    let prompt = 6 + reply.split_whitespace().count() as u64 + 1 + 4;
    assert_eq!(answer["usage"]["input_tokens"], prompt - 5);
    assert_eq!(answer["usage"]["cache_creation_input_tokens"], 5);

    next["messages"][1]["content"][0]["signature"] = json!("c2ltLXNpZzpub3BlCg==");
    let bad = messages(&sim, next).send().await.unwrap();
    assert_eq!(bad.status(), 400);
    let v: Value = bad.json().await.unwrap();
    assert_eq!(
        v["error"]["message"],
        "Invalid `signature` in `thinking` block"
    );
}

#[tokio::test]
async fn gemini_plain_usage_and_errors() {
    let sim = sim().await;
    let body = json!({"contents": [{"role": "user", "parts": [{"text": "why is the sky blue"}]}],
        "system_instruction": {"parts": [{"text": "be brief"}]},
        "generation_config": {"thinking_config": {"thinking_budget": 0}, "max_output_tokens": 4}});
    let resp = gemini(&sim, "generateContent", body).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["responseId"], "sim-1");
    assert_eq!(v["modelVersion"], "sim-gemini");
    assert_eq!(
        v["candidates"][0],
        json!({"content": {"role": "model", "parts": [{"text": "Simulated reply to: why"}]},
               "finishReason": "MAX_TOKENS", "index": 0})
    );
    assert_eq!(
        v["usageMetadata"],
        json!({"promptTokenCount": 3 + 6, "candidatesTokenCount": 4,
               "totalTokenCount": 13, "cachedContentTokenCount": 3})
    );
    assert_eq!(
        sim.requests().last().unwrap().usage.as_ref(),
        Some(&v["usageMetadata"])
    );

    let bearer = http()
        .post(format!(
            "{}/v1beta/models/sim-gemini:generateContent",
            sim.root_url()
        ))
        .bearer_auth(KEY)
        .json(&json!({"contents": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status(), 400, "Gemini's answer to a bad key");
    let v: Value = bearer.json().await.unwrap();
    assert_eq!(v["error"]["status"], "INVALID_ARGUMENT");
    assert_eq!(v["error"]["code"], 400);

    let unknown = gemini(&sim, "countTokens", json!({"contents": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    let v: Value = unknown.json().await.unwrap();
    assert_eq!(v["error"]["status"], "NOT_FOUND");

    post_fault(&sim, json!({"fault": "quota"})).await;
    let quota = gemini(&sim, "generateContent", json!({"contents": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(quota.status(), 429);
    assert_eq!(quota.headers()["retry-after"], "7");
    let v: Value = quota.json().await.unwrap();
    assert_eq!(v["error"]["status"], "RESOURCE_EXHAUSTED");
    assert!(v["error"]["message"].as_str().unwrap().contains("quota"));
}

#[tokio::test]
async fn gemini_sse_stream_shape() {
    let sim = sim().await;
    let body = json!({"contents": [{"parts": [{"text": "hello [[sim:comments,crlf]]"}]}],
        "generationConfig": {"thinkingConfig": {"includeThoughts": true}, "maxOutputTokens": 10}});
    let resp = gemini(&sim, "streamGenerateContent?alt=sse", body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let text = resp.text().await.unwrap();
    assert!(!text.contains("event:") && !text.contains(": keep-alive") && !text.contains("[DONE]"));
    let chunks: Vec<Value> = text
        .split("\r\n\r\n")
        .filter(|e| !e.is_empty())
        .map(|e| serde_json::from_str(e.strip_prefix("data: ").unwrap()).unwrap())
        .collect();
    assert_eq!(chunks.len(), 8 + 2 + 1);
    assert!(chunks
        .iter()
        .all(|c| c["responseId"] == "sim-1" && c["modelVersion"] == "sim-gemini"));
    let parts: Vec<&Value> = chunks[..10]
        .iter()
        .map(|c| &c["candidates"][0]["content"]["parts"][0])
        .collect();
    assert!(parts[..8].iter().all(|p| p["thought"] == true));
    assert_eq!(
        parts[8]["thoughtSignature"],
        upstream_sim::gemini_signature()
    );
    let last = &chunks[10];
    assert_eq!(last["candidates"][0]["finishReason"], "MAX_TOKENS");
    assert_eq!(
        last["usageMetadata"],
        // The directive is prompt text too: 2 words + 1.
        json!({"promptTokenCount": 3, "candidatesTokenCount": 2,
               "totalTokenCount": 13, "thoughtsTokenCount": 8})
    );
    assert!(chunks[..10]
        .iter()
        .all(|c| c.get("usageMetadata").is_none()));

    // Without alt=sse: the same chunks as one JSON array.
    let array: Value = gemini(
        &sim,
        "streamGenerateContent",
        json!({"contents": [{"parts": [{"text": "hello"}]}]}),
    )
    .json_answer()
    .await;
    let array = array.as_array().unwrap();
    assert_eq!(
        array.last().unwrap()["candidates"][0]["finishReason"],
        "STOP"
    );
    assert_eq!(
        array[0]["candidates"][0]["content"]["parts"][0]["text"],
        "Simulated "
    );
}

#[tokio::test]
async fn gemini_thought_signature_round_trip() {
    let sim = sim().await;
    let first = json!({"contents": [{"role": "user", "parts": [{"text": "weather in Paris"}]}],
        "tools": [{"function_declarations": [{"name": "get_weather", "parameters_json_schema": {}}]}],
        "generationConfig": {"thinkingConfig": {"thinking_budget": 1024}}});
    let v: Value = gemini(&sim, "generateContent", first.clone())
        .json_answer()
        .await;
    let parts = v["candidates"][0]["content"]["parts"].clone();
    assert_eq!(
        parts[1],
        json!({"functionCall": {"name": "get_weather", "args": {"query": "weather in Paris"}},
               "thoughtSignature": upstream_sim::gemini_signature()})
    );
    let mut next = first;
    next["contents"].as_array_mut().unwrap().extend([
        json!({"role": "model", "parts": parts}),
        json!({"role": "user", "parts": [{"functionResponse": {"name": "get_weather",
                                                               "response": {"result": "sunny and mild"}}}]}),
    ]);
    let good: Value = gemini(&sim, "generateContent", next.clone())
        .json_answer()
        .await;
    let answer = &good["candidates"][0]["content"]["parts"];
    assert_eq!(answer[0]["thought"], true);
    assert!(answer[1]["text"]
        .as_str()
        .unwrap()
        .starts_with("Simulated reply to: sunny and mild."));
    assert_eq!(good["candidates"][0]["finishReason"], "STOP");

    next["contents"][1]["parts"][1]["thoughtSignature"] = json!("c2ltLWdzaWc6MA==");
    let bad = gemini(&sim, "generateContent", next).send().await.unwrap();
    assert_eq!(bad.status(), 400);
    let v: Value = bad.json().await.unwrap();
    assert_eq!(
        v["error"],
        json!({"code": 400, "message": "Invalid thought signature", "status": "INVALID_ARGUMENT"})
    );
}

#[tokio::test]
async fn queued_429s_and_truncations_in_every_protocol() {
    let sim = sim().await;
    let chat = |body: Value| {
        http()
            .post(format!("{}/chat/completions", sim.base_url()))
            .bearer_auth(KEY)
            .json(&body)
    };
    let ask = json!({"stream": true, "max_tokens": 50, "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "tell me a story"}]});
    let gem = json!({"contents": [{"parts": [{"text": "tell me a story"}]}]});

    post_fault(&sim, json!({"fault": "status", "status": 429, "count": 3})).await;
    let answers = [
        chat(ask.clone()).send().await.unwrap(),
        messages(&sim, ask.clone()).send().await.unwrap(),
        gemini(&sim, "streamGenerateContent?alt=sse", gem.clone())
            .send()
            .await
            .unwrap(),
    ];
    for r in answers {
        assert_eq!(r.status(), 429);
        assert_eq!(r.headers()["retry-after"], "7");
    }
    post_fault(&sim, json!({"fault": "quota"})).await;
    let quota = chat(ask.clone()).send().await.unwrap();
    assert_eq!(
        (
            quota.status().as_u16(),
            quota.headers()["retry-after"].to_str().unwrap()
        ),
        (429, "7")
    );

    post_fault(&sim, json!({"fault": "truncate", "count": 3})).await;
    let openai = events(chat(ask.clone()).send().await.unwrap()).await;
    assert_eq!(openai.len(), 4);
    assert!(json_events(&openai)
        .iter()
        .all(|c| c["choices"][0]["finish_reason"].is_null() && c["usage"].is_null()));
    let anthropic = events(messages(&sim, ask).send().await.unwrap()).await;
    let names: Vec<&str> = anthropic
        .iter()
        .map(|(n, _)| n.as_deref().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta"
        ]
    );
    let google = events(
        gemini(&sim, "streamGenerateContent?alt=sse", gem.clone())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(google.len(), 4);
    assert!(json_events(&google)
        .iter()
        .all(|c| c["candidates"][0].get("finishReason").is_none()));
    // Nothing reported, nothing recorded; a plain answer is not truncated.
    assert!(sim.requests().iter().all(|r| r.usage.is_none()));
    let plain: Value = gemini(
        &sim,
        "generateContent",
        json!({"contents": [{"parts": [{"text": "x [[sim:truncate]]"}]}]}),
    )
    .json_answer()
    .await;
    assert_eq!(plain["candidates"][0]["finishReason"], "STOP");
}

#[tokio::test]
async fn recorded_usage_in_each_vendors_shape() {
    let sim = sim().await;
    let openai: Value = http()
        .post(format!("{}/chat/completions", sim.base_url()))
        .bearer_auth(KEY)
        .json(
            &json!({"messages": [{"role": "system", "content": "be brief"},
                                   {"role": "user", "content": "hi"}]}),
        )
        .json_answer()
        .await;
    // A stream without include_usage reports no usage.
    let streamed = http()
        .post(format!("{}/chat/completions", sim.base_url()))
        .bearer_auth(KEY)
        .json(&json!({"stream": true, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    let _ = events(streamed).await;
    let anthropic: Value = messages(
        &sim,
        json!({"max_tokens": 50, "stream": true, "system": "be brief",
               "messages": [{"role": "user", "content": "hi there"}]}),
    )
    .send()
    .await
    .map(|r| async { events(r).await })
    .unwrap()
    .await
    .into_iter()
    .filter_map(|(_, d)| serde_json::from_str::<Value>(&d).ok())
    .find(|d| d["type"] == "message_delta")
    .unwrap();
    let google: Value = gemini(
        &sim,
        "generateContent",
        json!({"contents": [{"parts": [{"text": "hi"}]}]}),
    )
    .json_answer()
    .await;
    let failed = gemini(
        &sim,
        "generateContent",
        json!({"contents": [{"parts": [{"text": "x [[sim:status=500]]"}]}]}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(failed.status(), 500);

    let listed: Value = http()
        .get(format!("http://{}/_sim/requests", sim.addr()))
        .json_answer()
        .await;
    let usage: Vec<&Value> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["usage"])
        .collect();
    assert_eq!(usage[0], &openai["usage"]);
    assert_eq!(usage[1], &Value::Null);
    let n = anthropic["usage"]["output_tokens"].as_u64().unwrap();
    assert_eq!(
        usage[2],
        // system (2+1) + user (2+1) - read 3 - write 2
        &json!({"input_tokens": 1, "output_tokens": n,
                "cache_creation_input_tokens": 2, "cache_read_input_tokens": 3})
    );
    assert_eq!(usage[3], &google["usageMetadata"]);
    assert_eq!(usage[4], &Value::Null);
}
