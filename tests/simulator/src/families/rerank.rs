//! `POST /v1/rerank`: a rerank API in the shape Jina and Cohere share.
//!
//! - **Body.** `{"model" (required), "query" (required), "documents" (1 to
//!   1000, each a string or `{"text": string}`), "top_n"? (≥ 1),
//!   "return_documents"? (default false)}`; other fields are ignored.
//! - **Scores** ([`score`]): with Q the distinct words of the query without
//!   directives and D those of the document — a word being a maximal run of
//!   alphanumeric characters, lower-cased — `overlap` = |Q ∩ D| / |Q| (0
//!   when Q is empty), and `relevance_score` = 0.99 · overlap + 0.01 ·
//!   (h mod 1000) / 1000 with h = FNV-1a of `<query without
//!   directives>\n<document text>`: in [0, 1), higher for more shared
//!   words, the hash only breaking ties.
//! - **Order.** By score descending, equal scores by index ascending; the
//!   first `top_n` are kept (all without it).
//! - **Answer.** `{"model": <as sent>, "results": [{"index",
//!   "relevance_score", "document"?: {"text"}}], "usage": {"total_tokens"},
//!   "meta": {"billed_units": {"search_units"}}}`; `document` only with
//!   `return_documents: true`.
//! - **Usage.** `total_tokens` = words of the query as sent + Σ words of
//!   the documents; `search_units` = ⌈documents / 100⌉ (Cohere's unit).
//!   The `usage` object is what is recorded.
//! - **Directives** in `query`.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{json, Value};

use super::{deliver, json_object, required_str, Reply};
use crate::errors::{ApiError, Dialect};
use crate::faults::FaultDirectives;
use crate::tokens::{count_words, fnv1a};
use crate::SimState;

pub const MAX_DOCUMENTS: usize = 1000;
/// Documents per Cohere search unit.
pub const DOCUMENTS_PER_UNIT: usize = 100;

/// The distinct lower-cased alphanumeric words of `text`.
fn words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The relevance of `document` to `query` (directives already removed
/// from the query), as documented in the module.
pub fn score(query: &str, document: &str) -> f64 {
    let q = words(query);
    let overlap = if q.is_empty() {
        0.0
    } else {
        let d = words(document);
        q.intersection(&d).count() as f64 / q.len() as f64
    };
    let tie = (fnv1a(&format!("{query}\n{document}")) % 1000) as f64 / 1000.0;
    0.99 * overlap + 0.01 * tie
}

#[derive(Debug, PartialEq)]
struct Rerank {
    model: String,
    /// Without directives.
    query: String,
    documents: Vec<String>,
    top_n: Option<usize>,
    return_documents: bool,
    tokens: u64,
    directives: FaultDirectives,
}

impl Rerank {
    fn parse(body: &[u8]) -> Result<Self, ApiError> {
        let obj = json_object(body, Dialect::OpenAi)?;
        let model = required_str(&obj, "model")?.to_owned();
        let raw_query = required_str(&obj, "query")?;
        let mut directives = FaultDirectives::default();
        let query = directives.scan(raw_query, |_, _| false);
        let bad_documents = || {
            ApiError::invalid_request(
                format!(
                    "'documents' must be an array of 1 to {MAX_DOCUMENTS} strings or \
                     {{\"text\": string}} objects."
                ),
                Some("documents"),
            )
        };
        let documents = obj
            .get("documents")
            .and_then(Value::as_array)
            .filter(|d| (1..=MAX_DOCUMENTS).contains(&d.len()))
            .ok_or_else(bad_documents)?
            .iter()
            .map(|d| match d {
                Value::String(s) => Some(s.clone()),
                other => other.get("text").and_then(Value::as_str).map(str::to_owned),
            })
            .collect::<Option<Vec<String>>>()
            .ok_or_else(bad_documents)?;
        let top_n = match obj.get("top_n") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .filter(|n| *n >= 1)
                    .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
                    .ok_or_else(|| {
                        ApiError::invalid_request(
                            "'top_n' must be a positive integer.",
                            Some("top_n"),
                        )
                    })?,
            ),
        };
        let return_documents = match obj.get("return_documents") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(ApiError::invalid_request(
                    "'return_documents' must be a boolean.",
                    Some("return_documents"),
                ))
            }
        };
        let tokens = count_words(raw_query) + documents.iter().map(|d| count_words(d)).sum::<u64>();
        Ok(Self {
            model,
            query,
            documents,
            top_n,
            return_documents,
            tokens,
            directives,
        })
    }

    fn reply(&self) -> Reply {
        let mut ranked: Vec<(usize, f64)> = self
            .documents
            .iter()
            .enumerate()
            .map(|(i, d)| (i, score(&self.query, d)))
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.truncate(self.top_n.unwrap_or(ranked.len()));
        let results: Vec<Value> = ranked
            .iter()
            .map(|&(index, relevance)| {
                let mut r = json!({"index": index, "relevance_score": relevance});
                if self.return_documents {
                    r["document"] = json!({"text": self.documents[index]});
                }
                r
            })
            .collect();
        let usage = json!({"total_tokens": self.tokens});
        let units = self.documents.len().div_ceil(DOCUMENTS_PER_UNIT);
        Reply::json(
            &json!({
                "model": self.model,
                "results": results,
                "usage": usage,
                "meta": {"billed_units": {"search_units": units}},
            }),
            Some(usage),
        )
    }
}

