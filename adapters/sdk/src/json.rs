//! Small helpers on `serde_json` values that every adapter needs.
//!
//! Guests edit bodies as `Value`s rather than typed structs so that members
//! this gateway does not know about pass through untouched. A translation,
//! which keeps only what the canonical form holds, reads its hot shapes
//! typed instead where it can ([`crate::typed`]).

use serde_json::{Map, Value};

use crate::TranslateError;

/// Parses a client body that must be a JSON object.
pub fn parse_request_object(body: &[u8]) -> Result<Value, TranslateError> {
    parse_object(body).map_err(|reason| TranslateError::invalid(format!("request body {reason}")))
}

/// Parses a vendor body that must be a JSON object.
pub fn parse_upstream_object(body: &[u8]) -> Result<Value, TranslateError> {
    parse_object(body).map_err(|reason| TranslateError::upstream(format!("vendor body {reason}")))
}

/// Parses a vendor stream event's data, which must be a JSON object.
pub fn parse_stream_chunk(data: &str) -> Result<Value, TranslateError> {
    let chunk: Value = serde_json::from_str(data).map_err(|err| {
        TranslateError::upstream(format!("stream chunk is not valid JSON ({err})"))
    })?;
    if !chunk.is_object() {
        return Err(TranslateError::upstream(
            "stream chunk is not a JSON object",
        ));
    }
    Ok(chunk)
}

fn parse_object(body: &[u8]) -> Result<Value, String> {
    match serde_json::from_slice::<Value>(body) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(other) => Err(format!("is JSON {}, not an object", kind_name(&other))),
        // serde_json's message names line and column, short enough to show.
        Err(err) => Err(format!("is not valid JSON ({err})")),
    }
}

/// A JSON type's name, for error messages.
pub fn kind_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Sets the top-level `model` member; does nothing on a non-object.
pub fn set_model(value: &mut Value, name: &str) {
    if let Some(object) = value.as_object_mut() {
        object.insert("model".to_owned(), Value::String(name.to_owned()));
    }
}

/// Serialises a value to bytes.
///
/// Through `serde_json::to_vec`, not `Value`'s `Display`: that one goes
/// through `fmt` and checks every piece it writes for UTF-8, which made it
/// the largest part of a passthrough answer's guest time.
pub fn to_bytes(value: &Value) -> Vec<u8> {
    // Serialising a `Value` cannot fail (its keys are always strings).
    serde_json::to_vec(value).unwrap_or_default()
}

/// Serialises a value to a string (an SSE event's data); see [`to_bytes`].
pub fn to_text(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// The object member `key` as a string, if it is one.
pub fn str_member<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

/// The object member `key` as a token count (see [`as_count`]).
pub fn count_member(value: &Value, key: &str) -> Option<u64> {
    value.get(key).and_then(as_count)
}

/// A non-negative whole number. Accepts `12.0` as well as `12` because some
/// vendors serialise counters as floats; anything else is `None`.
pub fn as_count(value: &Value) -> Option<u64> {
    if let Some(n) = value.as_u64() {
        return Some(n);
    }
    whole_count(value.as_f64()?)
}

/// A float as a token count: whole, not negative and in range, else `None`.
pub fn whole_count(f: f64) -> Option<u64> {
    if f.is_finite() && f >= 0.0 && f.fract() == 0.0 && f <= u64::MAX as f64 {
        // Exact: the value is whole and in range.
        Some(f as u64)
    } else {
        None
    }
}

/// The object member `key`, created as an empty object when it is missing or
/// not an object. `None` when `value` itself is not an object.
pub fn object_member<'a>(value: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    let object = value.as_object_mut()?;
    let member = object
        .entry(key.to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    if !member.is_object() {
        *member = Value::Object(Map::new());
    }
    member.as_object_mut()
}

/// Whether the object member `key` is present and not `null`.
pub fn has_non_null(value: &Value, key: &str) -> bool {
    value.get(key).is_some_and(|member| !member.is_null())
}

/// Typed access to a request object's optional members, with errors that
/// name the member. `null` counts as absent.
pub struct Fields<'a>(pub &'a Map<String, Value>);

impl<'a> Fields<'a> {
    /// The members of `body`, which must be an object.
    pub fn of(body: &'a Value) -> Result<Self, TranslateError> {
        body.as_object()
            .map(Fields)
            .ok_or_else(|| TranslateError::invalid("request body must be a JSON object"))
    }

