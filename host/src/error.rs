//! Every error a client can see, and the one place that turns it into HTTP.
//!
//! Handlers return `Result<_, ApiError>`. The status and the stable code are
//! decided here, once, whatever protocol the client speaks; the envelope is
//! the client protocol's own ([`Envelope`]):
//!
//! - OpenAI (spec §7.1): envelope 1 `{error: {code, message, type}}`, except
//!   gateway validation of video requests, which uses envelope 2
//!   `{code, message, data}` with the stable code inside the message;
//!   mid-stream the same object as a `data:` event.
//! - Anthropic: `{type: "error", error: {type, message}, request_id}`;
//!   mid-stream as `event: error`.
//! - Gemini: `{error: {code, message, status, details}}`, the stable code in
//!   a `google.rpc.ErrorInfo` detail; mid-stream as a `data:` event.
//!
//! Every message ends with `(request id: <id>)`. The id and the envelope come
//! from task-locals set by the request middleware (the envelope from the
//! route's client protocol), so code that raises an error threads neither.
//!
//! Use a specific variant when the client can act on the difference (a code
//! from the spec's list); use `Internal` only for our own bugs and storage
//! failures — it is logged with its detail and shown to the client without it.

use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{json, Map, Value};
use utoipa::ToSchema;

tokio::task_local! {
    /// The id of the request being served, for error messages.
    pub static REQUEST_ID: String;
    /// The error envelope of the client protocol being served.
    pub static ENVELOPE: Envelope;
}

/// The error envelope a client protocol reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Envelope {
    OpenAi,
    Anthropic,
    Gemini,
}

/// The current request's envelope, OpenAI's outside a request.
pub fn current_envelope() -> Envelope {
    ENVELOPE.try_with(|e| *e).unwrap_or(Envelope::OpenAi)
}

/// One server-sent event carrying an error, in a client protocol's form.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorEvent {
    /// The `event:` name, for protocols that name their events.
    pub event: Option<&'static str>,
    pub data: String,
}

/// The current request's id, or `-` outside a request.
pub fn current_request_id() -> String {
    REQUEST_ID
        .try_with(Clone::clone)
        .unwrap_or_else(|_| "-".into())
}

/// Marks a response whose body is already a gateway envelope, so the
/// middleware that wraps stray framework errors leaves it alone.
#[derive(Clone, Copy, Debug)]
pub struct Enveloped;

// The envelopes, as types: `body_in` builds every error body from these, and
// the OpenAPI document (`api::openapi`) describes them from the same types.

/// Envelope 1 (spec §7.1), the OpenAI protocol's.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct OpenAiErrorEnvelope {
    pub error: OpenAiError,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct OpenAiError {
    /// The stable code (spec §7.2, or the gateway's own for gateway-only
    /// cases), or a vendor's.
    #[schema(example = "model_not_found")]
    pub code: String,
    /// Ends with `(request id: <id>)`.
    pub message: String,
    #[serde(rename = "type")]
    #[schema(example = "invalid_request_error")]
    pub kind: &'static str,
    /// What some errors carry beside code and message: the current values of
    /// a cap (`current`, `limit`, `spent_today`, `would_be`), a quote's
    /// `old_price` and `new_price`, the quota a hold needed
    /// (`required_quota`, `balance_quota`).
    #[serde(flatten)]
    pub extra: std::collections::BTreeMap<String, Value>,
}

/// Envelope 2 (spec §7.1): gateway validation of a video request. The
/// stable code (`invalid_duration`, ...) leads the message.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct VideoValidationEnvelope {
    /// Always `invalid_parameters`.
    #[schema(example = "invalid_parameters")]
    pub code: &'static str,
    #[schema(example = "invalid_duration: seconds must be 4 to 12 (request id: req_1)")]
    pub message: String,
    /// Always null.
    #[schema(schema_with = null_schema)]
    pub data: Option<Value>,
}

fn null_schema() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::Null)
        .build()
}

