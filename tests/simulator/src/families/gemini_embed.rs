//! `POST /v1beta/models/{model}:embedContent` and
//! `POST /v1beta/models/{model}:batchEmbedContents`: Gemini's embeddings,
//! with the vectors of the OpenAI route ([`super::embeddings::vector`]).
//!
//! - **Auth.** `x-goog-api-key: <key>` or `?key=<key>` (the auth layer);
//!   errors in Gemini's envelope `{"error": {code, message, status}}`.
//! - **embedContent.** `{"content": {"parts": [{"text"}]}, "taskType"?,
//!   "title"?, "outputDimensionality"?}` → `{"embedding": {"values":
//!   [...]}}`.
//! - **batchEmbedContents.** `{"requests": [{"model", "content",
//!   "taskType"?, "title"?, "outputDimensionality"?}]}` (1 to 100 requests)
//!   → `{"embeddings": [{"values": [...]}, ...]}` in request order. Each
//!   `model` is required and must be `models/<the model in the URL>`, as
//!   the real API insists; anything else → 400.
//! - **Text.** The content's text parts joined by single spaces, each part's
//!   directives removed; a content without text → 400. Keys are read in
//!   camelCase or snake_case, as in the chat route.
//! - **Vectors.** `vector(text, outputDimensionality)`, 1..=3072, or 3072
//!   long by default (gemini-embedding-001's default). `taskType` and
//!   `title` are accepted and change nothing.
//! - **Usage.** None: the real API reports none, so none is recorded.
//! - **Directives** in every text part (all requests of a batch).

use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;

use super::embeddings::{vector, MAX_DIMENSIONS};
use super::{deliver, json_object, Reply};
use crate::chat::gemini::key;
use crate::errors::{ApiError, Dialect};
use crate::faults::FaultDirectives;
use crate::SimState;

/// The vector length without `outputDimensionality`.
pub const DEFAULT_DIMENSIONS: usize = 3072;
/// The most requests one batch may carry.
pub const MAX_BATCH: usize = 100;

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::invalid_request(message, None).in_dialect(Dialect::Gemini)
}

#[derive(Debug, PartialEq)]
struct Embed {
    /// Directives removed.
    text: String,
    dims: usize,
}

#[derive(Serialize)]
struct Values {
    values: Vec<f32>,
}

