//! The video vendor's error envelope, `{"error":{"code","message"}}`: a
//! different shape from the chat API's, as it is at real vendors that sell
//! both, so adapters cannot get away with one error reader.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VendorError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl VendorError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    pub fn unknown_task(id: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "task_not_found",
            format!("No video task with id {id:?}."),
        )
    }

    pub fn not_ready(id: &str, status: &str) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "task_not_ready",
            format!("Task {id} is {status}; its content is available once it has succeeded."),
        )
    }

    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "The API key is not allowed to download this content.",
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", message)
    }

    pub fn shutting_down() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "The simulator is shutting down.",
        )
    }

    pub fn body(&self) -> serde_json::Value {
        json!({ "error": { "code": self.code, "message": self.message } })
    }
}

impl IntoResponse for VendorError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}