pub async fn rerank(State(state): State<Arc<SimState>>, body: Bytes) -> Response {
    match Rerank::parse(&body) {
        Ok(req) => deliver(&state, Dialect::OpenAi, &req.directives, || Ok(req.reply())).await,
        Err(e) => e.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::Fault;

    fn answer(v: Value) -> Value {
        let req = Rerank::parse(v.to_string().as_bytes()).expect("valid");
        serde_json::from_slice(&req.reply().body).expect("json")
    }

    #[test]
    fn scores_follow_word_overlap_within_the_unit_interval() {
        let q = "capital of France";
        let full = score(q, "Paris is the capital of france.");
        let some = score(q, "The capital city");
        let none = score(q, "Bananas are yellow");
        assert!(full > some && some > none, "{full} {some} {none}");
        for s in [full, some, none, score("", "x"), score("a", "a")] {
            assert!((0.0..1.0).contains(&s), "{s}");
        }
        assert!((full - 0.99).abs() < 0.011);
        assert!(none < 0.01);
        assert_eq!(score(q, "x"), score(q, "x"), "deterministic");
        let h = fnv1a("a b\nb") % 1000;
        assert_eq!(score("a b", "b"), 0.99 * 0.5 + 0.01 * (h as f64 / 1000.0));
    }

    #[test]
    fn results_are_sorted_cut_and_carry_documents_on_request() {
        let body = json!({"model": "rerank-sim", "query": "red apple [[sim:latency_ms=1]]",
            "documents": ["green pear", {"text": "a red apple"}, "red car"],
            "top_n": 2, "return_documents": true});
        let v = answer(body);
        assert_eq!(v["model"], "rerank-sim");
        let results = v["results"].as_array().expect("results");
        assert_eq!(results.len(), 2);
        assert_eq!(results[0]["index"], 1);
        assert_eq!(results[0]["document"], json!({"text": "a red apple"}));
        assert_eq!(results[1]["index"], 2);
        assert_eq!(
            results[0]["relevance_score"].as_f64(),
            Some(score("red apple", "a red apple"))
        );
        // 2 query words + the markers' 1 word + 2 + 3 + 2.
        assert_eq!(v["usage"], json!({"total_tokens": 10}));
        assert_eq!(v["meta"]["billed_units"]["search_units"], 1);

        let v = answer(json!({"model": "m", "query": "q", "documents": ["a", "b"]}));
        assert_eq!(v["results"].as_array().map(Vec::len), Some(2));
        assert!(v["results"][0].get("document").is_none());
    }

    #[test]
    fn directives_and_bad_bodies() {
        let r = Rerank::parse(
            json!({"model": "m", "query": "q [[sim:status=429]]", "documents": ["a"]})
                .to_string()
                .as_bytes(),
        )
        .expect("valid");
        assert_eq!(r.query, "q");
        assert_eq!(r.directives.fault, Some(Fault::Status(429)));
        for (body, param) in [
            (json!({"query": "q", "documents": ["a"]}), "model"),
            (json!({"model": "m", "documents": ["a"]}), "query"),
            (json!({"model": "m", "query": "q"}), "documents"),
            (
                json!({"model": "m", "query": "q", "documents": []}),
                "documents",
            ),
            (
                json!({"model": "m", "query": "q", "documents": [1]}),
                "documents",
            ),
            (
                json!({"model": "m", "query": "q", "documents": ["a"], "top_n": 0}),
                "top_n",
            ),
            (
                json!({"model": "m", "query": "q", "documents": ["a"], "return_documents": "yes"}),
                "return_documents",
            ),
        ] {
            let e = Rerank::parse(body.to_string().as_bytes()).expect_err(&body.to_string());
            assert_eq!(e.param, Some(param), "{body}");
        }
    }
}
