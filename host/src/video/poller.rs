//! The task state machine (spec §3), driven by a background poller:
//!
//! ```text
//! queued ──(submitted upstream, generation starts)──▶ in_progress
//!   │                                                    │
//!   ├──────────────▶ completed   (settle actual seconds × unit price, refund the rest)
//!   ├──────────────▶ failed      (technical failure: full refund, video_generation_failed)
//!   ├──────────────▶ rejected    (content refusal: full refund, content_rejected)
//!   └──────────────▶ expired     (6 h without a final state: full refund, task_expired)
//! ```
//!
//! Each pass takes the tasks whose next poll is due (by the injected clock),
//! submits queued tasks the upstream has not seen yet, polls the others, and
//! writes the new state. A final state, its money figures and the webhook
//! event (if any) are written in one transaction; the hold is then settled in
//! the ledger. A crash between the two is repaired at start-up, which settles
//! holds of final tasks from the task's own figures (see `reconcile`).

use crate::billing::money::Quota;
use crate::plugins::session::{TaskState, VideoRequest, VideoSession};
use crate::relay::upstream;
use crate::state::{AppState, SharedState};
use crate::store::video::{
    put_event, put_task, task_in, EventStatus, OutboxEvent, TaskError, TaskStatus, VideoTask,
};
use futures_util::StreamExt;
use std::time::Duration;

/// Consecutive upstream failures after which a task not yet accepted
/// upstream is given up as failed.
const MAX_SUBMIT_FAILURES: u32 = 5;

/// Runs the poller until the state is dropped.
pub fn spawn(state: &SharedState, tick: Duration) {
    crate::state::spawn_worker(
        state,
        tick,
        |s| &s.video.wake,
        |state| async move {
            run_due(&state).await;
        },
    );
}

/// One pass over the due tasks; returns how many were looked at.
pub async fn run_due(state: &SharedState) -> usize {
    let _pass = state.video.pass_lock.lock().await;
    let due = match state.store.due_tasks(state.clock.now_ms()) {
        Ok(d) => d,
        Err(e) => {
            tracing::error!("video poller: cannot list due tasks: {e}");
            return 0;
        }
    };
    let n = due.len();
    // Each task gets its own deadline, so one slow upstream cannot hold up
    // the pass (and with it every other task's progress and expiry).
    let deadline = state.config.video.content_timeout * 3 + Duration::from_secs(5);
    futures_util::stream::iter(due)
        .for_each_concurrent(16, |id| async move {
            match tokio::time::timeout(deadline, advance(state, &id)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::error!(task = %id, "video poller: {e}"),
                Err(_) => tracing::warn!(task = %id, "video poller: gave up on this pass after {deadline:?}"),
            }
        })
        .await;
    n
}

fn backoff(state: &AppState, failures: u32) -> i64 {
    let v = &state.config.video;
    let base = v.poll_interval.as_millis() as i64;
    let max = v.poll_max_backoff.as_millis() as i64;
    base.saturating_mul(1i64 << failures.min(16))
        .min(max)
        .max(base)
}

/// What the upstream said about a task in this pass.
enum Step {
    /// Submitted; the upstream's id and the channel that took it.
    Accepted {
        upstream_id: String,
        channel: String,
    },
    Status(crate::plugins::session::UpstreamTaskStatus),
    /// The upstream could not be asked or did not answer usefully.
    Trouble(String),
}

