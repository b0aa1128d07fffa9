//! `POST /v1/audio/transcriptions`: the OpenAI transcription API, reading
//! the upload as a stream so large files cost no memory.
//!
//! - **Form.** `multipart/form-data` with a `file` part (the audio; its
//!   bytes are counted and only the first 64 KiB kept, for the header) and
//!   text fields `model` (required), `response_format`? (`json` default,
//!   `text`, `srt`, `verbose_json`, `vtt`), `language`?, `prompt`?,
//!   `temperature`? (0..=1), `timestamp_granularities[]`? (`word`,
//!   `segment`; repeatable); `stream=true` → 400 (not simulated); other
//!   fields are ignored. Text fields are limited to 64 KiB, the whole
//!   upload to [`MAX_UPLOAD`](crate::record::MAX_UPLOAD) (413 beyond).
//!   Anything else malformed (not multipart, no `file`, a bad value) → 400.
//! - **Duration** S ([`duration_ms`]), in whole milliseconds: for a
//!   RIFF/WAVE file, exactly the `data` chunk's bytes (as declared, at most
//!   those present; all present when it declares 0 or 0xFFFFFFFF) divided
//!   by the `fmt ` chunk's bytes per second (both chunks must lie in the
//!   first 64 KiB, else 400); for any other file, estimated as 128 kbit/s:
//!   size in bytes / 16 000 seconds. Shorter than 0.1 s → 400
//!   `audio_too_short`.
//! - **Text.** `Simulated transcription of <S> seconds of audio.` with S to
//!   one decimal (tenths rounded half up from the milliseconds: 3250 ms →
//!   `3.3`). Its 7 words form the segments and words below.
//! - **Segments.** n = ⌈S / 5 s⌉ segments, at least 1 and at most 7 (one
//!   per word): segment i spans ⌊S·i/n⌋ to ⌊S·(i+1)/n⌋ ms and holds words
//!   ⌊7i/n⌋ to ⌊7(i+1)/n⌋ (exclusive) joined by spaces; `seek` = its start
//!   in centiseconds, `tokens` [], `temperature` as sent (0 without),
//!   `avg_logprob` -0.25, `compression_ratio` 1.0, `no_speech_prob` 0.01.
//!   Words (verbose_json with `timestamp_granularities[]=word`): word j
//!   spans ⌊S·j/7⌋ to ⌊S·(j+1)/7⌋ ms, without its final full stop.
//! - **Formats.** `json`: `{"text", "usage": {"type": "duration",
//!   "seconds": S}}`. `text`: the text and a newline (`text/plain`). `srt`
//!   and `vtt`: one cue per segment (`text/plain`). `verbose_json`:
//!   `{"task": "transcribe", "language", "duration": S, "text",
//!   "segments", "words"? , "usage"}`, `language` being the name of the
//!   `language` code (`en` → `english`, a few others; unknown codes as
//!   sent; `english` without). Times in JSON are seconds (ms / 1000).
//! - **Recorded usage.** The `usage` of json and verbose_json; none for the
//!   text formats, which report none.
//! - **Recorded body.** Never the file: a JSON summary of the form, each
//!   text field under its name — a string, or an array of all its values
//!   when it is repeated or its name ends in `[]` — and `"file":
//!   {"filename", "content_type", "size"}` (null for a missing name or
//!   type), e.g. `{"model": "whisper-1", "timestamp_granularities[]":
//!   ["word"], "file": {"filename": "a.wav", "content_type": "audio/wav",
//!   "size": 48044}}`. An upload that fails midway (malformed, or over the
//!   size limit) records what was read until then, the file's `size` being
//!   the bytes received; a request refused by the auth check keeps an
//!   empty body.
//! - **Directives** in the `prompt` field.

use std::sync::Arc;

use axum::extract::multipart::MultipartError;
use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::super::{deliver, Reply};
use crate::errors::{ApiError, Dialect};
use crate::faults::FaultDirectives;
use crate::record::RecordSeq;
use crate::SimState;

