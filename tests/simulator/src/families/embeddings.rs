//! `POST /v1/embeddings`: the OpenAI embeddings API, and the vectors the
//! Gemini embeddings share ([`vector`]).
//!
//! - **Body.** `{"model" (required), "input", "encoding_format"?, "dimensions"?,
//!   "user"?}`; other fields are ignored.
//! - **Inputs.** `input` is a string, an array of strings, an array of token
//!   ids, or an array of token-id arrays (at most 2048 inputs). An input's
//!   *text* is the string, or its ids joined by single spaces (`[1, 2]` →
//!   `1 2`). An empty string, array or token array, a mix of kinds, or a
//!   negative id → 400 (`param: "input"`).
//! - **Vectors.** `embedding` i is [`vector`] of input i's text with its
//!   directives removed, `dimensions` long (1..=3072) or 1536 by default:
//!   unit length, f32. `encoding_format` `"float"` (default) sends the
//!   numbers; `"base64"` sends standard padded base64 of their
//!   little-endian f32 bytes, which decode to exactly the same values.
//! - **Usage.** `prompt_tokens` = `total_tokens` = Σ over inputs of the
//!   words of a string input as sent (directives included) or the number of
//!   ids of a token input.
//! - **Answer.** `{"object": "list", "data": [{"object": "embedding",
//!   "index": i, "embedding": ...}], "model": <model as sent>, "usage":
//!   {...}}`.
//! - **Directives** in every string input (token inputs have none).

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use bytes::Bytes;
use serde::Serialize;
use serde_json::{json, Value};

use super::{deliver, json_object, optional_choice, required_str, Reply};
use crate::errors::{ApiError, Dialect};
use crate::faults::FaultDirectives;
use crate::tokens::{count_words, fnv1a};
use crate::SimState;

/// The vector length without `dimensions`.
pub const DEFAULT_DIMENSIONS: usize = 1536;
/// The largest `dimensions` accepted (text-embedding-3-large's).
pub const MAX_DIMENSIONS: usize = 3072;
/// The most inputs one request may carry.
pub const MAX_INPUTS: usize = 2048;

/// The simulated embedding of `text`: `dims` components drawn from
/// SplitMix64 seeded with FNV-1a of `text` (each the top 24 bits of a draw,
/// mapped to [-1, 1)), scaled to unit length (in f64, then rounded to f32).
/// Pure and platform-independent: the same text always gives the same
/// vector, different texts different ones.
pub fn vector(text: &str, dims: usize) -> Vec<f32> {
    let mut state = fnv1a(text);
    let raw: Vec<f64> = (0..dims)
        .map(|_| {
            let bits = splitmix64(&mut state) >> 40;
            (bits as f64) / f64::from(1u32 << 23) - 1.0
        })
        .collect();
    let norm = raw.iter().map(|x| x * x).sum::<f64>().sqrt();
    if norm == 0.0 {
        // Practically unreachable; still a unit vector.
        return (0..dims).map(|i| if i == 0 { 1.0 } else { 0.0 }).collect();
    }
    raw.iter().map(|x| (x / norm) as f32).collect()
}

/// One step of SplitMix64 (Steele, Lea and Flood): a tiny, well-mixed
/// generator whose output is fixed by its published constants.
pub(crate) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Standard padded base64 of the little-endian f32 bytes.
pub fn base64_f32(v: &[f32]) -> String {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// One input: the text its vector comes from and its tokens.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Input {
    /// Directives removed.
    text: String,
    tokens: u64,
}

#[derive(Debug, PartialEq)]
struct EmbeddingRequest {
    model: String,
    inputs: Vec<Input>,
    dims: usize,
    base64: bool,
    directives: FaultDirectives,
}

const INPUT_SHAPES: &str = "'input' must be a string, an array of strings, an array of \
                            tokens or an array of token arrays.";

fn bad_input(message: &str) -> ApiError {
    ApiError::invalid_request(message, Some("input"))
}

/// Token ids as a text: the ids joined by single spaces.
fn token_text(ids: &[Value]) -> Result<Input, ApiError> {
    if ids.is_empty() {
        return Err(bad_input("'input' must not contain an empty token array."));
    }
    let ids: Option<Vec<String>> = ids
        .iter()
        .map(|id| id.as_u64().map(|n| n.to_string()))
        .collect();
    let ids = ids.ok_or_else(|| bad_input("Token ids must be non-negative integers."))?;
    Ok(Input {
        tokens: ids.len() as u64,
        text: ids.join(" "),
    })
}

