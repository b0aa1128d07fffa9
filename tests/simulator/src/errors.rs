//! Each vendor's own error envelope, so the gateway's error mapping is
//! exercised against the shapes real vendors send: OpenAI
//! `{"error":{message,type,param,code}}`, Anthropic
//! `{"type":"error","error":{type,message}}`, Gemini
//! `{"error":{code,message,status}}`. Every 429 carries `retry-after: 7`;
//! every 503 `retry-after-ms: 2500` (OpenAI's millisecond form).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

/// Which vendor's envelope an error is written in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Dialect {
    #[default]
    OpenAi,
    Anthropic,
    Gemini,
}

impl Dialect {
    /// The vendor whose routes `path` belongs to: `/v1/messages...` is
    /// Anthropic's, `/v1beta/...` Gemini's, every other path OpenAI's.
    pub fn for_path(path: &str) -> Self {
        if path == "/v1/messages" || path.starts_with("/v1/messages/") {
            Dialect::Anthropic
        } else if path == "/v1beta" || path.starts_with("/v1beta/") {
            Dialect::Gemini
        } else {
            Dialect::OpenAi
        }
    }
}

/// What every 429 says, in seconds.
pub const RETRY_AFTER_SECS: u64 = 7;
/// What every 503 says, in milliseconds.
pub const RETRY_AFTER_MS_503: u64 = 2500;

#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub kind: &'static str,
    pub param: Option<&'static str>,
    pub code: Option<&'static str>,
    pub dialect: Dialect,
}