    pub fn present(&self, key: &str) -> Option<&'a Value> {
        self.0.get(key).filter(|value| !value.is_null())
    }

    pub fn wrong(key: &str, wanted: &str, got: &Value) -> TranslateError {
        TranslateError::invalid(format!("`{key}` must be {wanted}, not {}", kind_name(got)))
    }

    pub fn string(&self, key: &str) -> Result<Option<String>, TranslateError> {
        match self.present(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(Self::wrong(key, "a string", other)),
        }
    }

    pub fn number(&self, key: &str) -> Result<Option<f64>, TranslateError> {
        match self.present(key) {
            None => Ok(None),
            Some(value) => value
                .as_f64()
                .map(Some)
                .ok_or_else(|| Self::wrong(key, "a number", value)),
        }
    }

    pub fn integer(&self, key: &str) -> Result<Option<i64>, TranslateError> {
        match self.present(key) {
            None => Ok(None),
            Some(value) => value
                .as_i64()
                .map(Some)
                .ok_or_else(|| Self::wrong(key, "an integer", value)),
        }
    }

    pub fn count(&self, key: &str) -> Result<Option<u64>, TranslateError> {
        match self.present(key) {
            None => Ok(None),
            Some(value) => as_count(value)
                .map(Some)
                .ok_or_else(|| Self::wrong(key, "a non-negative integer", value)),
        }
    }

    pub fn boolean(&self, key: &str) -> Result<Option<bool>, TranslateError> {
        match self.present(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(Self::wrong(key, "a boolean", other)),
        }
    }

    pub fn array(&self, key: &str) -> Result<&'a [Value], TranslateError> {
        match self.present(key) {
            None => Ok(&[]),
            Some(Value::Array(items)) => Ok(items),
            Some(other) => Err(Self::wrong(key, "an array", other)),
        }
    }

    /// A string or an array of strings (stop sequences).
    pub fn strings(&self, key: &str) -> Result<Vec<String>, TranslateError> {
        match self.present(key) {
            None => Ok(Vec::new()),
            Some(Value::String(s)) => Ok(vec![s.clone()]),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    item.as_str().map(str::to_owned).ok_or_else(|| {
                        TranslateError::invalid(format!("`{key}` must hold strings"))
                    })
                })
                .collect(),
            Some(other) => Err(Self::wrong(key, "a string or an array", other)),
        }
    }
}

/// Tool-call arguments (JSON text) as the object vendors that want an object
/// take; text that is not a JSON object is kept under `"arguments"` rather
/// than lost.
pub fn arguments_object(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return Value::Object(Map::new());
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => {
            let mut m = Map::new();
            m.insert("arguments".to_owned(), Value::String(arguments.to_owned()));
            Value::Object(m)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn request_object_errors_are_invalid_request() {
        assert!(parse_request_object(br#"{"a":1}"#).is_ok());
        let err = parse_request_object(b"[1]").unwrap_err();
        assert_eq!(
            err,
            TranslateError::invalid("request body is JSON an array, not an object")
        );
        assert!(matches!(
            parse_request_object(b"{nope"),
            Err(TranslateError::InvalidRequest(_))
        ));
    }

    #[test]
    fn upstream_object_errors_are_upstream_format() {
        assert!(matches!(
            parse_upstream_object(b"<html>"),
            Err(TranslateError::UpstreamFormat(_))
        ));
    }

    #[test]
    fn set_model_replaces_or_inserts() {
        let mut value = json!({"model": "a", "x": 1});
        set_model(&mut value, "b");
        assert_eq!(value, json!({"model": "b", "x": 1}));
        let mut value = json!({});
        set_model(&mut value, "c");
        assert_eq!(value, json!({"model": "c"}));
        let mut value = json!([1]);
        set_model(&mut value, "c");
        assert_eq!(value, json!([1]));
    }

    #[test]
    fn counts_accept_whole_floats_only() {
        assert_eq!(as_count(&json!(7)), Some(7));
        assert_eq!(as_count(&json!(7.0)), Some(7));
        assert_eq!(as_count(&json!(7.5)), None);
        assert_eq!(as_count(&json!(-1)), None);
        assert_eq!(as_count(&json!("7")), None);
    }

    #[test]
    fn arguments_become_objects_without_loss() {
        assert_eq!(arguments_object(r#"{"a":[1]}"#), json!({"a": [1]}));
        assert_eq!(arguments_object(""), json!({}));
        assert_eq!(arguments_object("[1]"), json!({"arguments": "[1]"}));
    }

    #[test]
    fn object_member_replaces_non_objects() {
        let mut value = json!({"a": null});
        if let Some(a) = object_member(&mut value, "a") {
            a.insert("b".into(), json!(1));
        }
        assert_eq!(value, json!({"a": {"b": 1}}));
        assert!(object_member(&mut json!(3), "a").is_none());
    }
}
