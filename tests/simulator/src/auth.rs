//! Bearer-key check for the vendor routes, so tests can prove the gateway
//! injected the channel's key rather than passing the client's through.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::errors::ApiError;
use crate::SimState;

pub async fn require_key(State(state): State<Arc<SimState>>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let guarded = path == "/v1" || path.starts_with("/v1/");
    if let (true, Some(key)) = (guarded, state.api_key.as_deref()) {
        let presented = req
            .headers()
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if presented != Some(key) {
            return ApiError::invalid_api_key().into_response();
        }
    }
    next.run(req).await
}
