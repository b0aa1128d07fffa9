//! Gemini client, Gemini vendor: the request body goes as it is (the model is
//! in the URL the adapter builds); answers get the client's model name in
//! `modelVersion` and their usage read.

use serde_json::{json, Value};

use super::parse_usage;
use super::stream::StreamParser;
use crate::bindings::types::SseEvent;
use crate::canonical::{StreamEvent, Usage};
use crate::errors::in_answer_failure_from;
use crate::json::{parse_upstream_object, to_bytes};
use crate::TranslateError;

fn rename(value: &mut Value, client_model: &str) {
    if let Some(o) = value.as_object_mut() {
        if o.contains_key("modelVersion") {
            o.insert("modelVersion".into(), json!(client_model));
        }
    }
}

/// Renames the model; reads the usage.
pub fn finish_response(
    body: &[u8],
    client_model: &str,
) -> Result<(Vec<u8>, Option<Usage>), TranslateError> {
    let mut value = parse_upstream_object(body)?;
    if value.get("error").is_some_and(|e| !e.is_null()) {
        return Err(TranslateError::Vendor(in_answer_failure_from(&value)));
    }
    rename(&mut value, client_model);
    let usage = super::key(&value, "usageMetadata").and_then(parse_usage);
    Ok((to_bytes(&value), usage))
}

/// Relays a Gemini stream, chunk by chunk.
#[derive(Debug)]
pub struct StreamRelay {
    client_model: String,
    parser: StreamParser,
    usage: Option<Usage>,
}

impl StreamRelay {
    pub fn new(client_model: &str, request_id: &str) -> Self {
        Self {
            client_model: client_model.to_owned(),
            parser: StreamParser::new(request_id),
            usage: None,
        }
    }

    pub fn push(&mut self, ev: &SseEvent) -> Result<Vec<SseEvent>, TranslateError> {
        if ev.data.trim().is_empty() {
            return Ok(Vec::new());
        }
        for e in self.parser.push(ev)? {
            if let StreamEvent::Usage(u) = e {
                self.usage = Some(u);
            }
        }
        let mut value: Value = serde_json::from_str(&ev.data)
            .map_err(|e| TranslateError::upstream(format!("stream chunk is not JSON ({e})")))?;
        rename(&mut value, &self.client_model);
        Ok(vec![SseEvent {
            event: None,
            data: value.to_string(),
        }])
    }

    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    pub fn complete(&self) -> bool {
        self.parser.complete()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_and_reads_usage() {
        let (out, usage) = finish_response(
            br#"{"candidates":[],"modelVersion":"up","usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":2}}"#,
            "client",
        )
        .unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&out).unwrap()["modelVersion"],
            "client"
        );
        assert_eq!(usage.unwrap().output_tokens, 2);
        let mut r = StreamRelay::new("client", "r");
        let out = r
            .push(&SseEvent {
                event: None,
                data: r#"{"candidates":[{"content":{"parts":[{"text":"x"}]},"finishReason":"STOP"}],"modelVersion":"up","usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":1}}"#.into(),
            })
            .unwrap();
        assert!(out[0].data.contains("\"client\""));
        assert!(r.complete());
        assert_eq!(r.usage().unwrap().input_tokens, 1);
    }
}
