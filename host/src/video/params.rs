//! Reading and checking a video request (spec §4.4b): JSON or
//! multipart/form-data, `seconds` (string) or `duration` (integer), `size` or
//! `resolution` (with 480p / 720p / 1080p shorthands) and `ratio`, all
//! normalised into one [`Submission`] before anything else looks at it — so
//! `duration: 4` and `seconds: "4"` are the same request, down to the
//! idempotency fingerprint.
//!
//! Failures here are the gateway's own validation: envelope 2, the stable
//! code at the start of the message, nothing charged, nothing sent upstream.

use super::size::{parse_size, ratio_of};
use crate::config::VideoModelConfig;
use crate::error::ApiError;
use crate::store::video::WebhookTarget;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The fields of a video request, as sent (JSON values, or text parts of a
/// multipart form).
#[derive(Debug, Default, Clone)]
pub struct RawFields {
    pub fields: Map<String, Value>,
    /// Whether the body was a form, where every value is text.
    pub form: bool,
}

/// A checked, normalised video request.
#[derive(Debug, Clone, PartialEq)]
pub struct Submission {
    pub model: String,
    pub prompt: String,
    pub seconds: u32,
    pub size: String,
    pub ratio: String,
    pub quote_id: Option<String>,
    pub webhook: Option<WebhookTarget>,
}

fn invalid(code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::VideoValidation {
        code,
        message: message.into(),
    }
}

impl RawFields {
    fn text(&self, name: &str) -> Result<Option<String>, ApiError> {
        match self.fields.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(invalid(
                "invalid_request",
                format!("`{name}` must be a string, got {}", kind(other)),
            )),
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The requested duration from `seconds` (string) and/or `duration` (integer).
fn seconds_of(raw: &RawFields) -> Result<Option<u32>, ApiError> {
    let from_seconds = match raw.fields.get("seconds") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(
            s.trim()
                .parse::<u32>()
                .map_err(|_| invalid("invalid_duration", format!("`seconds` must be a whole number of seconds as a string, got \"{s}\"")))?,
        ),
        Some(Value::Number(_)) => {
            return Err(invalid(
                "invalid_parameters",
                "a number cannot be read into the string field `seconds`: send it as a string (\"4\") or use the integer field `duration`",
            ))
        }
        Some(other) => return Err(invalid("invalid_parameters", format!("`seconds` must be a string, got {}", kind(other)))),
    };
    let from_duration = match raw.fields.get("duration") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => Some(n.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(
            || {
                invalid(
                    "invalid_duration",
                    format!("`duration` must be a whole number of seconds, got {n}"),
                )
            },
        )?),
        // A form sends everything as text.
        Some(Value::String(s)) if raw.form => Some(s.trim().parse::<u32>().map_err(|_| {
            invalid(
                "invalid_duration",
                format!("`duration` must be a whole number of seconds, got \"{s}\""),
            )
        })?),
        Some(other) => {
            return Err(invalid(
                "invalid_parameters",
                format!("`duration` must be an integer, got {}", kind(other)),
            ))
        }
    };
    match (from_seconds, from_duration) {
        (Some(a), Some(b)) if a != b => Err(invalid(
            "invalid_duration",
            format!("`seconds` (\"{a}\") and `duration` ({b}) disagree; send one of them"),
        )),
        (a, b) => Ok(a.or(b)),
    }
}

/// `size` / `resolution` / `ratio` → a `WIDTHxHEIGHT` size and its ratio.
fn size_of(raw: &RawFields) -> Result<(String, String), ApiError> {
    let ratio = raw.text("ratio")?;
    if let Some(r) = &ratio {
        if r != "16:9" && r != "9:16" {
            return Err(invalid(
                "invalid_ratio",
                format!("`ratio` must be \"16:9\" or \"9:16\", got \"{r}\""),
            ));
        }
    }
    let portrait = ratio.as_deref() == Some("9:16");
    let expand = |text: &str| -> Result<String, ApiError> {
        let shorthand = match text.to_ascii_lowercase().as_str() {
            "480p" => Some(("854x480", "480x854")),
            "720p" => Some(("1280x720", "720x1280")),
            "1080p" => Some(("1792x1024", "1024x1792")),
            _ => None,
        };
        match shorthand {
            Some((land, port)) => Ok(if portrait { port } else { land }.to_string()),
            None if parse_size(text).is_some() => Ok(text.to_string()),
            None => Err(invalid(
                "invalid_resolution",
                format!("`{text}` is not a size (WIDTHxHEIGHT) or one of 480p, 720p, 1080p"),
            )),
        }
    };
    let size = match (raw.text("size")?, raw.text("resolution")?) {
        (Some(s), Some(r)) => {
            let (s, r) = (expand(&s)?, expand(&r)?);
            if s != r {
                return Err(invalid(
                    "invalid_resolution",
                    format!("`size` ({s}) and `resolution` ({r}) disagree"),
                ));
            }
            s
        }
        (Some(s), None) | (None, Some(s)) => expand(&s)?,
        (None, None) => if portrait { "720x1280" } else { "1280x720" }.to_string(),
    };
    let derived = ratio_of(&size).unwrap_or("16:9").to_string();
    if let Some(r) = ratio {
        if r != derived {
            return Err(invalid(
                "invalid_ratio",
                format!("`ratio` {r} does not match the size {size} ({derived})"),
            ));
        }
    }
    Ok((size, derived))
}

/// Checks the duration against the model's real range.
pub fn check_duration(model: &VideoModelConfig, seconds: u32) -> Result<(), ApiError> {
    if seconds < model.min_seconds || seconds > model.max_seconds {
        return Err(invalid(
            "invalid_duration",
            format!(
                "{} generates {} to {} seconds; {seconds} was requested",
                model.name, model.min_seconds, model.max_seconds
            ),
        ));
    }
    Ok(())
}

fn check_size(model: &VideoModelConfig, size: &str) -> Result<(), ApiError> {
    if !model.resolutions.iter().any(|r| r == size) {
        return Err(invalid(
            "invalid_resolution",
            format!(
                "{} supports {}; {size} was requested",
                model.name,
                model.resolutions.join(", ")
            ),
        ));
    }
    Ok(())
}

/// The model name a request names; its absence is a validation error.
pub fn model_of(raw: &RawFields) -> Result<String, ApiError> {
    raw.text("model")?
        .filter(|m| !m.trim().is_empty())
        .ok_or_else(|| invalid("invalid_request", "`model` is required"))
}

/// Seconds and size for a quote: the same rules as a submission.
pub fn quote_terms(raw: &RawFields, model: &VideoModelConfig) -> Result<(u32, String), ApiError> {
    let seconds = seconds_of(raw)?.unwrap_or(4);
    check_duration(model, seconds)?;
    let has_size = ["size", "resolution", "ratio"]
        .iter()
        .any(|f| raw.fields.contains_key(*f));
    let (size, _) = size_of(raw)?;
    if has_size {
        check_size(model, &size)?;
    }
    Ok((seconds, size))
}

/// Reads and checks a submission against the model (already looked up by
/// name). Webhook fields come from the body, else from the headers.
pub fn submission(
    raw: &RawFields,
    model: &VideoModelConfig,
    header_webhook: (Option<String>, Option<String>),
) -> Result<Submission, ApiError> {
    if raw.fields.contains_key("input_reference") || raw.fields.contains_key("image") {
        return Err(invalid(
            "invalid_request",
            "image-to-video is not available; send a text prompt only",
        ));
    }
    let prompt = raw
        .text("prompt")?
        .filter(|p| !p.trim().is_empty())
        .ok_or_else(|| invalid("invalid_request", "`prompt` is required"))?;
    let seconds = seconds_of(raw)?.unwrap_or(4);
    check_duration(model, seconds)?;
    let (size, ratio) = size_of(raw)?;
    check_size(model, &size)?;
    let quote_id = raw.text("quote_id")?.filter(|q| !q.is_empty());
    let url = raw
        .text("webhook_url")?
        .or(header_webhook.0)
        .filter(|u| !u.is_empty());
    let secret = raw
        .text("webhook_secret")?
        .or(header_webhook.1)
        .filter(|s| !s.is_empty());
    let secret_prev = raw.text("webhook_secret_prev")?.filter(|s| !s.is_empty());
    let webhook = match url {
        Some(_) if secret.is_none() && secret_prev.is_some() => {
            return Err(invalid(
                "invalid_request",
                "`webhook_secret_prev` needs `webhook_secret` (the new secret) as well",
            ))
        }
        Some(url) => Some(WebhookTarget {
            url,
            secret,
            secret_prev,
        }),
        None if secret.is_some() || secret_prev.is_some() => {
            return Err(invalid(
                "invalid_request",
                "a webhook secret was given without `webhook_url`",
            ))
        }
        None => None,
    };
    Ok(Submission {
        model: model.name.clone(),
        prompt,
        seconds,
        size,
        ratio,
        quote_id,
        webhook,
    })
}

impl Submission {
    /// A digest of the normalised request, for Idempotency-Key reuse checks.
    /// Secrets enter only as their own digests.
    pub fn fingerprint(&self) -> String {
        let digest = |s: &Option<String>| {
            s.as_ref()
                .map(|s| hex::encode(Sha256::digest(s.as_bytes())))
        };
        let canonical = serde_json::json!({
            "model": self.model,
            "prompt": self.prompt,
            "seconds": self.seconds,
            "size": self.size,
            "ratio": self.ratio,
            "quote_id": self.quote_id,
            "webhook_url": self.webhook.as_ref().map(|w| &w.url),
            "webhook_secret": self.webhook.as_ref().and_then(|w| digest(&w.secret)),
            "webhook_secret_prev": self.webhook.as_ref().and_then(|w| digest(&w.secret_prev)),
        });
        hex::encode(Sha256::digest(canonical.to_string().as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn model() -> VideoModelConfig {
        VideoModelConfig {
            created: None,
            name: "Gen-2.0-fast".into(),
            alias_of: None,
            price_per_second: 700_000,
            min_seconds: 4,
            max_seconds: 12,
            resolutions: vec!["1280x720".into(), "720x1280".into()],
            status: "stable".into(),
            owned_by: "gen".into(),
        }
    }

    fn json_raw(v: Value) -> RawFields {
        RawFields {
            fields: v.as_object().cloned().unwrap_or_default(),
            form: false,
        }
    }

    fn code_of(e: ApiError) -> String {
        match e {
            ApiError::VideoValidation { code, .. } => code.to_string(),
            other => format!("not validation: {other}"),
        }
    }

    fn sub(v: Value) -> Result<Submission, String> {
        submission(&json_raw(v), &model(), (None, None)).map_err(code_of)
    }

    #[test]
    fn seconds_and_duration_normalise_to_the_same_fingerprint() {
        let a = sub(json!({"model": "m", "prompt": "p", "seconds": "4"})).unwrap();
        let b = sub(json!({"model": "m", "prompt": "p", "duration": 4})).unwrap();
        let c = sub(json!({"model": "m", "prompt": "p"})).unwrap();
        assert_eq!(a.fingerprint(), b.fingerprint());
        assert_eq!(a.fingerprint(), c.fingerprint(), "4 is the default");
        let form = RawFields {
            fields: json!({"prompt": "p", "duration": "4"})
                .as_object()
                .cloned()
                .unwrap(),
            form: true,
        };
        assert_eq!(
            submission(&form, &model(), (None, None))
                .unwrap()
                .fingerprint(),
            a.fingerprint()
        );
        let d = sub(json!({"model": "m", "prompt": "p", "seconds": "8"})).unwrap();
        assert_ne!(a.fingerprint(), d.fingerprint());
    }

    #[test]
    fn seconds_as_a_json_number_is_refused() {
        assert_eq!(
            sub(json!({"prompt": "p", "seconds": 4})).unwrap_err(),
            "invalid_parameters"
        );
    }

    #[test]
    fn durations_outside_the_range_are_invalid_duration() {
        for v in [
            json!({"prompt": "p", "seconds": "3"}),
            json!({"prompt": "p", "seconds": "13"}),
            json!({"prompt": "p", "seconds": "4.5"}),
            json!({"prompt": "p", "seconds": "4", "duration": 8}),
        ] {
            assert_eq!(sub(v.clone()).unwrap_err(), "invalid_duration", "{v}");
        }
        assert_eq!(
            sub(json!({"prompt": "p", "duration": 12})).unwrap().seconds,
            12
        );
    }

    #[test]
    fn sizes_resolutions_and_ratios() {
        let s = sub(json!({"prompt": "p", "resolution": "720p", "ratio": "9:16"})).unwrap();
        assert_eq!((s.size.as_str(), s.ratio.as_str()), ("720x1280", "9:16"));
        let s = sub(json!({"prompt": "p", "size": "720x1280"})).unwrap();
        assert_eq!(s.ratio, "9:16");
        let s = sub(json!({"prompt": "p"})).unwrap();
        assert_eq!((s.size.as_str(), s.ratio.as_str()), ("1280x720", "16:9"));
        assert_eq!(
            sub(json!({"prompt": "p", "resolution": "1080p"})).unwrap_err(),
            "invalid_resolution"
        );
        assert_eq!(
            sub(json!({"prompt": "p", "size": "big"})).unwrap_err(),
            "invalid_resolution"
        );
        assert_eq!(
            sub(json!({"prompt": "p", "ratio": "4:3"})).unwrap_err(),
            "invalid_ratio"
        );
        assert_eq!(
            sub(json!({"prompt": "p", "size": "1280x720", "ratio": "9:16"})).unwrap_err(),
            "invalid_ratio"
        );
    }

    #[test]
    fn missing_prompt_images_and_orphan_secrets_are_invalid_request() {
        assert_eq!(sub(json!({"seconds": "4"})).unwrap_err(), "invalid_request");
        assert_eq!(
            sub(json!({"prompt": "p", "input_reference": "x"})).unwrap_err(),
            "invalid_request"
        );
        assert_eq!(
            sub(json!({"prompt": "p", "webhook_secret": "s"})).unwrap_err(),
            "invalid_request"
        );
        let w = submission(
            &json_raw(json!({"prompt": "p"})),
            &model(),
            (Some("https://example.com/hook".into()), Some("sec".into())),
        )
        .unwrap();
        assert_eq!(w.webhook.unwrap().secret.as_deref(), Some("sec"));
    }
}
