//! OpenAI-style error envelopes, so the gateway's error mapping is exercised
//! against the shapes a real vendor sends.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub kind: &'static str,
    pub param: Option<&'static str>,
    pub code: Option<&'static str>,
}

impl ApiError {
    pub fn invalid_request(message: impl Into<String>, param: Option<&'static str>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
            param,
            code: None,
        }
    }

    pub fn invalid_api_key() -> Self {
        Self {
            status: StatusCode::UNAUTHORIZED,
            message: "Incorrect API key provided.".into(),
            kind: "invalid_request_error",
            param: None,
            code: Some("invalid_api_key"),
        }
    }

    pub fn not_found(path: &str) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            message: format!("Unknown request URL: {path}."),
            kind: "invalid_request_error",
            param: None,
            code: Some("unknown_url"),
        }
    }

    pub fn insufficient_quota(status: StatusCode) -> Self {
        Self {
            status,
            message: "You exceeded your current quota, please check your plan and billing details."
                .into(),
            kind: "insufficient_quota",
            param: None,
            code: Some("insufficient_quota"),
        }
    }

    pub fn shutting_down() -> Self {
        Self {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: "The simulator is shutting down.".into(),
            kind: "server_error",
            param: None,
            code: None,
        }
    }

    /// The error a vendor typically sends with `status`. Statuses outside
    /// 400..=599 make no sense for an injected failure and become 500.
    pub fn for_status(status: u16) -> Self {
        let status = match StatusCode::from_u16(status) {
            Ok(s) if s.is_client_error() || s.is_server_error() => s,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let (message, kind, code) = match status.as_u16() {
            400 => ("Invalid request.", "invalid_request_error", None),
            401 => return Self::invalid_api_key(),
            402 => return Self::insufficient_quota(status),
            403 => (
                "You are not allowed to access this resource.",
                "permission_error",
                Some("permission_denied"),
            ),
            404 => (
                "The model does not exist or you do not have access to it.",
                "invalid_request_error",
                Some("model_not_found"),
            ),
            429 => (
                "Rate limit reached for requests. Please try again later.",
                "rate_limit_error",
                Some("rate_limit_exceeded"),
            ),
            503 => (
                "The engine is currently overloaded, please try again later.",
                "server_error",
                None,
            ),
            s if s >= 500 => (
                "The server had an error while processing your request.",
                "server_error",
                None,
            ),
            _ => ("The request was rejected.", "invalid_request_error", None),
        };
        Self {
            status,
            message: message.into(),
            kind,
            param: None,
            code,
        }
    }

    pub fn body(&self) -> serde_json::Value {
        json!({
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limit_and_server_errors_have_vendor_types() {
        let e = ApiError::for_status(429);
        assert_eq!(
            (e.kind, e.code),
            ("rate_limit_error", Some("rate_limit_exceeded"))
        );
        assert_eq!(ApiError::for_status(502).kind, "server_error");
        assert_eq!(
            ApiError::for_status(503).status,
            StatusCode::SERVICE_UNAVAILABLE
        );
    }

    #[test]
    fn nonsense_status_becomes_500() {
        assert_eq!(
            ApiError::for_status(200).status,
            StatusCode::INTERNAL_SERVER_ERROR
        );
        assert_eq!(
            ApiError::for_status(42).status,
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }

    #[test]
    fn auth_error_matches_openai_shape() {
        let body = ApiError::invalid_api_key().body();
        assert_eq!(
            body,
            json!({"error": {"message": "Incorrect API key provided.",
                "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}})
        );
    }
}
