//! The client protocols' surfaces: routes (with the root or the `/v1` base
//! URL), where each takes its key, each one's error envelope (before the
//! call, and mid-stream), the Gemini model list, and the protocol-specific
//! refusals.

use crate::common::protocols::{Ask, Client, CLIENTS};
use crate::common::*;
use serde_json::{json, Value};

/// Checks a non-2xx answer is in `client`'s envelope, with the request id at
/// the end of its message; returns the error object.
async fn enveloped(client: Client, resp: reqwest::Response, status: u16) -> Value {
    assert_eq!(resp.status().as_u16(), status, "{client:?}");
    let rid = crate::billing::request_id(&resp);
    let v: Value = resp.json().await.unwrap();
    let (message, err) = match client {
        Client::Messages => {
            assert_eq!(v["type"], "error", "{v}");
            assert!(v["error"]["type"].is_string(), "{v}");
            (v["error"]["message"].clone(), v["error"].clone())
        }
        Client::Gemini => {
            assert_eq!(v["error"]["code"], status, "{v}");
            assert!(v["error"]["status"].is_string(), "{v}");
            (v["error"]["message"].clone(), v["error"].clone())
        }
        _ => {
            assert!(
                v["error"]["code"].is_string() && v["error"]["type"].is_string(),
                "{v}"
            );
            (v["error"]["message"].clone(), v["error"].clone())
        }
    };
    assert!(
        message
            .as_str()
            .unwrap()
            .ends_with(&format!("(request id: {rid})")),
        "{v}"
    );
    err
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_protocol_takes_its_key_where_its_sdks_put_it_and_answers_in_its_envelope() {
    let env = Env::start().await;
    let key = env.key().await;
    for client in CLIENTS {
        let ask = Ask::new("gpt-4o-mini", "hello");
        // The right key, in the right place.
        let ok = client.ask(&env.http, &env.url(""), &key, &ask).await;
        assert_eq!(ok.status, 200, "{client:?}: {:?}", ok.error);
        // A wrong key: 401 in the protocol's own envelope.
        let resp = client
            .request(&env.http, &env.url(""), "sk-wrong", &ask)
            .send()
            .await
            .unwrap();
        let err = enveloped(client, resp, 401).await;
        match client {
            Client::Messages => assert_eq!(err["type"], "authentication_error"),
            Client::Gemini => assert_eq!(err["status"], "UNAUTHENTICATED"),
            _ => assert_eq!(err["code"], "invalid_api_key"),
        }
        // An unknown model: 404 model_not_found, same envelope.
        let resp = client
            .request(
                &env.http,
                &env.url(""),
                &key,
                &Ask::new("no-such-model", "x"),
            )
            .send()
            .await
            .unwrap();
        enveloped(client, resp, 404).await;
    }
    // The Anthropic protocol also takes a bearer token (its newer SDKs send one).
    let resp = env
        .http
        .post(env.url("/v1/messages"))
        .bearer_auth(&key)
        .json(&Client::Messages.body(&Ask::new("gpt-4o-mini", "hi")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    // `?key=` is the Gemini protocol's, and nobody else's.
    let gemini = env
        .http
        .post(env.url(&format!(
            "/v1beta/models/gpt-4o-mini:generateContent?key={key}"
        )))
        .json(&Client::Gemini.body(&Ask::new("gpt-4o-mini", "hi")))
        .send()
        .await
        .unwrap();
    assert_eq!(gemini.status(), 200);
    // ... and only under `/v1beta`: the same call under `/v1` needs a header.
    let v1 = env
        .http
        .post(env.url(&format!("/v1/models/gpt-4o-mini:generateContent?key={key}")))
        .json(&Client::Gemini.body(&Ask::new("gpt-4o-mini", "hi")))
        .send()
        .await
        .unwrap();
    enveloped(Client::Gemini, v1, 401).await;
    let chat = env
        .http
        .post(env.url(&format!("/v1/chat/completions?key={key}")))
        .json(&user("gpt-4o-mini", "hi"))
        .send()
        .await
        .unwrap();
    enveloped(Client::Chat, chat, 401).await;
    // Nor does the OpenAI protocol read Anthropic's header.
    let chat = env
        .http
        .post(env.url("/v1/chat/completions"))
        .header("x-api-key", &key)
        .json(&user("gpt-4o-mini", "hi"))
        .send()
        .await
        .unwrap();
    enveloped(Client::Chat, chat, 401).await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_root_and_the_v1_base_url_both_land_right() {
    let env = Env::start().await;
    let key = env.key().await;
    // SDKs that add `/v1` themselves, configured with a `/v1` base URL.
    let doubled = [
        ("/v1/v1/messages", Client::Messages),
        (
            "/v1/v1beta/models/gpt-4o-mini:generateContent",
            Client::Gemini,
        ),
    ];
    for (path, client) in doubled {
        let ask = Ask::new("gpt-4o-mini", "hello");
        let mut req = env.http.post(env.url(path)).json(&client.body(&ask));
        req = match client {
            Client::Messages => req.header("x-api-key", &key),
            _ => req.header("x-goog-api-key", &key),
        };
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gemini_model_list_and_model_lookup() {
    let env = Env::start().await;
    let key = env.key().await;
    let list: Value = env
        .http
        .get(env.url("/v1beta/models"))
        .header("x-goog-api-key", &key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = list["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"models/gpt-4o-mini"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.contains("Gen-2")),
        "video models are not Gemini models"
    );
    assert!(list["models"][0]["supportedGenerationMethods"]
        .as_array()
        .unwrap()
        .contains(&json!("generateContent")));
    let one = env
        .http
        .get(env.url("/v1beta/models/gpt-4o-mini"))
        .header("x-goog-api-key", &key)
        .send()
        .await
        .unwrap();
    assert_eq!(one.status(), 200);
    let missing = env
        .http
        .get(env.url("/v1beta/models/nope"))
        .header("x-goog-api-key", &key)
        .send()
        .await
        .unwrap();
    enveloped(Client::Gemini, missing, 404).await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_specific_refusals_are_clear() {
    let env = Env::start().await;
    let key = env.key().await;
    let ask = Ask::new("gpt-4o-mini", "hi");
    // Gemini streams are served as SSE only.
    let resp = env
        .http
        .post(env.url("/v1beta/models/gpt-4o-mini:streamGenerateContent"))
        .header("x-goog-api-key", &key)
        .json(&Client::Gemini.body(&ask))
        .send()
        .await
        .unwrap();
    let err = enveloped(Client::Gemini, resp, 400).await;
    assert!(err["message"].as_str().unwrap().contains("alt=sse"));
    // Unknown Gemini methods are 404s.
    let resp = env
        .http
        .post(env.url("/v1beta/models/gpt-4o-mini:countTokens"))
        .header("x-goog-api-key", &key)
        .json(&Client::Gemini.body(&ask))
        .send()
        .await
        .unwrap();
    enveloped(Client::Gemini, resp, 404).await;
    // The Messages protocol requires max_tokens.
    let mut body = Client::Messages.body(&ask);
    body.as_object_mut().unwrap().remove("max_tokens");
    let resp = env
        .http
        .post(env.url("/v1/messages"))
        .header("x-api-key", &key)
        .json(&body)
        .send()
        .await
        .unwrap();
    let err = enveloped(Client::Messages, resp, 400).await;
    assert_eq!(err["type"], "invalid_request_error");
    // The gateway keeps no responses: chaining by id is refused, not faked.
    let mut body = Client::Responses.body(&ask);
    body["previous_response_id"] = json!("resp_123");
    let resp = env
        .http
        .post(env.url("/v1/responses"))
        .bearer_auth(&key)
        .json(&body)
        .send()
        .await
        .unwrap();
    let err = enveloped(Client::Responses, resp, 400).await;
    assert!(err["message"]
        .as_str()
        .unwrap()
        .contains("whole conversation"));
    assert!(
        env.sim.requests().is_empty(),
        "no refused request reached the vendor"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_breaks_ends_with_the_protocols_error_event() {
    let env = Env::start().await;
    let key = env.key().await;
    for client in CLIENTS {
        let ask = Ask::new("gpt-4o-mini", "tell me a story [[sim:cut]]").streamed(true);
        let a = client.ask(&env.http, &env.url(""), &key, &ask).await;
        assert_eq!(a.status, 200, "{client:?}: the stream had started");
        let (name, data) = a.events.last().expect("events").clone();
        let v: Value = serde_json::from_str(&data).expect("the last event is JSON");
        match client {
            Client::Messages => {
                assert_eq!(name.as_deref(), Some("error"), "an Anthropic error event");
                assert_eq!(v["type"], "error");
            }
            Client::Gemini => {
                assert!(name.is_none());
                assert!(data.starts_with("{\"error\":"), "error first: {data}");
                // A cut vendor stream is a 502, which google.rpc calls INTERNAL.
                assert_eq!(v["error"]["code"], 502, "{data}");
                assert_eq!(v["error"]["status"], "INTERNAL", "{data}");
            }
            _ => {
                assert!(v["error"]["code"].is_string(), "{client:?}: {data}");
            }
        }
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.ends_with(&format!("(request id: {})", a.request_id)),
            "{client:?}: the message ends with this call's request id: {data}"
        );
        assert!(
            !a.events.iter().any(|(_, d)| d == "[DONE]"),
            "{client:?}: no [DONE] after a cut"
        );
        assert!(
            !a.events
                .iter()
                .any(|(n, _)| matches!(n.as_deref(), Some("message_stop" | "response.completed"))),
            "{client:?}: no completion event after a cut"
        );
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vendors_retry_after_reaches_every_client() {
    let env = Env::start().await;
    let key = env.key().await;
    // The simulator says `retry-after: 7` on a 429 and `retry-after-ms:
    // 2500` on a 503; clients get both forms either way.
    let cases = [("429", 429, "7", "7000"), ("503", 502, "3", "2500")];
    for (vendor, status, secs, ms) in cases {
        for model in ["gpt-4o-mini", "claude-sonnet-4-5", "gemini-2.5-flash"] {
            for client in CLIENTS {
                let ask = Ask::new(model, &format!("hi [[sim:status={vendor}]]"));
                let resp = client
                    .request(&env.http, &env.url(""), &key, &ask)
                    .send()
                    .await
                    .unwrap();
                let header = |name: &str| {
                    resp.headers()
                        .get(name)
                        .map(|v| v.to_str().unwrap().to_string())
                };
                assert_eq!(
                    (header("retry-after"), header("retry-after-ms")),
                    (Some(secs.to_string()), Some(ms.to_string())),
                    "{client:?} → {model}, vendor {vendor}"
                );
                let err = enveloped(client, resp, status).await;
                if vendor == "429"
                    && matches!(
                        client,
                        Client::Chat | Client::Completions | Client::Responses
                    )
                {
                    assert_eq!(err["code"], "upstream_rate_limited");
                }
            }
        }
    }
    env.stop().await;
}

/// Whether a client stream shows an answer's completion: `[DONE]`,
/// `message_stop`, `response.completed` or a Gemini `finishReason`.
fn shows_completion(events: &[(Option<String>, String)]) -> bool {
    events.iter().any(|(n, d)| {
        d == "[DONE]"
            || matches!(n.as_deref(), Some("message_stop" | "response.completed"))
            || d.contains("finishReason")
    })
}

/// A vendor that reports an error after the text (`[[sim:error_midway]]`):
/// every client gets the text, then its protocol's error event with the
/// vendor's message instead of the closing events (one error event: an
/// OpenAI vendor's own is not relayed as well), and is billed for what was
/// relayed. The same whether the vendor's error event came alone or, with
/// the whole stream in one write (`whole`), with the stream's end, so that
/// it reached the translator in `finish` as its `rest` and failed there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_fails_after_its_text_ends_with_the_vendors_error_and_bills_what_was_relayed()
{
    let env = Env::start().await;
    let account = env.account("5").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let vendors = [
        ("gpt-4o-mini", "The server is overloaded"),
        ("claude-sonnet-4-5", "Overloaded"),
        ("gemini-2.5-flash", "The model is overloaded"),
    ];
    for (model, said) in vendors {
        let reported = format!("the upstream reported an error mid-answer: {said}");
        for client in CLIENTS {
            let mut first = None;
            for how in ["error_midway", "error_midway,whole"] {
                let ask = Ask::new(model, &format!("tell me a story [[sim:{how}]]")).streamed(true);
                let a = client.ask(&env.http, &env.url(""), &key, &ask).await;
                let case = format!("{client:?} → {model}, {how}");
                assert_eq!(a.status, 200, "{case}");
                let error = a
                    .error
                    .clone()
                    .unwrap_or_else(|| panic!("{case}: no error event: {:?}", a.events));
                assert!(
                    error.to_string().contains(&reported),
                    "{case}: the vendor's message: {error}"
                );
                let errors = a
                    .events
                    .iter()
                    .filter(|(n, d)| {
                        let v: Value = serde_json::from_str(d).unwrap_or_default();
                        n.as_deref() == Some("error")
                            || v["error"].is_object()
                            || matches!(v["type"].as_str(), Some("error" | "response.failed"))
                    })
                    .count();
                assert_eq!(errors, 1, "{case}: one error event: {:?}", a.events);
                assert!(
                    !shows_completion(&a.events),
                    "{case}: no completion marker: {:?}",
                    a.events
                );
                assert!(
                    a.text.starts_with("Simulated reply to: tell me a story"),
                    "{case}: the text went out first: {:?}",
                    a.text
                );
                let row = crate::billing::usage_row(&env, &a.request_id).await;
                assert_eq!(row["status"], 502, "{case}: {row}");
                assert_eq!(row["error"], reported.as_str(), "{case}: {row}");
                // No usage came: the gateway counted what went out.
                assert_eq!(row["counted_by_gateway"], true, "{case}: {row}");
                assert!(row["output_tokens"].as_u64().unwrap() > 0, "{case}: {row}");
                let relayed = (a.text.clone(), a.events.len(), row["output_tokens"].clone());
                match &first {
                    None => first = Some(relayed),
                    Some(first) => assert_eq!(&relayed, first, "{case}"),
                }
            }
        }
    }
    let (balance, sum) = env.balance(&account).await;
    assert_eq!(balance, sum);
    env.stop().await;
}

/// Also with the vendor's whole stream in one write (`[[sim:whole]]`), so
/// that its last events come with its end and reach the translator in one
/// `finish` (as its `rest`): the client gets the same text before the
/// error event, and the row the same output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_stops_without_its_finish_marker_never_looks_complete() {
    let env = Env::start().await;
    let account = env.account("5").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    for model in ["gpt-4o-mini", "claude-sonnet-4-5", "gemini-2.5-flash"] {
        for client in CLIENTS {
            let mut chunked = None;
            for how in ["truncate", "truncate,whole"] {
                let ask = Ask::new(model, &format!("tell me a story [[sim:{how}]]")).streamed(true);
                let a = client.ask(&env.http, &env.url(""), &key, &ask).await;
                assert_eq!(a.status, 200);
                assert!(
                    a.error.is_some(),
                    "{client:?} → {model}: ends with an error event: {:?}",
                    a.events
                );
                assert!(
                    !shows_completion(&a.events),
                    "{client:?} → {model}: no completion marker: {:?}",
                    a.events
                );
                let row = crate::billing::usage_row(&env, &a.request_id).await;
                assert_eq!(
                    row["status"], 502,
                    "{client:?} → {model}: recorded as failed: {row}"
                );
                assert!(row["error"]
                    .as_str()
                    .unwrap()
                    .contains("before the answer was complete"));
                let relayed = (a.text.clone(), a.events.len(), row["output_tokens"].clone());
                match &chunked {
                    None => chunked = Some(relayed),
                    Some(first) => assert_eq!(&relayed, first, "{client:?} → {model}, {how}"),
                }
            }
        }
    }
    let (balance, sum) = env.balance(&account).await;
    assert_eq!(balance, sum);
    env.stop().await;
}
