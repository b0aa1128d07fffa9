//! A multipart client request (a transcription upload) held by the host.
//!
//! The adapter needs the form's text fields (the model, the answer format)
//! but never the audio: a 100 MB upload must not be copied into a guest with
//! a 64 MiB memory cap, nor sit twice in host memory. So the form is read
//! once, field by field: text fields are kept as strings (and handed to the
//! adapter as a JSON object), file parts as the chunks they arrived in. The
//! upstream request is a new multipart body built from the same chunks
//! (reference-counted, never joined), with the fields the adapter set (its
//! vendor's model name) replaced, so the form can be sent again to a second
//! channel without being read again.

use crate::error::ApiError;
use crate::state::SharedState;
use axum::extract::{FromRequest, Multipart, Request};
use bytes::Bytes;
use serde_json::{Map, Value};

/// One file part of the client's form.
#[derive(Debug)]
pub struct FilePart {
    pub name: String,
    pub file_name: Option<String>,
    pub content_type: Option<String>,
    chunks: Vec<Bytes>,
    len: u64,
}

/// The client's form: text fields in order, then file parts.
#[derive(Debug, Default)]
pub struct ClientForm {
    pub fields: Vec<(String, String)>,
    pub files: Vec<FilePart>,
    /// The form's bytes in the request-body budget, held as long as the form.
    _lease: crate::api::body::BodyLease,
}

impl ClientForm {
    /// Reads a `multipart/form-data` request under the body limits (see
    /// `api::body`); the form keeps the lease on the bytes it holds.
    pub async fn read(state: &SharedState, req: Request) -> Result<ClientForm, ApiError> {
        let (req, lease, failure) = crate::api::body::guarded_request(state, req);
        let form = Multipart::from_request(req, state).await.map_err(|e| {
            ApiError::InvalidRequest(format!("the body is not a multipart form: {e}"))
        })?;
        let (fields, files) = read_parts(form).await.map_err(|e| {
            // A limit that stopped the body explains the broken form best.
            failure.or(state, ApiError::InvalidRequest(e))
        })?;
        Ok(ClientForm {
            fields,
            files,
            _lease: lease,
        })
    }

    /// The text fields as a JSON object (a repeated field keeps its last
    /// value), for the head and the adapter.
    pub fn fields_json(&self) -> Vec<u8> {
        let map: Map<String, Value> = self
            .fields
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        Value::Object(map).to_string().into_bytes()
    }

    /// The upstream form: the client's fields with `set` applied (replaced
    /// or added), then its file parts, streamed from the chunks as read.
    pub fn upstream(&self, set: &[(String, String)]) -> reqwest::multipart::Form {
        let mut form = reqwest::multipart::Form::new();
        for (name, value) in &self.fields {
            if !set.iter().any(|(k, _)| k == name) {
                form = form.text(name.clone(), value.clone());
            }
        }
        for (name, value) in set {
            form = form.text(name.clone(), value.clone());
        }
        for f in &self.files {
            let part = || {
                let chunks = f.chunks.clone().into_iter().map(Ok::<_, std::io::Error>);
                let body = reqwest::Body::wrap_stream(futures_util::stream::iter(chunks));
                let p = reqwest::multipart::Part::stream_with_length(body, f.len);
                match &f.file_name {
                    Some(n) => p.file_name(n.clone()),
                    None => p,
                }
            };
            // A content type that does not parse is left out rather than
            // failing the call.
            let typed = f
                .content_type
                .as_deref()
                .and_then(|ct| part().mime_str(ct).ok());
            form = form.part(f.name.clone(), typed.unwrap_or_else(part));
        }
        form
    }

    /// The first file's audio duration in milliseconds: exact for a WAV
    /// file (from its header), otherwise estimated from its size at
    /// 128 kbit/s, a common bitrate for compressed speech. `None` without a
    /// file.
    pub fn audio_ms(&self) -> Option<u64> {
        let f = self.files.first()?;
        Some(wav_ms(&f.head(64 * 1024)).unwrap_or(f.len / 16))
    }
}

