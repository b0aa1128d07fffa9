//! The endpoint families beside chat: embeddings (OpenAI and Gemini
//! spellings), images, speech, transcription, rerank and moderation.
//!
//! Chat protocols share a canonical form because five of them must reach
//! three vendor dialects. These families are simpler: nearly every vendor
//! speaks the OpenAI-style shape, so a call is a passthrough that renames the
//! model and reads what to bill; only embeddings have a second spelling
//! (Gemini's `embedContent` / `batchEmbedContents`), translated both ways in
//! [`embeddings`].
//!
//! Large binary bodies never pass through the guest: a speech or image
//! answer is relayed by the host (`answer-mode.relay`, billed with meters
//! known from the request), and a transcription upload stays with the host
//! (`request-body.client-form`): the guest sees only the form's text fields.
//!
//! What each family bills, as [`Usage`] (tokens and meters):
//! - embeddings: input tokens, the vendor's count (Gemini reports none: the
//!   adapter counts about four characters per token, see
//!   [`embeddings::count_tokens`]);
//! - images: one `images` meter, `n` images of detail `SIZE/QUALITY`;
//! - speech: one `characters` meter, the input's characters;
//! - transcription: `audio-ms` from the vendor's report (`usage.seconds`,
//!   `duration`, or the last subtitle cue's end); none for `text` answers,
//!   which the host measures itself;
//! - rerank: `search-units` (the vendor's, else one per 100 documents) and
//!   the tokens the vendor reports;
//! - moderation: one `requests` meter.

pub mod embeddings;
pub mod transcription;

use serde_json::Value;

use crate::bindings::types::{
    AnswerMode, Meter, MeterKind, Protocol, RequestBody, RequestCtx, Setting, Usage,
};
use crate::json::{parse_request_object, parse_upstream_object, set_model, to_bytes};
use crate::TranslateError;

/// Whether `p` is one of the families (not chat, not video).
pub fn is_family(p: Protocol) -> bool {
    matches!(
        p,
        Protocol::Embeddings
            | Protocol::GeminiEmbeddings
            | Protocol::Images
            | Protocol::Speech
            | Protocol::Transcription
            | Protocol::Rerank
            | Protocol::Moderation
    )
}

/// The vendor request of one family call, before the vendor's path.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub body: RequestBody,
    pub answer: AnswerMode,
    pub state: String,
    /// Gemini's batch endpoint rather than the single one.
    pub batch: bool,
}

/// The client's answer to one family call.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    pub content_type: String,
    pub body: Vec<u8>,
    pub usage: Option<Usage>,
}

/// Usage with only meters.
pub fn metered(kind: MeterKind, quantity: u64, detail: Option<String>) -> Usage {
    Usage {
        meters: vec![Meter {
            kind,
            quantity,
            detail,
        }],
        ..tokens(0)
    }
}

/// Usage with only input tokens.
pub fn tokens(input: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: 0,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        reasoning_tokens: 0,
        meters: Vec::new(),
    }
}

fn json_body(value: &Value) -> RequestBody {
    RequestBody::Bytes(to_bytes(value))
}

fn unsupported_pair(client: Protocol, vendor: Protocol) -> TranslateError {
    TranslateError::unsupported(format!(
        "this adapter cannot serve {client:?} calls from a {vendor:?} vendor"
    ))
}

