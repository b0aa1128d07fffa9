//! The vendor endpoints besides chat and video, each a single non-streamed
//! call: embeddings, images, speech, transcription, rerank, moderation
//! (OpenAI style, `Authorization: Bearer`), and Gemini's embeddings
//! (`x-goog-api-key`). They exist so the gateway's relay, billing and error
//! mapping can be tested on every kind of call it forwards.
//!
//! The gateway's tests compute expected values from the rules below (the
//! wire details are in each endpoint's module), so changing any of them is a
//! breaking change:
//!
//! - **Tokens.** One whitespace-separated word is one token, as in chat
//!   ([`crate::tokens::count_words`]), counted on the text as sent
//!   (directives included).
//! - **Directives.** `[[sim:...]]` directives in an endpoint's text inputs
//!   (listed per endpoint below) are removed before the answer is computed,
//!   so `hi [[sim:latency_ms=50]]` embeds like `hi`. The fault items are the
//!   chat ones that make sense for one JSON (or binary) answer:
//!   `status=NNN` (with the dialect's error body; every 429 carries
//!   `retry-after: 7`), `status=429-quota` (out of money, as chat),
//!   `latency_ms=N`, `hang`, `malformed`, `cut`; `truncate` is accepted and
//!   changes nothing (as for a non-streamed chat answer). With several
//!   inputs, the items of all of them apply, later ones winning.
//! - **Queued faults** (`SimServer::push_fault`, `POST /_sim/faults`) are
//!   consumed by the next *valid* request of these endpoints as of chat
//!   (invalid ones answer 400 and leave the queue alone), and replace the
//!   request's own fault and latency directives. The image links
//!   (`GET /v1/images/files/...`) take none.
//! - **Malformed / cut.** `malformed`: 200 with the usual content type and
//!   the first half of the usual body (JSON that does not parse; truncated
//!   audio or text). `cut`: the same half, then the connection is aborted.
//!   Neither records a usage.
//! - **Recorded usage.** What the answer reports: embeddings `usage`
//!   (`{"prompt_tokens","total_tokens"}`), rerank `usage`
//!   (`{"total_tokens"}`), transcription `usage` (`{"type":"duration",
//!   "seconds"}`, json and verbose_json only); none for images, speech,
//!   moderation and Gemini embeddings, whose answers report none.
//! - **Recorded body.** The body as received, except for the transcription
//!   upload, recorded as a JSON summary (see [`audio`]).
//!
//! Per endpoint (details in each module):
//!
//! - [`embeddings`] `POST /v1/embeddings`: unit vectors seeded by FNV-1a of
//!   each input's text, 1536 long unless `dimensions`; directives in every
//!   string input.
//! - [`gemini_embed`] `POST /v1beta/models/{model}:embedContent` and
//!   `:batchEmbedContents`: the same vectors, 3072 long unless
//!   `outputDimensionality`; directives in every text part.
//! - [`images`] `POST /v1/images/generations`: `n` real PNGs, the requested
//!   size divided by 16; served at `GET /v1/images/files/{id}.png`;
//!   directives in `prompt`.
//! - [`audio`] `POST /v1/audio/speech`: silent audio of the requested format
//!   lasting `max(0.5 s, 60 ms × characters) / speed`; directives in
//!   `input`. `POST /v1/audio/transcriptions`: "Simulated transcription of
//!   S seconds of audio.", S read from a WAV header or estimated from the
//!   size; directives in the `prompt` field.
//! - [`rerank`] `POST /v1/rerank`: score = word overlap with the query plus
//!   a hash tie-breaker; directives in `query`.
//! - [`moderation`] `POST /v1/moderations`: flagged on `[[sim:flag]]`,
//!   `[[sim:flag=CATEGORY]]` or the word `violence`; directives in every
//!   text input.

pub mod audio;
pub mod embeddings;
pub mod gemini_embed;
pub mod images;
pub mod moderation;
pub mod rerank;

use axum::body::Body;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::errors::{ApiError, Dialect};
use crate::faults::{self, Fault, FaultDirectives};
use crate::record::ReportedUsage;
use crate::{sse, SimState};

/// An endpoint's answer when no fault intervenes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Reply {
    pub content_type: &'static str,
    pub body: Bytes,
    /// The usage the answer reports, for the record.
    pub usage: Option<Value>,
}

impl Reply {
    pub fn json(body: &Value, usage: Option<Value>) -> Self {
        Self {
            content_type: "application/json",
            body: Bytes::from(body.to_string()),
            usage,
        }
    }

    /// A JSON answer serialized from a typed value: f32 vectors keep their
    /// short f32 spelling (through [`Value`] they would print as f64).
    pub fn serialized(body: &impl Serialize, usage: Option<Value>) -> Self {
        let body = match serde_json::to_vec(body) {
            Ok(bytes) => Bytes::from(bytes),
            // Plain structs of strings and numbers always serialize.
            Err(e) => {
                tracing::error!("serializing an answer failed: {e}");
                Bytes::from(json!({"error": {"message": e.to_string()}}).to_string())
            }
        };
        Self {
            content_type: "application/json",
            body,
            usage,
        }
    }
}

