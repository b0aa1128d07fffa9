//! Video tasks, quotes, idempotency keys and the webhook outbox in redb.
//!
//! A task's state change and the webhook event it causes are written in the
//! same transaction (the outbox), so a crash can never leave one without the
//! other.

use super::{decode, encode, Store, StoreError};
use crate::billing::money::Quota;
use redb::{ReadableTable, TableDefinition, WriteTransaction};
use serde::{Deserialize, Serialize};

pub(crate) const TASKS: TableDefinition<&str, &[u8]> = TableDefinition::new("video_tasks");
/// (account, created_at, task id) → (): an account's tasks in time order.
pub(crate) const TASKS_BY_ACCOUNT: TableDefinition<(&str, i64, &str), ()> =
    TableDefinition::new("video_tasks_by_account");
/// Unfinished task id → when it is next due for the poller (Unix ms).
pub(crate) const ACTIVE: TableDefinition<&str, i64> = TableDefinition::new("video_active");
pub(crate) const QUOTES: TableDefinition<&str, &[u8]> = TableDefinition::new("video_quotes");
/// (account, Idempotency-Key) → the first submission's outcome.
pub(crate) const IDEMPOTENCY: TableDefinition<(&str, &str), &[u8]> =
    TableDefinition::new("video_idempotency");
pub(crate) const OUTBOX: TableDefinition<&str, &[u8]> = TableDefinition::new("webhook_outbox");
/// Event id → when its next delivery attempt is due (Unix seconds).
pub(crate) const OUTBOX_DUE: TableDefinition<&str, i64> = TableDefinition::new("webhook_due");

pub fn create_tables(txn: &WriteTransaction) -> Result<(), StoreError> {
    txn.open_table(TASKS)?;
    txn.open_table(TASKS_BY_ACCOUNT)?;
    txn.open_table(ACTIVE)?;
    txn.open_table(QUOTES)?;
    txn.open_table(IDEMPOTENCY)?;
    txn.open_table(OUTBOX)?;
    txn.open_table(OUTBOX_DUE)?;
    Ok(())
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Queued,
    InProgress,
    Completed,
    Failed,
    Rejected,
    Expired,
}

