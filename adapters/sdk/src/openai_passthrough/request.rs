use serde_json::Value;

use super::STATE_CLIENT_WANTS_USAGE;
use crate::json::{object_member, parse_request_object, set_model, to_bytes};
use crate::TranslateError;

/// The body to send upstream and the state to hand back later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedRequest {
    pub body: Vec<u8>,
    pub state: String,
}

/// Renames the model to `upstream_model` and, for a streamed call, makes the
/// vendor report usage at the end of the stream.
pub fn prepare_request(
    body: &[u8],
    upstream_model: &str,
    stream: bool,
) -> Result<PreparedRequest, TranslateError> {
    let mut value = parse_request_object(body)?;
    set_model(&mut value, upstream_model);
    let client_wants_usage = stream
        && value
            .get("stream_options")
            .and_then(|options| options.get("include_usage"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
    if let Some(object) = value.as_object_mut() {
        if stream {
            object.insert("stream".to_owned(), Value::Bool(true));
        } else if object.get("stream") == Some(&Value::Bool(true)) {
            // The host decided this call is not streamed; a vendor answering
            // with SSE anyway would be unreadable.
            object.insert("stream".to_owned(), Value::Bool(false));
        }
    }
    if stream {
        // Other members of `stream_options` are the client's business and stay.
        if let Some(options) = object_member(&mut value, "stream_options") {
            options.insert("include_usage".to_owned(), Value::Bool(true));
        }
    }
    Ok(PreparedRequest {
        body: to_bytes(&value),
        state: if client_wants_usage {
            STATE_CLIENT_WANTS_USAGE.to_owned()
        } else {
            String::new()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn prepared_json(body: Value, stream: bool) -> (Value, String) {
        let prepared = prepare_request(body.to_string().as_bytes(), "up-model", stream).unwrap();
        (
            serde_json::from_slice(&prepared.body).unwrap(),
            prepared.state,
        )
    }

    #[test]
    fn renames_the_model_and_keeps_everything_else() {
        let body = json!({"model": "client", "messages": [], "vendor_knob": {"x": [1, 2]}});
        let (sent, state) = prepared_json(body, false);
        assert_eq!(
            sent,
            json!({"model": "up-model", "messages": [], "vendor_knob": {"x": [1, 2]}})
        );
        assert_eq!(state, "");
    }

    #[test]
    fn streams_always_ask_for_usage() {
        let (sent, state) = prepared_json(json!({"model": "c", "stream": true}), true);
        assert_eq!(sent["stream"], json!(true));
        assert_eq!(sent["stream_options"], json!({"include_usage": true}));
        assert_eq!(state, "");
    }

    #[test]
    fn client_usage_request_is_remembered_and_options_kept() {
        let body = json!({"model": "c", "stream": true,
                          "stream_options": {"include_usage": true, "chunk_hint": 3}});
        let (sent, state) = prepared_json(body, true);
        assert_eq!(
            sent["stream_options"],
            json!({"include_usage": true, "chunk_hint": 3})
        );
        assert_eq!(state, STATE_CLIENT_WANTS_USAGE);
        let body = json!({"model": "c", "stream": true,
                          "stream_options": {"include_usage": false}});
        let (sent, state) = prepared_json(body, true);
        assert_eq!(sent["stream_options"]["include_usage"], json!(true));
        assert_eq!(state, "");
    }

    #[test]
    fn stream_flag_follows_the_host() {
        let (sent, _) = prepared_json(json!({"model": "c", "stream": true}), false);
        assert_eq!(sent["stream"], json!(false));
        let (sent, _) = prepared_json(json!({"model": "c"}), true);
        assert_eq!(sent["stream"], json!(true));
    }

    #[test]
    fn non_objects_are_invalid_requests() {
        for body in [&b"[]"[..], b"\"x\"", b"{", b""] {
            assert!(matches!(
                prepare_request(body, "m", false),
                Err(TranslateError::InvalidRequest(_))
            ));
        }
    }
}
