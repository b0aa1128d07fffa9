//! Embeddings in both spellings: OpenAI's `POST /embeddings` (`input`, a
//! string or a list; `encoding_format` `float` or `base64`, which the openai
//! SDK asks for by default; `dimensions`) and Gemini's `:embedContent` /
//! `:batchEmbedContents` (`content.parts[].text`; `outputDimensionality`).
//!
//! An OpenAI client in front of a Gemini vendor always goes through the
//! batch endpoint (one request per input); a Gemini client in front of an
//! OpenAI vendor gets the single or batch shape it asked for. Gemini reports
//! no usage for embeddings, so for a Gemini vendor the adapter counts the
//! input tokens itself ([`count_tokens`]).

use base64::Engine;
use serde_json::{json, Map, Value};

use super::{tokens, Prepared};
use crate::bindings::types::{AnswerMode, Protocol, RequestBody, RequestCtx, Usage};
use crate::json::{as_count, parse_request_object, parse_upstream_object, to_bytes};
use crate::TranslateError;

/// A deliberately simple token count for vendors that report none: one
/// token per four characters of each input, at least one per input. It is
/// what the call is billed at, so it errs on the generous side for English.
pub fn count_tokens<'a>(texts: impl IntoIterator<Item = &'a str>) -> u64 {
    texts
        .into_iter()
        .map(|t| (t.chars().count() as u64).div_ceil(4).max(1))
        .sum()
}

/// What the answer needs to remember about the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct State {
    /// OpenAI client: vectors as base64 little-endian `f32`s.
    base64: bool,
    /// Gemini client: the batch shape.
    batch: bool,
    /// The adapter's own count, for a vendor that reports none.
    tokens: u64,
}

impl State {
    fn encode(self) -> String {
        format!("{} {} {}", self.base64 as u8, self.batch as u8, self.tokens)
    }

    fn decode(s: &str) -> State {
        let mut parts = s.split(' ');
        let mut flag = || parts.next() == Some("1");
        let base64 = flag();
        let batch = flag();
        let tokens = parts.next().and_then(|t| t.parse().ok()).unwrap_or(0);
        State {
            base64,
            batch,
            tokens,
        }
    }
}

/// The texts of an OpenAI `input`.
fn openai_inputs(v: &Value) -> Result<Vec<String>, TranslateError> {
    let invalid =
        || TranslateError::invalid("`input` must be a non-empty string or list of strings");
    match v.get("input") {
        Some(Value::String(s)) if !s.is_empty() => Ok(vec![s.clone()]),
        Some(Value::Array(items)) if !items.is_empty() => items
            .iter()
            .map(|i| match i {
                Value::String(s) if !s.is_empty() => Ok(s.clone()),
                Value::Number(_) | Value::Array(_) => Err(TranslateError::unsupported(
                    "token-id input cannot be sent to this vendor; send text",
                )),
                _ => Err(invalid()),
            })
            .collect(),
        _ => Err(invalid()),
    }
}

/// The text of one Gemini `content` (its parts' texts, joined by newlines).
fn gemini_text(content: Option<&Value>) -> Result<String, TranslateError> {
    let parts = content
        .and_then(|c| c.get("parts"))
        .and_then(Value::as_array)
        .filter(|p| !p.is_empty())
        .ok_or_else(|| TranslateError::invalid("`content.parts` must be a non-empty list"))?;
    let texts: Vec<&str> = parts
        .iter()
        .map(|p| {
            p.get("text")
                .and_then(Value::as_str)
                .ok_or_else(|| TranslateError::unsupported("only text parts can be embedded"))
        })
        .collect::<Result<_, _>>()?;
    Ok(texts.join("\n"))
}

/// The single or batch requests of a Gemini client body.
fn gemini_requests(v: &Value) -> Result<(bool, Vec<&Value>), TranslateError> {
    match v.get("requests") {
        Some(Value::Array(r)) if !r.is_empty() => Ok((true, r.iter().collect())),
        Some(_) => Err(TranslateError::invalid(
            "`requests` must be a non-empty list",
        )),
        None => Ok((false, vec![v])),
    }
}