/// Builds the vendor request of a family call from the client's body.
pub fn request(
    vendor: Protocol,
    ctx: &RequestCtx,
    body: &[u8],
) -> Result<Prepared, TranslateError> {
    let client = ctx.client_protocol;
    let model = ctx.upstream_model.as_str();
    let translate = |body: RequestBody, state: String| Prepared {
        body,
        answer: AnswerMode::Translate,
        state,
        batch: false,
    };
    match (client, vendor) {
        (Protocol::Embeddings, Protocol::Embeddings)
        | (Protocol::Moderation, Protocol::Moderation) => {
            let mut v = parse_request_object(body)?;
            set_model(&mut v, model);
            Ok(translate(json_body(&v), String::new()))
        }
        (Protocol::Rerank, Protocol::Rerank) => {
            let mut v = parse_request_object(body)?;
            let documents = match v.get("documents") {
                Some(Value::Array(d)) if !d.is_empty() => d.len(),
                _ => {
                    return Err(TranslateError::invalid(
                        "`documents` must be a non-empty array",
                    ))
                }
            };
            set_model(&mut v, model);
            Ok(translate(json_body(&v), documents.to_string()))
        }
        (Protocol::Embeddings, Protocol::GeminiEmbeddings)
        | (Protocol::GeminiEmbeddings, Protocol::GeminiEmbeddings)
        | (Protocol::GeminiEmbeddings, Protocol::Embeddings) => {
            embeddings::request(client, vendor, ctx, body)
        }
        (Protocol::Images, Protocol::Images) => {
            let mut v = parse_request_object(body)?;
            let n = match v.get("n") {
                None | Some(Value::Null) => 1,
                Some(n) => n
                    .as_u64()
                    .filter(|n| (1..=10).contains(n))
                    .ok_or_else(|| TranslateError::invalid("`n` must be a whole number 1 to 10"))?,
            };
            let size = v.get("size").and_then(Value::as_str).unwrap_or("1024x1024");
            let quality = v
                .get("quality")
                .and_then(Value::as_str)
                .unwrap_or("standard");
            let detail = format!("{size}/{quality}");
            set_model(&mut v, model);
            Ok(Prepared {
                body: json_body(&v),
                answer: AnswerMode::Relay(metered(MeterKind::Images, n, Some(detail))),
                state: String::new(),
                batch: false,
            })
        }
        (Protocol::Speech, Protocol::Speech) => {
            let mut v = parse_request_object(body)?;
            let chars = match v.get("input") {
                Some(Value::String(s)) if !s.is_empty() => s.chars().count() as u64,
                _ => {
                    return Err(TranslateError::invalid(
                        "`input` must be a non-empty string",
                    ))
                }
            };
            set_model(&mut v, model);
            Ok(Prepared {
                body: json_body(&v),
                answer: AnswerMode::Relay(metered(MeterKind::Characters, chars, None)),
                state: String::new(),
                batch: false,
            })
        }
        (Protocol::Transcription, Protocol::Transcription) => {
            let fields = parse_request_object(body)?;
            let format = transcription::Format::of(&fields)?;
            Ok(translate(
                RequestBody::ClientForm(vec![Setting {
                    key: "model".to_owned(),
                    value: model.to_owned(),
                }]),
                format.name().to_owned(),
            ))
        }
        (client, vendor) => Err(unsupported_pair(client, vendor)),
    }
}

/// Builds the client's answer from the vendor's 2xx answer of a family call.
pub fn response(
    vendor: Protocol,
    ctx: &RequestCtx,
    state: &str,
    body: &[u8],
) -> Result<Finished, TranslateError> {
    let client = ctx.client_protocol;
    let json = |body: Vec<u8>, usage: Option<Usage>| Finished {
        content_type: "application/json".to_owned(),
        body,
        usage,
    };
    match (client, vendor) {
        (Protocol::Embeddings, Protocol::Embeddings) => {
            let mut v = parse_upstream_object(body)?;
            set_model(&mut v, &ctx.model);
            let usage = v
                .get("usage")
                .and_then(|u| crate::json::count_member(u, "prompt_tokens"))
                .map(tokens);
            Ok(json(to_bytes(&v), usage))
        }
        (Protocol::Moderation, Protocol::Moderation) => {
            let mut v = parse_upstream_object(body)?;
            set_model(&mut v, &ctx.model);
            Ok(json(
                to_bytes(&v),
                Some(metered(MeterKind::Requests, 1, None)),
            ))
        }
        (Protocol::Rerank, Protocol::Rerank) => {
            let mut v = parse_upstream_object(body)?;
            set_model(&mut v, &ctx.model);
            Ok(json(to_bytes(&v), Some(rerank_usage(&v, state))))
        }
        (Protocol::Embeddings, Protocol::GeminiEmbeddings)
        | (Protocol::GeminiEmbeddings, Protocol::GeminiEmbeddings)
        | (Protocol::GeminiEmbeddings, Protocol::Embeddings) => {
            let (body, usage) = embeddings::response(client, vendor, ctx, state, body)?;
            Ok(json(body, usage))
        }
        (Protocol::Transcription, Protocol::Transcription) => {
            let (content_type, usage) = transcription::read_answer(state, body)?;
            Ok(Finished {
                content_type: content_type.to_owned(),
                body: body.to_vec(),
                usage,
            })
        }
        (client, vendor) => Err(unsupported_pair(client, vendor)),
    }
}

