//! The OpenAPI document (spec §9): served without a token at
//! `/v1/openapi.json`, version 1.1.0, OpenAPI 3.1, and describing exactly the
//! routes the public router serves — a route added without its description
//! fails here. (Its validity against the OpenAPI 3.1 schema and the answers'
//! conformance are checked by the property-based run in `tests/sdk`.)

use crate::common::*;
use serde_json::Value;
use std::collections::BTreeSet;

/// A path with its parameters blanked, the way the router matches it:
/// `{model}:generateContent` and `{model_action}` are both one segment.
fn shape(path: &str) -> String {
    path.split('/')
        .map(|seg| if seg.starts_with('{') { "{}" } else { seg })
        .collect::<Vec<_>>()
        .join("/")
}

/// Every `$ref` in `v`.
fn refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("$ref", Value::String(r)) => out.push(r.clone()),
                    _ => refs(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_document_is_served_without_a_token_and_covers_every_public_route() {
    let env = Env::start().await;
    let resp = env
        .http
        .get(env.url("/v1/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    let doc: Value = resp.json().await.unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["version"], "1.1.0");

    // Every other route still needs a token.
    let resp = env.http.get(env.url("/v1/models")).send().await.unwrap();
    let (code, _) = envelope(resp, 401).await;
    assert_eq!(code, "invalid_api_key");

    // The operations are the router's routes, no more and no fewer. Gemini's
    // `{model_action}` route is one router entry and one operation per action.
    let router: BTreeSet<(String, String)> = gateway::api::public_route_list()
        .into_iter()
        .map(|(m, p)| (m.to_string(), shape(p)))
        .collect();
    let mut documented = BTreeSet::new();
    let paths = doc["paths"].as_object().unwrap();
    for (path, item) in paths {
        for (method, op) in item.as_object().unwrap() {
            if !["get", "post", "put", "delete", "patch"].contains(&method.as_str()) {
                continue;
            }
            documented.insert((method.to_uppercase(), shape(path)));
            assert!(op["responses"]["200"].is_object() || op["responses"]["501"].is_object());
            let secured = op["security"].as_array().is_some_and(|s| !s.is_empty());
            assert_eq!(
                secured,
                path != "/v1/openapi.json",
                "{method} {path}: only the document itself is open"
            );
        }
    }
    assert_eq!(
        router, documented,
        "routes the router serves and operations the document describes differ"
    );
    for action in [
        "generateContent",
        "streamGenerateContent",
        "embedContent",
        "batchEmbedContents",
    ] {
        for root in ["/v1beta", "/v1"] {
            let p = format!("{root}/models/{{model}}:{action}");
            assert!(paths[&p]["post"].is_object(), "{p} is not described");
        }
    }

    // Streams are described where a `stream` flag exists.
    for p in [
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/responses",
        "/v1/messages",
    ] {
        let content = &paths[p]["post"]["responses"]["200"]["content"];
        assert!(content["text/event-stream"].is_object(), "{p}");
        assert!(content["application/json"]["schema"]["$ref"].is_string());
        let stream = &paths[p]["post"]["requestBody"]["content"]["application/json"]["schema"];
        let name = stream["$ref"].as_str().unwrap().rsplit('/').next().unwrap();
        assert!(
            doc["components"]["schemas"][name]["properties"]["stream"].is_object(),
            "{p}: {name} has no `stream`"
        );
    }
    // Each protocol's own keys and envelope.
    let security = |p: &str| -> BTreeSet<String> {
        paths[p]["post"]["security"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| s.as_object().unwrap().keys().cloned())
            .collect()
    };
    assert!(security("/v1/messages").contains("x-api-key"));
    assert!(security("/v1beta/models/{model}:generateContent").contains("x-goog-api-key"));
    assert_eq!(
        paths["/v1/messages"]["post"]["responses"]["401"]["content"]["application/json"]["schema"]
            ["$ref"],
        "#/components/schemas/AnthropicErrorEnvelope"
    );
    assert_eq!(
        paths["/v1beta/models/{model}:generateContent"]["post"]["responses"]["429"]["content"]
            ["application/json"]["schema"]["$ref"],
        "#/components/schemas/GeminiErrorEnvelope"
    );
    assert!(
        paths["/v1/videos"]["post"]["responses"]["400"]["content"]["application/json"]["schema"]
            ["oneOf"]
            .is_array(),
        "video validation errors may use envelope 2"
    );

    // Every reference resolves.
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(!all.is_empty());
    for r in all {
        let name = r
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("unexpected $ref {r}"));
        assert!(
            doc["components"]["schemas"][name].is_object(),
            "{r} does not resolve"
        );
    }
    env.stop().await;
}

/// The answers the handlers build are the types the document describes: a
/// few real answers checked field by field against their schemas' required
/// properties.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_answers_carry_the_documented_required_fields() {
    let env = Env::start().await;
    let key = env.key().await;
    let doc: Value = env
        .http
        .get(env.url("/v1/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let required = |name: &str| -> Vec<String> {
        doc["components"]["schemas"][name]["required"]
            .as_array()
            .unwrap_or_else(|| panic!("{name} has no required fields"))
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    let models = env.get_json(&key, "/v1/models").await;
    for f in required("ModelList") {
        assert!(models.get(&f).is_some(), "ModelList.{f}");
    }
    for f in required("Model") {
        assert!(models["data"][0].get(&f).is_some(), "Model.{f}");
    }
    let resp = env.get(&key, "/v1/models/no-such-model").await;
    let body: Value = resp.json().await.unwrap();
    for f in required("OpenAiError") {
        assert!(body["error"].get(&f).is_some(), "OpenAiError.{f}");
    }
    let sub = env
        .get_json(&key, "/v1/dashboard/billing/subscription")
        .await;
    for f in required("Subscription") {
        assert!(sub.get(&f).is_some(), "Subscription.{f}");
    }
    env.stop().await;
}
