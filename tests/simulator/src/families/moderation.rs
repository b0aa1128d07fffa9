//! `POST /v1/moderations`: the OpenAI moderation API.
//!
//! - **Body.** `{"model"? (default "omni-moderation-latest"), "input"}`;
//!   `input` is a string, an array of strings (one result each), or an
//!   array of multimodal parts (`{"type": "text", "text"}`, `{"type":
//!   "image_url", "image_url": {"url"}}`: one result for all of them, its
//!   text being the text parts joined by single spaces). A missing or empty
//!   array input, or an unknown part → 400 (`param: "input"`).
//! - **Flags.** Per input, a category is flagged by `[[sim:flag]]`
//!   (`violence`), by `[[sim:flag=CATEGORY]]` (any of [`CATEGORIES`], e.g.
//!   `[[sim:flag=self-harm/intent]]`; several may be given), and
//!   `violence` also by the word `violence` (any case, as a whole
//!   alphanumeric word) in the text. A flagged category scores 0.9; any
//!   other scores (FNV-1a of `<text without directives>#<category>` mod
//!   1000) / 100 000, below 0.01. `flagged` is true when any category is.
//! - **Input types.** `category_applied_input_types` is `["text"]` for
//!   every category of a text input; with an image part, the categories
//!   that apply to images ([`IMAGE_CATEGORIES`]) list `"image"` too (only
//!   `"image"` when there is no text), and the others `["text"]` (`[]`
//!   without text).
//! - **Answer.** `{"id": "modr-<16 hex digits of FNV-1a of the inputs'
//!   texts without directives, joined by newlines>", "model": <as sent>,
//!   "results": [{"flagged", "categories", "category_scores",
//!   "category_applied_input_types"}]}`, every category in each map. No
//!   usage is reported.
//! - **Directives** in every text input.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::{deliver, json_object, optional_str, Reply};
use crate::errors::{ApiError, Dialect};
use crate::faults::FaultDirectives;
use crate::tokens::fnv1a;
use crate::SimState;

/// OpenAI's current moderation categories, in its order.
pub const CATEGORIES: [&str; 13] = [
    "harassment",
    "harassment/threatening",
    "hate",
    "hate/threatening",
    "illicit",
    "illicit/violent",
    "self-harm",
    "self-harm/intent",
    "self-harm/instructions",
    "sexual",
    "sexual/minors",
    "violence",
    "violence/graphic",
];

/// The categories that also apply to images.
pub const IMAGE_CATEGORIES: [&str; 6] = [
    "self-harm",
    "self-harm/intent",
    "self-harm/instructions",
    "sexual",
    "violence",
    "violence/graphic",
];

/// The score of a flagged category.
pub const FLAGGED_SCORE: f64 = 0.9;
const DEFAULT_MODEL: &str = "omni-moderation-latest";

/// One moderated input.
#[derive(Debug, PartialEq)]
struct Input {
    /// Without directives.
    text: String,
    has_text: bool,
    has_image: bool,
    flags: BTreeSet<&'static str>,
}

impl Input {
    /// `has_text` is false for a multimodal input without text parts.
    fn new(raw: &str, has_text: bool, has_image: bool, directives: &mut FaultDirectives) -> Self {
        let mut flags = BTreeSet::new();
        let text = directives.scan(raw, |key, value| match (key, value) {
            ("flag", None) => {
                flags.insert("violence");
                true
            }
            ("flag", Some(c)) => match CATEGORIES.iter().find(|k| **k == c) {
                Some(k) => {
                    flags.insert(k);
                    true
                }
                None => false,
            },
            _ => false,
        });
        if text
            .split(|c: char| !c.is_alphanumeric())
            .any(|w| w.eq_ignore_ascii_case("violence"))
        {
            flags.insert("violence");
        }
        Self {
            has_text,
            text,
            has_image,
            flags,
        }
    }

    fn result(&self) -> Value {
        let (mut categories, mut scores, mut applied) = (Map::new(), Map::new(), Map::new());
        for c in CATEGORIES {
            let flagged = self.flags.contains(c);
            let score = if flagged {
                FLAGGED_SCORE
            } else {
                (fnv1a(&format!("{}#{c}", self.text)) % 1000) as f64 / 100_000.0
            };
            let mut types = Vec::new();
            if self.has_text {
                types.push("text");
            }
            if self.has_image && IMAGE_CATEGORIES.contains(&c) {
                types.push("image");
            }
            categories.insert(c.into(), json!(flagged));
            scores.insert(c.into(), json!(score));
            applied.insert(c.into(), json!(types));
        }
        json!({
            "flagged": !self.flags.is_empty(),
            "categories": categories,
            "category_scores": scores,
            "category_applied_input_types": applied,
        })
    }
}

#[derive(Debug, PartialEq)]
struct Moderation {
    model: String,
    inputs: Vec<Input>,
    directives: FaultDirectives,
}

fn bad_input(message: &str) -> ApiError {
    ApiError::invalid_request(message, Some("input"))
}