/// Applies the queued fault, else the request's directives, then sends
/// `reply()` (computed only when it is needed; an error is sent as is).
pub(crate) async fn deliver(
    state: &SimState,
    dialect: Dialect,
    directives: &FaultDirectives,
    reply: impl FnOnce() -> Result<Reply, ApiError>,
) -> Response {
    let fault =
        match faults::apply(state, dialect, directives.latency, directives.fault.clone()).await {
            Ok(fault) => fault,
            Err(refused) => return refused,
        };
    let (malformed, cut) = (fault == Some(Fault::Malformed), fault == Some(Fault::Cut));
    let reply = match reply() {
        Ok(r) => r,
        Err(e) => return e.in_dialect(dialect).into_response(),
    };
    let half = reply.body.slice(..reply.body.len() / 2);
    let body = if cut {
        sse::paced(vec![half], None, true, state.shutdown.clone())
    } else if malformed {
        Body::from(half)
    } else {
        Body::from(reply.body)
    };
    let mut resp = body.into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(reply.content_type),
    );
    if let (false, false, Some(usage)) = (malformed, cut, reply.usage) {
        resp.extensions_mut().insert(ReportedUsage(usage));
    }
    resp
}

/// The body as a JSON object, or the dialect's 400.
pub(crate) fn json_object(body: &[u8], dialect: Dialect) -> Result<Map<String, Value>, ApiError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::invalid_request(
            format!("We could not parse the JSON body of your request: {e}."),
            None,
        )
        .in_dialect(dialect)
    })?;
    match value {
        Value::Object(obj) => Ok(obj),
        _ => Err(
            ApiError::invalid_request("The request body must be a JSON object.", None)
                .in_dialect(dialect),
        ),
    }
}

/// The non-empty string `key`, or an OpenAI-style 400 naming it.
pub(crate) fn required_str<'a>(
    obj: &'a Map<String, Value>,
    key: &'static str,
) -> Result<&'a str, ApiError> {
    match obj.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s),
        Some(Value::String(_)) => Err(ApiError::invalid_request(
            format!("'{key}' must not be empty."),
            Some(key),
        )),
        Some(_) => Err(ApiError::invalid_request(
            format!("'{key}' must be a string."),
            Some(key),
        )),
        None => Err(ApiError::invalid_request(
            format!("you must provide a '{key}' parameter"),
            Some(key),
        )),
    }
}

/// The optional string `key` (null counts as absent), or a 400 naming it.
pub(crate) fn optional_str<'a>(
    obj: &'a Map<String, Value>,
    key: &'static str,
) -> Result<Option<&'a str>, ApiError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::invalid_request(
            format!("'{key}' must be a string."),
            Some(key),
        )),
    }
}

/// The optional string `key`, which must be one of `allowed`.
pub(crate) fn optional_choice<'a>(
    obj: &'a Map<String, Value>,
    key: &'static str,
    allowed: &[&str],
) -> Result<Option<&'a str>, ApiError> {
    match optional_str(obj, key)? {
        Some(v) if !allowed.contains(&v) => Err(ApiError::invalid_request(
            format!(
                "Invalid value for '{key}': {v:?}. Supported values are: {}.",
                allowed.join(", ")
            ),
            Some(key),
        )),
        v => Ok(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(o) => o,
            _ => Map::new(),
        }
    }

    #[test]
    fn bodies_must_be_json_objects_in_the_dialect() {
        assert!(json_object(b"{}", Dialect::OpenAi).is_ok());
        let e = json_object(b"[1]", Dialect::Gemini).expect_err("array");
        assert_eq!(e.body()["error"]["status"], "INVALID_ARGUMENT");
        let e = json_object(b"{", Dialect::OpenAi).expect_err("broken");
        assert_eq!(e.body()["error"]["type"], "invalid_request_error");
    }

    #[test]
    fn field_readers_name_the_field() {
        let o = obj(json!({"a": "x", "b": "", "c": 1, "d": null}));
        assert_eq!(required_str(&o, "a").ok(), Some("x"));
        for key in ["b", "c", "missing"] {
            let e = required_str(&o, key).expect_err(key);
            assert_eq!(e.param, Some(key));
        }
        assert_eq!(optional_str(&o, "d").ok(), Some(None));
        assert!(optional_str(&o, "c").is_err());
        assert_eq!(optional_choice(&o, "a", &["x", "y"]).ok(), Some(Some("x")));
        let e = optional_choice(&o, "a", &["y"]).expect_err("not allowed");
        assert!(
            e.message.contains("Supported values are: y."),
            "{}",
            e.message
        );
    }
}
