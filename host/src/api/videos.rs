//! The video endpoints: `GET /v1/capabilities`, `POST /v1/videos/quote`,
//! `POST /v1/videos`, `GET /v1/videos/{id}`, `GET /v1/videos/{id}/content`,
//! `POST /v1/videos/{id}/cancel`.

use crate::auth::Caller;
use crate::error::ApiError;
use crate::run_to_end::RunToEnd;
use crate::state::SharedState;
use crate::video::params::RawFields;
use crate::video::{content, render, submit};
use axum::extract::{FromRequest, Multipart, Path, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{Map, Value};

/// A capability entry (spec §2.5).
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct Capability {
    #[schema(example = "video-fast")]
    pub model: String,
    /// `[min, max]` seconds.
    pub durations: [u32; 2],
    pub resolutions: Vec<String>,
    /// `stable` or `preview`.
    pub status: String,
    /// For a stable alias: the model it points to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alias_of: Option<String>,
}

/// The list wrapper of `GET /v1/capabilities`.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct CapabilityList {
    /// Always `list`.
    pub object: &'static str,
    pub data: Vec<Capability>,
}

/// `GET /v1/capabilities` (spec §2.5, §4.2): each model's real limits.
pub async fn capabilities(
    State(state): State<SharedState>,
    _caller: Caller,
) -> Json<CapabilityList> {
    let catalog = state.catalog();
    let data = catalog
        .listed
        .iter()
        .filter_map(|m| catalog.video_models.get(&m.id))
        .filter(|m| !catalog.channels(m.concrete()).is_empty())
        .map(|m| Capability {
            model: m.name.clone(),
            durations: [m.min_seconds, m.max_seconds],
            resolutions: m.resolutions.clone(),
            status: m.status.clone(),
            alias_of: m.alias_of.clone(),
        })
        .collect();
    Json(CapabilityList {
        object: "list",
        data,
    })
}

/// The body's fields, from JSON or multipart/form-data (what the official
/// openai SDK sends). A file part is recorded by name only.
async fn read_fields(state: &SharedState, req: Request) -> Result<RawFields, ApiError> {
    let is_form = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.to_ascii_lowercase().starts_with("multipart/form-data"));
    if is_form {
        let (req, _lease, failure) = super::body::guarded_request(state, req);
        let unreadable = |e: &dyn std::fmt::Display| {
            ApiError::InvalidRequest(format!("the form could not be read: {e}"))
        };
        let mut form = Multipart::from_request(req, state)
            .await
            .map_err(|e| failure.or(state, unreadable(&e)))?;
        let mut fields = Map::new();
        while let Some(field) = form
            .next_field()
            .await
            .map_err(|e| failure.or(state, unreadable(&e)))?
        {
            let name = field.name().unwrap_or("").to_string();
            if field.file_name().is_some() {
                fields.insert(name, Value::String("<file>".into()));
                continue;
            }
            let text = field.text().await.map_err(|e| {
                ApiError::InvalidRequest(format!("form field `{name}` is not text: {e}"))
            })?;
            fields.insert(name, Value::String(text));
        }
        return Ok(RawFields { fields, form: true });
    }
    let (bytes, _lease) = super::read_body(state, req).await?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(fields)) => Ok(RawFields {
            fields,
            form: false,
        }),
        Ok(_) => Err(ApiError::VideoValidation {
            code: "invalid_request",
            message: "the body must be a JSON object".into(),
        }),
        Err(e) => Err(ApiError::VideoValidation {
            code: "invalid_request",
            message: format!("the body is not valid JSON: {e}"),
        }),
    }
}

fn json_response(status: u16, body: String) -> Response {
    let mut resp = Response::new(axum::body::Body::from(body));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

pub async fn quote(
    State(state): State<SharedState>,
    caller: Caller,
    req: Request,
) -> Result<Json<render::QuoteView>, ApiError> {
    let raw = read_fields(&state, req).await?;
    Ok(Json(submit::quote(&state, &caller, &raw).await?))
}

/// A header's text; present but not visible ASCII is an error rather than
/// "absent" (an ignored Idempotency-Key would charge a retry twice, an
/// ignored secret would send webhooks unsigned).
fn header_text(headers: &HeaderMap, name: &str) -> Result<Option<String>, ApiError> {
    match headers.get(name) {
        None => Ok(None),
        Some(v) => v.to_str().map(|s| Some(s.to_string())).map_err(|_| {
            ApiError::InvalidRequest(format!("header `{name}` must be visible ASCII text"))
        }),
    }
}

pub async fn create(
    State(state): State<SharedState>,
    caller: Caller,
    req: Request,
) -> Result<Response, ApiError> {
    let headers = req.headers().clone();
    let idempotency_key = header_text(&headers, "idempotency-key")?;
    let webhook = (
        header_text(&headers, "x-webhook-url")?,
        header_text(&headers, "x-webhook-secret")?,
    );
    let raw = read_fields(&state, req).await?;
    // Run to its end: a client disconnecting must not cancel a submission
    // between its hold and its task record (`run_to_end`).
    let submitting = RunToEnd::new(crate::error::REQUEST_ID.scope(
        caller.info.id.clone(),
        submit::submit(state.clone(), caller, raw, webhook, idempotency_key),
    ));
    let answer = submitting.await.map_err(ApiError::internal)??;
    let mut resp = json_response(answer.status, answer.body);
    if answer.replayed {
        resp.headers_mut()
            .insert("idempotency-replayed", HeaderValue::from_static("true"));
    }
    Ok(resp)
}

pub async fn retrieve(
    State(state): State<SharedState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let task = content::own_task(&state, &caller, &id)?;
    let mut resp = Json(render::task(&task, &state.config.currency, false)).into_response();
    if !task.status.is_final() {
        resp.headers_mut().insert(
            "openai-poll-after-ms",
            HeaderValue::from(state.config.video.poll_after_ms),
        );
    }
    Ok(resp)
}

pub async fn download(
    State(state): State<SharedState>,
    caller: Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    content::download(&state, &caller, &id, &headers).await
}

pub async fn cancel(
    State(state): State<SharedState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    content::own_task(&state, &caller, &id)?;
    Err(ApiError::CancelUnsupported)
}
