//! Responses client, Responses vendor: bodies pass through with the model
//! renamed and the usage read; stream events pass through with the model
//! renamed in the lifecycle events.

use serde_json::Value;

use super::parse_usage;
use crate::bindings::types::SseEvent;
use crate::canonical::Usage;
use crate::json::{parse_request_object, parse_upstream_object, set_model, str_member, to_bytes};
use crate::TranslateError;

/// Renames the model and sets `stream` as the host decided.
pub fn prepare_request(
    body: &[u8],
    upstream_model: &str,
    stream: bool,
) -> Result<Vec<u8>, TranslateError> {
    let mut value = parse_request_object(body)?;
    set_model(&mut value, upstream_model);
    if let Some(o) = value.as_object_mut() {
        o.insert("stream".into(), Value::Bool(stream));
    }
    Ok(to_bytes(&value))
}

/// Renames the model back; reads the usage.
pub fn finish_response(
    body: &[u8],
    client_model: &str,
) -> Result<(Vec<u8>, Option<Usage>), TranslateError> {
    let mut value = parse_upstream_object(body)?;
    set_model(&mut value, client_model);
    let usage = value.get("usage").and_then(parse_usage);
    Ok((to_bytes(&value), usage))
}

/// Relays a Responses stream.
#[derive(Debug)]
pub struct StreamRelay {
    client_model: String,
    usage: Option<Usage>,
    finished: bool,
}

impl StreamRelay {
    pub fn new(client_model: &str) -> Self {
        Self {
            client_model: client_model.to_owned(),
            usage: None,
            finished: false,
        }
    }

    pub fn push(&mut self, ev: &SseEvent) -> Result<Vec<SseEvent>, TranslateError> {
        let trimmed = ev.data.trim();
        if trimmed.is_empty() || trimmed == "[DONE]" {
            return Ok(Vec::new());
        }
        let mut data: Value = serde_json::from_str(trimmed).map_err(|e| {
            TranslateError::upstream(format!("stream event is not valid JSON ({e})"))
        })?;
        let kind = str_member(&data, "type").unwrap_or("").to_owned();
        if let Some(r) = data.get_mut("response") {
            set_model(r, &self.client_model);
            if kind == "response.completed" || kind == "response.incomplete" {
                self.finished = true;
                self.usage = r.get("usage").and_then(parse_usage);
            }
        }
        Ok(vec![SseEvent {
            event: ev.event.clone(),
            data: crate::json::to_text(&data),
        }])
    }

    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    pub fn complete(&self) -> bool {
        self.finished
    }
}
