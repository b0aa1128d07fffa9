//! Signed, durable webhooks for video tasks (spec §6, §2.4).
//!
//! Events are created in the same transaction as the task's final state (the
//! outbox, see `store::video`). A dispatcher delivers the due ones: each
//! delivery is a POST of the event JSON with the §6 headers, signed over the
//! exact bytes sent; a 2xx answer ends it, anything else schedules the next
//! attempt (30 s, 2 min, 10 min, 1 h, 6 h, 24 h by default) with the same
//! `event_id` and `attempt` counting up, and after the last retry the event is
//! dead (listed in the admin API, re-sendable). Deliveries run concurrently
//! (bounded), each with its own timeout, so a slow or dead receiver delays
//! nobody else. Because the outbox is durable, a crash loses no event:
//! delivery resumes where the outbox says it stood.

pub mod guard;
pub mod signer;

use crate::state::SharedState;
use crate::store::video::{event_in, put_event, EventStatus, OutboxEvent};
use serde_json::json;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, Semaphore};

/// Dispatcher state shared with handlers.
pub struct WebhookRuntime {
    pub wake: Notify,
    /// Events being delivered right now (never two deliveries of one event).
    inflight: Mutex<HashSet<String>>,
    slots: Arc<Semaphore>,
}

impl WebhookRuntime {
    /// Deliveries under way right now.
    pub fn in_flight(&self) -> usize {
        self.inflight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    pub fn new(max_concurrent: usize) -> Self {
        Self {
            wake: Notify::new(),
            inflight: Mutex::new(HashSet::new()),
            slots: Arc::new(Semaphore::new(max_concurrent.max(1))),
        }
    }
}

/// Runs the dispatcher until the state is dropped.
pub fn spawn(state: &SharedState, tick: Duration) {
    crate::state::spawn_worker(
        state,
        tick,
        |s| &s.webhooks.wake,
        |state| async move {
            dispatch_due(&state, false).await;
        },
    );
}

/// Starts a delivery for every due event not already being delivered. With
/// `wait`, returns once those deliveries finished (admin API and tests);
/// returns how many were started.
pub async fn dispatch_due(state: &SharedState, wait: bool) -> usize {
    let due = match state.store.due_events(state.clock.now_secs()) {
        Ok(d) => d,
        Err(e) => {
            tracing::error!("webhooks: cannot list due events: {e}");
            return 0;
        }
    };
    let mut started = Vec::new();
    for id in due {
        {
            let mut inflight = state
                .webhooks
                .inflight
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if !inflight.insert(id.clone()) {
                continue;
            }
        }
        let state = state.clone();
        let slots = state.webhooks.slots.clone();
        started.push(tokio::spawn(async move {
            let _slot = slots.acquire_owned().await;
            if let Err(e) = deliver(&state, &id).await {
                tracing::error!(event = %id, "webhook delivery bookkeeping failed: {e}");
            }
            state
                .webhooks
                .inflight
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
        }));
    }
    let n = started.len();
    if wait {
        for h in started {
            let _ = h.await;
        }
    }
    n
}

/// The JSON body of one delivery (spec §2.4).
pub fn body(ev: &OutboxEvent, timestamp: i64, attempt: u32) -> Vec<u8> {
    json!({
        "event_id": ev.event_id,
        "event": ev.event,
        "task_id": ev.task_id,
        "status": ev.status,
        "progress": ev.progress,
        "model": ev.model,
        "fail_reason": ev.fail_reason,
        "created_at": ev.task_created_at,
        "timestamp": timestamp,
        "attempt": attempt,
    })
    .to_string()
    .into_bytes()
}

/// One POST to the receiver; `Ok` on a 2xx answer.
async fn post(
    state: &SharedState,
    ev: &OutboxEvent,
    timestamp: i64,
    attempt: u32,
) -> Result<(), String> {
    let cfg = &state.config.webhooks;
    let (url, addr) = guard::resolve_checked(&ev.target.url, cfg).await?;
    let host = url.host_str().unwrap_or("").to_string();
    // Connect to exactly the address just checked, follow no redirects.
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        // A proxy would connect on its own, around the address check.
        .no_proxy()
        .timeout(cfg.timeout)
        .resolve(&host, addr)
        .build()
        .map_err(|e| e.to_string())?;
    let payload = body(ev, timestamp, attempt);
    let mut req = client
        .post(url)
        .header("content-type", "application/json")
        .header("user-agent", "gateway-webhooks/1")
        .header("x-webhook-event-id", &ev.event_id)
        .header("x-webhook-timestamp", timestamp.to_string());
    if let Some(secret) = &ev.target.secret {
        req = req
            .header(
                "x-webhook-signature",
                signer::sign(secret, timestamp, &payload),
            )
            .header("x-webhook-signature-algorithm", "sha256");
        if let Some(prev) = &ev.target.secret_prev {
            req = req.header(
                "x-webhook-signature-prev",
                signer::sign(prev, timestamp, &payload),
            );
        }
    }
    let resp = req
        .body(payload)
        .send()
        .await
        .map_err(|e| crate::relay::upstream::describe(&e))?;
    if resp.status().is_success() {
        Ok(())
    } else {
        Err(format!("the receiver answered {}", resp.status()))
    }
}

async fn deliver(state: &SharedState, id: &str) -> anyhow::Result<()> {
    let Some(ev) = state.store.event(id)? else {
        return Ok(());
    };
    let now = state.clock.now_secs();
    if ev.state != EventStatus::Pending || ev.next_attempt_at > now {
        return Ok(());
    }
    let attempt = ev.attempts + 1;
    let before = (ev.state, ev.next_attempt_at);
    let outcome = post(state, &ev, now, attempt).await;
    let schedule = state.config.webhooks.retry_schedule_secs.clone();
    let id = ev.event_id.clone();
    let delivered = outcome.is_ok();
    let dead = state
        .store
        .write(move |txn| {
            // Re-read: an operator may have re-sent the event while this
            // delivery was under way; that request must not be lost.
            let Some(mut ev) = event_in(txn, &id)? else {
                return Ok(false);
            };
            let resent = (ev.state, ev.next_attempt_at) != before;
            ev.attempts = ev.attempts.max(attempt);
            match outcome {
                Ok(()) => {
                    ev.state = EventStatus::Delivered;
                    ev.delivered_at = Some(now);
                    ev.last_error = None;
                }
                Err(why) => {
                    ev.last_error = Some(why.clone());
                    if !resent {
                        match schedule.get(attempt as usize - 1) {
                            Some(delay) => ev.next_attempt_at = now + delay,
                            None => {
                                ev.state = EventStatus::Dead;
                                ev.dead_at = Some(now);
                                tracing::warn!(event = %ev.event_id, attempts = attempt, "webhook event is dead: {why}");
                            }
                        }
                    }
                }
            }
            put_event(txn, &ev)?;
            Ok(ev.state == EventStatus::Dead)
        })
        .await?;
    state.metrics.webhook_delivery(match (delivered, dead) {
        (true, _) => "delivered",
        (false, true) => "dead",
        (false, false) => "failed",
    });
    Ok(())
}

/// Queues an event for delivery now, whatever its state (the console's
/// "resend"); `None` when it does not exist.
pub async fn resend(state: &SharedState, id: &str) -> anyhow::Result<Option<OutboxEvent>> {
    let now = state.clock.now_secs();
    let id = id.to_string();
    let ev = state
        .store
        .write(move |txn| {
            let Some(mut ev) = event_in(txn, &id)? else {
                return Ok(None);
            };
            ev.state = EventStatus::Pending;
            ev.next_attempt_at = now;
            put_event(txn, &ev)?;
            Ok(Some(ev))
        })
        .await?;
    if ev.is_some() {
        state.webhooks.wake.notify_one();
    }
    Ok(ev)
}
