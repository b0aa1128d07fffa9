//! The video vendor: an asynchronous task API that ends in a real MP4.
//!
//! Errors use the vendor's own envelope `{"error":{"code","message"}}`
//! (see [`errors`]); authentication and recording are the chat API's.
//!
//! - `POST /v1/video/tasks` with `{"model", "prompt", "duration" (whole
//!   seconds, 1..=120), "size" ("WIDTHxHEIGHT"), "aspect_ratio" ("16:9" or
//!   "9:16")}` → 200 `{"task_id": "vt_<n>", "status": "pending"}`, `n`
//!   counting from 1 per server; an invalid body → 400 `invalid_request`.
//! - `GET /v1/video/tasks/{id}` → 200 `{"task_id", "status", "progress"}`
//!   plus `"duration"` (float seconds, the requested duration) when
//!   `succeeded` and `"error": {"code", "message"}` when `failed`; unknown
//!   id → 404. How the status moves is set by [`VideoSpeed`].
//! - `GET /v1/video/tasks/{id}/content` → the MP4 (`video/mp4`,
//!   `accept-ranges: bytes`) once succeeded, 409 `task_not_ready` before (and
//!   after a failure), 404 unknown. One `Range` (`bytes=a-b`, `a-`, `-n`) →
//!   206 with `Content-Range`; unsatisfiable → 416 with `bytes */LEN`;
//!   several ranges are ignored (200, whole file).
//!
//! Directives anywhere in the prompt (see [`request`]): `[[sim:submit_fail]]`
//! (the submission answers 500), `[[sim:reject]]` (failed, `content_policy`,
//! at the first poll), `[[sim:fail]]` (failed, `generation_error`, at the
//! first poll), `[[sim:never]]` (running at 50 forever),
//! `[[sim:content_auth]]` (content answers 401), `[[sim:content_hang]]`
//! (content never answers, until the client leaves or the server stops).
//! Queued chat faults do not apply here.

mod clip;
mod errors;
mod range;
mod request;
mod tasks;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::SimState;
use errors::VendorError;
use range::ByteRange;
use request::{ContentFault, Submission};
use tasks::{Status, TaskStore};

/// How a task moves from pending to succeeded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VideoSpeed {
    /// Each status poll advances the task one step: the k-th poll of n sees
    /// `running` at `100·k/n` percent, the n-th and later see `succeeded`.
    /// Independent of time, so tests are deterministic.
    Polls(u32),
    /// The task takes this many milliseconds of real time from submission:
    /// `pending` for the first 10%, then `running` in proportion, then
    /// `succeeded`. For demos.
    Millis(u64),
}

impl Default for VideoSpeed {
    fn default() -> Self {
        Self::Polls(3)
    }
}

/// The video part of one server's state.
#[derive(Default)]
pub struct VideoState {
    speed: VideoSpeed,
    tasks: TaskStore,
    clips: clip::ClipCache,
    content_fetches: AtomicUsize,
}

impl VideoState {
    pub fn new(speed: VideoSpeed) -> Self {
        Self {
            speed,
            ..Self::default()
        }
    }

    pub fn task_count(&self) -> usize {
        self.tasks.created()
    }

    pub fn content_fetches(&self) -> usize {
        self.content_fetches.load(Ordering::Relaxed)
    }
}

pub async fn submit(
    State(state): State<Arc<SimState>>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let submission = match Submission::parse(&body) {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    if submission.directives.submit_fail {
        return VendorError::internal("The task could not be created; please try again.")
            .into_response();
    }
    let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok());
    let id = state.video.tasks.create(&submission, key, Instant::now());
    Json(json!({ "task_id": id, "status": "pending" })).into_response()
}

pub async fn poll(State(state): State<Arc<SimState>>, Path(id): Path<String>) -> Response {
    let video = &state.video;
    let Some((task, status)) = video.tasks.poll(&id, &video.speed, Instant::now()) else {
        return VendorError::unknown_task(&id).into_response();
    };
    let mut body = json!({
        "task_id": id,
        "status": status.name(),
        "progress": status.progress(),
    });
    match status {
        Status::Succeeded => body["duration"] = json!(f64::from(task.seconds)),
        Status::Failed { code, message } => {
            body["error"] = json!({ "code": code, "message": message })
        }
        Status::Pending | Status::Running { .. } => {}
    }
    Json::<Value>(body).into_response()
}

pub async fn content(
    State(state): State<Arc<SimState>>,
    Path(id): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let video = &state.video;
    let Some((task, status)) = video.tasks.peek(&id, &video.speed, Instant::now()) else {
        return VendorError::unknown_task(&id).into_response();
    };
    match task.content {
        ContentFault::None => {}
        ContentFault::Auth => return VendorError::unauthorized().into_response(),
        ContentFault::Hang => {
            // Ends early when the client goes away: axum drops this future.
            state.shutdown.cancelled().await;
            return VendorError::shutting_down().into_response();
        }
    }
    if status != Status::Succeeded {
        return VendorError::not_ready(&id, status.name()).into_response();
    }
    let renderer = state.clone();
    let (seconds, geometry) = (task.seconds, task.geometry);
    // Encoding a long clip takes a while in debug builds; keep it off the
    // threads that serve other requests.
    let rendered =
        tokio::task::spawn_blocking(move || renderer.video.clips.get(seconds, geometry)).await;
    let file = match rendered {
        Ok(Ok(file)) => file,
        Ok(Err(e)) => {
            return VendorError::internal(format!("rendering failed: {e:#}")).into_response()
        }
        Err(e) => return VendorError::internal(format!("rendering failed: {e}")).into_response(),
    };
    let range = range::resolve(
        headers.get(header::RANGE).and_then(|v| v.to_str().ok()),
        file.len() as u64,
    );
    let response = mp4_response(file, range);
    // axum answers HEAD from this handler too; that downloads nothing.
    if response.status().is_success() && method != Method::HEAD {
        video.content_fetches.fetch_add(1, Ordering::Relaxed);
    }
    response
}

fn mp4_response(file: Bytes, range: ByteRange) -> Response {
    let len = file.len();
    let (status, body, content_range) = match range {
        ByteRange::Full => (StatusCode::OK, file, None),
        ByteRange::Partial(r) => {
            let (first, last) = (*r.start(), *r.end());
            // Both ends are below len, which is a usize.
            let slice = file.slice(first as usize..=last as usize);
            let content_range = format!("bytes {first}-{last}/{len}");
            (StatusCode::PARTIAL_CONTENT, slice, Some(content_range))
        }
        ByteRange::Unsatisfiable => {
            let mut response = VendorError {
                status: StatusCode::RANGE_NOT_SATISFIABLE,
                code: "range_not_satisfiable",
                message: format!("The file has {len} bytes."),
            }
            .into_response();
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{len}")) {
                response.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            return response;
        }
    };
    let body_len = body.len();
    let mut response = (status, Body::from(body)).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("video/mp4"));
    headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body_len));
    if let Some(v) = content_range.and_then(|v| HeaderValue::from_str(&v).ok()) {
        headers.insert(header::CONTENT_RANGE, v);
    }
    response
}