async fn advance(state: &SharedState, id: &str) -> anyhow::Result<()> {
    let Some(task) = state.store.task(id)? else {
        return Ok(());
    };
    if task.status.is_final() {
        // Stale index entry: drop it.
        let t = task.clone();
        state
            .store
            .write(move |txn| put_task(txn, &t, None))
            .await?;
        return Ok(());
    }
    let now = state.clock.now_secs();
    if now - task.created_at >= state.config.video.task_expiry_secs {
        let hours = state.config.video.task_expiry_secs / 3600;
        return finish(state, task, TaskStatus::Expired, None, Some(TaskError {
            code: "task_expired".into(),
            message: format!("the task did not reach a final state within {hours} hours; its reservation was refunded"),
        }))
        .await;
    }
    let step = match &task.upstream_id {
        None => submit_upstream(state, &task).await,
        Some(up) => poll_upstream(state, &task, up).await,
    };
    let now_ms = state.clock.now_ms();
    let interval = state.config.video.poll_interval.as_millis() as i64;
    let mut t = task;
    match step {
        Step::Accepted {
            upstream_id,
            channel,
        } => {
            t.upstream_id = Some(upstream_id);
            t.channel = Some(channel);
            t.failures = 0;
            save(state, t, Some(now_ms + interval)).await
        }
        Step::Trouble(why) => {
            t.failures += 1;
            tracing::warn!(task = %t.id, failures = t.failures, "video upstream trouble: {why}");
            if t.upstream_id.is_none() && t.failures >= MAX_SUBMIT_FAILURES {
                return finish(state, t, TaskStatus::Failed, None, Some(TaskError {
                    code: "video_generation_failed".into(),
                    message: format!("the upstream did not accept the task: {why}; its reservation was refunded"),
                }))
                .await;
            }
            let next = now_ms + backoff(state, t.failures);
            save(state, t, Some(next)).await
        }
        Step::Status(s) => {
            t.failures = 0;
            match s.state {
                TaskState::Queued => {
                    t.progress = s.progress;
                    save(state, t, Some(now_ms + interval)).await
                }
                TaskState::InProgress => {
                    if t.status != TaskStatus::InProgress {
                        state.metrics.video_task("in_progress");
                    }
                    t.status = TaskStatus::InProgress;
                    t.progress = s.progress;
                    save(state, t, Some(now_ms + interval)).await
                }
                TaskState::Completed => {
                    let actual = s.actual_seconds.unwrap_or(t.seconds).clamp(1, t.seconds);
                    finish(state, t, TaskStatus::Completed, Some(actual), None).await
                }
                TaskState::Failed => {
                    let why = s
                        .error_message
                        .unwrap_or_else(|| "the upstream reported a technical failure".into());
                    finish(
                        state,
                        t,
                        TaskStatus::Failed,
                        None,
                        Some(TaskError {
                            code: "video_generation_failed".into(),
                            message: why,
                        }),
                    )
                    .await
                }
                TaskState::Rejected => {
                    let why = s.error_message.unwrap_or_else(|| {
                        "the prompt was refused by the content-safety check".into()
                    });
                    finish(
                        state,
                        t,
                        TaskStatus::Rejected,
                        None,
                        Some(TaskError {
                            code: "content_rejected".into(),
                            message: why,
                        }),
                    )
                    .await
                }
            }
        }
    }
}

async fn save(state: &SharedState, t: VideoTask, next_ms: Option<i64>) -> anyhow::Result<()> {
    state
        .store
        .write(move |txn| {
            // Never overwrite a final state written meanwhile (defensive:
            // passes are serialised, but a restart may race a manual pass).
            if let Some(cur) = task_in(txn, &t.id)? {
                if cur.status.is_final() {
                    return Ok(());
                }
            }
            put_task(txn, &t, next_ms)
        })
        .await?;
    Ok(())
}

/// The webhook event a final state causes (spec §2.4, DESIGN decisions:
/// rejected and expired tasks are reported as `video.failed`, their reason
/// starting with the error code).
pub fn event_for(t: &VideoTask, now: i64) -> Option<OutboxEvent> {
    let target = t.webhook.clone()?;
    let completed = t.status == TaskStatus::Completed;
    Some(OutboxEvent {
        event_id: crate::ids::new_id("evt_"),
        task_id: t.id.clone(),
        account_id: t.account_id.clone(),
        event: if completed {
            "video.completed"
        } else {
            "video.failed"
        }
        .into(),
        status: if completed { "completed" } else { "failed" }.into(),
        progress: format!("{}%", t.progress),
        model: t.model.clone(),
        fail_reason: t
            .error
            .as_ref()
            .map(|e| format!("{}: {}", e.code, e.message)),
        task_created_at: t.created_at,
        target,
        created_at: now,
        attempts: 0,
        next_attempt_at: now,
        state: EventStatus::Pending,
        last_error: None,
        delivered_at: None,
        dead_at: None,
    })
}

