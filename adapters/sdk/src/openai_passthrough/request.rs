use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::{member_value, raw, STATE_CLIENT_WANTS_USAGE};
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
///
/// Only `model`, `stream` and `stream_options` change, so only they are
/// parsed: the messages, with all their text, are checked as JSON and copied
/// as the client wrote them (the same splice as [`super::finish_response`]).
/// Members come out in key order, as from a parsed object. A body that is
/// not a JSON object, or has a key written with an escape (the keys are
/// borrowed from the body), takes the whole parse.
pub fn prepare_request(
    body: &[u8],
    upstream_model: &str,
    stream: bool,
) -> Result<PreparedRequest, TranslateError> {
    // The replacement members first: the map below borrows them.
    let Some(model) = raw(&Value::from(upstream_model)) else {
        return prepare_parsed(body, upstream_model, stream);
    };
    let options_raw;
    let Ok(mut members) = serde_json::from_slice::<BTreeMap<&str, &RawValue>>(body) else {
        return prepare_parsed(body, upstream_model, stream);
    };
    members.insert("model", &model);
    let mut client_wants_usage = false;
    if stream {
        members.insert("stream", RawValue::TRUE);
        let mut options = match members.get("stream_options").map(|o| member_value(o)) {
            Some(Value::Object(options)) => options,
            // Absent or not an object: replaced, as `object_member` does.
            _ => Map::new(),
        };
        client_wants_usage = options.get("include_usage") == Some(&Value::Bool(true));
        // Other members of `stream_options` are the client's business and stay.
        options.insert("include_usage".to_owned(), Value::Bool(true));
        let Some(text) = raw(&Value::Object(options)) else {
            return prepare_parsed(body, upstream_model, stream);
        };
        options_raw = text;
        members.insert("stream_options", &options_raw);
    } else if members
        .get("stream")
        .is_some_and(|s| member_value(s) == Value::Bool(true))
    {
        // See `prepare_parsed`.
        members.insert("stream", RawValue::FALSE);
    }
    Ok(PreparedRequest {
        body: serde_json::to_vec(&members).unwrap_or_default(),
        state: state(client_wants_usage),
    })
}

fn state(client_wants_usage: bool) -> String {
    if client_wants_usage {
        STATE_CLIENT_WANTS_USAGE.to_owned()
    } else {
        String::new()
    }
}

/// [`prepare_request`] over the whole parsed body.
fn prepare_parsed(
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
        if let Some(options) = object_member(&mut value, "stream_options") {
            options.insert("include_usage".to_owned(), Value::Bool(true));
        }
    }
    Ok(PreparedRequest {
        body: to_bytes(&value),
        state: state(client_wants_usage),
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
    fn the_spliced_request_is_the_parsed_one_with_the_clients_own_text() {
        let bodies = [
            r#"{"model":"c","messages":[{"role":"user","content":"caf\u00e9 \"q\""}],
               "temperature":1e-4,"stream":true,"stream_options":{"include_usage":true,"x":1}}"#,
            r#"{"model":"c","stream":false,"stream_options":{"include_usage":false}}"#,
            r#"{"model":"c","stream":"yes","stream_options":"n/a"}"#,
            r#"{"stream_options":null,"stream":true,"a":1,"a":2}"#,
            r#"  {"b":[1,2,{"c":{}}],"\u006dodel":"escaped key","\u0073tream":true}  "#,
            r#"{}"#,
        ];
        for body in bodies {
            for stream in [false, true] {
                let spliced = prepare_request(body.as_bytes(), "up", stream).unwrap();
                let parsed = prepare_parsed(body.as_bytes(), "up", stream).unwrap();
                assert_eq!(spliced.state, parsed.state, "{body} {stream}");
                let a: Value = serde_json::from_slice(&spliced.body).unwrap();
                let b: Value = serde_json::from_slice(&parsed.body).unwrap();
                assert_eq!(a, b, "{body} {stream}");
            }
        }
        // The client's own spelling of a number survives.
        let spliced = prepare_request(bodies[0].as_bytes(), "up", false).unwrap();
        assert!(String::from_utf8(spliced.body).unwrap().contains("1e-4"));
    }

    #[test]
    fn non_objects_are_invalid_requests() {
        for body in [&b"[]"[..], b"\"x\"", b"{", b""] {
            assert!(matches!(
                prepare_request(body, "m", false),
                Err(TranslateError::InvalidRequest(_))
            ));
            assert_eq!(
                prepare_request(body, "m", true).unwrap_err().to_string(),
                prepare_parsed(body, "m", true).unwrap_err().to_string()
            );
        }
    }
}