impl EmbeddingRequest {
    fn parse(body: &[u8]) -> Result<Self, ApiError> {
        let obj = json_object(body, Dialect::OpenAi)?;
        let model = required_str(&obj, "model")?.to_owned();
        let mut directives = FaultDirectives::default();
        let mut text_input = |s: &str| -> Result<Input, ApiError> {
            if s.is_empty() {
                return Err(bad_input("'input' cannot be an empty string."));
            }
            Ok(Input {
                tokens: count_words(s),
                text: directives.scan(s, |_, _| false),
            })
        };
        let inputs = match obj.get("input") {
            None | Some(Value::Null) => {
                return Err(bad_input("you must provide an 'input' parameter"))
            }
            Some(Value::String(s)) => vec![text_input(s)?],
            Some(Value::Array(items)) if items.is_empty() => {
                return Err(bad_input("'input' must not be an empty array."))
            }
            Some(Value::Array(items)) if items.len() > MAX_INPUTS => {
                return Err(bad_input(&format!(
                    "'input' may hold at most {MAX_INPUTS} inputs."
                )))
            }
            Some(Value::Array(items)) => match &items[0] {
                Value::String(_) => items
                    .iter()
                    .map(|item| match item {
                        Value::String(s) => text_input(s),
                        _ => Err(bad_input("'input' must not mix strings with other values.")),
                    })
                    .collect::<Result<_, _>>()?,
                Value::Number(_) => vec![token_text(items)?],
                Value::Array(_) => items
                    .iter()
                    .map(|item| match item {
                        Value::Array(ids) => token_text(ids),
                        _ => Err(bad_input(
                            "'input' must not mix token arrays with other values.",
                        )),
                    })
                    .collect::<Result<_, _>>()?,
                _ => return Err(bad_input(INPUT_SHAPES)),
            },
            Some(_) => return Err(bad_input(INPUT_SHAPES)),
        };
        let dims = match obj.get("dimensions") {
            None | Some(Value::Null) => DEFAULT_DIMENSIONS,
            Some(v) => v
                .as_u64()
                .filter(|d| (1..=MAX_DIMENSIONS as u64).contains(d))
                .map(|d| d as usize)
                .ok_or_else(|| {
                    ApiError::invalid_request(
                        format!("'dimensions' must be an integer from 1 to {MAX_DIMENSIONS}."),
                        Some("dimensions"),
                    )
                })?,
        };
        let format = optional_choice(&obj, "encoding_format", &["float", "base64"])?;
        Ok(Self {
            model,
            inputs,
            dims,
            base64: format == Some("base64"),
            directives,
        })
    }

    fn reply(&self) -> Reply {
        #[derive(Serialize)]
        #[serde(untagged)]
        enum Embedding {
            Float(Vec<f32>),
            Base64(String),
        }
        #[derive(Serialize)]
        struct Item {
            object: &'static str,
            index: usize,
            embedding: Embedding,
        }
        #[derive(Serialize)]
        struct Answer<'a> {
            object: &'static str,
            data: Vec<Item>,
            model: &'a str,
            usage: &'a Value,
        }
        let tokens: u64 = self.inputs.iter().map(|i| i.tokens).sum();
        let usage = json!({"prompt_tokens": tokens, "total_tokens": tokens});
        let data = self
            .inputs
            .iter()
            .enumerate()
            .map(|(index, input)| {
                let v = vector(&input.text, self.dims);
                Item {
                    object: "embedding",
                    index,
                    embedding: if self.base64 {
                        Embedding::Base64(base64_f32(&v))
                    } else {
                        Embedding::Float(v)
                    },
                }
            })
            .collect();
        let answer = Answer {
            object: "list",
            data,
            model: &self.model,
            usage: &usage,
        };
        Reply::serialized(&answer, Some(usage.clone()))
    }
}