/// How much of the file is kept for reading its header.
pub const HEAD_BYTES: usize = 64 * 1024;
/// The largest text field.
pub const MAX_FIELD: usize = 64 * 1024;
/// The estimate for files that are not WAV: 128 kbit/s.
pub const ESTIMATE_BYTES_PER_SECOND: u64 = 16_000;
/// The shortest audio transcribed, as OpenAI's minimum.
pub const MIN_MS: u64 = 100;
/// Seconds per segment, before the cap of one segment per word.
pub const SEGMENT_MS: u64 = 5_000;
const FORMATS: [&str; 5] = ["json", "text", "srt", "verbose_json", "vtt"];

/// What was read of the upload.
#[derive(Debug, Default, PartialEq)]
struct Upload {
    /// Text fields in arrival order.
    fields: Vec<(String, String)>,
    file: Option<FileInfo>,
}

#[derive(Debug, Default, PartialEq)]
struct FileInfo {
    name: Option<String>,
    content_type: Option<String>,
    size: u64,
    /// The first [`HEAD_BYTES`] bytes.
    head: Vec<u8>,
}

impl Upload {
    /// The last value of field `name`.
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.fields
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// What the record keeps instead of the body.
    fn summary(&self) -> Value {
        let mut out = Map::new();
        for (name, value) in &self.fields {
            let as_list = name.ends_with("[]") || self.values(name).nth(1).is_some();
            if !as_list {
                out.insert(name.clone(), json!(value));
            } else if !out.contains_key(name) {
                out.insert(name.clone(), json!(self.values(name).collect::<Vec<_>>()));
            }
        }
        if let Some(f) = &self.file {
            out.insert(
                "file".into(),
                json!({"filename": f.name, "content_type": f.content_type, "size": f.size}),
            );
        }
        Value::Object(out)
    }
}

fn upload_error(e: MultipartError) -> ApiError {
    let mut err = ApiError::invalid_request(
        format!("The upload could not be read: {}", e.body_text()),
        None,
    );
    err.status = e.status();
    err
}

/// Reads every part into `upload`, keeping only the head of the file.
async fn read_upload(multipart: &mut Multipart, upload: &mut Upload) -> Result<(), ApiError> {
    while let Some(mut field) = multipart.next_field().await.map_err(upload_error)? {
        let Some(name) = field.name().map(str::to_owned) else {
            // A part without a name belongs to no field; multer skips it.
            continue;
        };
        if name == "file" {
            // In place, so a failed upload still records how far it got.
            let file = upload.file.insert(FileInfo {
                name: field.file_name().map(str::to_owned),
                content_type: field.content_type().map(str::to_owned),
                ..FileInfo::default()
            });
            while let Some(chunk) = field.chunk().await.map_err(upload_error)? {
                file.size += chunk.len() as u64;
                let room = HEAD_BYTES.saturating_sub(file.head.len());
                file.head.extend_from_slice(&chunk[..room.min(chunk.len())]);
            }
            continue;
        }
        let mut text = Vec::new();
        while let Some(chunk) = field.chunk().await.map_err(upload_error)? {
            if text.len() + chunk.len() > MAX_FIELD {
                return Err(ApiError::invalid_request(
                    format!("The form field {name:?} is longer than {MAX_FIELD} bytes."),
                    None,
                ));
            }
            text.extend_from_slice(&chunk);
        }
        let text = String::from_utf8(text).map_err(|_| {
            ApiError::invalid_request(format!("The form field {name:?} is not UTF-8."), None)
        })?;
        upload.fields.push((name, text));
    }
    Ok(())
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    let bytes = b.get(at..at + 4)?;
    Some(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

/// The duration of a RIFF/WAVE file from its head and total size: `None`
/// when it is not one, `Some(Err)` when it is one whose header cannot be
/// read.
fn wav_ms(head: &[u8], size: u64) -> Option<Result<u64, &'static str>> {
    if head.get(..4) != Some(b"RIFF") || head.get(8..12) != Some(b"WAVE") {
        return None;
    }
    let mut at = 12;
    let mut byte_rate = None;
    Some(loop {
        let chunk = (at < head.len()).then(|| (head.get(at..at + 4), u32_at(head, at + 4)));
        let Some((Some(id), Some(len))) = chunk else {
            break Err("no 'fmt ' and 'data' chunks in the first 64 KiB");
        };
        match id {
            b"fmt " => byte_rate = u32_at(head, at + 16),
            b"data" => {
                let Some(rate) = byte_rate.filter(|r| *r > 0) else {
                    break Err("no valid 'fmt ' chunk before the 'data' chunk");
                };
                let present = size.saturating_sub(at as u64 + 8);
                let bytes = match len {
                    0 | u32::MAX => present,
                    declared => u64::from(declared).min(present),
                };
                let rate = u64::from(rate);
                break Ok((bytes * 1000 + rate / 2) / rate);
            }
            _ => {}
        }
        // Chunks are padded to an even length.
        at = at.saturating_add(8 + len as usize + (len as usize & 1));
    })
}

/// The duration S of an upload of `size` bytes whose first bytes are
/// `head`, in milliseconds (the rule is in the module docs); an error for
/// a WAV file whose header cannot be read.
pub fn duration_ms(head: &[u8], size: u64) -> Result<u64, &'static str> {
    match wav_ms(head, size) {
        Some(result) => result,
        None => Ok((size * 1000 + ESTIMATE_BYTES_PER_SECOND / 2) / ESTIMATE_BYTES_PER_SECOND),
    }
}