impl TaskStatus {
    pub fn is_final(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Failed | Self::Rejected | Self::Expired
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::InProgress => "in_progress",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Rejected => "rejected",
            Self::Expired => "expired",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TaskError {
    pub code: String,
    pub message: String,
}

/// Where and how to tell the client about the final state.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WebhookTarget {
    pub url: String,
    pub secret: Option<String>,
    pub secret_prev: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct VideoTask {
    pub id: String,
    pub account_id: String,
    pub token_id: String,
    /// As submitted (alias or concrete name).
    pub model: String,
    /// The concrete model the upstream generates with.
    pub concrete_model: String,
    pub prompt: String,
    pub seconds: u32,
    pub size: String,
    pub ratio: String,
    pub status: TaskStatus,
    pub progress: u8,
    pub created_at: i64,
    pub completed_at: Option<i64>,
    pub expires_at: Option<i64>,
    pub actual_seconds: Option<u32>,
    pub error: Option<TaskError>,
    /// Quota per second, locked at submission.
    pub unit_price: Quota,
    pub reserved: Quota,
    pub settled: Quota,
    pub refunded: Quota,
    pub hold_id: String,
    pub channel: Option<String>,
    pub upstream_id: Option<String>,
    /// Upstream polls (or submissions) that failed in a row.
    pub failures: u32,
    pub downloads: u32,
    pub quote_id: Option<String>,
    pub webhook: Option<WebhookTarget>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Quote {
    pub id: String,
    pub account_id: String,
    pub token_id: String,
    pub model: String,
    pub seconds: u32,
    pub unit_price: Quota,
    pub quota: Quota,
    pub created_at: i64,
    pub expires_at: i64,
    pub used_by: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum IdempotencyState {
    /// The first submission's answer, replayed to repeats.
    Done { status: u16, body: String },
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct IdempotencyRecord {
    pub fingerprint: String,
    pub created_at: i64,
    pub state: IdempotencyState,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum EventStatus {
    Pending,
    Delivered,
    Dead,
}

/// One webhook event and its delivery history.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OutboxEvent {
    pub event_id: String,
    pub task_id: String,
    pub account_id: String,
    /// `video.completed` or `video.failed`.
    pub event: String,
    /// `completed` or `failed`.
    pub status: String,
    pub progress: String,
    pub model: String,
    pub fail_reason: Option<String>,
    pub task_created_at: i64,
    pub target: WebhookTarget,
    pub created_at: i64,
    /// Attempts made so far.
    pub attempts: u32,
    pub next_attempt_at: i64,
    pub state: EventStatus,
    pub last_error: Option<String>,
    pub delivered_at: Option<i64>,
}

fn get_json<T: serde::de::DeserializeOwned>(
    t: &impl ReadableTable<&'static str, &'static [u8]>,
    name: &'static str,
    id: &str,
) -> Result<Option<T>, StoreError> {
    let v = t.get(id)?;
    v.map(|v| decode(name, v.value())).transpose()
}

/// Writes a task and keeps the active index in step with its status.
pub fn put_task(
    txn: &WriteTransaction,
    task: &VideoTask,
    next_poll_ms: Option<i64>,
) -> Result<(), StoreError> {
    txn.open_table(TASKS)?
        .insert(task.id.as_str(), encode(task).as_slice())?;
    txn.open_table(TASKS_BY_ACCOUNT)?.insert(
        (task.account_id.as_str(), task.created_at, task.id.as_str()),
        (),
    )?;
    let mut active = txn.open_table(ACTIVE)?;
    if task.status.is_final() {
        active.remove(task.id.as_str())?;
    } else if let Some(at) = next_poll_ms {
        active.insert(task.id.as_str(), at)?;
    }
    Ok(())
}

pub fn task_in(txn: &WriteTransaction, id: &str) -> Result<Option<VideoTask>, StoreError> {
    get_json(&txn.open_table(TASKS)?, "video_tasks", id)
}

pub fn put_event(txn: &WriteTransaction, ev: &OutboxEvent) -> Result<(), StoreError> {
    txn.open_table(OUTBOX)?
        .insert(ev.event_id.as_str(), encode(ev).as_slice())?;
    let mut due = txn.open_table(OUTBOX_DUE)?;
    if ev.state == EventStatus::Pending {
        due.insert(ev.event_id.as_str(), ev.next_attempt_at)?;
    } else {
        due.remove(ev.event_id.as_str())?;
    }
    Ok(())
}

impl Store {
    pub fn task(&self, id: &str) -> Result<Option<VideoTask>, StoreError> {
        let txn = self.read()?;
        get_json(&txn.open_table(TASKS)?, "video_tasks", id)
    }

    /// An account's tasks created at or after `since` (Unix seconds).
    pub fn tasks_of_since(
        &self,
        account_id: &str,
        since: i64,
    ) -> Result<Vec<VideoTask>, StoreError> {
        let txn = self.read()?;
        let index = txn.open_table(TASKS_BY_ACCOUNT)?;
        let tasks = txn.open_table(TASKS)?;
        let mut out = Vec::new();
        for row in index.range((account_id, since, "")..=(account_id, i64::MAX, "\u{10FFFF}"))? {
            let (k, _) = row?;
            let (_, _, id) = k.value();
            if let Some(t) = get_json(&tasks, "video_tasks", id)? {
                out.push(t);
            }
        }
        Ok(out)
    }

    /// Unfinished tasks due for the poller at `now_ms`.
    pub fn due_tasks(&self, now_ms: i64) -> Result<Vec<String>, StoreError> {
        let txn = self.read()?;
        let active = txn.open_table(ACTIVE)?;
        let mut out = Vec::new();
        for row in active.iter()? {
            let (k, v) = row?;
            if v.value() <= now_ms {
                out.push(k.value().to_string());
            }
        }
        Ok(out)
    }

    pub fn quote(&self, id: &str) -> Result<Option<Quote>, StoreError> {
        let txn = self.read()?;
        get_json(&txn.open_table(QUOTES)?, "video_quotes", id)
    }

    pub async fn put_quote(&self, q: Quote) -> Result<(), StoreError> {
        self.write(move |txn| {
            txn.open_table(QUOTES)?
                .insert(q.id.as_str(), encode(&q).as_slice())?;
            Ok(())
        })
        .await
    }

    pub fn event(&self, id: &str) -> Result<Option<OutboxEvent>, StoreError> {
        let txn = self.read()?;
        get_json(&txn.open_table(OUTBOX)?, "webhook_outbox", id)
    }

    /// Pending events due at `now` (Unix seconds).
    pub fn due_events(&self, now: i64) -> Result<Vec<String>, StoreError> {
        let txn = self.read()?;
        let due = txn.open_table(OUTBOX_DUE)?;
        let mut out = Vec::new();
        for row in due.iter()? {
            let (k, v) = row?;
            if v.value() <= now {
                out.push(k.value().to_string());
            }
        }
        Ok(out)
    }

    /// Events, newest first, optionally only those in one state.
    pub fn events(
        &self,
        state: Option<EventStatus>,
        limit: usize,
    ) -> Result<Vec<OutboxEvent>, StoreError> {
        let txn = self.read()?;
        let t = txn.open_table(OUTBOX)?;
        let mut out: Vec<OutboxEvent> = Vec::new();
        for row in t.iter()? {
            let (_, v) = row?;
            let ev: OutboxEvent = decode("webhook_outbox", v.value())?;
            if state.is_none_or(|s| s == ev.state) {
                out.push(ev);
            }
        }
        out.sort_by(|a, b| (b.created_at, &b.event_id).cmp(&(a.created_at, &a.event_id)));
        out.truncate(limit);
        Ok(out)
    }
}