/// Text fields and file parts of a form, read field by field; the error
/// says what was wrong with the form.
pub(crate) async fn read_parts(
    mut form: Multipart,
) -> Result<(Vec<(String, String)>, Vec<FilePart>), String> {
    let broken = |e: &dyn std::fmt::Display| format!("the form could not be read: {e}");
    let mut fields = Vec::new();
    let mut files = Vec::new();
    while let Some(mut field) = form.next_field().await.map_err(|e| broken(&e))? {
        let name = field.name().unwrap_or("").to_string();
        if let Some(file_name) = field.file_name().map(str::to_string) {
            let content_type = field.content_type().map(str::to_string);
            let mut chunks = Vec::new();
            let mut len = 0u64;
            while let Some(chunk) = field.chunk().await.map_err(|e| broken(&e))? {
                len += chunk.len() as u64;
                chunks.push(chunk);
            }
            files.push(FilePart {
                name,
                file_name: Some(file_name),
                content_type,
                chunks,
                len,
            });
        } else {
            let text = field
                .text()
                .await
                .map_err(|e| format!("form field `{name}` is not text: {e}"))?;
            fields.push((name, text));
        }
    }
    Ok((fields, files))
}

impl FilePart {
    /// The file's bytes, joined (tests).
    #[cfg(test)]
    pub(crate) fn joined(&self) -> Vec<u8> {
        self.chunks.concat()
    }

    /// The first `n` bytes (or fewer), joined.
    fn head(&self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n.min(self.len as usize));
        for c in &self.chunks {
            if out.len() >= n {
                break;
            }
            out.extend_from_slice(&c[..c.len().min(n - out.len())]);
        }
        out
    }
}

/// A WAV file's duration from its header, if `head` starts one.
pub(crate) fn wav_ms(head: &[u8]) -> Option<u64> {
    let reader = hound::WavReader::new(std::io::Cursor::new(head)).ok()?;
    let rate = u64::from(reader.spec().sample_rate);
    (rate > 0).then(|| u64::from(reader.duration()) * 1000 / rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wav(seconds: u32, rate: u32) -> Vec<u8> {
        let spec = hound::WavSpec {
            channels: 1,
            sample_rate: rate,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let mut out = std::io::Cursor::new(Vec::new());
        let mut w = hound::WavWriter::new(&mut out, spec).unwrap();
        for _ in 0..seconds * rate {
            w.write_sample(0i16).unwrap();
        }
        w.finalize().unwrap();
        out.into_inner()
    }

    fn form_with(file: Vec<u8>) -> ClientForm {
        let len = file.len() as u64;
        // Split in uneven chunks, as a network delivers them.
        let b = Bytes::from(file);
        let chunks = vec![b.slice(..7), b.slice(7..)];
        ClientForm {
            _lease: Default::default(),
            fields: vec![("model".into(), "whisper-1".into())],
            files: vec![FilePart {
                name: "file".into(),
                file_name: Some("a.wav".into()),
                content_type: Some("audio/wav".into()),
                chunks,
                len,
            }],
        }
    }

    #[test]
    fn a_wav_duration_is_read_from_its_header() {
        assert_eq!(form_with(wav(3, 8000)).audio_ms(), Some(3000));
        // Not a WAV: 128 kbit/s.
        assert_eq!(form_with(vec![1u8; 32_000]).audio_ms(), Some(2000));
        assert_eq!(ClientForm::default().audio_ms(), None);
    }

    #[test]
    fn fields_reach_the_adapter_as_json() {
        let f = form_with(vec![0; 16]);
        let v: Value = serde_json::from_slice(&f.fields_json()).unwrap();
        assert_eq!(v, serde_json::json!({"model": "whisper-1"}));
    }
}