/// `3250` → `"3.3"`: tenths of a second, rounded half up.
fn tenths(ms: u64) -> String {
    let t = (ms + 50) / 100;
    format!("{}.{}", t / 10, t % 10)
}

/// The transcript of `ms` of audio.
pub fn transcript(ms: u64) -> String {
    format!(
        "Simulated transcription of {} seconds of audio.",
        tenths(ms)
    )
}

fn seconds(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

/// A span of the audio and its words.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Span {
    start: u64,
    end: u64,
    text: String,
}

/// The segments of a transcript of `ms` (the rule is in the module docs).
fn segments(ms: u64, words: &[&str]) -> Vec<Span> {
    let w = words.len().max(1) as u64;
    let n = ms.div_ceil(SEGMENT_MS).clamp(1, w);
    (0..n)
        .map(|i| Span {
            start: ms * i / n,
            end: ms * (i + 1) / n,
            text: words[(w * i / n) as usize..(w * (i + 1) / n) as usize].join(" "),
        })
        .collect()
}

fn word_spans(ms: u64, words: &[&str]) -> Vec<Span> {
    let w = words.len() as u64;
    (0..w)
        .map(|j| Span {
            start: ms * j / w,
            end: ms * (j + 1) / w,
            text: words[j as usize].trim_end_matches('.').to_owned(),
        })
        .collect()
}

/// `HH:MM:SS<sep>mmm`.
fn timestamp(ms: u64, sep: char) -> String {
    let (h, m, s) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60);
    format!("{h:02}:{m:02}:{s:02}{sep}{:03}", ms % 1000)
}

fn language_name(code: Option<&str>) -> String {
    let names = [
        ("en", "english"),
        ("fr", "french"),
        ("de", "german"),
        ("es", "spanish"),
        ("it", "italian"),
        ("pt", "portuguese"),
        ("nl", "dutch"),
        ("ru", "russian"),
        ("ja", "japanese"),
        ("zh", "chinese"),
        ("ko", "korean"),
    ];
    match code {
        None => "english".into(),
        Some(c) => names
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(c))
            .map_or_else(|| c.to_owned(), |(_, name)| (*name).to_owned()),
    }
}

#[derive(Debug, PartialEq)]
struct Transcription {
    ms: u64,
    format: &'static str,
    language: String,
    temperature: f64,
    words: bool,
    directives: FaultDirectives,
}