pub fn request(
    client: Protocol,
    vendor: Protocol,
    ctx: &RequestCtx,
    body: &[u8],
) -> Result<Prepared, TranslateError> {
    let v = parse_request_object(body)?;
    let model_path = format!(
        "models/{}",
        ctx.upstream_model
            .strip_prefix("models/")
            .unwrap_or(&ctx.upstream_model)
    );
    let (out, state, batch) = match (client, vendor) {
        (Protocol::Embeddings, _) => {
            let texts = openai_inputs(&v)?;
            let base64 = match v.get("encoding_format").and_then(Value::as_str) {
                None | Some("float") => false,
                Some("base64") => true,
                Some(other) => {
                    return Err(TranslateError::invalid(format!(
                        "`encoding_format` must be `float` or `base64`, not `{other}`"
                    )))
                }
            };
            let dims = v.get("dimensions").and_then(as_count);
            let requests: Vec<Value> = texts
                .iter()
                .map(|t| {
                    let mut r = json!({"model": model_path, "content": {"parts": [{"text": t}]}});
                    if let Some(d) = dims {
                        r["outputDimensionality"] = json!(d);
                    }
                    r
                })
                .collect();
            let state = State {
                base64,
                batch: true,
                tokens: count_tokens(texts.iter().map(String::as_str)),
            };
            (json!({ "requests": requests }), state, true)
        }
        (Protocol::GeminiEmbeddings, Protocol::GeminiEmbeddings) => {
            let (batch, requests) = gemini_requests(&v)?;
            let texts: Vec<String> = requests
                .iter()
                .map(|r| gemini_text(r.get("content")))
                .collect::<Result<_, _>>()?;
            let state = State {
                base64: false,
                batch,
                tokens: count_tokens(texts.iter().map(String::as_str)),
            };
            let mut out = v.clone();
            if let Some(Value::Array(rs)) = out.get_mut("requests") {
                for r in rs {
                    if let Some(o) = r.as_object_mut() {
                        o.insert("model".to_owned(), json!(model_path));
                    }
                }
            }
            (out, state, batch)
        }
        (Protocol::GeminiEmbeddings, Protocol::Embeddings) => {
            let (batch, requests) = gemini_requests(&v)?;
            let texts: Vec<String> = requests
                .iter()
                .map(|r| gemini_text(r.get("content")))
                .collect::<Result<_, _>>()?;
            let dims: Vec<Option<u64>> = requests
                .iter()
                .map(|r| r.get("outputDimensionality").and_then(as_count))
                .collect();
            if dims.windows(2).any(|w| w[0] != w[1]) {
                return Err(TranslateError::unsupported(
                    "requests with different `outputDimensionality` cannot be sent together to this vendor",
                ));
            }
            let mut out = json!({
                "model": ctx.upstream_model,
                "input": texts,
                "encoding_format": "float",
            });
            if let Some(Some(d)) = dims.first() {
                out["dimensions"] = json!(d);
            }
            let state = State {
                base64: false,
                batch,
                tokens: 0,
            };
            (out, state, false)
        }
        _ => return Err(super::unsupported_pair(client, vendor)),
    };
    Ok(Prepared {
        body: RequestBody::Bytes(to_bytes(&out)),
        answer: AnswerMode::Translate,
        state: state.encode(),
        batch,
    })
}

/// A vector as JSON numbers.
fn floats(values: &Value) -> Result<Vec<f32>, TranslateError> {
    values
        .as_array()
        .ok_or_else(|| TranslateError::upstream("an embedding is not a list of numbers"))?
        .iter()
        .map(|x| {
            x.as_f64()
                .map(|f| f as f32)
                .ok_or_else(|| TranslateError::upstream("an embedding holds a non-number"))
        })
        .collect()
}

/// An OpenAI `embedding` member: numbers, or base64 of little-endian `f32`s.
fn openai_vector(e: &Value) -> Result<Vec<f32>, TranslateError> {
    match e {
        Value::String(s) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(s)
                .map_err(|_| TranslateError::upstream("a base64 embedding is not base64"))?;
            if bytes.len() % 4 != 0 {
                return Err(TranslateError::upstream(
                    "a base64 embedding is not a whole number of f32s",
                ));
            }
            Ok(bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect())
        }
        other => floats(other),
    }
}

