//! Following a task: the poll and download requests and the poll answer.

use gateway_guest_sdk::errors::MAX_VENDOR_MESSAGE_CHARS;
use gateway_guest_sdk::json::{parse_upstream_object, str_member};
use gateway_guest_sdk::redact::clean_message;
use serde_json::Value;

use crate::paths::{get, task_path};
use crate::submit::{upstream, vendor_failure};
use gateway_guest_sdk::video::{PluginError, TaskState, TaskStatus, UpstreamRequest};

/// The vendor's code for a content-safety refusal.
const CONTENT_POLICY: &str = "content_policy";

pub fn build_poll(id: &str) -> Result<UpstreamRequest, PluginError> {
    task_path(id, "").map(get)
}

pub fn build_content(id: &str) -> Result<UpstreamRequest, PluginError> {
    task_path(id, "/content").map(get)
}

pub fn parse_poll(status: u16, body: &[u8]) -> Result<TaskStatus, PluginError> {
    if !(200..300).contains(&status) {
        return Err(vendor_failure(status, body));
    }
    let answer = parse_upstream_object(body).map_err(|e| upstream(e.message()))?;
    let vendor_state = str_member(&answer, "status")
        .ok_or_else(|| upstream("vendor answer has no string status"))?;
    let (state, actual_seconds, error_message) = match vendor_state {
        "pending" => (TaskState::Queued, None, None),
        "running" => (TaskState::InProgress, None, None),
        "succeeded" => (TaskState::Completed, Some(actual_seconds(&answer)?), None),
        "failed" => {
            let (refused, message) = failure(&answer);
            let state = if refused {
                TaskState::Rejected
            } else {
                TaskState::Failed
            };
            (state, None, Some(message))
        }
        other => {
            return Err(upstream(&format!(
                "vendor task status {:?} is not one this adapter knows",
                clean_message(other, 40)
            )))
        }
    };
    let default_progress = if state == TaskState::Completed {
        100
    } else {
        0
    };
    Ok(TaskStatus {
        state,
        progress: progress(&answer).unwrap_or(default_progress),
        actual_seconds,
        error_message,
    })
}

/// The vendor's `progress`, clamped to 0..=100; `None` when absent or not a
/// number.
fn progress(answer: &Value) -> Option<u8> {
    let p = answer.get("progress")?.as_f64()?;
    // NaN cannot come out of JSON; the clamp makes the cast exact.
    Some(p.round().clamp(0.0, 100.0) as u8)
}

/// `duration` in whole seconds, rounded, at least 1: what the host bills.
fn actual_seconds(answer: &Value) -> Result<u32, PluginError> {
    match answer.get("duration").and_then(Value::as_f64) {
        Some(d) if d.is_finite() && d >= 0.0 => {
            // `as` saturates, so an absurd duration cannot wrap.
            Ok((d.round() as u32).max(1))
        }
        _ => Err(upstream(
            "vendor reported success without a usable duration",
        )),
    }
}