impl Transcription {
    fn from_upload(upload: &Upload) -> Result<Self, ApiError> {
        let Some(file) = &upload.file else {
            return Err(ApiError::invalid_request(
                "you must provide a 'file'",
                Some("file"),
            ));
        };
        if upload.field("model").is_none_or(|m| m.trim().is_empty()) {
            return Err(ApiError::invalid_request(
                "you must provide a 'model'",
                Some("model"),
            ));
        }
        let format = match upload.field("response_format") {
            None => "json",
            Some(f) => FORMATS.into_iter().find(|k| *k == f).ok_or_else(|| {
                ApiError::invalid_request(
                    format!(
                        "Invalid value for 'response_format': {f:?}. Supported values are: {}.",
                        FORMATS.join(", ")
                    ),
                    Some("response_format"),
                )
            })?,
        };
        let temperature = match upload.field("temperature") {
            None => 0.0,
            Some(t) => t
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|t| (0.0..=1.0).contains(t))
                .ok_or_else(|| {
                    ApiError::invalid_request(
                        "'temperature' must be a number from 0 to 1.",
                        Some("temperature"),
                    )
                })?,
        };
        let mut words = false;
        for g in upload
            .values("timestamp_granularities[]")
            .chain(upload.values("timestamp_granularities"))
        {
            match g {
                "word" => words = true,
                "segment" => {}
                other => {
                    return Err(ApiError::invalid_request(
                        format!(
                            "Invalid timestamp granularity {other:?}: use \"word\" or \"segment\"."
                        ),
                        Some("timestamp_granularities"),
                    ))
                }
            }
        }
        if upload.field("stream") == Some("true") {
            return Err(ApiError::invalid_request(
                "Streamed transcription is not simulated.",
                Some("stream"),
            ));
        }
        let ms = duration_ms(&file.head, file.size).map_err(|why| {
            ApiError::invalid_request(
                format!("The audio file could not be decoded: {why}."),
                Some("file"),
            )
        })?;
        if ms < MIN_MS {
            let mut e = ApiError::invalid_request(
                "Audio file is too short. Minimum audio length is 0.1 seconds.",
                Some("file"),
            );
            e.code = Some("audio_too_short");
            return Err(e);
        }
        let mut directives = FaultDirectives::default();
        if let Some(prompt) = upload.field("prompt") {
            directives.scan(prompt, |_, _| false);
        }
        Ok(Self {
            ms,
            format,
            language: language_name(upload.field("language")),
            temperature,
            words,
            directives,
        })
    }

    fn reply(&self) -> Reply {
        let text = transcript(self.ms);
        let words: Vec<&str> = text.split_whitespace().collect();
        let segments = segments(self.ms, &words);
        let usage = json!({"type": "duration", "seconds": seconds(self.ms)});
        let plain = |body: String| Reply {
            content_type: "text/plain; charset=utf-8",
            body: Bytes::from(body),
            usage: None,
        };
        match self.format {
            "text" => plain(format!("{text}\n")),
            "srt" => plain(
                segments
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        format!(
                            "{}\n{} --> {}\n{}\n\n",
                            i + 1,
                            timestamp(s.start, ','),
                            timestamp(s.end, ','),
                            s.text
                        )
                    })
                    .collect(),
            ),
            "vtt" => plain(
                std::iter::once("WEBVTT\n\n".to_owned())
                    .chain(segments.iter().map(|s| {
                        format!(
                            "{} --> {}\n{}\n\n",
                            timestamp(s.start, '.'),
                            timestamp(s.end, '.'),
                            s.text
                        )
                    }))
                    .collect(),
            ),
            "verbose_json" => {
                let segs: Vec<Value> = segments
                    .iter()
                    .enumerate()
                    .map(|(id, s)| {
                        json!({
                            "id": id, "seek": s.start / 10,
                            "start": seconds(s.start), "end": seconds(s.end),
                            "text": s.text, "tokens": [],
                            "temperature": self.temperature, "avg_logprob": -0.25,
                            "compression_ratio": 1.0, "no_speech_prob": 0.01,
                        })
                    })
                    .collect();
                let mut body = json!({
                    "task": "transcribe",
                    "language": self.language,
                    "duration": seconds(self.ms),
                    "text": text,
                    "segments": segs,
                    "usage": usage,
                });
                if self.words {
                    body["words"] = word_spans(self.ms, &words)
                        .iter()
                        .map(|w| {
                            json!({"word": w.text, "start": seconds(w.start),
                                   "end": seconds(w.end)})
                        })
                        .collect();
                }
                Reply::json(&body, Some(usage))
            }
            _ => Reply::json(&json!({"text": text, "usage": usage}), Some(usage)),
        }
    }
}