/// A rerank answer's usage: the vendor's search units (Cohere's
/// `meta.billed_units.search_units`), else one per 100 documents as Cohere
/// counts them; and the tokens it reports (Jina's `usage.total_tokens`).
fn rerank_usage(v: &Value, state: &str) -> Usage {
    let units = v
        .pointer("/meta/billed_units/search_units")
        .and_then(crate::json::as_count)
        .unwrap_or_else(|| state.parse::<u64>().unwrap_or(1).div_ceil(100).max(1));
    let input = v
        .pointer("/usage/total_tokens")
        .or_else(|| v.pointer("/meta/billed_units/input_tokens"))
        .and_then(crate::json::as_count)
        .unwrap_or(0);
    Usage {
        input_tokens: input,
        ..metered(MeterKind::SearchUnits, units, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn ctx(client: Protocol) -> RequestCtx {
        RequestCtx {
            client_protocol: client,
            model: "client-model".into(),
            upstream_model: "vendor-model".into(),
            stream: false,
            request_id: "req_1".into(),
            client_headers: vec![],
            channel_options: vec![],
        }
    }

    fn body_json(p: &Prepared) -> Value {
        match &p.body {
            RequestBody::Bytes(b) => serde_json::from_slice(b).unwrap(),
            other => panic!("not bytes: {other:?}"),
        }
    }

    #[test]
    fn images_are_relayed_and_metered_by_count_size_and_quality() {
        let p = request(
            Protocol::Images,
            &ctx(Protocol::Images),
            br#"{"model":"client-model","prompt":"a cat","n":3,"size":"512x512","quality":"hd"}"#,
        )
        .unwrap();
        assert_eq!(body_json(&p)["model"], "vendor-model");
        assert_eq!(
            p.answer,
            AnswerMode::Relay(metered(MeterKind::Images, 3, Some("512x512/hd".into())))
        );
        let d = request(
            Protocol::Images,
            &ctx(Protocol::Images),
            br#"{"prompt":"a cat"}"#,
        )
        .unwrap();
        assert_eq!(
            d.answer,
            AnswerMode::Relay(metered(
                MeterKind::Images,
                1,
                Some("1024x1024/standard".into())
            ))
        );
        let bad = request(
            Protocol::Images,
            &ctx(Protocol::Images),
            br#"{"prompt":"a cat","n":11}"#,
        );
        assert!(matches!(bad, Err(TranslateError::InvalidRequest(_))));
    }

    #[test]
    fn speech_is_relayed_and_metered_by_characters() {
        let p = request(
            Protocol::Speech,
            &ctx(Protocol::Speech),
            "{\"input\":\"héllo\",\"voice\":\"alloy\"}".as_bytes(),
        )
        .unwrap();
        assert_eq!(
            p.answer,
            AnswerMode::Relay(metered(MeterKind::Characters, 5, None))
        );
        assert!(request(
            Protocol::Speech,
            &ctx(Protocol::Speech),
            b"{\"input\":\"\"}"
        )
        .is_err());
    }

    #[test]
    fn embeddings_and_moderation_rename_the_model_both_ways() {
        let c = ctx(Protocol::Embeddings);
        let p = request(
            Protocol::Embeddings,
            &c,
            br#"{"model":"client-model","input":"hi"}"#,
        )
        .unwrap();
        assert_eq!(body_json(&p)["model"], "vendor-model");
        let f = response(
            Protocol::Embeddings,
            &c,
            "",
            br#"{"object":"list","data":[],"model":"vendor-model","usage":{"prompt_tokens":7,"total_tokens":7}}"#,
        )
        .unwrap();
        let v: Value = serde_json::from_slice(&f.body).unwrap();
        assert_eq!(v["model"], "client-model");
        assert_eq!(f.usage, Some(tokens(7)));
        let m = response(
            Protocol::Moderation,
            &ctx(Protocol::Moderation),
            "",
            br#"{"id":"modr-1","model":"vendor-model","results":[]}"#,
        )
        .unwrap();
        assert_eq!(m.usage, Some(metered(MeterKind::Requests, 1, None)));
    }

    #[test]
    fn rerank_bills_the_vendors_search_units_or_one_per_hundred_documents() {
        let c = ctx(Protocol::Rerank);
        let docs: Vec<Value> = (0..150).map(|i| json!(format!("doc {i}"))).collect();
        let p = request(
            Protocol::Rerank,
            &c,
            &to_bytes(&json!({"query": "q", "documents": docs})),
        )
        .unwrap();
        assert_eq!(p.state, "150");
        let cohere = response(
            Protocol::Rerank,
            &c,
            &p.state,
            br#"{"results":[],"meta":{"billed_units":{"search_units":3}}}"#,
        )
        .unwrap();
        assert_eq!(cohere.usage, Some(metered(MeterKind::SearchUnits, 3, None)));
        let jina = response(
            Protocol::Rerank,
            &c,
            &p.state,
            br#"{"results":[],"usage":{"total_tokens":42}}"#,
        )
        .unwrap();
        assert_eq!(
            jina.usage,
            Some(Usage {
                input_tokens: 42,
                ..metered(MeterKind::SearchUnits, 2, None)
            })
        );
        assert!(request(Protocol::Rerank, &c, br#"{"query":"q","documents":[]}"#).is_err());
    }

    #[test]
    fn a_pair_the_adapter_cannot_serve_is_unsupported() {
        let e = request(Protocol::Images, &ctx(Protocol::Speech), b"{}").unwrap_err();
        assert!(matches!(e, TranslateError::Unsupported(_)));
    }
}
