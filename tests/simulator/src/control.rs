//! `/_sim/...`: the same inspection and fault injection the library offers,
//! for users that run the simulator as a separate process (demo, SDK tests).
//! These routes are neither authenticated nor recorded.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::errors::ApiError;
use crate::faults::{parse_status, Fault};
use crate::record::Recorded;
use crate::SimState;

pub fn routes() -> Router<Arc<SimState>> {
    Router::new()
        .route("/_sim/requests", get(list_requests).delete(clear_requests))
        .route("/_sim/mail", get(list_mail).delete(clear_mail))
        .route(
            "/_sim/faults",
            axum::routing::post(push_fault).delete(clear_faults),
        )
}

async fn list_requests(State(state): State<Arc<SimState>>) -> Json<Vec<Value>> {
    Json(state.recorder.snapshot().iter().map(to_json).collect())
}

async fn clear_requests(State(state): State<Arc<SimState>>) -> StatusCode {
    state.recorder.clear();
    StatusCode::NO_CONTENT
}

async fn list_mail(State(state): State<Arc<SimState>>) -> Json<Vec<crate::mail::Mail>> {
    Json(state.mailbox.snapshot())
}

async fn clear_mail(State(state): State<Arc<SimState>>) -> StatusCode {
    state.mailbox.clear();
    StatusCode::NO_CONTENT
}

async fn clear_faults(State(state): State<Arc<SimState>>) -> StatusCode {
    state.faults.clear();
    StatusCode::NO_CONTENT
}

fn to_json(r: &Recorded) -> Value {
    let mut headers = Map::new();
    for (name, value) in &r.headers {
        // Repeated headers are joined the way HTTP allows them to be folded.
        let merged = match headers.get(name).and_then(Value::as_str) {
            Some(prev) => format!("{prev}, {value}"),
            None => value.clone(),
        };
        headers.insert(name.clone(), Value::String(merged));
    }
    let mut out = json!({ "method": r.method, "path": r.path, "headers": headers,
                          "usage": r.usage });
    match std::str::from_utf8(&r.body) {
        Ok(text) => out["body"] = json!(text),
        Err(_) => {
            out["body_base64"] = json!(base64::engine::general_purpose::STANDARD.encode(&r.body))
        }
    }
    out
}

#[derive(Debug, Deserialize)]
struct FaultSpec {
    fault: String,
    status: Option<Value>,
    ms: Option<u64>,
    count: Option<usize>,
}

impl FaultSpec {
    fn to_fault(&self) -> Result<Fault, String> {
        match self.fault.as_str() {
            "status" => {
                let status = match &self.status {
                    Some(Value::Number(n)) => n.to_string(),
                    Some(Value::String(s)) => s.clone(),
                    _ => return Err("\"status\" fault needs a \"status\" field".into()),
                };
                parse_status(&status).ok_or_else(|| format!("bad status {status:?}"))
            }
            "quota" => Ok(Fault::InsufficientQuota),
            "hang" => Ok(Fault::Hang),
            "latency" => self
                .ms
                .map(|ms| Fault::Latency(Duration::from_millis(ms)))
                .ok_or_else(|| "\"latency\" fault needs an \"ms\" field".into()),
            "malformed" => Ok(Fault::Malformed),
            "cut" => Ok(Fault::Cut),
            "truncate" => Ok(Fault::Truncate),
            "error_event" => Ok(Fault::ErrorEvent),
            "error_midway" => Ok(Fault::ErrorMidway),
            other => Err(format!("unknown fault {other:?}")),
        }
    }
}

async fn push_fault(State(state): State<Arc<SimState>>, body: Bytes) -> Response {
    let spec: FaultSpec = match serde_json::from_slice(&body) {
        Ok(s) => s,
        Err(e) => {
            return ApiError::invalid_request(format!("bad fault spec: {e}"), None).into_response()
        }
    };
    let fault = match spec.to_fault() {
        Ok(f) => f,
        Err(msg) => return ApiError::invalid_request(msg, Some("fault")).into_response(),
    };
    let count = spec.count.unwrap_or(1);
    state.faults.push(fault, count);
    Json(json!({ "queued": count, "pending": state.faults.pending() })).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(v: Value) -> Result<Fault, String> {
        let s: FaultSpec = serde_json::from_value(v).map_err(|e| e.to_string())?;
        s.to_fault()
    }

    #[test]
    fn fault_specs() {
        assert_eq!(
            spec(json!({"fault": "status", "status": 429})),
            Ok(Fault::Status(429))
        );
        assert_eq!(
            spec(json!({"fault": "status", "status": "429-quota"})),
            Ok(Fault::InsufficientQuota)
        );
        assert_eq!(
            spec(json!({"fault": "latency", "ms": 200})),
            Ok(Fault::Latency(Duration::from_millis(200)))
        );
        assert_eq!(spec(json!({"fault": "cut"})), Ok(Fault::Cut));
        assert_eq!(spec(json!({"fault": "truncate"})), Ok(Fault::Truncate));
        assert_eq!(spec(json!({"fault": "error_event"})), Ok(Fault::ErrorEvent));
        assert_eq!(
            spec(json!({"fault": "error_midway"})),
            Ok(Fault::ErrorMidway)
        );
        assert!(spec(json!({"fault": "status"})).is_err());
        assert!(spec(json!({"fault": "latency"})).is_err());
        assert!(spec(json!({"fault": "explode"})).is_err());
    }

    #[test]
    fn recorded_body_encoding() {
        let mut r = Recorded {
            method: "POST".into(),
            path: "/v1/x".into(),
            headers: vec![("a".into(), "1".into()), ("a".into(), "2".into())],
            body: Bytes::from_static(b"hi"),
            usage: None,
        };
        let v = to_json(&r);
        assert_eq!(v["body"], "hi");
        assert_eq!(v["headers"]["a"], "1, 2");
        r.body = Bytes::from_static(&[0xff, 0x00]);
        let v = to_json(&r);
        assert_eq!(v["body_base64"], "/wA=");
        assert!(v.get("body").is_none());
    }
}