impl ApiError {
    pub fn invalid_request(message: impl Into<String>, param: Option<&'static str>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
            param,
            code: None,
            dialect: Dialect::OpenAi,
        }
    }

    pub fn invalid_api_key() -> Self {
        Self {
            status: StatusCode::UNAUTHORIZED,
            message: "Incorrect API key provided.".into(),
            kind: "invalid_request_error",
            param: None,
            code: Some("invalid_api_key"),
            dialect: Dialect::OpenAi,
        }
    }

    pub fn not_found(path: &str) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            message: format!("Unknown request URL: {path}."),
            kind: "invalid_request_error",
            param: None,
            code: Some("unknown_url"),
            dialect: Dialect::OpenAi,
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
            dialect: Dialect::OpenAi,
        }
    }

    pub fn shutting_down() -> Self {
        Self {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: "The simulator is shutting down.".into(),
            kind: "server_error",
            param: None,
            code: None,
            dialect: Dialect::OpenAi,
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
            dialect: Dialect::OpenAi,
        }
    }

    /// "The account is out of money", as each vendor says it: OpenAI 429
    /// `insufficient_quota`, Anthropic 400 about the credit balance, Gemini
    /// 429 `RESOURCE_EXHAUSTED` about the quota.
    pub fn out_of_quota(dialect: Dialect) -> Self {
        match dialect {
            Dialect::OpenAi => Self::insufficient_quota(StatusCode::TOO_MANY_REQUESTS),
            Dialect::Anthropic => Self::invalid_request(
                "Your credit balance is too low to access the Anthropic API.",
                None,
            )
            .in_dialect(dialect),
            Dialect::Gemini => {
                let mut e = Self::for_status(429).in_dialect(dialect);
                e.message =
                    "You exceeded your current quota, please check your plan and billing details."
                        .into();
                e
            }
        }
    }

    /// The same error with another message.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// The same error in another vendor's envelope.
    pub fn in_dialect(mut self, dialect: Dialect) -> Self {
        self.dialect = dialect;
        self
    }

    /// Anthropic's error type for this status.
    fn anthropic_type(&self) -> &'static str {
        match self.status.as_u16() {
            400 => "invalid_request_error",
            401 => "authentication_error",
            402 => "billing_error",
            403 => "permission_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            529 => "overloaded_error",
            s if s < 500 => "invalid_request_error",
            _ => "api_error",
        }
    }

    /// Gemini's (google.rpc) status word for this status.
    fn gemini_status(&self) -> &'static str {
        match self.status.as_u16() {
            400 => "INVALID_ARGUMENT",
            401 => "UNAUTHENTICATED",
            403 => "PERMISSION_DENIED",
            404 => "NOT_FOUND",
            409 => "ABORTED",
            429 => "RESOURCE_EXHAUSTED",
            499 => "CANCELLED",
            501 => "NOT_IMPLEMENTED",
            503 => "UNAVAILABLE",
            504 => "DEADLINE_EXCEEDED",
            s if s < 500 => "FAILED_PRECONDITION",
            _ => "INTERNAL",
        }
    }

    pub fn body(&self) -> serde_json::Value {
        match self.dialect {
            Dialect::OpenAi => json!({
                "error": {
                    "message": self.message,
                    "type": self.kind,
                    "param": self.param,
                    "code": self.code,
                }
            }),
            Dialect::Anthropic => json!({
                "type": "error",
                "error": {"type": self.anthropic_type(), "message": self.message},
            }),
            Dialect::Gemini => json!({
                "error": {
                    "code": self.status.as_u16(),
                    "message": self.message,
                    "status": self.gemini_status(),
                }
            }),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (self.status, Json(self.body())).into_response();
        if self.status == StatusCode::TOO_MANY_REQUESTS {
            resp.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(RETRY_AFTER_SECS),
            );
        }
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            resp.headers_mut().insert(
                "retry-after-ms",
                axum::http::HeaderValue::from(RETRY_AFTER_MS_503),
            );
        }
        resp
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
    fn each_dialect_has_its_envelope() {
        let e = ApiError::for_status(429);
        assert_eq!(
            e.clone().in_dialect(Dialect::Anthropic).body(),
            json!({"type": "error", "error": {"type": "rate_limit_error",
                   "message": "Rate limit reached for requests. Please try again later."}})
        );
        let g = e.in_dialect(Dialect::Gemini).body();
        assert_eq!(g["error"]["code"], 429);
        assert_eq!(g["error"]["status"], "RESOURCE_EXHAUSTED");
    }

    #[test]
    fn status_words_per_vendor() {
        let words = |status: u16| {
            let e = ApiError::for_status(status);
            let a = e.clone().in_dialect(Dialect::Anthropic).body();
            let g = e.in_dialect(Dialect::Gemini).body();
            assert_eq!(g["error"]["code"], status);
            (
                a["error"]["type"].as_str().unwrap_or("").to_owned(),
                g["error"]["status"].as_str().unwrap_or("").to_owned(),
            )
        };
        let table = [
            (400, "invalid_request_error", "INVALID_ARGUMENT"),
            (401, "authentication_error", "UNAUTHENTICATED"),
            (403, "permission_error", "PERMISSION_DENIED"),
            (404, "not_found_error", "NOT_FOUND"),
            (413, "request_too_large", "FAILED_PRECONDITION"),
            (429, "rate_limit_error", "RESOURCE_EXHAUSTED"),
            (500, "api_error", "INTERNAL"),
            (502, "api_error", "INTERNAL"),
            (503, "api_error", "UNAVAILABLE"),
            (504, "api_error", "DEADLINE_EXCEEDED"),
            (529, "overloaded_error", "INTERNAL"),
        ];
        for (status, anthropic, gemini) in table {
            assert_eq!(
                words(status),
                (anthropic.to_owned(), gemini.to_owned()),
                "{status}"
            );
        }
    }

    #[test]
    fn every_429_says_when_to_retry() {
        for dialect in [Dialect::OpenAi, Dialect::Anthropic, Dialect::Gemini] {
            let resp = ApiError::for_status(429)
                .in_dialect(dialect)
                .into_response();
            assert_eq!(resp.headers()["retry-after"], "7");
            let resp = ApiError::for_status(503)
                .in_dialect(dialect)
                .into_response();
            assert!(resp.headers().get("retry-after").is_none());
            assert_eq!(resp.headers()["retry-after-ms"], "2500");
        }
    }

    #[test]
    fn routes_belong_to_vendors() {
        assert_eq!(Dialect::for_path("/v1/messages"), Dialect::Anthropic);
        assert_eq!(
            Dialect::for_path("/v1/messages/count_tokens"),
            Dialect::Anthropic
        );
        assert_eq!(
            Dialect::for_path("/v1beta/models/m:generateContent"),
            Dialect::Gemini
        );
        assert_eq!(Dialect::for_path("/v1/chat/completions"), Dialect::OpenAi);
        assert_eq!(Dialect::for_path("/v1/messagesx"), Dialect::OpenAi);
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
