//! Transcription answers: what the client gets is the vendor's answer as it
//! is (`json`, `text`, `srt`, `vtt` or `verbose_json`); what the adapter
//! reads from it is the audio duration to bill, where the answer carries it:
//! `usage.seconds` (json), `duration` (verbose_json), or the end of the last
//! subtitle cue (srt, vtt — the speech's end, which may fall short of
//! trailing silence). A `text` answer carries none; the host then bills the
//! duration it measured from the upload.

use serde_json::Value;

use super::{metered, tokens};
use crate::bindings::types::{MeterKind, Usage};
use crate::json::as_count;
use crate::TranslateError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Text,
    Srt,
    Vtt,
    VerboseJson,
}

impl Format {
    const ALL: [Format; 5] = [
        Format::Json,
        Format::Text,
        Format::Srt,
        Format::Vtt,
        Format::VerboseJson,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Text => "text",
            Format::Srt => "srt",
            Format::Vtt => "vtt",
            Format::VerboseJson => "verbose_json",
        }
    }

    /// The `response_format` form field (default `json`).
    pub fn of(fields: &Value) -> Result<Format, TranslateError> {
        match fields.get("response_format").and_then(Value::as_str) {
            None | Some("") => Ok(Format::Json),
            Some(s) => Format::ALL
                .into_iter()
                .find(|f| f.name() == s)
                .ok_or_else(|| {
                    TranslateError::invalid(format!(
                        "`response_format` must be json, text, srt, vtt or verbose_json, not `{s}`"
                    ))
                }),
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Format::Json | Format::VerboseJson => "application/json",
            Format::Text | Format::Srt | Format::Vtt => "text/plain; charset=utf-8",
        }
    }
}

/// Milliseconds from seconds as a JSON number.
fn millis(v: &Value) -> Option<u64> {
    let s = v.as_f64()?;
    (s.is_finite() && s >= 0.0).then(|| (s * 1000.0).round() as u64)
}

/// `HH:MM:SS,mmm` (srt) or `HH:MM:SS.mmm` / `MM:SS.mmm` (vtt) in milliseconds.
fn timestamp_ms(t: &str) -> Option<u64> {
    let (clock, frac) = t.trim().split_once([',', '.'])?;
    let ms: u64 = frac.get(..3)?.parse().ok()?;
    let mut secs = 0u64;
    for part in clock.split(':') {
        secs = secs.checked_mul(60)?.checked_add(part.parse().ok()?)?;
    }
    secs.checked_mul(1000)?.checked_add(ms)
}

/// The end of the last cue of an srt or vtt document.
fn last_cue_end(text: &str) -> Option<u64> {
    text.lines()
        .filter_map(|l| l.split_once("-->"))
        .filter_map(|(_, end)| timestamp_ms(end.split_whitespace().next()?))
        .max()
}

/// The content type of the client's answer and the usage it carries.
pub fn read_answer(
    state: &str,
    body: &[u8],
) -> Result<(&'static str, Option<Usage>), TranslateError> {
    let format = Format::ALL
        .into_iter()
        .find(|f| f.name() == state)
        .unwrap_or(Format::Json);
    let audio = |ms: u64| metered(MeterKind::AudioMs, ms, None);
    let usage = match format {
        Format::Json | Format::VerboseJson => {
            let v: Value = serde_json::from_slice(body).map_err(|e| {
                TranslateError::upstream(format!("the transcription is not JSON ({e})"))
            })?;
            let u = v.get("usage");
            match u.and_then(|u| u.get("type")).and_then(Value::as_str) {
                Some("duration") => u.and_then(|u| u.get("seconds")).and_then(millis).map(audio),
                Some("tokens") => u.map(|u| Usage {
                    output_tokens: u.get("output_tokens").and_then(as_count).unwrap_or(0),
                    ..tokens(u.get("input_tokens").and_then(as_count).unwrap_or(0))
                }),
                _ => v.get("duration").and_then(millis).map(audio),
            }
        }
        Format::Srt | Format::Vtt => std::str::from_utf8(body)
            .ok()
            .and_then(last_cue_end)
            .map(audio),
        Format::Text => None,
    };
    Ok((format.content_type(), usage))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn formats_are_read_from_the_form() {
        assert_eq!(Format::of(&json!({})).unwrap(), Format::Json);
        assert_eq!(
            Format::of(&json!({"response_format": "verbose_json"})).unwrap(),
            Format::VerboseJson
        );
        assert!(Format::of(&json!({"response_format": "mp3"})).is_err());
    }

    #[test]
    fn the_duration_comes_from_whatever_the_answer_carries() {
        let audio = |ms| Some(metered(MeterKind::AudioMs, ms, None));
        let (ct, u) = read_answer(
            "json",
            br#"{"text":"hi","usage":{"type":"duration","seconds":3.25}}"#,
        )
        .unwrap();
        assert_eq!((ct, u), ("application/json", audio(3250)));
        let (_, u) = read_answer("verbose_json", br#"{"text":"hi","duration":2.5}"#).unwrap();
        assert_eq!(u, audio(2500));
        let srt =
            "1\n00:00:00,000 --> 00:00:01,500\nHello\n\n2\n00:00:01,500 --> 00:01:02,040\nWorld\n";
        let (ct, u) = read_answer("srt", srt.as_bytes()).unwrap();
        assert_eq!((ct, u), ("text/plain; charset=utf-8", audio(62_040)));
        let vtt = "WEBVTT\n\n00:00.000 --> 00:02.750\nHello\n";
        assert_eq!(read_answer("vtt", vtt.as_bytes()).unwrap().1, audio(2750));
        assert_eq!(read_answer("text", b"Hello").unwrap().1, None);
        let (_, u) = read_answer(
            "json",
            br#"{"text":"hi","usage":{"type":"tokens","input_tokens":10,"output_tokens":3}}"#,
        )
        .unwrap();
        assert_eq!(
            u,
            Some(Usage {
                output_tokens: 3,
                ..tokens(10)
            })
        );
    }
}