pub async fn create(State(state): State<Arc<SimState>>, body: Bytes) -> Response {
    match EmbeddingRequest::parse(&body) {
        Ok(req) => deliver(&state, Dialect::OpenAi, &req.directives, || Ok(req.reply())).await,
        Err(e) => e.into_response(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::faults::Fault;

    fn parse(v: Value) -> Result<EmbeddingRequest, ApiError> {
        EmbeddingRequest::parse(v.to_string().as_bytes())
    }

    fn answer(v: Value) -> Value {
        let req = parse(v).expect("valid");
        serde_json::from_slice(&req.reply().body).expect("json")
    }

    /// The numbers of a JSON array as f32: each is the shortest spelling of
    /// an f32, so this gives back exactly the vector's values.
    pub(crate) fn floats(v: &Value) -> Vec<f32> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_f64)
            .map(|x| x as f32)
            .collect()
    }

    #[test]
    fn vectors_are_deterministic_unit_and_distinct() {
        let a = vector("hello world", 1536);
        assert_eq!(a.len(), 1536);
        assert_eq!(a, vector("hello world", 1536));
        let norm: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{norm}");
        assert_ne!(a, vector("hello world!", 1536));
        assert_eq!(vector("x", 1).len(), 1);
        assert!((vector("x", 1)[0].abs() - 1.0).abs() < 1e-6);
    }

    #[test]
    fn splitmix64_matches_its_reference_output() {
        // The first outputs for seed 0, as published with the algorithm.
        let mut s = 0u64;
        assert_eq!(splitmix64(&mut s), 0xe220_a839_7b1d_cdaf);
        assert_eq!(splitmix64(&mut s), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn every_input_kind_and_its_tokens() {
        let v = answer(json!({"model": "m", "input": "one two three"}));
        assert_eq!(v["object"], "list");
        assert_eq!(v["model"], "m");
        assert_eq!(v["data"][0]["object"], "embedding");
        assert_eq!(v["data"][0]["index"], 0);
        assert_eq!(
            v["data"][0]["embedding"].as_array().map(Vec::len),
            Some(1536)
        );
        assert_eq!(v["usage"], json!({"prompt_tokens": 3, "total_tokens": 3}));

        let v = answer(json!({"model": "m", "input": ["a b", "c"], "dimensions": 8}));
        assert_eq!(v["data"][1]["index"], 1);
        assert_eq!(v["data"][1]["embedding"].as_array().map(Vec::len), Some(8));
        assert_eq!(v["usage"]["total_tokens"], 3);

        let v = answer(json!({"model": "m", "input": [5, 6, 7], "dimensions": 4}));
        assert_eq!(v["usage"]["total_tokens"], 3);
        assert_eq!(floats(&v["data"][0]["embedding"]), vector("5 6 7", 4));

        let v = answer(json!({"model": "m", "input": [[1], [2, 3]], "dimensions": 4}));
        assert_eq!(v["data"].as_array().map(Vec::len), Some(2));
        assert_eq!(v["usage"]["total_tokens"], 3);
    }

    #[test]
    fn base64_decodes_to_the_float_values() {
        let body = |format: &str| {
            json!({"model": "m", "input": "same text", "dimensions": 16,
                   "encoding_format": format})
        };
        let float = answer(body("float"));
        let b64 = answer(body("base64"));
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64["data"][0]["embedding"].as_str().expect("a string"))
            .expect("base64");
        let decoded: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(floats(&float["data"][0]["embedding"]), decoded);
        assert_eq!(decoded, vector("same text", 16));
    }

    #[test]
    fn directives_are_removed_before_embedding_but_counted() {
        let req = parse(json!({"model": "m", "dimensions": 4,
            "input": ["hi [[sim:latency_ms=7]]", "x [[sim:status=429]]"]}))
        .expect("valid");
        assert_eq!(req.inputs[0].text, "hi");
        assert_eq!(req.inputs[0].tokens, 2);
        assert_eq!(req.directives.fault, Some(Fault::Status(429)));
        assert!(req.directives.latency.is_some());
    }

    #[test]
    fn bad_bodies_name_the_field() {
        for (body, param) in [
            (json!({"input": "x"}), "model"),
            (json!({"model": "m"}), "input"),
            (json!({"model": "m", "input": ""}), "input"),
            (json!({"model": "m", "input": []}), "input"),
            (json!({"model": "m", "input": ["a", ""]}), "input"),
            (json!({"model": "m", "input": ["a", 1]}), "input"),
            (json!({"model": "m", "input": [[]]}), "input"),
            (json!({"model": "m", "input": [-1]}), "input"),
            (json!({"model": "m", "input": {"a": 1}}), "input"),
            (
                json!({"model": "m", "input": "x", "dimensions": 0}),
                "dimensions",
            ),
            (
                json!({"model": "m", "input": "x", "dimensions": 4000}),
                "dimensions",
            ),
            (
                json!({"model": "m", "input": "x", "encoding_format": "int8"}),
                "encoding_format",
            ),
        ] {
            let e = parse(body.clone()).expect_err(&body.to_string());
            assert_eq!(e.param, Some(param), "{body}");
            assert_eq!(e.status, axum::http::StatusCode::BAD_REQUEST);
        }
    }
}
