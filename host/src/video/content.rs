//! `GET /v1/videos/{id}/content` (spec §4.6): the MP4, streamed from the
//! upstream as it arrives (never held whole in memory), with HTTP Range
//! passed through; available once completed, until `expires_at`, at most
//! `max_downloads` times.

use crate::auth::Caller;
use crate::error::ApiError;
use crate::plugins::session::VideoSession;
use crate::relay::upstream::{self, SendError};
use crate::state::SharedState;
use crate::store::video::{put_task, task_in, TaskStatus, VideoTask};
use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;

/// The caller's task, or 404 (also for another account's task).
pub fn own_task(state: &SharedState, caller: &Caller, id: &str) -> Result<VideoTask, ApiError> {
    state
        .store
        .task(id)
        .map_err(ApiError::internal)?
        .filter(|t| t.account_id == caller.token.account_id)
        .ok_or_else(|| ApiError::NotFound(format!("no video task `{id}`")))
}

fn gone(msg: String) -> ApiError {
    ApiError::ArtifactGone(msg)
}

/// Checks the download rules against a task as stored now.
fn check_available(t: &VideoTask, now: i64, max: u32) -> Result<(), ApiError> {
    if t.status != TaskStatus::Completed {
        return Err(gone(format!(
            "the video is not available: the task is {} (content exists only for completed tasks)",
            t.status.as_str()
        )));
    }
    if t.expires_at.is_some_and(|e| now >= e) {
        return Err(gone(format!(
            "the download window closed at {} (24 hours after completion)",
            t.expires_at.unwrap_or(0)
        )));
    }
    if t.downloads >= max {
        return Err(gone(format!(
            "the video was already downloaded {max} times, the limit"
        )));
    }
    Ok(())
}

pub async fn download(
    state: &SharedState,
    caller: &Caller,
    id: &str,
    client_headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let task = own_task(state, caller, id)?;
    let max = state.config.video.max_downloads;
    check_available(&task, state.clock.now_secs(), max)?;

    let registry = state.plugins.registry();
    let catalog = state.catalog();
    let (Some(ch), Some(up)) = (
        task.channel.as_deref().and_then(|n| catalog.channel(n)),
        task.upstream_id.as_ref(),
    ) else {
        // A completed task always has both; a config that dropped the
        // channel since is an operator problem, not the client's.
        return Err(ApiError::internal(format!(
            "completed task {id} has no usable channel or upstream id"
        )));
    };
    let plugin = registry
        .video
        .get(&ch.adapter)
        .ok_or_else(|| ApiError::NoChannel(task.model.clone()))?;
    let mut session = VideoSession::start(&state.plugins.sandbox, plugin, &caller.info.id).await?;
    let out = session.build_content(up).await?;
    let mut req = upstream::build(
        &state.http,
        ch,
        plugin.auth,
        out,
        upstream::ClientPayload::none(),
    )?;
    if let Some(range) = client_headers.get(header::RANGE) {
        req = req.header(header::RANGE, range.clone());
    }
    let resp = match upstream::send(req, state.config.video.content_timeout).await {
        Ok(r) => r,
        Err(SendError::Timeout(_)) => return Err(ApiError::ArtifactUpstreamTimeout),
        Err(SendError::Transport(e)) => {
            tracing::warn!(task = %id, "content fetch failed: {e}");
            return Err(ApiError::ArtifactUpstreamTimeout);
        }
    };
    let status = resp.status();
    match status.as_u16() {
        200 | 206 => {}
        401 | 403 => return Err(ApiError::ArtifactUpstreamAuth),
        404 | 410 => return Err(gone("the upstream no longer has the file".into())),
        408 | 504 => return Err(ApiError::ArtifactUpstreamTimeout),
        416 => {
            let range = resp.headers().get(header::CONTENT_RANGE).cloned();
            return Err(ApiError::RangeNotSatisfiable(
                range.and_then(|v| v.to_str().ok().map(str::to_string)),
            ));
        }
        other => {
            return Err(ApiError::Upstream {
                status: 502,
                code: "upstream_error".into(),
                message: format!("fetching the video from the upstream failed with status {other}"),
                retry_after: None,
            })
        }
    }

    // Count the download only now that the upstream delivers, atomically
    // with the limit check (concurrent downloads cannot pass the limit).
    let now = state.clock.now_secs();
    let tid = task.id.clone();
    let counted = state
        .store
        .write(move |txn| {
            let Some(mut t) = task_in(txn, &tid)? else {
                return Ok(Err(ApiError::NotFound(format!("no video task `{tid}`"))));
            };
            if let Err(e) = check_available(&t, now, max) {
                return Ok(Err(e));
            }
            t.downloads += 1;
            put_task(txn, &t, None)?;
            Ok(Ok(()))
        })
        .await
        .map_err(ApiError::internal)?;
    counted?;

    let passed: Vec<(header::HeaderName, HeaderValue)> =
        [header::CONTENT_LENGTH, header::CONTENT_RANGE]
            .into_iter()
            .filter_map(|name| resp.headers().get(&name).cloned().map(|v| (name, v)))
            .collect();
    let mut out = Response::new(Body::from_stream(resp.bytes_stream()));
    *out.status_mut() = if status.as_u16() == 206 {
        StatusCode::PARTIAL_CONTENT
    } else {
        StatusCode::OK
    };
    let h = out.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("video/mp4"));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    for (name, v) in passed {
        h.insert(name, v);
    }
    Ok(out)
}