/// One `EmbedContentRequest`; `at` names it in errors.
fn embed_request(
    req: &Value,
    at: &str,
    directives: &mut FaultDirectives,
) -> Result<Embed, ApiError> {
    let content = key(req, "content")
        .filter(|c| c.is_object())
        .ok_or_else(|| invalid(format!("* {at}.content: content is not specified")))?;
    let texts: Vec<String> = key(content, "parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| key(p, "text").and_then(Value::as_str))
        .map(|t| directives.scan(t, |_, _| false))
        .collect();
    if texts.is_empty() {
        return Err(invalid(format!(
            "* {at}.content.parts: contents must have at least one text part"
        )));
    }
    let dims = match key(req, "outputDimensionality") {
        None => DEFAULT_DIMENSIONS,
        Some(v) => v
            .as_u64()
            .filter(|d| (1..=MAX_DIMENSIONS as u64).contains(d))
            .map(|d| d as usize)
            .ok_or_else(|| {
                invalid(format!(
                    "* {at}.output_dimensionality: must be from 1 to {MAX_DIMENSIONS}"
                ))
            })?,
    };
    Ok(Embed {
        text: texts.join(" "),
        dims,
    })
}

/// The embeddings asked for and the request's directives.
fn parse(body: &[u8], model: &str, batch: bool) -> Result<(Vec<Embed>, FaultDirectives), ApiError> {
    let obj = Value::Object(json_object(body, Dialect::Gemini)?);
    let mut directives = FaultDirectives::default();
    if !batch {
        let one = embed_request(&obj, "EmbedContentRequest", &mut directives)?;
        return Ok((vec![one], directives));
    }
    let requests = key(&obj, "requests")
        .and_then(Value::as_array)
        .filter(|r| !r.is_empty())
        .ok_or_else(|| {
            invalid("* BatchEmbedContentsRequest.requests: requests is not specified")
        })?;
    if requests.len() > MAX_BATCH {
        return Err(invalid(format!(
            "* BatchEmbedContentsRequest.requests: at most {MAX_BATCH} requests can be in one batch"
        )));
    }
    let want = format!("models/{model}");
    let embeds = requests
        .iter()
        .enumerate()
        .map(|(i, req)| {
            let at = format!("BatchEmbedContentsRequest.requests[{i}]");
            match key(req, "model").and_then(Value::as_str) {
                Some(m) if m == want => {}
                Some(m) => {
                    return Err(invalid(format!(
                        "* {at}.model: {m:?} does not match the model in the URL ({want:?})"
                    )))
                }
                None => return Err(invalid(format!("* {at}.model: model is not specified"))),
            }
            embed_request(req, &at, &mut directives)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((embeds, directives))
}

fn reply(embeds: &[Embed], batch: bool) -> Reply {
    let mut all = embeds.iter().map(|e| Values {
        values: vector(&e.text, e.dims),
    });
    if batch {
        #[derive(Serialize)]
        struct Batch {
            embeddings: Vec<Values>,
        }
        Reply::serialized(
            &Batch {
                embeddings: all.collect(),
            },
            None,
        )
    } else {
        #[derive(Serialize)]
        struct One {
            embedding: Option<Values>,
        }
        Reply::serialized(
            &One {
                embedding: all.next(),
            },
            None,
        )
    }
}

/// `:embedContent` (`batch` false) or `:batchEmbedContents`.
pub async fn embed(state: Arc<SimState>, model: &str, body: &[u8], batch: bool) -> Response {
    match parse(body, model, batch) {
        Ok((embeds, directives)) => {
            deliver(&state, Dialect::Gemini, &directives, || {
                Ok(reply(&embeds, batch))
            })
            .await
        }
        Err(e) => e.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::families::embeddings::tests::floats;
    use crate::faults::Fault;
    use serde_json::json;

    fn answer(body: Value, batch: bool) -> Value {
        let (embeds, _) =
            parse(body.to_string().as_bytes(), "gemini-embedding-001", batch).expect("valid");
        serde_json::from_slice(&reply(&embeds, batch).body).expect("json")
    }

    fn error(body: Value, batch: bool) -> String {
        let e =
            parse(body.to_string().as_bytes(), "gemini-embedding-001", batch).expect_err("invalid");
        assert_eq!(e.body()["error"]["status"], "INVALID_ARGUMENT");
        e.message
    }

    #[test]
    fn one_content_is_one_vector_of_its_parts() {
        let v = answer(
            json!({"content": {"parts": [{"text": "a"}, {"text": "b [[sim:cut]]"}]},
                   "taskType": "RETRIEVAL_QUERY", "outputDimensionality": 8}),
            false,
        );
        assert_eq!(floats(&v["embedding"]["values"]), vector("a b", 8));
        assert_eq!(v.as_object().map(|o| o.len()), Some(1));
        let v = answer(json!({"content": {"parts": [{"text": "a"}]}}), false);
        assert_eq!(
            v["embedding"]["values"].as_array().map(Vec::len),
            Some(3072)
        );
        // snake_case works too.
        let v = answer(
            json!({"content": {"parts": [{"text": "a"}]}, "output_dimensionality": 2}),
            false,
        );
        assert_eq!(v["embedding"]["values"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn a_batch_keeps_its_order_and_gathers_directives() {
        let req = |text: &str| {
            json!({"model": "models/gemini-embedding-001",
                   "content": {"parts": [{"text": text}]}, "outputDimensionality": 4})
        };
        let body = json!({"requests": [req("x"), req("y [[sim:status=503]]")]});
        let v = answer(body.clone(), true);
        assert_eq!(floats(&v["embeddings"][0]["values"]), vector("x", 4));
        assert_eq!(floats(&v["embeddings"][1]["values"]), vector("y", 4));
        let (_, d) =
            parse(body.to_string().as_bytes(), "gemini-embedding-001", true).expect("valid");
        assert_eq!(d.fault, Some(Fault::Status(503)));
    }

    #[test]
    fn bad_bodies_are_invalid_arguments() {
        let ok = json!({"model": "models/gemini-embedding-001",
                        "content": {"parts": [{"text": "x"}]}});
        assert!(error(json!({}), false).contains("content is not specified"));
        assert!(error(json!({"content": {"parts": []}}), false).contains("text part"));
        assert!(error(
            json!({"content": {"parts": [{"text": "x"}]}, "outputDimensionality": 0}),
            false
        )
        .contains("output_dimensionality"));
        assert!(error(json!({"requests": []}), true).contains("requests"));
        let mut other = ok.clone();
        other["model"] = json!("models/text-embedding-004");
        let message = error(json!({"requests": [ok.clone(), other]}), true);
        assert!(message.contains("requests[1].model"), "{message}");
        let mut missing = ok.clone();
        missing.as_object_mut().map(|o| o.remove("model"));
        assert!(error(json!({"requests": [missing]}), true).contains("not specified"));
        let many: Vec<Value> = (0..=MAX_BATCH).map(|_| ok.clone()).collect();
        assert!(error(json!({"requests": many}), true).contains("at most"));
    }
}