/// Money figures of a final state: completed tasks pay for the seconds
/// generated (never more than was held); every other final state refunds all.
fn figures(t: &VideoTask, status: TaskStatus, actual: Option<u32>) -> (Quota, Quota) {
    let settled = match (status, actual) {
        (TaskStatus::Completed, Some(secs)) => {
            t.unit_price.saturating_mul(secs as i64).min(t.reserved)
        }
        _ => 0,
    };
    (settled, t.reserved - settled)
}

/// The usage row of a finished task (the dashboard and the admin's usage
/// log count video spending from these).
fn usage_row(t: &VideoTask, now: i64) -> crate::store::records::UsageRecord {
    crate::store::records::UsageRecord {
        at: now,
        request_id: t.id.clone(),
        account_id: t.account_id.clone(),
        token_id: Some(t.token_id.clone()),
        model: t.model.clone(),
        channel: t.channel.clone(),
        latency_ms: (now - t.created_at).max(0) as u64 * 1000,
        status: if t.status == TaskStatus::Completed {
            200
        } else {
            0
        },
        error: t
            .error
            .as_ref()
            .map(|e| format!("{}: {}", e.code, e.message)),
        ..Default::default()
    }
}

async fn finish(
    state: &SharedState,
    mut t: VideoTask,
    status: TaskStatus,
    actual: Option<u32>,
    error: Option<TaskError>,
) -> anyhow::Result<()> {
    let now = state.clock.now_secs();
    let (settled, refunded) = figures(&t, status, actual);
    t.status = status;
    t.error = error;
    t.settled = settled;
    t.refunded = refunded;
    if status == TaskStatus::Completed {
        t.progress = 100;
        t.actual_seconds = actual;
        t.completed_at = Some(now);
        t.expires_at = Some(now + state.config.video.download_window_secs);
    }
    let event = event_for(&t, now);
    let hold = t.hold_id.clone();
    let task = t.clone();
    let wrote = state
        .store
        .write(move |txn| {
            if let Some(cur) = task_in(txn, &task.id)? {
                if cur.status.is_final() {
                    return Ok(false);
                }
            }
            put_task(txn, &task, None)?;
            if let Some(ev) = &event {
                put_event(txn, ev)?;
            }
            Ok(true)
        })
        .await?;
    if wrote {
        state
            .ledger
            .settle(&hold, settled, Some(usage_row(&t, now)), now)
            .await?;
        tracing::info!(task = %t.id, status = status.as_str(), settled, refunded, "video task finished");
        state.metrics.video_task(status.as_str());
        if t.webhook.is_some() {
            state.webhooks.wake.notify_one();
        }
    }
    Ok(())
}

/// Largest task-API answer read from a video upstream.
const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// Reads a task-API answer within the content timeout and size cap: a vendor
/// that sends headers and then stalls must not stall the poller.
async fn read_answer(state: &SharedState, resp: reqwest::Response) -> Result<bytes::Bytes, String> {
    let limit = state.config.video.content_timeout;
    match tokio::time::timeout(
        limit,
        crate::relay::vendor::read_capped(
            axum::http::Response::from(resp).into_body(),
            MAX_ANSWER_BYTES,
        ),
    )
    .await
    {
        Ok(r) => r,
        Err(_) => Err(format!(
            "the answer did not arrive within {} s",
            limit.as_secs()
        )),
    }
}

