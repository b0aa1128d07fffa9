//! Reading and validating a task submission, and the prompt's directives.

use serde_json::{Map, Value};

use super::clip::Geometry;
use super::errors::VendorError;
use crate::faults::scan_directives;

/// Longest clip the simulated vendor makes.
pub const MAX_SECONDS: u64 = 120;
/// Largest frame side accepted in `size`.
pub const MAX_SIDE: u32 = 8192;
pub const RATIOS: [&str; 2] = ["16:9", "9:16"];

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Submission {
    pub seconds: u32,
    pub geometry: Geometry,
    pub directives: VideoDirectives,
}

/// How the task ends, chosen by a prompt directive.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Outcome {
    #[default]
    Succeed,
    /// `[[sim:reject]]`: a content-safety refusal at the first poll.
    Reject,
    /// `[[sim:fail]]`: a technical failure at the first poll.
    Fail,
    /// `[[sim:never]]`: running at 50% forever.
    Never,
}

/// How the content endpoint misbehaves, chosen by a prompt directive.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ContentFault {
    #[default]
    None,
    /// `[[sim:content_auth]]`: 401.
    Auth,
    /// `[[sim:content_hang]]`: no answer until the client gives up.
    Hang,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VideoDirectives {
    /// `[[sim:submit_fail]]`: the submission itself answers 500.
    pub submit_fail: bool,
    pub outcome: Outcome,
    pub content: ContentFault,
}

impl VideoDirectives {
    fn from_prompt(prompt: &str) -> Self {
        let mut d = Self::default();
        scan_directives(prompt, |item| match item {
            "submit_fail" => d.submit_fail = true,
            "reject" => d.outcome = Outcome::Reject,
            "fail" => d.outcome = Outcome::Fail,
            "never" => d.outcome = Outcome::Never,
            "content_auth" => d.content = ContentFault::Auth,
            "content_hang" => d.content = ContentFault::Hang,
            _ => tracing::warn!(item, "ignoring unknown video sim directive"),
        });
        d
    }
}

impl Submission {
    pub fn parse(body: &[u8]) -> Result<Self, VendorError> {
        let value: Value = serde_json::from_slice(body).map_err(|e| {
            VendorError::invalid_request(format!("The request body is not valid JSON: {e}."))
        })?;
        let Some(obj) = value.as_object() else {
            return Err(VendorError::invalid_request(
                "The request body must be a JSON object.",
            ));
        };
        // Any model name is accepted, as long as there is one.
        required_text(obj, "model")?;
        let prompt = required_text(obj, "prompt")?;
        let seconds = obj
            .get("duration")
            .and_then(Value::as_u64)
            .filter(|s| (1..=MAX_SECONDS).contains(s))
            .ok_or_else(|| {
                VendorError::invalid_request(format!(
                    "'duration' must be a whole number of seconds from 1 to {MAX_SECONDS}."
                ))
            })?;
        let size = obj.get("size").and_then(Value::as_str).unwrap_or_default();
        let (width, height) = parse_size(size).ok_or_else(|| {
            VendorError::invalid_request(format!(
                "'size' must be WIDTHxHEIGHT with sides from 1 to {MAX_SIDE}, got {size:?}."
            ))
        })?;
        let ratio = obj.get("aspect_ratio").and_then(Value::as_str);
        if !ratio.is_some_and(|r| RATIOS.contains(&r)) {
            return Err(VendorError::invalid_request(
                "'aspect_ratio' must be \"16:9\" or \"9:16\".",
            ));
        }
        Ok(Self {
            // At most MAX_SECONDS, so it fits.
            seconds: seconds as u32,
            geometry: Geometry::for_request(width, height),
            directives: VideoDirectives::from_prompt(prompt),
        })
    }
}

fn required_text<'a>(obj: &'a Map<String, Value>, key: &str) -> Result<&'a str, VendorError> {
    match obj.get(key).and_then(Value::as_str) {
        Some(text) if !text.trim().is_empty() => Ok(text),
        _ => Err(VendorError::invalid_request(format!(
            "'{key}' is required and must be a non-empty string."
        ))),
    }
}

/// `"1280x720"` → (1280, 720).
fn parse_size(size: &str) -> Option<(u32, u32)> {
    let (w, h) = size.split_once('x')?;
    let side = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| s.parse::<u32>().ok())
            .flatten()
            .filter(|n| (1..=MAX_SIDE).contains(n))
    };
    Some((side(w)?, side(h)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<Submission, VendorError> {
        Submission::parse(v.to_string().as_bytes())
    }

    fn body(prompt: &str) -> Value {
        json!({"model": "sim-video", "prompt": prompt, "duration": 4,
               "size": "1280x720", "aspect_ratio": "16:9"})
    }

    #[test]
    fn a_valid_submission() {
        let s = parse(body("a cat")).expect("valid");
        assert_eq!(s.seconds, 4);
        assert_eq!(s.geometry, Geometry::for_request(1280, 720));
        assert_eq!(s.directives, VideoDirectives::default());
    }

    #[test]
    fn directives_choose_the_ending() {
        let d = parse(body("a cat [[sim:reject]] [[sim:content_hang]]"))
            .expect("valid")
            .directives;
        assert_eq!(d.outcome, Outcome::Reject);
        assert_eq!(d.content, ContentFault::Hang);
        let d = parse(body("[[sim:fail,content_auth,submit_fail]]"))
            .expect("valid")
            .directives;
        assert_eq!(
            (d.outcome, d.content, d.submit_fail),
            (Outcome::Fail, ContentFault::Auth, true)
        );
        assert_eq!(
            parse(body("[[sim:never]]"))
                .expect("valid")
                .directives
                .outcome,
            Outcome::Never
        );
    }

    #[test]
    fn invalid_bodies_are_refused_with_the_field_named() {
        let mut cases = Vec::new();
        for (key, value) in [
            ("model", json!("")),
            ("prompt", json!(null)),
            ("duration", json!(0)),
            ("duration", json!(121)),
            ("duration", json!(4.5)),
            ("duration", json!("4")),
            ("size", json!("1280*720")),
            ("size", json!("0x720")),
            ("size", json!("+1280x720")),
            ("aspect_ratio", json!("4:3")),
        ] {
            let mut b = body("x");
            b[key] = value;
            cases.push((key, b));
        }
        for (key, b) in cases {
            let err = parse(b).expect_err(key);
            assert_eq!(err.code, "invalid_request");
            assert!(err.message.contains(key), "{}", err.message);
        }
        assert!(Submission::parse(b"[1]").is_err());
        assert!(Submission::parse(b"{").is_err());
    }
}
