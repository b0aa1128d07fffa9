//! Vendor paths, appended by the host to the channel's base URL (which ends
//! in `/v1`), and the task ids that go into them.

use gateway_guest_sdk::video::{AnswerMode, PluginError, RequestBody, UpstreamRequest};

pub const TASKS_PATH: &str = "/video/tasks";

/// Longer ids are not something this vendor sends.
pub const MAX_TASK_ID_LEN: usize = 128;

/// Whether `id` can go into a path as it is: vendor ids are
/// `[A-Za-z0-9_-]`, and anything else (`/`, `..`, `?`, `%`) could make the
/// host call another URL than the task's.
pub fn is_task_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_TASK_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `/video/tasks/{id}` followed by `suffix`.
pub fn task_path(id: &str, suffix: &str) -> Result<String, PluginError> {
    if !is_task_id(id) {
        return Err(PluginError::InvalidRequest(format!(
            "task id {:?} is not a genvideo task id (1 to {MAX_TASK_ID_LEN} of A-Z a-z 0-9 _ -)",
            gateway_guest_sdk::redact::clean_message(id, 40)
        )));
    }
    Ok(format!("{TASKS_PATH}/{id}{suffix}"))
}

pub fn get(path: String) -> UpstreamRequest {
    UpstreamRequest {
        method: "GET".to_owned(),
        path,
        headers: Vec::new(),
        body: RequestBody::Bytes(Vec::new()),
        answer: AnswerMode::Translate,
        state: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_ids_make_paths() {
        assert_eq!(task_path("vt_1", "").unwrap(), "/video/tasks/vt_1");
        assert_eq!(
            task_path("Ab-9_z", "/content").unwrap(),
            "/video/tasks/Ab-9_z/content"
        );
        for bad in [
            "",
            "../x",
            "a/b",
            "a?b=1",
            "a%2F",
            "a b",
            "é",
            &"x".repeat(129),
        ] {
            assert!(
                matches!(task_path(bad, ""), Err(PluginError::InvalidRequest(_))),
                "{bad:?}"
            );
        }
        assert!(is_task_id(&"x".repeat(128)));
    }
}
