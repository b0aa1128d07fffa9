//! `POST /v1/chat/completions` end to end, through the OpenAI adapter, against
//! the simulator (spec §2.8, §2.9, §4.3).

use crate::common::*;
use serde_json::{json, Value};
use upstream_sim::Fault;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_chat_answers_in_the_clients_terms_and_forwards_the_vendors() {
    let env = Env::start().await;
    let key = env.key().await;
    let resp = env
        .chat(
            &key,
            json!({"model": "gpt-4o-mini", "messages": [
                {"role": "system", "content": "be brief please"},
                {"role": "user", "content": "hello there"}
            ]}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().get("x-request-id").is_some());
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(
        v["model"], "gpt-4o-mini",
        "the client's model name, not the upstream's"
    );
    let choice = &v["choices"][0];
    assert_eq!(choice["finish_reason"], "stop");
    assert_eq!(choice["message"]["role"], "assistant");
    assert!(choice["message"]["content"]
        .as_str()
        .unwrap()
        .starts_with("Simulated reply to: hello there."));
    let u = &v["usage"];
    // Simulator: prompt = Σ(words + 1) = (3+1) + (2+1); cached = the system message.
    assert_eq!(u["prompt_tokens"], 7);
    assert_eq!(u["prompt_tokens_details"]["cached_tokens"], 4);
    assert_eq!(u["completion_tokens_details"]["reasoning_tokens"], 0);
    assert_eq!(
        u["total_tokens"].as_u64().unwrap(),
        u["prompt_tokens"].as_u64().unwrap() + u["completion_tokens"].as_u64().unwrap()
    );

    // What went upstream: the mapped model, the channel's key, not the client's.
    let sent = env.sim.requests().pop().unwrap();
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.json().unwrap()["model"], "sim-chat");
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {SIM_KEY}").as_str())
    );
    assert!(!format!("{:?}", sent.headers).contains(&key));
    env.stop().await;
}

/// Parses SSE payloads into chunk objects, checking `[DONE]` comes last.
fn chunks(data: &[String]) -> Vec<Value> {
    assert_eq!(
        data.last().map(String::as_str),
        Some("[DONE]"),
        "stream ends with [DONE]"
    );
    data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).expect("chunk is JSON"))
        .collect()
}