impl Moderation {
    fn parse(body: &[u8]) -> Result<Self, ApiError> {
        let obj = json_object(body, Dialect::OpenAi)?;
        let model = optional_str(&obj, "model")?
            .unwrap_or(DEFAULT_MODEL)
            .to_owned();
        let mut d = FaultDirectives::default();
        let inputs = match obj.get("input") {
            Some(Value::String(s)) => vec![Input::new(s, true, false, &mut d)],
            Some(Value::Array(items)) if items.is_empty() => {
                return Err(bad_input("'input' must not be an empty array."))
            }
            Some(Value::Array(items)) if items.iter().all(Value::is_string) => items
                .iter()
                .map(|s| Input::new(s.as_str().unwrap_or_default(), true, false, &mut d))
                .collect(),
            Some(Value::Array(parts)) => {
                let (mut texts, mut has_image) = (Vec::new(), false);
                for part in parts {
                    match part.get("type").and_then(Value::as_str) {
                        Some("text") => match part.get("text").and_then(Value::as_str) {
                            Some(t) => texts.push(t),
                            None => return Err(bad_input("A text part needs a 'text' string.")),
                        },
                        Some("image_url") => {
                            if part
                                .pointer("/image_url/url")
                                .and_then(Value::as_str)
                                .is_none()
                            {
                                return Err(bad_input("An image_url part needs 'image_url.url'."));
                            }
                            has_image = true;
                        }
                        _ => {
                            return Err(bad_input(
                                "'input' must be a string, an array of strings, or an array of \
                                 text and image_url parts.",
                            ))
                        }
                    }
                }
                vec![Input::new(
                    &texts.join(" "),
                    !texts.is_empty(),
                    has_image,
                    &mut d,
                )]
            }
            None | Some(Value::Null) => {
                return Err(bad_input("you must provide an 'input' parameter"))
            }
            Some(_) => {
                return Err(bad_input(
                    "'input' must be a string, an array of strings, or an array of text and \
                     image_url parts.",
                ))
            }
        };
        Ok(Self {
            model,
            inputs,
            directives: d,
        })
    }

    fn reply(&self) -> Reply {
        let joined: Vec<&str> = self.inputs.iter().map(|i| i.text.as_str()).collect();
        let id = format!("modr-{:016x}", fnv1a(&joined.join("\n")));
        let results: Vec<Value> = self.inputs.iter().map(Input::result).collect();
        Reply::json(
            &json!({"id": id, "model": self.model, "results": results}),
            None,
        )
    }
}

pub async fn moderate(State(state): State<Arc<SimState>>, body: Bytes) -> Response {
    match Moderation::parse(&body) {
        Ok(req) => deliver(&state, Dialect::OpenAi, &req.directives, || Ok(req.reply())).await,
        Err(e) => e.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::Fault;

    fn parse(v: Value) -> Result<Moderation, ApiError> {
        Moderation::parse(v.to_string().as_bytes())
    }

    fn answer(v: Value) -> Value {
        serde_json::from_slice(&parse(v).expect("valid").reply().body).expect("json")
    }

    #[test]
    fn clean_text_is_not_flagged_and_lists_every_category() {
        let v = answer(json!({"input": "a sunny day"}));
        assert_eq!(v["model"], DEFAULT_MODEL);
        assert_eq!(v["id"], format!("modr-{:016x}", fnv1a("a sunny day")));
        let r = &v["results"][0];
        assert_eq!(r["flagged"], false);
        for c in CATEGORIES {
            assert_eq!(r["categories"][c], false, "{c}");
            let s = r["category_scores"][c].as_f64().expect("score");
            assert!((0.0..0.01).contains(&s), "{c} {s}");
            assert_eq!(r["category_applied_input_types"][c], json!(["text"]));
        }
        assert_eq!(r["categories"].as_object().map(Map::len), Some(13));
    }

    #[test]
    fn flags_by_directive_category_or_word() {
        let v = answer(json!({"model": "omni-moderation-2024-09-26", "input": [
            "calm", "graphic Violence here", "x [[sim:flag]]",
            "y [[sim:flag=self-harm/intent, flag=hate]]", "nonviolence"]}));
        assert_eq!(v["model"], "omni-moderation-2024-09-26");
        let r = v["results"].as_array().expect("results");
        assert_eq!(r.len(), 5);
        assert_eq!(r[0]["flagged"], false);
        assert_eq!(r[1]["flagged"], true);
        assert_eq!(r[1]["categories"]["violence"], true);
        assert_eq!(r[1]["category_scores"]["violence"], 0.9);
        assert_eq!(r[2]["categories"]["violence"], true);
        assert_eq!(r[3]["categories"]["self-harm/intent"], true);
        assert_eq!(r[3]["categories"]["hate"], true);
        assert_eq!(r[3]["categories"]["violence"], false);
        assert_eq!(r[4]["flagged"], false, "only whole words count");
    }

    #[test]
    fn multimodal_parts_are_one_input() {
        let v = answer(json!({"input": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}));
        let r = &v["results"];
        assert_eq!(r.as_array().map(Vec::len), Some(1));
        let types = &r[0]["category_applied_input_types"];
        assert_eq!(types["violence"], json!(["text", "image"]));
        assert_eq!(types["hate"], json!(["text"]));
        let v = answer(json!({"input": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]}));
        let types = &v["results"][0]["category_applied_input_types"];
        assert_eq!(types["sexual"], json!(["image"]));
        assert_eq!(types["hate"], json!([]));
    }

    #[test]
    fn directives_and_bad_bodies() {
        let m = parse(json!({"input": ["a [[sim:status=502]]", "b"]})).expect("valid");
        assert_eq!(m.directives.fault, Some(Fault::Status(502)));
        assert_eq!(m.inputs[0].text, "a");
        for body in [
            json!({}),
            json!({"input": []}),
            json!({"input": 5}),
            json!({"input": [{"type": "audio"}]}),
            json!({"input": [{"type": "text"}]}),
            json!({"input": [{"type": "image_url", "image_url": {}}]}),
            json!({"input": ["a", {"type": "text", "text": "b"}]}),
        ] {
            let e = parse(body.clone()).expect_err(&body.to_string());
            assert_eq!(e.param, Some("input"), "{body}");
        }
        assert!(parse(json!({"input": "x", "model": 1})).is_err());
    }
}