pub async fn transcribe(State(state): State<Arc<SimState>>, req: Request) -> Response {
    let seq = req.extensions().get::<RecordSeq>().copied();
    let mut multipart = match Multipart::from_request(req, &()).await {
        Ok(m) => m,
        Err(rejection) => {
            let mut e = ApiError::invalid_request(
                format!(
                    "The request must be multipart/form-data: {}",
                    rejection.body_text()
                ),
                None,
            );
            e.status = rejection.status();
            if e.status.is_success() {
                e.status = StatusCode::BAD_REQUEST;
            }
            return e.into_response();
        }
    };
    let mut upload = Upload::default();
    let read = read_upload(&mut multipart, &mut upload).await;
    if let Some(RecordSeq(seq)) = seq {
        state
            .recorder
            .set_body(seq, Bytes::from(upload.summary().to_string()));
    }
    if let Err(e) = read {
        return e.into_response();
    }
    match Transcription::from_upload(&upload) {
        Ok(t) => deliver(&state, Dialect::OpenAi, &t.directives, || Ok(t.reply())).await,
        Err(e) => e.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::families::audio::encode::{silence, Format};
    use crate::faults::Fault;

    fn upload(fields: &[(&str, &str)], file: &[u8]) -> Upload {
        Upload {
            fields: fields
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect(),
            file: Some(FileInfo {
                name: Some("a.wav".into()),
                content_type: Some("audio/wav".into()),
                size: file.len() as u64,
                head: file[..file.len().min(HEAD_BYTES)].to_vec(),
            }),
        }
    }

    fn answer(fields: &[(&str, &str)], file: &[u8]) -> Reply {
        Transcription::from_upload(&upload(fields, file))
            .expect("valid")
            .reply()
    }

    #[test]
    fn wav_durations_are_exact_and_others_estimated() {
        let wav = silence(Format::Wav, 3200);
        assert_eq!(duration_ms(&wav, wav.len() as u64), Ok(3200));
        // Only what is present counts, and "unknown" sizes mean "all of it".
        assert_eq!(duration_ms(&wav[..44 + 4800], 44 + 4800), Ok(100));
        let mut streaming = wav.clone();
        streaming[40..44].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(duration_ms(&streaming, wav.len() as u64), Ok(3200));
        // A chunk before fmt (odd length, padded) is skipped.
        let mut listed = wav[..12].to_vec();
        listed.extend_from_slice(b"LIST\x03\x00\x00\x00abc\x00");
        listed.extend_from_slice(&wav[12..]);
        assert_eq!(duration_ms(&listed, listed.len() as u64), Ok(3200));
        assert!(duration_ms(b"RIFF\0\0\0\0WAVEdata\0\0\0\0", 20).is_err());
        assert!(duration_ms(b"RIFF\0\0\0\0WAVE", 12).is_err());
        // 128 kbit/s: 16 000 bytes a second.
        assert_eq!(duration_ms(b"ID3", 48_000), Ok(3000));
        assert_eq!(duration_ms(b"", 8), Ok(1));
    }

    #[test]
    fn transcript_text_rounds_tenths_half_up() {
        assert_eq!(
            transcript(3200),
            "Simulated transcription of 3.2 seconds of audio."
        );
        assert_eq!(tenths(3250), "3.3");
        assert_eq!(tenths(3249), "3.2");
        assert_eq!(tenths(100), "0.1");
        assert_eq!(tenths(61_000), "61.0");
    }

    #[test]
    fn segments_cover_the_audio_and_the_words() {
        let text = transcript(12_000);
        let words: Vec<&str> = text.split_whitespace().collect();
        let s = segments(12_000, &words);
        assert_eq!(s.len(), 3);
        assert_eq!((s[0].start, s[0].end), (0, 4000));
        assert_eq!((s[2].start, s[2].end), (8000, 12_000));
        let joined: Vec<&str> = s.iter().map(|x| x.text.as_str()).collect();
        assert_eq!(joined.join(" "), text);
        assert_eq!(segments(500, &words).len(), 1);
        assert_eq!(segments(3_600_000, &words).len(), 7, "at most one per word");
        let w = word_spans(7000, &words);
        assert_eq!(w.len(), 7);
        assert_eq!(
            (w[6].start, w[6].end, w[6].text.as_str()),
            (6000, 7000, "audio")
        );
        assert_eq!(timestamp(3_723_004, ','), "01:02:03,004");
    }

    #[test]
    fn every_format() {
        let wav = silence(Format::Wav, 3200);
        let model = ("model", "whisper-1");
        let v: Value = serde_json::from_slice(&answer(&[model], &wav).body).expect("json");
        assert_eq!(
            v,
            json!({"text": "Simulated transcription of 3.2 seconds of audio.",
                   "usage": {"type": "duration", "seconds": 3.2}})
        );
        let r = answer(&[model, ("response_format", "text")], &wav);
        assert_eq!(r.body, "Simulated transcription of 3.2 seconds of audio.\n");
        assert_eq!(r.usage, None);
        let r = answer(&[model, ("response_format", "srt")], &wav);
        assert_eq!(
            r.body,
            "1\n00:00:00,000 --> 00:00:03,200\nSimulated transcription of 3.2 seconds of audio.\n\n"
        );
        let r = answer(&[model, ("response_format", "vtt")], &wav);
        assert_eq!(
            r.body,
            "WEBVTT\n\n00:00:00.000 --> 00:00:03.200\n\
             Simulated transcription of 3.2 seconds of audio.\n\n"
        );
        let r = answer(
            &[
                model,
                ("response_format", "verbose_json"),
                ("language", "fr"),
                ("temperature", "0.2"),
                ("timestamp_granularities[]", "word"),
                ("timestamp_granularities[]", "segment"),
            ],
            &wav,
        );
        let v: Value = serde_json::from_slice(&r.body).expect("json");
        assert_eq!(v["task"], "transcribe");
        assert_eq!(v["language"], "french");
        assert_eq!(v["duration"], 3.2);
        assert_eq!(v["usage"], json!({"type": "duration", "seconds": 3.2}));
        assert_eq!(r.usage, Some(v["usage"].clone()));
        assert_eq!(
            v["segments"][0],
            json!({"id": 0, "seek": 0, "start": 0.0, "end": 3.2,
                   "text": "Simulated transcription of 3.2 seconds of audio.", "tokens": [],
                   "temperature": 0.2, "avg_logprob": -0.25, "compression_ratio": 1.0,
                   "no_speech_prob": 0.01})
        );
        assert_eq!(v["words"].as_array().map(Vec::len), Some(7));
        assert_eq!(v["words"][6]["word"], "audio");
    }

    #[test]
    fn the_summary_replaces_the_file() {
        let u = upload(
            &[
                ("model", "whisper-1"),
                ("timestamp_granularities[]", "word"),
                ("prompt", "a"),
                ("prompt", "b"),
            ],
            b"RIFF",
        );
        assert_eq!(
            u.summary(),
            json!({"model": "whisper-1", "timestamp_granularities[]": ["word"],
                   "prompt": ["a", "b"],
                   "file": {"filename": "a.wav", "content_type": "audio/wav", "size": 4}})
        );
    }

    #[test]
    fn directives_come_from_the_prompt_and_bad_forms_name_the_field() {
        let wav = silence(Format::Wav, 1000);
        let t = Transcription::from_upload(&upload(
            &[("model", "m"), ("prompt", "names: Ada [[sim:status=503]]")],
            &wav,
        ))
        .expect("valid");
        assert_eq!(t.directives.fault, Some(Fault::Status(503)));
        let bad = |fields: &[(&str, &str)], file: &[u8]| {
            Transcription::from_upload(&upload(fields, file))
                .expect_err("invalid")
                .param
        };
        assert_eq!(bad(&[], &wav), Some("model"));
        assert_eq!(
            bad(&[("model", "m"), ("response_format", "xml")], &wav),
            Some("response_format")
        );
        assert_eq!(
            bad(&[("model", "m"), ("temperature", "2")], &wav),
            Some("temperature")
        );
        assert_eq!(
            bad(
                &[("model", "m"), ("timestamp_granularities[]", "char")],
                &wav
            ),
            Some("timestamp_granularities")
        );
        assert_eq!(
            bad(&[("model", "m"), ("stream", "true")], &wav),
            Some("stream")
        );
        assert_eq!(
            bad(&[("model", "m")], &silence(Format::Wav, 50)),
            Some("file")
        );
        assert_eq!(bad(&[("model", "m")], b"RIFF\0\0\0\0WAVE"), Some("file"));
        let mut none = upload(&[("model", "m")], &wav);
        none.file = None;
        assert_eq!(
            Transcription::from_upload(&none)
                .expect_err("no file")
                .param,
            Some("file")
        );
    }
}
