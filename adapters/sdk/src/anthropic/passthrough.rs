//! Anthropic client, Anthropic vendor: bodies pass through with the model
//! renamed and the usage read; stream events pass through as they are,
//! except `message_start` (model renamed), and the usage events are read.

use serde_json::Value;

use super::parse_usage;
use super::stream::StreamParser;
use crate::bindings::types::SseEvent;
use crate::canonical::{StreamEvent, Usage};
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
        if stream {
            o.insert("stream".into(), Value::Bool(true));
        } else {
            o.remove("stream");
        }
    }
    Ok(to_bytes(&value))
}

/// Renames the model back; reads the usage.
pub fn finish_response(
    body: &[u8],
    client_model: &str,
) -> Result<(Vec<u8>, Option<Usage>), TranslateError> {
    let mut value = parse_upstream_object(body)?;
    if str_member(&value, "type") == Some("error") {
        return Err(TranslateError::Vendor(
            crate::errors::in_answer_failure_from(&value),
        ));
    }
    set_model(&mut value, client_model);
    let usage = value.get("usage").and_then(parse_usage);
    Ok((to_bytes(&value), usage))
}

/// Relays a Messages stream.
#[derive(Debug)]
pub struct StreamRelay {
    client_model: String,
    parser: StreamParser,
    usage: Option<Usage>,
}

impl StreamRelay {
    pub fn new(client_model: &str) -> Self {
        Self {
            client_model: client_model.to_owned(),
            parser: StreamParser::default(),
            usage: None,
        }
    }

    pub fn push(&mut self, ev: &SseEvent) -> Result<Vec<SseEvent>, TranslateError> {
        let name = ev.event.as_deref().unwrap_or("");
        let watched = matches!(
            name,
            "message_start" | "message_delta" | "message_stop" | "error" | ""
        );
        if !watched {
            return Ok(vec![ev.clone()]);
        }
        for e in self.parser.push(ev)? {
            if let StreamEvent::Usage(u) = e {
                self.usage = Some(u);
            }
        }
        if name == "message_start" {
            let mut data: Value = serde_json::from_str(&ev.data).map_err(|e| {
                TranslateError::upstream(format!("message_start is not JSON ({e})"))
            })?;
            if let Some(m) = data.get_mut("message") {
                set_model(m, &self.client_model);
            }
            return Ok(vec![SseEvent {
                event: ev.event.clone(),
                data: crate::json::to_text(&data),
            }]);
        }
        Ok(vec![ev.clone()])
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
    use serde_json::json;

    #[test]
    fn passes_through_renaming_the_model() {
        let body = prepare_request(
            br#"{"model":"c","stream":false,"max_tokens":5,"x":{"y":1}}"#,
            "up",
            true,
        )
        .unwrap();
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            v,
            json!({"model": "up", "stream": true, "max_tokens": 5, "x": {"y": 1}})
        );
        let (out, usage) = finish_response(
            br#"{"model":"up","content":[],"usage":{"input_tokens":3,"output_tokens":1,"cache_creation_input_tokens":2}}"#,
            "c",
        )
        .unwrap();
        assert_eq!(serde_json::from_slice::<Value>(&out).unwrap()["model"], "c");
        assert_eq!(usage.unwrap().input_tokens, 5);
    }

    #[test]
    fn relays_events_and_reads_usage() {
        let mut r = StreamRelay::new("client");
        let start = SseEvent {
            event: Some("message_start".into()),
            data: json!({"type": "message_start", "message": {"model": "up", "usage": {"input_tokens": 4, "output_tokens": 1}}}).to_string(),
        };
        let out = r.push(&start).unwrap();
        assert!(out[0].data.contains("\"client\""));
        let delta = SseEvent {
            event: Some("content_block_delta".into()),
            data: "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}".into(),
        };
        assert_eq!(r.push(&delta).unwrap(), vec![delta.clone()]);
        r.push(&SseEvent {
            event: Some("message_delta".into()),
            data: json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 7}}).to_string(),
        })
        .unwrap();
        assert!(!r.complete());
        r.push(&SseEvent {
            event: Some("message_stop".into()),
            data: "{\"type\":\"message_stop\"}".into(),
        })
        .unwrap();
        assert!(r.complete());
        assert_eq!(r.usage().unwrap().output_tokens, 7);
        assert_eq!(r.usage().unwrap().input_tokens, 4);
    }
}
