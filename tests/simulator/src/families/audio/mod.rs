//! The OpenAI audio API: speech (text → audio) and transcription (audio →
//! text).
//!
//! `POST /v1/audio/speech`:
//!
//! - **Body.** `{"model" (required), "input" (required, at most 4096
//!   characters), "voice" (required: a name, or `{"id"}`),
//!   "response_format"? ("mp3" default, "opus", "aac", "flac", "wav",
//!   "pcm"), "speed"? (0.25..=4, default 1), "instructions"?,
//!   "stream_format"? ("audio"; "sse" → 400, not simulated)}`.
//! - **Answer.** 200 with real, silent audio of that format, 24 kHz mono
//!   (see [`encode`] for each container), and OpenAI's content type:
//!   `audio/mpeg`, `audio/opus` (Ogg Opus), `audio/aac` (ADTS),
//!   `audio/flac`, `audio/wav`, `audio/pcm` (raw 16-bit little-endian).
//! - **Duration** ([`speech_ms`]): round(max(500, 60 × characters of the
//!   input without directives) / speed) milliseconds; wav, pcm, flac and
//!   opus last exactly that, mp3 whole 24 ms frames and aac whole
//!   1024-sample frames (~42.7 ms) rounding it up. No usage is reported.
//! - **Directives** in `input`.
//!
//! `POST /v1/audio/transcriptions` ([`transcribe`] has the details):
//! `multipart/form-data` with `file`, `model`, `response_format`? (json,
//! text, srt, verbose_json, vtt), `language`?, `prompt`?, `temperature`?,
//! `timestamp_granularities[]`?; the text is "Simulated transcription of S
//! seconds of audio.", S read exactly from a WAV header, else estimated as
//! 128 kbit/s from the file's size. Directives in `prompt`.

pub mod encode;
pub mod transcribe;

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::Value;

use super::{deliver, json_object, optional_str, required_str, Reply};
use crate::errors::{ApiError, Dialect};
use crate::faults::FaultDirectives;
use crate::SimState;
use encode::Format;

/// OpenAI's limit on the speech input, in characters.
pub const MAX_INPUT_CHARS: usize = 4096;
/// Milliseconds of speech per character of input, at speed 1.
pub const MS_PER_CHAR: u64 = 60;
/// The shortest speech, in milliseconds, at speed 1.
pub const MIN_MS: u64 = 500;

/// How long the speech for `text` (directives removed) lasts at `speed`.
pub fn speech_ms(text: &str, speed: f64) -> u64 {
    let chars = text.chars().count() as u64;
    let ms = (MS_PER_CHAR * chars).max(MIN_MS) as f64 / speed;
    ms.round() as u64
}

#[derive(Debug, PartialEq)]
struct Speech {
    format: Format,
    ms: u64,
    directives: FaultDirectives,
}

impl Speech {
    fn parse(body: &[u8]) -> Result<Self, ApiError> {
        let obj = json_object(body, Dialect::OpenAi)?;
        required_str(&obj, "model")?;
        let input = required_str(&obj, "input")?;
        if input.chars().count() > MAX_INPUT_CHARS {
            return Err(ApiError::invalid_request(
                format!("'input' is longer than {MAX_INPUT_CHARS} characters."),
                Some("input"),
            ));
        }
        let voice_ok = match obj.get("voice") {
            Some(Value::String(s)) => !s.trim().is_empty(),
            Some(v) => v.get("id").and_then(Value::as_str).is_some(),
            None => false,
        };
        if !voice_ok {
            return Err(ApiError::invalid_request(
                "'voice' must be a voice name or an object with an 'id'.",
                Some("voice"),
            ));
        }
        let format = match optional_str(&obj, "response_format")? {
            None => Format::Mp3,
            Some(name) => Format::parse(name).ok_or_else(|| {
                ApiError::invalid_request(
                    format!(
                        "Invalid value for 'response_format': {name:?}. Supported values are: {}.",
                        Format::NAMES.join(", ")
                    ),
                    Some("response_format"),
                )
            })?,
        };
        let speed = match obj.get("speed") {
            None | Some(Value::Null) => 1.0,
            Some(v) => v
                .as_f64()
                .filter(|s| (0.25..=4.0).contains(s))
                .ok_or_else(|| {
                    ApiError::invalid_request(
                        "'speed' must be a number from 0.25 to 4.0.",
                        Some("speed"),
                    )
                })?,
        };
        optional_str(&obj, "instructions")?;
        if optional_str(&obj, "stream_format")? == Some("sse") {
            return Err(ApiError::invalid_request(
                "stream_format \"sse\" is not simulated; use \"audio\".",
                Some("stream_format"),
            ));
        }
        let mut directives = FaultDirectives::default();
        let text = directives.scan(input, |_, _| false);
        Ok(Self {
            format,
            ms: speech_ms(&text, speed),
            directives,
        })
    }

    fn reply(&self) -> Reply {
        Reply {
            content_type: self.format.content_type(),
            body: Bytes::from(encode::silence(self.format, self.ms)),
            usage: None,
        }
    }
}

pub async fn speech(State(state): State<Arc<SimState>>, body: Bytes) -> Response {
    match Speech::parse(&body) {
        Ok(req) => deliver(&state, Dialect::OpenAi, &req.directives, || Ok(req.reply())).await,
        Err(e) => e.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::Fault;
    use serde_json::json;

    fn parse(v: Value) -> Result<Speech, ApiError> {
        Speech::parse(v.to_string().as_bytes())
    }

    #[test]
    fn duration_rule() {
        assert_eq!(speech_ms("hi", 1.0), 500);
        assert_eq!(speech_ms(&"x".repeat(100), 1.0), 6000);
        assert_eq!(speech_ms(&"x".repeat(100), 2.0), 3000);
        assert_eq!(speech_ms("hi", 0.25), 2000);
        assert_eq!(speech_ms("é", 3.0), 167, "characters, not bytes; rounded");
    }

    #[test]
    fn a_valid_request_and_its_directives() {
        let s = parse(json!({"model": "tts-1", "voice": "alloy",
            "input": "0123456789 [[sim:latency_ms=5]]", "response_format": "wav", "speed": 0.5}))
        .expect("valid");
        assert_eq!(s.format, Format::Wav);
        assert_eq!(
            s.ms, 1200,
            "10 characters (directives removed) = 600 ms, / 0.5"
        );
        assert!(s.directives.latency.is_some());
        let r = s.reply();
        assert_eq!(r.content_type, "audio/wav");
        assert_eq!(r.body.len(), 44 + 1200 * 48);
        let s = parse(json!({"model": "m", "voice": {"id": "voice_1"}, "input": "x [[sim:cut]]"}))
            .expect("valid");
        assert_eq!(s.format, Format::Mp3);
        assert_eq!(s.directives.fault, Some(Fault::Cut));
    }

    #[test]
    fn bad_bodies_name_the_field() {
        let ok = json!({"model": "m", "voice": "alloy", "input": "x"});
        for (key, value) in [
            ("model", json!(null)),
            ("input", json!("")),
            ("input", json!("x".repeat(MAX_INPUT_CHARS + 1))),
            ("voice", json!("")),
            ("voice", json!({"name": "x"})),
            ("response_format", json!("ogg")),
            ("speed", json!(5)),
            ("speed", json!("fast")),
            ("stream_format", json!("sse")),
        ] {
            let mut body = ok.clone();
            body[key] = value;
            if key == "model" {
                body.as_object_mut().map(|o| o.remove("model"));
            }
            let e = parse(body).expect_err(key);
            assert_eq!(e.param, Some(key));
        }
    }
}
