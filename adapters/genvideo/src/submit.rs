//! Creating a task: the submission request and the vendor's answer to it.

use gateway_guest_sdk::errors::{read_vendor_error, upstream_message};
use gateway_guest_sdk::json::{parse_upstream_object, str_member, to_bytes};
use gateway_guest_sdk::redact::clean_message;
use serde_json::json;

use crate::paths::{is_task_id, TASKS_PATH};
use gateway_guest_sdk::video::Header;
use gateway_guest_sdk::video::{
    AnswerMode, PluginError, RequestBody, UpstreamRequest, VideoRequest,
};

pub fn build_submit(req: &VideoRequest) -> Result<UpstreamRequest, PluginError> {
    let body = json!({
        "model": req.upstream_model,
        "prompt": req.prompt,
        "duration": req.seconds,
        "size": req.size,
        "aspect_ratio": req.ratio,
    });
    Ok(UpstreamRequest {
        method: "POST".to_owned(),
        path: TASKS_PATH.to_owned(),
        headers: vec![
            Header {
                name: "content-type".to_owned(),
                value: "application/json".to_owned(),
            },
            // The gateway's task id: if the gateway dies after the vendor
            // accepted the task but before it recorded that, its resubmission
            // is recognised instead of paid for twice.
            Header {
                name: "idempotency-key".to_owned(),
                value: req.request_id.clone(),
            },
        ],
        body: RequestBody::Bytes(to_bytes(&body)),
        answer: AnswerMode::Translate,
        state: String::new(),
    })
}

/// The vendor's task id, from a 2xx answer.
pub fn parse_submit(status: u16, body: &[u8]) -> Result<String, PluginError> {
    if !(200..300).contains(&status) {
        return Err(vendor_failure(status, body));
    }
    let answer = parse_upstream_object(body).map_err(|e| upstream(e.message()))?;
    match str_member(&answer, "task_id") {
        Some(id) if is_task_id(id) => Ok(id.to_owned()),
        Some(id) => Err(upstream(&format!(
            "vendor task id {:?} has characters or a length this adapter cannot use",
            clean_message(id, 40)
        ))),
        None => Err(upstream("vendor answer has no string task_id")),
    }
}

/// A non-2xx answer: its status and the vendor's own words, cleaned.
pub fn vendor_failure(status: u16, body: &[u8]) -> PluginError {
    upstream(&upstream_message(status, &read_vendor_error(body).message))
}

pub fn upstream(message: &str) -> PluginError {
    PluginError::UpstreamFormat(message.to_owned())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::Value;

    pub(crate) fn message(err: PluginError) -> String {
        match err {
            PluginError::UpstreamFormat(m) => m,
            other => panic!("expected upstream-format, got {other:?}"),
        }
    }

    #[test]
    fn builds_the_vendor_submission() {
        let req = VideoRequest {
            upstream_model: "gen-2".to_owned(),
            prompt: "a fox \"in\" snow".to_owned(),
            seconds: 8,
            size: "720x1280".to_owned(),
            ratio: "9:16".to_owned(),
            request_id: "req-1".to_owned(),
        };
        let sent = build_submit(&req).unwrap();
        assert_eq!(
            (sent.method.as_str(), sent.path.as_str()),
            ("POST", "/video/tasks")
        );
        assert_eq!(sent.headers.len(), 2);
        assert_eq!(sent.headers[0].name, "content-type");
        assert_eq!(sent.headers[0].value, "application/json");
        assert_eq!(
            (
                sent.headers[1].name.as_str(),
                sent.headers[1].value.as_str()
            ),
            ("idempotency-key", "req-1")
        );
        assert_eq!(sent.state, "");
        let RequestBody::Bytes(bytes) = &sent.body else {
            panic!("a submission has its own body");
        };
        let body: Value = serde_json::from_slice(bytes).unwrap();
        assert_eq!(
            body,
            json!({"model": "gen-2", "prompt": "a fox \"in\" snow", "duration": 8,
                   "size": "720x1280", "aspect_ratio": "9:16"})
        );
    }

    #[test]
    fn reads_the_task_id() {
        let body = br#"{"task_id": "vt_7", "status": "pending"}"#;
        assert_eq!(parse_submit(200, body).unwrap(), "vt_7");
        assert_eq!(parse_submit(201, body).unwrap(), "vt_7");
    }

    #[test]
    fn unusable_answers_are_upstream_format() {
        for body in [
            &br#"{"status": "pending"}"#[..],
            br#"{"task_id": 7}"#,
            br#"{"task_id": "../admin"}"#,
            br#"{"task_id": ""}"#,
            b"[]",
            b"<html>",
        ] {
            assert!(
                matches!(parse_submit(200, body), Err(PluginError::UpstreamFormat(_))),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn vendor_errors_carry_status_and_a_cleaned_message() {
        let body = json!({"error": {"code": "unauthorized",
            "message": "Invalid key sk-live-abcdef123456 for\nthis project"}})
        .to_string();
        let m = message(parse_submit(401, body.as_bytes()).unwrap_err());
        assert_eq!(
            m,
            "upstream answered 401: Invalid key [redacted] for this project"
        );
        let m = message(parse_submit(500, b"").unwrap_err());
        assert_eq!(m, "upstream answered 500");
        let m = message(parse_submit(503, b"overloaded, Bearer abc.def.ghi").unwrap_err());
        assert_eq!(m, "upstream answered 503: overloaded, Bearer [redacted]");
    }
}