fn encode_vector(v: &[f32], base64: bool) -> Value {
    if base64 {
        let bytes: Vec<u8> = v.iter().flat_map(|f| f.to_le_bytes()).collect();
        Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
    } else {
        json!(v)
    }
}

pub fn response(
    client: Protocol,
    vendor: Protocol,
    ctx: &RequestCtx,
    state: &str,
    body: &[u8],
) -> Result<(Vec<u8>, Option<Usage>), TranslateError> {
    let st = State::decode(state);
    let v = parse_upstream_object(body)?;
    match (client, vendor) {
        (Protocol::Embeddings, _) => {
            let list = v
                .get("embeddings")
                .and_then(Value::as_array)
                .ok_or_else(|| TranslateError::upstream("the answer has no `embeddings` list"))?;
            let data = list
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    let values = floats(e.get("values").unwrap_or(&Value::Null))?;
                    Ok(json!({"object": "embedding", "index": i, "embedding": encode_vector(&values, st.base64)}))
                })
                .collect::<Result<Vec<Value>, TranslateError>>()?;
            let out = json!({
                "object": "list",
                "data": data,
                "model": ctx.model,
                "usage": {"prompt_tokens": st.tokens, "total_tokens": st.tokens},
            });
            Ok((to_bytes(&out), Some(tokens(st.tokens))))
        }
        (Protocol::GeminiEmbeddings, Protocol::GeminiEmbeddings) => {
            Ok((body.to_vec(), Some(tokens(st.tokens))))
        }
        (Protocol::GeminiEmbeddings, Protocol::Embeddings) => {
            let mut data: Vec<&Value> = v
                .get("data")
                .and_then(Value::as_array)
                .ok_or_else(|| TranslateError::upstream("the answer has no `data` list"))?
                .iter()
                .collect();
            data.sort_by_key(|d| d.get("index").and_then(Value::as_u64).unwrap_or(0));
            let vectors = data
                .iter()
                .map(|d| {
                    let values = openai_vector(d.get("embedding").unwrap_or(&Value::Null))?;
                    let mut m = Map::new();
                    m.insert("values".to_owned(), json!(values));
                    Ok(Value::Object(m))
                })
                .collect::<Result<Vec<Value>, TranslateError>>()?;
            let out = if st.batch {
                json!({ "embeddings": vectors })
            } else {
                let first = vectors
                    .into_iter()
                    .next()
                    .ok_or_else(|| TranslateError::upstream("the answer has no embedding"))?;
                json!({ "embedding": first })
            };
            let usage = v
                .get("usage")
                .and_then(|u| crate::json::count_member(u, "prompt_tokens"))
                .map(tokens);
            Ok((to_bytes(&out), usage))
        }
        _ => Err(super::unsupported_pair(client, vendor)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::ctx;
    use super::*;

    fn sent(p: &Prepared) -> Value {
        match &p.body {
            RequestBody::Bytes(b) => serde_json::from_slice(b).unwrap(),
            other => panic!("not bytes: {other:?}"),
        }
    }

    #[test]
    fn an_openai_client_reaches_gemini_through_the_batch_endpoint() {
        let c = ctx(Protocol::Embeddings);
        let p = request(
            Protocol::Embeddings,
            Protocol::GeminiEmbeddings,
            &c,
            br#"{"model":"client-model","input":["hello world","hi"],"encoding_format":"base64","dimensions":3}"#,
        )
        .unwrap();
        assert!(p.batch);
        assert_eq!(
            sent(&p),
            json!({"requests": [
                {"model": "models/vendor-model", "content": {"parts": [{"text": "hello world"}]}, "outputDimensionality": 3},
                {"model": "models/vendor-model", "content": {"parts": [{"text": "hi"}]}, "outputDimensionality": 3},
            ]})
        );
        let (body, usage) = response(
            Protocol::Embeddings,
            Protocol::GeminiEmbeddings,
            &c,
            &p.state,
            br#"{"embeddings":[{"values":[0.5,-1.0,0.25]},{"values":[1,0,0]}]}"#,
        )
        .unwrap();
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["model"], "client-model");
        assert_eq!(v["data"][1]["index"], 1);
        // "hello world" is 11 characters: 3 tokens; "hi" 1.
        assert_eq!(usage, Some(tokens(4)));
        assert_eq!(v["usage"]["prompt_tokens"], 4);
        let b64 = v["data"][0]["embedding"].as_str().unwrap();
        assert_eq!(
            openai_vector(&json!(b64)).unwrap(),
            vec![0.5f32, -1.0, 0.25]
        );
    }

    #[test]
    fn a_gemini_client_reaches_an_openai_vendor_single_and_batch() {
        let c = ctx(Protocol::GeminiEmbeddings);
        let single = request(
            Protocol::GeminiEmbeddings,
            Protocol::Embeddings,
            &c,
            br#"{"content":{"parts":[{"text":"a"},{"text":"b"}]},"outputDimensionality":2}"#,
        )
        .unwrap();
        assert_eq!(
            sent(&single),
            json!({"model": "vendor-model", "input": ["a\nb"], "encoding_format": "float", "dimensions": 2})
        );
        let (body, usage) = response(
            Protocol::GeminiEmbeddings,
            Protocol::Embeddings,
            &c,
            &single.state,
            br#"{"data":[{"index":0,"embedding":[0.1,0.2]}],"usage":{"prompt_tokens":2,"total_tokens":2}}"#,
        )
        .unwrap();
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["embedding"]["values"].as_array().unwrap().len(), 2);
        assert_eq!(usage, Some(tokens(2)));
        let batch = request(
            Protocol::GeminiEmbeddings,
            Protocol::Embeddings,
            &c,
            br#"{"requests":[{"model":"models/x","content":{"parts":[{"text":"a"}]}},{"model":"models/x","content":{"parts":[{"text":"b"}]}}]}"#,
        )
        .unwrap();
        let (body, _) = response(
            Protocol::GeminiEmbeddings,
            Protocol::Embeddings,
            &c,
            &batch.state,
            br#"{"data":[{"index":1,"embedding":[2.0]},{"index":0,"embedding":[1.0]}]}"#,
        )
        .unwrap();
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            v,
            json!({"embeddings": [{"values": [1.0]}, {"values": [2.0]}]})
        );
    }

    #[test]
    fn a_gemini_batch_passes_through_with_its_models_renamed() {
        let c = ctx(Protocol::GeminiEmbeddings);
        let p = request(
            Protocol::GeminiEmbeddings,
            Protocol::GeminiEmbeddings,
            &c,
            br#"{"requests":[{"model":"models/client-model","content":{"parts":[{"text":"abcdefgh"}]},"taskType":"RETRIEVAL_QUERY"}]}"#,
        )
        .unwrap();
        assert!(p.batch);
        assert_eq!(sent(&p)["requests"][0]["model"], "models/vendor-model");
        assert_eq!(sent(&p)["requests"][0]["taskType"], "RETRIEVAL_QUERY");
        let (_, usage) = response(
            Protocol::GeminiEmbeddings,
            Protocol::GeminiEmbeddings,
            &c,
            &p.state,
            br#"{"embeddings":[{"values":[1]}]}"#,
        )
        .unwrap();
        assert_eq!(usage, Some(tokens(2)));
    }

    #[test]
    fn token_ids_and_bad_formats_are_refused() {
        let c = ctx(Protocol::Embeddings);
        let ids = request(
            Protocol::Embeddings,
            Protocol::GeminiEmbeddings,
            &c,
            br#"{"input":[[1,2,3]]}"#,
        );
        assert!(matches!(ids, Err(TranslateError::Unsupported(_))));
        let fmt = request(
            Protocol::Embeddings,
            Protocol::GeminiEmbeddings,
            &c,
            br#"{"input":"x","encoding_format":"int8"}"#,
        );
        assert!(matches!(fmt, Err(TranslateError::InvalidRequest(_))));
    }
}