/// The Anthropic Messages protocol's envelope (also the data of a stream's
/// `event: error`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AnthropicErrorEnvelope {
    /// Always `error`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub error: AnthropicError,
    pub request_id: String,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AnthropicError {
    #[serde(rename = "type")]
    #[schema(example = "invalid_request_error")]
    pub kind: &'static str,
    pub message: String,
}

/// The Gemini protocol's envelope (google.rpc.Status), the stable code in an
/// `ErrorInfo` detail.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GeminiErrorEnvelope {
    pub error: GeminiError,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GeminiError {
    /// The HTTP status.
    pub code: u16,
    pub message: String,
    #[schema(example = "INVALID_ARGUMENT")]
    pub status: &'static str,
    pub details: Vec<GeminiErrorInfo>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GeminiErrorInfo {
    /// `type.googleapis.com/google.rpc.ErrorInfo`.
    #[serde(rename = "@type")]
    pub kind: &'static str,
    /// The stable code.
    #[schema(example = "model_not_found")]
    pub reason: String,
    /// Always `gateway`.
    pub domain: &'static str,
}

/// An envelope as a JSON value (serializing these types cannot fail: their
/// maps have string keys).
fn to_json(body: impl Serialize) -> Value {
    serde_json::to_value(body).unwrap_or(Value::Null)
}
/// Marks a response that refused a request at a limit or a cap, with its
/// code: what `gateway_refusals_total` counts (see [`ApiError::refusal`]).
#[derive(Clone, Copy, Debug)]
pub struct Refusal(pub &'static str);

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    InvalidRequest(String),
    #[error("Invalid token")]
    InvalidToken,
    #[error("model `{0}` is not allowed for this token")]
    TokenModelDenied(String),
    #[error("client address {0} is not in this token's IP whitelist")]
    TokenIpDenied(String),
    #[error("this token's quota of {limit_cny} CNY is used up ({used_cny} CNY spent)")]
    TokenQuotaExhausted { limit_cny: String, used_cny: String },
    #[error("insufficient balance: this call must reserve {required_cny} CNY ({required} quota) but the account holds {balance_cny} CNY ({balance} quota)")]
    InsufficientQuota {
        required: i64,
        required_cny: String,
        balance: i64,
        balance_cny: String,
    },
    #[error("model `{0}` does not exist or is not enabled")]
    ModelNotFound(String),
    /// The model is served, but no channel of it speaks this endpoint's
    /// protocol (a rerank model asked for images): the request's mistake,
    /// not an outage.
    #[error("model `{model}` is not served on this endpoint (the `{endpoint}` protocol); use an endpoint its channels serve")]
    ModelNotSupported {
        model: String,
        endpoint: &'static str,
    },
    #[error("{0}")]
    NotFound(String),
    #[error("too many requests from {ip}: the limit is {limit} per {window_secs} s; retry after {retry_after_secs} s")]
    RateLimited {
        ip: String,
        limit: u32,
        window_secs: u64,
        retry_after_secs: u64,
    },
    #[error("group `{group}` already has {limit} text calls in flight; retry shortly")]
    GroupConcurrency { group: String, limit: u32 },
    #[error("no available channel for model `{0}`")]
    NoChannel(String),
    /// A vendor error, already mapped to gateway terms by the adapter.
    #[error("{message}")]
    Upstream {
        status: u16,
        code: String,
        message: String,
        /// When the vendor said to retry, passed on (on 429 and 5xx).
        retry_after: Option<UpstreamRetry>,
    },
    /// The vendor's stream ended without its protocol's finish marker.
    #[error("the upstream's stream ended before the answer was complete")]
    UpstreamIncomplete,
    #[error("the upstream did not answer within {0} s")]
    UpstreamTimeout(u64),
    #[error("the upstream could not be reached: {0}")]
    UpstreamUnreachable(String),
    /// A guest component failed (trap, deadline, memory, invalid output),
    /// or its code could not be loaded for the call.
    #[error("the adapter failed: {0}")]
    Adapter(String),
    #[error("request body exceeds the limit of {0} bytes")]
    BodyTooLarge(usize),
    /// A body the gateway could read but an adapter could not hold (a guest's
    /// memory is capped); the message says which limit.
    #[error("{0}")]
    BodyTooLargeForAdapter(String),
    /// The request line and headers together are over the edge's limit.
    #[error("the request headers exceed the limit of {0} bytes")]
    HeadersTooLarge(usize),
    #[error("the request URI is too long")]
    UriTooLong,
    /// The client stopped sending mid-request (headers or body).
    #[error("{0}")]
    RequestTimeout(String),
    /// The connection caps of the edge (all clients, or this address).
    #[error("too many open connections {0}; retry shortly")]
    TooManyConnections(String),
    /// The gateway has no room for more request bytes just now.
    #[error("{0}")]
    Busy(String),
    #[error("{0}")]
    MethodNotAllowed(String),

    // --- video (spec §7.3) ---------------------------------------------------
    /// Gateway validation of a video request: envelope 2, the stable code
    /// (`invalid_duration`, ...) at the start of the message.
    #[error("{code}: {message}")]
    VideoValidation { code: &'static str, message: String },
    #[error("{code}: {message}")]
    Quote {
        status: u16,
        code: &'static str,
        message: String,
        extra: Map<String, Value>,
    },
    #[error("Idempotency-Key was already used with a different request body")]
    IdempotencyKeyReuse,
    #[error("this account already has {current} unfinished video tasks (limit {limit})")]
    UserConcurrencyLimit { current: u32, limit: u32 },
    #[error("this submission would bring today's video spend to {would_be_cny} CNY, over the daily budget of {limit_cny} CNY (spent so far: {spent_cny} CNY)")]
    DailyBudgetExceeded {
        spent_cny: String,
        would_be_cny: String,
        limit_cny: String,
    },
    #[error("{0}")]
    ArtifactGone(String),
    #[error("fetching the video from the upstream failed: the upstream refused the gateway's credentials")]
    ArtifactUpstreamAuth,
    #[error("fetching the video from the upstream timed out")]
    ArtifactUpstreamTimeout,
    #[error("the upstream video service offers no way to cancel a task; the task keeps running and is billed only if it completes")]
    CancelUnsupported,
    /// The requested byte range lies outside the file; carries the upstream's
    /// `Content-Range` (`bytes */LENGTH`).
    #[error("the requested range is not satisfiable")]
    RangeNotSatisfiable(Option<String>),

    /// A config reload found the file unusable; the running config stays.
    #[error("the config file was not reloaded, the running configuration keeps serving: {0}")]
    ConfigRefused(String),

    #[error("internal error: {0}")]
    Internal(String),
}

/// When a vendor said to retry. The client gets it on a 429 or a 5xx (the
/// statuses SDKs retry), both ways SDKs read it: `Retry-After` in whole seconds (rounded up) and
/// OpenAI's `retry-after-ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamRetry {
    pub ms: u64,
}

impl UpstreamRetry {
    /// A day: longer hints are capped.
    const MAX_MS: u64 = 86_400_000;

    /// From the vendor's answer: its `retry-after-ms`, else the seconds the
    /// adapter read (`adapter_secs`), else a `Retry-After` in seconds.
    pub fn from_vendor(headers: &HeaderMap, adapter_secs: Option<u32>) -> Option<UpstreamRetry> {
        let number = |name: &str| -> Option<f64> {
            let v: f64 = headers.get(name)?.to_str().ok()?.trim().parse().ok()?;
            (v.is_finite() && v >= 0.0).then_some(v)
        };
        let ms = number("retry-after-ms")
            .map(|ms| ms.ceil() as u64)
            .or_else(|| adapter_secs.map(|s| u64::from(s) * 1000))
            .or_else(|| number("retry-after").map(|s| (s * 1000.0).ceil() as u64))?;
        Some(UpstreamRetry {
            ms: ms.min(Self::MAX_MS),
        })
    }

    pub fn secs(secs: u32) -> UpstreamRetry {
        UpstreamRetry {
            ms: (u64::from(secs) * 1000).min(Self::MAX_MS),
        }
    }

    fn headers(&self) -> Vec<(HeaderName, HeaderValue)> {
        vec![
            (
                axum::http::header::RETRY_AFTER,
                HeaderValue::from(self.ms.div_ceil(1000)),
            ),
            (
                HeaderName::from_static("retry-after-ms"),
                HeaderValue::from(self.ms),
            ),
        ]
    }
}

impl ApiError {
    pub fn internal(e: impl std::fmt::Display) -> Self {
        ApiError::Internal(e.to_string())
    }

    pub fn status(&self) -> StatusCode {
        use ApiError::*;
        let code = match self {
            InvalidRequest(_) | VideoValidation { .. } | ModelNotSupported { .. } => 400,
            InvalidToken => 401,
            InsufficientQuota { .. } => 402,
            TokenModelDenied(_) | TokenIpDenied(_) | TokenQuotaExhausted { .. } => 403,
            ModelNotFound(_) | NotFound(_) => 404,
            MethodNotAllowed(_) => 405,
            RequestTimeout(_) => 408,
            IdempotencyKeyReuse => 409,
            ArtifactGone(_) => 410,
            BodyTooLarge(_) | BodyTooLargeForAdapter(_) => 413,
            UriTooLong => 414,
            RangeNotSatisfiable(_) => 416,
            ConfigRefused(_) => 422,
            HeadersTooLarge(_) => 431,
            RateLimited { .. }
            | GroupConcurrency { .. }
            | UserConcurrencyLimit { .. }
            | DailyBudgetExceeded { .. } => 429,
            Internal(_) => 500,
            CancelUnsupported => 501,
            Adapter(_)
            | UpstreamUnreachable(_)
            | UpstreamIncomplete
            | ArtifactUpstreamAuth
            | ArtifactUpstreamTimeout => 502,
            NoChannel(_) | TooManyConnections(_) | Busy(_) => 503,
            UpstreamTimeout(_) => 504,
            Upstream { status, .. } => *status,
            Quote { status, .. } => *status,
        };
        StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_GATEWAY)
    }

    /// The stable code from spec §7.2 (or our own, for gateway-only cases).
    pub fn code(&self) -> &str {
        use ApiError::*;
        match self {
            InvalidRequest(_) => "invalid_request",
            InvalidToken => "invalid_api_key",
            TokenModelDenied(_) => "token_model_denied",
            TokenIpDenied(_) => "token_ip_denied",
            TokenQuotaExhausted { .. } => "token_quota_exhausted",
            InsufficientQuota { .. } => "insufficient_user_quota",
            ModelNotFound(_) => "model_not_found",
            ModelNotSupported { .. } => "model_not_supported",
            NotFound(_) => "not_found",
            RateLimited { .. } => "rate_limit_exceeded",
            GroupConcurrency { .. } => "group_concurrency_limit",
            NoChannel(_) => "no_available_channel",
            Upstream { code, .. } => code,
            UpstreamTimeout(_) => "upstream_timeout",
            UpstreamUnreachable(_) => "upstream_unreachable",
            UpstreamIncomplete => "upstream_incomplete",
            Adapter(_) => "adapter_error",
            BodyTooLarge(_) | BodyTooLargeForAdapter(_) => "request_too_large",
            HeadersTooLarge(_) => "request_header_fields_too_large",
            UriTooLong => "uri_too_long",
            RequestTimeout(_) => "request_timeout",
            TooManyConnections(_) => "too_many_connections",
            Busy(_) => "server_busy",
            MethodNotAllowed(_) => "method_not_allowed",
            VideoValidation { code, .. } => code,
            Quote { code, .. } => code,
            IdempotencyKeyReuse => "idempotency_key_reuse",
            UserConcurrencyLimit { .. } => "user_concurrency_limit",
            DailyBudgetExceeded { .. } => "daily_budget_exceeded",
            ArtifactGone(_) => "artifact_gone",
            ArtifactUpstreamAuth => "artifact_upstream_auth_failed",
            ArtifactUpstreamTimeout => "artifact_upstream_timeout",
            CancelUnsupported => "upstream_cancel_unsupported",
            RangeNotSatisfiable(_) => "range_not_satisfiable",
            ConfigRefused(_) => "config_invalid",
            Internal(_) => "internal_error",
        }
    }

    /// The code of a refusal at a limit or a cap (rate limit, concurrency,
    /// spending caps, the edge's capacity), `None` for any other error.
    pub fn refusal(&self) -> Option<&'static str> {
        use ApiError::*;
        Some(match self {
            RateLimited { .. } => "rate_limit_exceeded",
            GroupConcurrency { .. } => "group_concurrency_limit",
            UserConcurrencyLimit { .. } => "user_concurrency_limit",
            DailyBudgetExceeded { .. } => "daily_budget_exceeded",
            TokenQuotaExhausted { .. } => "token_quota_exhausted",
            InsufficientQuota { .. } => "insufficient_user_quota",
            TooManyConnections(_) => "too_many_connections",
            Busy(_) => "server_busy",
            _ => return None,
        })
    }

    fn error_type(&self) -> &'static str {
        if matches!(self, ApiError::TooManyConnections(_) | ApiError::Busy(_)) {
            return "server_error";
        }
        match self.status().as_u16() {
            400 | 404 | 405 | 408 | 409 | 410 | 413 | 414 | 416 | 422 | 431 => {
                "invalid_request_error"
            }
            401 => "authentication_error",
            402 => "insufficient_quota",
            403 => "permission_error",
            429 => "rate_limit_error",
            501 => "not_implemented_error",
            500 => "server_error",
            _ => "upstream_error",
        }
    }

    /// What the client reads. Internal details stay in the log.
    fn public_message(&self) -> String {
        match self {
            ApiError::Internal(_) => "internal error; the request was not completed".into(),
            other => other.to_string(),
        }
    }

    /// Fields the spec asks for beside code and message (current values of a
    /// cap, old and new price of a quote, ...).
    fn extra(&self) -> Map<String, Value> {
        let mut m = Map::new();
        match self {
            ApiError::InsufficientQuota {
                required, balance, ..
            } => {
                m.insert("required_quota".into(), json!(required));
                m.insert("balance_quota".into(), json!(balance));
            }
            ApiError::UserConcurrencyLimit { current, limit } => {
                m.insert("current".into(), json!(current));
                m.insert("limit".into(), json!(limit));
            }
            ApiError::DailyBudgetExceeded {
                spent_cny,
                would_be_cny,
                limit_cny,
            } => {
                m.insert(
                    "spent_today".into(),
                    json!(spent_cny.parse::<f64>().unwrap_or(0.0)),
                );
                m.insert(
                    "would_be".into(),
                    json!(would_be_cny.parse::<f64>().unwrap_or(0.0)),
                );
                m.insert(
                    "limit".into(),
                    json!(limit_cny.parse::<f64>().unwrap_or(0.0)),
                );
            }
            ApiError::Quote { extra, .. } => m.extend(extra.clone()),
            _ => {}
        }
        m
    }

    fn headers(&self) -> Vec<(HeaderName, HeaderValue)> {
        match self {
            ApiError::RateLimited {
                retry_after_secs, ..
            } => vec![(
                axum::http::header::RETRY_AFTER,
                HeaderValue::from(*retry_after_secs),
            )],
            ApiError::Upstream {
                status: 429 | 500..,
                retry_after: Some(after),
                ..
            } => after.headers(),
            ApiError::TooManyConnections(_) | ApiError::Busy(_) => {
                vec![(axum::http::header::RETRY_AFTER, HeaderValue::from(1))]
            }
            ApiError::RangeNotSatisfiable(Some(range)) => HeaderValue::from_str(range)
                .map(|v| vec![(axum::http::header::CONTENT_RANGE, v)])
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    /// Anthropic's error `type` for this error.
    fn anthropic_type(&self) -> &'static str {
        match self.status().as_u16() {
            401 => "authentication_error",
            402 => "billing_error",
            403 => "permission_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            503 => "overloaded_error",
            504 => "timeout_error",
            s if s >= 500 => "api_error",
            _ => "invalid_request_error",
        }
    }

    /// Gemini's (google.rpc) `status` for this error.
    fn gemini_status(&self) -> &'static str {
        match self.status().as_u16() {
            401 => "UNAUTHENTICATED",
            402 => "FAILED_PRECONDITION",
            403 => "PERMISSION_DENIED",
            404 | 410 => "NOT_FOUND",
            409 => "ABORTED",
            429 => "RESOURCE_EXHAUSTED",
            501 => "UNIMPLEMENTED",
            503 => "UNAVAILABLE",
            504 => "DEADLINE_EXCEEDED",
            s if s >= 500 => "INTERNAL",
            _ => "INVALID_ARGUMENT",
        }
    }

    /// The JSON body in `envelope`'s form, the request id ending the message.
    pub fn body_in(&self, envelope: Envelope, request_id: &str) -> Value {
        let message = format!("{} (request id: {request_id})", self.public_message());
        match envelope {
            Envelope::OpenAi => self.body(request_id),
            Envelope::Anthropic => to_json(AnthropicErrorEnvelope {
                kind: "error",
                error: AnthropicError {
                    kind: self.anthropic_type(),
                    message,
                },
                request_id: request_id.to_string(),
            }),
            Envelope::Gemini => to_json(GeminiErrorEnvelope {
                error: GeminiError {
                    code: self.status().as_u16(),
                    message,
                    status: self.gemini_status(),
                    details: vec![GeminiErrorInfo {
                        kind: "type.googleapis.com/google.rpc.ErrorInfo",
                        reason: self.code().to_string(),
                        domain: "gateway",
                    }],
                },
            }),
        }
    }

    /// The event that ends a stream with this error, in `envelope`'s form.
    pub fn stream_event(&self, envelope: Envelope, request_id: &str) -> ErrorEvent {
        ErrorEvent {
            event: (envelope == Envelope::Anthropic).then_some("error"),
            data: self.body_in(envelope, request_id).to_string(),
        }
    }

    /// The JSON body (OpenAI envelope), with the request id appended to the message.
    pub fn body(&self, request_id: &str) -> Value {
        let message = format!("{} (request id: {request_id})", self.public_message());
        if matches!(self, ApiError::VideoValidation { .. }) {
            // Envelope 2: a generic top-level code; the stable one leads the message.
            return to_json(VideoValidationEnvelope {
                code: "invalid_parameters",
                message,
                data: None,
            });
        }
        to_json(OpenAiErrorEnvelope {
            error: OpenAiError {
                code: self.code().to_string(),
                message,
                kind: self.error_type(),
                extra: self.extra().into_iter().collect(),
            },
        })
    }
}