/// Whether the failure is a content refusal, and the vendor's reason.
fn failure(answer: &Value) -> (bool, String) {
    let error = answer.get("error");
    let code = error.and_then(|e| str_member(e, "code"));
    let message = error
        .and_then(|e| str_member(e, "message"))
        .map(|m| clean_message(m, MAX_VENDOR_MESSAGE_CHARS))
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| match code {
            Some(code) => format!("the vendor reported {}", clean_message(code, 40)),
            None => "the vendor reported a failure without a reason".to_owned(),
        });
    (code == Some(CONTENT_POLICY), message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::submit::tests::message;
    use serde_json::json;

    fn parse(v: Value) -> TaskStatus {
        parse_poll(200, v.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn builds_poll_and_download_requests() {
        let poll = build_poll("vt_3").unwrap();
        assert_eq!(
            (poll.method.as_str(), poll.path.as_str()),
            ("GET", "/video/tasks/vt_3")
        );
        assert!(
            poll.body == gateway_guest_sdk::video::RequestBody::Bytes(Vec::new())
                && poll.headers.is_empty()
                && poll.state.is_empty()
        );
        let content = build_content("vt_3").unwrap();
        assert_eq!(content.path, "/video/tasks/vt_3/content");
        assert!(matches!(
            build_poll("a/b"),
            Err(PluginError::InvalidRequest(_))
        ));
        assert!(matches!(
            build_content(""),
            Err(PluginError::InvalidRequest(_))
        ));
    }

    #[test]
    fn maps_the_running_states() {
        let s = parse(json!({"task_id": "vt_1", "status": "pending", "progress": 0}));
        assert_eq!((s.state, s.progress), (TaskState::Queued, 0));
        let s = parse(json!({"task_id": "vt_1", "status": "running", "progress": 33}));
        assert_eq!((s.state, s.progress), (TaskState::InProgress, 33));
        assert_eq!((s.actual_seconds, s.error_message), (None, None));
    }

    #[test]
    fn completed_tasks_report_whole_seconds() {
        let s = parse(json!({"status": "succeeded", "progress": 100, "duration": 4.0}));
        assert_eq!(s.state, TaskState::Completed);
        assert_eq!((s.progress, s.actual_seconds), (100, Some(4)));
        let secs = |d: f64| parse(json!({"status": "succeeded", "duration": d})).actual_seconds;
        assert_eq!(secs(4.4), Some(4));
        assert_eq!(secs(4.5), Some(5));
        assert_eq!(secs(0.2), Some(1));
        assert_eq!(secs(0.0), Some(1));
        assert_eq!(secs(1e12), Some(u32::MAX));
        // No progress given: a finished task is at 100.
        assert_eq!(
            parse(json!({"status": "succeeded", "duration": 8})).progress,
            100
        );
        for bad in [
            json!({"status": "succeeded"}),
            json!({"status": "succeeded", "duration": -1}),
            json!({"status": "succeeded", "duration": "4"}),
        ] {
            assert!(
                parse_poll(200, bad.to_string().as_bytes()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn failures_split_into_rejected_and_failed() {
        let s = parse(json!({"status": "failed", "progress": 0,
            "error": {"code": "content_policy", "message": "Refused by the safety system."}}));
        assert_eq!(s.state, TaskState::Rejected);
        assert_eq!(
            s.error_message.as_deref(),
            Some("Refused by the safety system.")
        );
        assert_eq!(s.actual_seconds, None);
        let s = parse(json!({"status": "failed",
            "error": {"code": "generation_error", "message": "GPU fell over; key sk-abcdefgh"}}));
        assert_eq!(s.state, TaskState::Failed);
        assert_eq!(
            s.error_message.as_deref(),
            Some("GPU fell over; key [redacted]")
        );
        let s = parse(json!({"status": "failed", "error": {"code": "timeout"}}));
        assert_eq!(
            (s.state, s.error_message.as_deref()),
            (TaskState::Failed, Some("the vendor reported timeout"))
        );
        let s = parse(json!({"status": "failed"}));
        assert_eq!(s.state, TaskState::Failed);
        assert!(s.error_message.is_some_and(|m| !m.is_empty()));
    }

    #[test]
    fn progress_is_clamped() {
        let p = |v: Value| parse(json!({"status": "running", "progress": v})).progress;
        assert_eq!(p(json!(-5)), 0);
        assert_eq!(p(json!(250)), 100);
        assert_eq!(p(json!(41.6)), 42);
        assert_eq!(p(json!("50")), 0);
        assert_eq!(p(json!(null)), 0);
    }

    #[test]
    fn unreadable_or_failed_polls_are_upstream_format() {
        let m = message(parse_poll(200, b"{\"status\":").unwrap_err());
        assert!(m.starts_with("vendor body is not valid JSON"), "{m}");
        let m = message(parse_poll(200, br#"{"status": "exploded"}"#).unwrap_err());
        assert!(m.contains("exploded"), "{m}");
        let m = message(parse_poll(200, br#"{"progress": 3}"#).unwrap_err());
        assert!(m.contains("status"), "{m}");
        let body = json!({"error": {"code": "task_not_found", "message": "No video task with id \"vt_9\"."}});
        let m = message(parse_poll(404, body.to_string().as_bytes()).unwrap_err());
        assert_eq!(m, "upstream answered 404: No video task with id \"vt_9\".");
    }
}