fn content_of(chunks: &[Value]) -> String {
    chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_chat_carries_usage_only_at_the_end() {
    let env = Env::start().await;
    let key = env.key().await;
    let plain: Value = env
        .chat(&key, user("gpt-4o-mini", "tell me a story"))
        .await
        .json()
        .await
        .unwrap();

    let mut body = user("gpt-4o-mini", "tell me a story");
    body["stream"] = json!(true);
    let resp = env.chat(&key, body.clone()).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let cs = chunks(&sse_data(resp).await);
    assert!(cs
        .iter()
        .all(|c| c["object"] == "chat.completion.chunk" && c["model"] == "gpt-4o-mini"));
    assert_eq!(
        content_of(&cs),
        plain["choices"][0]["message"]["content"].as_str().unwrap()
    );
    // Without include_usage the usage rides on the final (finish_reason) chunk.
    let (last, earlier) = cs.split_last().unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    assert_eq!(last["usage"], plain["usage"]);
    assert!(earlier.iter().all(|c| c["usage"].is_null()));
    assert!(earlier
        .iter()
        .all(|c| c["choices"][0]["finish_reason"].is_null()));

    // With include_usage: the standard separate usage chunk with no choices.
    body["stream_options"] = json!({"include_usage": true});
    let cs = chunks(&sse_data(env.chat(&key, body).await).await);
    let (last, earlier) = cs.split_last().unwrap();
    assert_eq!(last["choices"], json!([]));
    assert_eq!(last["usage"], plain["usage"]);
    assert!(earlier.iter().all(|c| c["usage"].is_null()));
    assert!(earlier
        .iter()
        .any(|c| c["choices"][0]["finish_reason"] == "stop"));

    // The gateway always asks the vendor for usage, so it can bill.
    let sent = env.sim.requests().pop().unwrap().json().unwrap();
    assert_eq!(sent["stream_options"]["include_usage"], true);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_model_reports_reasoning_and_length_when_max_tokens_is_small() {
    let env = Env::start().await;
    let key = env.key().await;
    let mut body = user("deepseek-reasoner", "why is the sky blue");
    body["max_tokens"] = json!(8);
    let v: Value = env.chat(&key, body.clone()).await.json().await.unwrap();
    let c = &v["choices"][0];
    assert_eq!(c["finish_reason"], "length");
    assert_eq!(c["message"]["content"], "");
    assert!(c["message"]["reasoning_content"]
        .as_str()
        .unwrap()
        .starts_with("Let me think"));
    assert_eq!(
        v["usage"]["completion_tokens_details"]["reasoning_tokens"],
        8
    );
    assert_eq!(v["usage"]["completion_tokens"], 8);

    body["stream"] = json!(true);
    let cs = chunks(&sse_data(env.chat(&key, body).await).await);
    let reasoning: String = cs
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["reasoning_content"].as_str())
        .collect();
    assert_eq!(
        reasoning,
        c["message"]["reasoning_content"].as_str().unwrap()
    );
    assert_eq!(cs.last().unwrap()["choices"][0]["finish_reason"], "length");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_finish_with_tool_calls() {
    let env = Env::start().await;
    let key = env.key().await;
    let mut body = user("gpt-4o-mini", "weather in Paris");
    body["tools"] = json!([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]);
    let v: Value = env.chat(&key, body.clone()).await.json().await.unwrap();
    let c = &v["choices"][0];
    assert_eq!(c["finish_reason"], "tool_calls");
    assert_eq!(
        c["message"]["tool_calls"][0]["function"]["name"],
        "get_weather"
    );

    body["stream"] = json!(true);
    let cs = chunks(&sse_data(env.chat(&key, body).await).await);
    let args: String = cs
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(
        args,
        c["message"]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap()
    );
    assert!(cs
        .iter()
        .any(|c| c["choices"][0]["finish_reason"] == "tool_calls"));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_clear_envelopes_and_never_reach_the_upstream() {
    let env = Env::start().await;
    let key = env.key().await;
    let (code, msg) = envelope(env.chat(&key, user("no-such-model", "x")).await, 404).await;
    assert_eq!(code, "model_not_found");
    assert!(msg.contains("no-such-model"));
    let (code, msg) = envelope(env.chat(&key, json!({"model": "gpt-4o-mini"})).await, 400).await;
    assert_eq!(code, "invalid_request");
    assert!(msg.contains("`messages` is required"), "{msg}");
    let resp = env
        .http
        .post(env.url("/v1/chat/completions"))
        .bearer_auth(&key)
        .body("{not json")
        .send()
        .await
        .unwrap();
    let (code, _) = envelope(resp, 400).await;
    assert_eq!(code, "invalid_request");
    assert!(env.sim.requests().is_empty());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_failures_become_clear_5xx_envelopes() {
    let env = Env::start().await;
    let key = env.key().await;
    let cases: &[(&str, u16, &str)] = &[
        ("[[sim:status=500]]", 502, "upstream_error"),
        ("[[sim:status=503]]", 502, "upstream_error"),
        ("[[sim:status=429]]", 429, "upstream_rate_limited"),
        ("[[sim:status=429-quota]]", 503, "upstream_quota_exceeded"),
        ("[[sim:malformed]]", 502, "adapter_error"),
        ("[[sim:cut]]", 502, "upstream_unreachable"),
    ];
    for (directive, status, code) in cases {
        let resp = env
            .chat(&key, user("gpt-4o-mini", &format!("hi {directive}")))
            .await;
        let (got, msg) = envelope(resp, *status).await;
        assert_eq!(&got, code, "{directive}: {msg}");
        assert!(!msg.contains(SIM_KEY), "no credentials in messages");
    }
    // Streamed, the same refusals get the same envelopes (the stream's
    // translator, made while the vendor worked, is put away and its
    // instance reads the vendor's error), and the gateway streams on after
    // them.
    for (directive, status, code) in cases.iter().filter(|c| c.0.contains("status")) {
        let mut body = user("gpt-4o-mini", &format!("hi {directive}"));
        body["stream"] = json!(true);
        let resp = env.chat(&key, body).await;
        let (got, msg) = envelope(resp, *status).await;
        assert_eq!(&got, code, "streamed {directive}: {msg}");
    }
    streams_whole(&env, &key).await;
    env.stop().await;
}

/// A streamed chat call answers `200` and ends with `[DONE]`.
async fn streams_whole(env: &Env, key: &str) {
    let mut body = user("gpt-4o-mini", "hi");
    body["stream"] = json!(true);
    let resp = env.chat(key, body).await;
    assert_eq!(resp.status(), 200);
    let payloads = sse_data(resp).await;
    assert_eq!(
        payloads.last().map(String::as_str),
        Some("[DONE]"),
        "{payloads:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_upstream_times_out_instead_of_hanging_the_client() {
    let env = Env::with(Setup {
        limits: "upstream_timeout_secs = 1\nstream_idle_timeout_secs = 1".into(),
        ..Setup::default()
    })
    .await;
    let key = env.key().await;
    let started = std::time::Instant::now();
    let (code, _) = envelope(
        env.chat(&key, user("gpt-4o-mini", "hi [[sim:hang]]")).await,
        504,
    )
    .await;
    assert_eq!(code, "upstream_timeout");
    assert!(started.elapsed() < std::time::Duration::from_secs(4));
    // A stream waits for the answer's head as long as for an event: the
    // same envelope, and the translator made meanwhile is put away.
    let mut body = user("gpt-4o-mini", "hi [[sim:hang]]");
    body["stream"] = json!(true);
    let started = std::time::Instant::now();
    let (code, _) = envelope(env.chat(&key, body).await, 504).await;
    assert_eq!(code, "upstream_timeout");
    assert!(started.elapsed() < std::time::Duration::from_secs(4));
    streams_whole(&env, &key).await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_midway_ends_with_an_error_event_not_done() {
    let env = Env::start().await;
    let key = env.key().await;
    let mut body = user("gpt-4o-mini", "a long story [[sim:cut]]");
    body["stream"] = json!(true);
    let data = sse_data(env.chat(&key, body).await).await;
    assert!(!data.iter().any(|d| d == "[DONE]"));
    let last: Value = serde_json::from_str(data.last().unwrap()).unwrap();
    assert!(last["error"]["code"].is_string(), "{last}");
    assert!(data.len() > 2, "the chunks before the cut were relayed");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_framing_survives_crlf_fragments_and_comments() {
    let env = Env::start().await;
    let key = env.key().await;
    let mut body = user("gpt-4o-mini", "framing test");
    body["stream"] = json!(true);
    let reference = chunks(&sse_data(env.chat(&key, body.clone()).await).await);
    body["messages"][0]["content"] = json!("framing test [[sim:crlf,fragment,comments]]");
    let tricky = chunks(&sse_data(env.chat(&key, body).await).await);
    assert_eq!(content_of(&tricky), content_of(&reference));
    assert_eq!(tricky.len(), reference.len());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_channel_fails_over_to_the_next() {
    let env = Env::with(Setup {
        default_models: false,
        extra: r#"
[[channels]]
name = "unreachable"
adapter = "openai"
base_url = "http://127.0.0.1:9/v1"
models = ["m"]
priority = 20

[[channels]]
name = "first"
adapter = "openai"
base_url = "{SIM_URL}"
key = "env:E2E_SIM_KEY"
models = ["m"]
priority = 10

[[channels]]
name = "second"
adapter = "openai"
base_url = "{SIM_URL}"
key = "env:E2E_SIM_KEY"
models = ["m"]

[[models]]
name = "m"
input_price = "1"
output_price = "1"
"#
        .into(),
        ..Setup::default()
    })
    .await;
    let key = env.key().await;
    // Connection refused on the first channel: the next one answers.
    assert_eq!(env.chat(&key, user("m", "hello")).await.status(), 200);
    // A retryable vendor error on the next one: the last one answers.
    env.sim.push_fault(Fault::Status(500), 1);
    assert_eq!(env.chat(&key, user("m", "hello")).await.status(), 200);
    // Every channel failing: the last channel's error is reported.
    env.sim.push_fault(Fault::Status(500), 2);
    let (code, _) = envelope(env.chat(&key, user("m", "hello")).await, 502).await;
    assert_eq!(code, "upstream_error");
    // A non-retryable vendor error does not fail over.
    env.sim.clear_requests();
    let resp = env.chat(&key, user("m", "hello [[sim:status=400]]")).await;
    let (code, _) = envelope(resp, 400).await;
    assert_eq!(code, "invalid_request");
    assert_eq!(
        env.sim.requests().len(),
        1,
        "not retried on another channel"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_rewrite_requests_for_their_models() {
    let env = Env::start().await;
    let key = env.key().await;
    let mut body = user("qwen-plus", "hello");
    body["temperature"] = json!(0.3);
    body["top_p"] = json!(0.9);
    body["max_tokens"] = json!(50);
    assert_eq!(env.chat(&key, body).await.status(), 200);
    let sent = env.sim.requests().pop().unwrap().json().unwrap();
    assert!(
        sent.get("temperature").is_none() && sent.get("top_p").is_none(),
        "{sent}"
    );
    assert_eq!(sent["max_tokens"], 50);

    let mut body = user("thinker", "hello");
    body["enable_thinking"] = json!(false);
    body["reasoning_effort"] = json!("none");
    let v: Value = env.chat(&key, body).await.json().await.unwrap();
    assert_eq!(
        v["usage"]["completion_tokens_details"]["reasoning_tokens"], 8,
        "thinking stayed on"
    );
    let sent = env.sim.requests().pop().unwrap().json().unwrap();
    assert!(sent.get("enable_thinking").is_none() && sent.get("reasoning_effort").is_none());

    // Models without policies pass sampling parameters through.
    let mut body = user("gpt-4o-mini", "hello");
    body["temperature"] = json!(0.3);
    env.chat(&key, body).await;
    assert_eq!(
        env.sim.requests().pop().unwrap().json().unwrap()["temperature"],
        0.3
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_role_is_400_before_money_is_held_or_the_vendor_asked() {
    let env = Env::start().await;
    let account = env.account("5").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let before = env.balance(&account).await;
    let asked = env.sim.requests().len();
    for messages in [
        json!([{"role": "root", "content": "obey"}]),
        json!([{"role": "user", "content": 42}]),
        json!(["hi"]),
    ] {
        let body = json!({"model": "gpt-4o-mini", "messages": messages});
        let (code, msg) = envelope(env.chat(&key, body).await, 400).await;
        assert_eq!(code, "invalid_request", "{msg}");
    }
    assert_eq!(env.sim.requests().len(), asked, "the vendor was not asked");
    assert_eq!(env.balance(&account).await, before, "nothing was held");
    env.stop().await;
}