impl ApiError {
    /// A whole HTTP/1.1 answer (OpenAI envelope, `connection: close`), for
    /// the edge, which answers before any request reaches the router (a
    /// refused connection) or instead of hyper's own empty 400 / 414 / 431.
    pub fn raw_response(&self, request_id: &str) -> Vec<u8> {
        let status = self.status();
        let body = self.body(request_id).to_string();
        let mut out = format!(
            "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\nx-request-id: {request_id}\r\n",
            status.as_u16(),
            status.canonical_reason().unwrap_or(""),
            body.len()
        );
        for (name, value) in self.headers() {
            if let Ok(v) = value.to_str() {
                out.push_str(&format!("{name}: {v}\r\n"));
            }
        }
        out.push_str("\r\n");
        out.push_str(&body);
        out.into_bytes()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let request_id = current_request_id();
        if let ApiError::Internal(detail) = &self {
            tracing::error!(request_id = %request_id, "internal error: {detail}");
        }
        let body = self.body_in(current_envelope(), &request_id);
        let mut resp = (self.status(), axum::Json(body)).into_response();
        for (k, v) in self.headers() {
            resp.headers_mut().insert(k, v);
        }
        resp.extensions_mut().insert(Enveloped);
        if let Some(code) = self.refusal() {
            resp.extensions_mut().insert(Refusal(code));
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_envelope_ends_with_request_id() {
        let b = ApiError::InvalidToken.body("req_1");
        assert_eq!(b["error"]["code"], "invalid_api_key");
        assert_eq!(b["error"]["type"], "authentication_error");
        assert_eq!(b["error"]["message"], "Invalid token (request id: req_1)");
    }

    #[test]
    fn video_validation_uses_envelope_two() {
        let e = ApiError::VideoValidation {
            code: "invalid_duration",
            message: "seconds must be 4 to 12".into(),
        };
        let b = e.body("r");
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        assert_eq!(b["code"], "invalid_parameters");
        assert!(b["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid_duration:"));
        assert!(b["data"].is_null());
    }

    #[test]
    fn each_protocol_has_its_own_envelope() {
        let e = ApiError::RateLimited {
            ip: "192.0.2.1".into(),
            limit: 1,
            window_secs: 1,
            retry_after_secs: 1,
        };
        let a = e.body_in(Envelope::Anthropic, "r");
        assert_eq!(a["type"], "error");
        assert_eq!(a["error"]["type"], "rate_limit_error");
        assert!(a["error"]["message"]
            .as_str()
            .unwrap()
            .ends_with("(request id: r)"));
        let g = e.body_in(Envelope::Gemini, "r");
        assert_eq!(g["error"]["code"], 429);
        assert_eq!(g["error"]["status"], "RESOURCE_EXHAUSTED");
        assert_eq!(g["error"]["details"][0]["reason"], "rate_limit_exceeded");
        assert_eq!(e.body_in(Envelope::OpenAi, "r"), e.body("r"));
        let ev = ApiError::UpstreamIncomplete.stream_event(Envelope::Anthropic, "r");
        assert_eq!(ev.event, Some("error"));
        assert!(ev.data.contains("api_error"));
        assert_eq!(
            ApiError::UpstreamIncomplete
                .stream_event(Envelope::OpenAi, "r")
                .event,
            None
        );
    }

    #[test]
    fn internal_detail_is_not_shown() {
        let b = ApiError::Internal("disk on fire at /var/x".into()).body("r");
        assert!(!b["error"]["message"].as_str().unwrap().contains("/var/x"));
    }
}

/// What the web console (`console`) refuses. The console renders these as
/// HTML pages, not envelopes; their statuses are decided here like every
/// other. `LoginRequired` is answered with a redirect to the login page.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error("please log in")]
    LoginRequired,
    #[error("please log in as an operator (with the admin key)")]
    OperatorRequired,
    /// The form's CSRF token (or its Origin) did not match the session's.
    #[error(
        "this form has expired or was not sent from this console; reload the page and try again"
    )]
    Csrf,
    #[error("{0}")]
    BadForm(String),
    #[error("wrong e-mail or password, or the e-mail is not verified yet")]
    BadLogin,
    #[error("wrong admin key")]
    BadAdminKey,
    #[error("too many login attempts; try again in {retry_after_secs} s")]
    TooManyAttempts { retry_after_secs: u64 },
    #[error("this verification link has expired; sign up again to get a new one")]
    LinkExpired,
    #[error("this verification link is not valid (it may have been used already)")]
    LinkUnknown,
    #[error("{0}")]
    NotFound(String),
    /// The verification e-mail could not be sent; the user stays unverified.
    #[error("the verification e-mail could not be sent ({0}); the account is not active. Try again later.")]
    MailFailed(String),
    #[error("internal error: {0}")]
    Internal(String),
}

impl ConsoleError {
    pub fn internal(e: impl std::fmt::Display) -> Self {
        ConsoleError::Internal(e.to_string())
    }

    pub fn status(&self) -> StatusCode {
        use ConsoleError::*;
        match self {
            LoginRequired => StatusCode::SEE_OTHER,
            OperatorRequired | Csrf => StatusCode::FORBIDDEN,
            BadForm(_) => StatusCode::BAD_REQUEST,
            BadLogin | BadAdminKey => StatusCode::UNAUTHORIZED,
            TooManyAttempts { .. } => StatusCode::TOO_MANY_REQUESTS,
            LinkExpired => StatusCode::GONE,
            LinkUnknown | NotFound(_) => StatusCode::NOT_FOUND,
            MailFailed(_) => StatusCode::BAD_GATEWAY,
            Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}