async fn submit_upstream(state: &SharedState, task: &VideoTask) -> Step {
    let registry = state.plugins.registry();
    let channels = state.catalog().channels(&task.concrete_model).to_vec();
    let mut last = format!("no channel serves {}", task.concrete_model);
    for ch in channels {
        let Some(plugin) = registry.video.get(&ch.adapter) else {
            last = format!("channel {} has no loaded video adapter", ch.name);
            continue;
        };
        let req = VideoRequest {
            upstream_model: ch.upstream_model(&task.concrete_model).to_string(),
            prompt: task.prompt.clone(),
            seconds: task.seconds,
            size: task.size.clone(),
            ratio: task.ratio.clone(),
            request_id: task.id.clone(),
        };
        let result: Result<String, String> = async {
            let mut s = VideoSession::start(&state.plugins.sandbox, plugin, &task.id)
                .await
                .map_err(|e| e.to_string())?;
            let out = s.build_submit(&req).await.map_err(|e| e.to_string())?;
            let built = upstream::build(
                &state.http,
                &ch,
                plugin.auth,
                out,
                upstream::ClientPayload::none(),
            )
            .map_err(|e| e.to_string())?;
            let resp = upstream::send(built, state.config.video.content_timeout)
                .await
                .map_err(|e| e.to_string())?;
            let status = resp.status().as_u16();
            let body = resp.bytes().await.map_err(|e| upstream::describe(&e))?;
            s.parse_submit(status, &body)
                .await
                .map_err(|e| e.to_string())
        }
        .await;
        match result {
            Ok(upstream_id) => {
                return Step::Accepted {
                    upstream_id,
                    channel: ch.name.clone(),
                }
            }
            Err(e) => last = format!("channel {}: {e}", ch.name),
        }
    }
    Step::Trouble(last)
}

async fn poll_upstream(state: &SharedState, task: &VideoTask, upstream_id: &str) -> Step {
    let registry = state.plugins.registry();
    let Some(ch) = task
        .channel
        .as_deref()
        .and_then(|name| state.catalog().channel(name).cloned())
    else {
        return Step::Trouble("the channel that took the task is no longer configured".into());
    };
    let Some(plugin) = registry.video.get(&ch.adapter) else {
        return Step::Trouble(format!("channel {} has no loaded video adapter", ch.name));
    };
    let result: Result<_, String> = async {
        let mut s = VideoSession::start(&state.plugins.sandbox, plugin, &task.id)
            .await
            .map_err(|e| e.to_string())?;
        let out = s.build_poll(upstream_id).await.map_err(|e| e.to_string())?;
        let built = upstream::build(
            &state.http,
            &ch,
            plugin.auth,
            out,
            upstream::ClientPayload::none(),
        )
        .map_err(|e| e.to_string())?;
        let resp = upstream::send(built, state.config.video.content_timeout)
            .await
            .map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let body = read_answer(state, resp).await?;
        s.parse_poll(status, &body).await.map_err(|e| e.to_string())
    }
    .await;
    match result {
        Ok(s) => Step::Status(s),
        Err(e) => Step::Trouble(e),
    }
}

/// At start-up: holds the ledger still has for video tasks are settled from
/// the task's own figures when the task already ended (a crash between the
/// two writes), refunded when no task exists (a crash before it was
/// written), and kept when the task is still running.
pub async fn reconcile(state: &SharedState) -> anyhow::Result<usize> {
    let now = state.clock.now_secs();
    let mut fixed = 0;
    for hold in state.ledger.holds() {
        if hold.kind != crate::store::records::ReservationKind::Video {
            continue;
        }
        match state.store.task(&hold.reference)? {
            None => {
                state.ledger.settle(&hold.id, 0, None, now).await?;
                fixed += 1;
            }
            Some(t) if t.status.is_final() => {
                state
                    .ledger
                    .settle(&hold.id, t.settled, Some(usage_row(&t, now)), now)
                    .await?;
                fixed += 1;
            }
            Some(_) => {}
        }
    }
    Ok(fixed)
}
