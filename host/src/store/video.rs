//! Video tasks, quotes, idempotency keys and the webhook outbox in redb.
//!
//! A task's state change and the webhook event it causes are written in the
//! same transaction (the outbox), so a crash can never leave one without the
//! other.
//!
//! Quotes, idempotency records and finished webhook events are only useful
//! for a while (spec: quotes live 30 minutes, keys de-duplicate for 24
//! hours), so each has a time index kept in step by the functions here, and
//! [`Store::sweep`] removes the old ones in bounded batches — a walk from
//! the oldest index entry, never a scan of the records themselves.

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
/// (expires_at, quote id) → (): quotes in the order they expire.
const QUOTES_BY_EXPIRY: TableDefinition<(i64, &str), ()> =
    TableDefinition::new("video_quotes_by_expiry");
/// (created_at, account, key) → (): idempotency records, oldest first.
const IDEMPOTENCY_BY_TIME: TableDefinition<(i64, &str, &str), ()> =
    TableDefinition::new("video_idempotency_by_time");
/// (outcome, finished at, event id) → (): delivered and dead events, in the
/// order they finished; the outcome is [`DELIVERED`] or [`DEAD`].
const EVENTS_FINISHED: TableDefinition<(u8, i64, &str), ()> =
    TableDefinition::new("webhook_finished");
/// Above every id, key and account in a range's upper bound.
const LAST: &str = "\u{10FFFF}";
const DELIVERED: u8 = 1;
const DEAD: u8 = 2;

pub fn create_tables(txn: &WriteTransaction) -> Result<(), StoreError> {
    txn.open_table(TASKS)?;
    txn.open_table(TASKS_BY_ACCOUNT)?;
    txn.open_table(ACTIVE)?;
    txn.open_table(QUOTES)?;
    txn.open_table(IDEMPOTENCY)?;
    txn.open_table(OUTBOX)?;
    txn.open_table(OUTBOX_DUE)?;
    txn.open_table(QUOTES_BY_EXPIRY)?;
    txn.open_table(IDEMPOTENCY_BY_TIME)?;
    txn.open_table(EVENTS_FINISHED)?;
    Ok(())
}

/// Fills the time indexes from the records, for a database written before
/// they existed (run once, at start-up).
pub(crate) fn build_indexes(txn: &WriteTransaction) -> Result<(), StoreError> {
    let mut by_expiry = txn.open_table(QUOTES_BY_EXPIRY)?;
    for row in txn.open_table(QUOTES)?.iter()? {
        let (_, v) = row?;
        let q: Quote = decode("video_quotes", v.value())?;
        by_expiry.insert((q.expires_at, q.id.as_str()), ())?;
    }
    let mut by_time = txn.open_table(IDEMPOTENCY_BY_TIME)?;
    for row in txn.open_table(IDEMPOTENCY)?.iter()? {
        let (k, v) = row?;
        let (account, key) = k.value();
        let rec: IdempotencyRecord = decode("video_idempotency", v.value())?;
        by_time.insert((rec.created_at, account, key), ())?;
    }
    let mut finished = txn.open_table(EVENTS_FINISHED)?;
    for row in txn.open_table(OUTBOX)?.iter()? {
        let (_, v) = row?;
        let ev: OutboxEvent = decode("webhook_outbox", v.value())?;
        if let Some((outcome, at)) = ev.finished() {
            finished.insert((outcome, at, ev.event_id.as_str()), ())?;
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
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

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
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
    /// When the last retry failed and the event was given up.
    #[serde(default)]
    pub dead_at: Option<i64>,
}

impl OutboxEvent {
    /// How and when delivery ended, for an event no longer pending.
    fn finished(&self) -> Option<(u8, i64)> {
        match self.state {
            EventStatus::Pending => None,
            EventStatus::Delivered => {
                Some((DELIVERED, self.delivered_at.unwrap_or(self.created_at)))
            }
            EventStatus::Dead => Some((DEAD, self.dead_at.unwrap_or(self.next_attempt_at))),
        }
    }
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

pub fn event_in(txn: &WriteTransaction, id: &str) -> Result<Option<OutboxEvent>, StoreError> {
    get_json(&txn.open_table(OUTBOX)?, "webhook_outbox", id)
}

/// Writes an event and keeps the due and finished indexes in step with its
/// state (an operator's resend takes a finished event back to pending).
pub fn put_event(txn: &WriteTransaction, ev: &OutboxEvent) -> Result<(), StoreError> {
    let before = event_in(txn, &ev.event_id)?.and_then(|old| old.finished());
    let mut finished = txn.open_table(EVENTS_FINISHED)?;
    if let Some((outcome, at)) = before {
        finished.remove((outcome, at, ev.event_id.as_str()))?;
    }
    if let Some((outcome, at)) = ev.finished() {
        finished.insert((outcome, at, ev.event_id.as_str()), ())?;
    }
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

/// Writes a quote (new, or marked used).
pub fn put_quote_in(txn: &WriteTransaction, q: &Quote) -> Result<(), StoreError> {
    txn.open_table(QUOTES)?
        .insert(q.id.as_str(), encode(q).as_slice())?;
    txn.open_table(QUOTES_BY_EXPIRY)?
        .insert((q.expires_at, q.id.as_str()), ())?;
    Ok(())
}

/// Records the first answer to an account's Idempotency-Key (replacing a
/// record whose window has passed).
pub fn put_idempotency(
    txn: &WriteTransaction,
    account: &str,
    key: &str,
    rec: &IdempotencyRecord,
) -> Result<(), StoreError> {
    let mut table = txn.open_table(IDEMPOTENCY)?;
    let old = table
        .insert((account, key), encode(rec).as_slice())?
        .map(|v| decode::<IdempotencyRecord>("video_idempotency", v.value()))
        .transpose()?;
    let mut by_time = txn.open_table(IDEMPOTENCY_BY_TIME)?;
    if let Some(old) = old {
        by_time.remove((old.created_at, account, key))?;
    }
    by_time.insert((rec.created_at, account, key), ())?;
    Ok(())
}

/// How long each kind of record is kept, for one sweep.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    /// Unix seconds.
    pub now: i64,
    /// Kept this long after they expire (a late submission still learns
    /// `quote_expired` rather than `quote_not_found`).
    pub quotes_after_expiry_secs: i64,
    /// The de-duplication window: a record older than it answers nothing.
    pub idempotency_window_secs: i64,
    pub delivered_events_secs: i64,
    pub dead_events_secs: i64,
    /// Most records of each kind removed by one sweep (one transaction).
    pub batch: usize,
}

/// What one sweep removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    pub quotes: usize,
    pub idempotency: usize,
    pub events: usize,
}

impl Swept {
    /// More may be due: some kind filled its batch.
    pub fn full(&self, batch: usize) -> bool {
        self.quotes >= batch || self.idempotency >= batch || self.events >= batch
    }
}

fn sweep_in(txn: &WriteTransaction, r: &Retention) -> Result<Swept, StoreError> {
    let mut swept = Swept::default();

    let cutoff = r.now.saturating_sub(r.quotes_after_expiry_secs);
    let mut by_expiry = txn.open_table(QUOTES_BY_EXPIRY)?;
    let mut old = Vec::new();
    for row in by_expiry
        .range((i64::MIN, "")..=(cutoff, LAST))?
        .take(r.batch)
    {
        let (k, _) = row?;
        let (at, id) = k.value();
        old.push((at, id.to_string()));
    }
    let mut quotes = txn.open_table(QUOTES)?;
    for (at, id) in &old {
        by_expiry.remove((*at, id.as_str()))?;
        quotes.remove(id.as_str())?;
    }
    swept.quotes = old.len();

    let cutoff = r.now.saturating_sub(r.idempotency_window_secs);
    let mut by_time = txn.open_table(IDEMPOTENCY_BY_TIME)?;
    let mut old = Vec::new();
    for row in by_time
        .range((i64::MIN, "", "")..=(cutoff, LAST, LAST))?
        .take(r.batch)
    {
        let (k, _) = row?;
        let (at, account, key) = k.value();
        old.push((at, account.to_string(), key.to_string()));
    }
    let mut records = txn.open_table(IDEMPOTENCY)?;
    for (at, account, key) in &old {
        by_time.remove((*at, account.as_str(), key.as_str()))?;
        records.remove((account.as_str(), key.as_str()))?;
    }
    swept.idempotency = old.len();

    let mut finished = txn.open_table(EVENTS_FINISHED)?;
    let mut outbox = txn.open_table(OUTBOX)?;
    for (outcome, kept) in [
        (DELIVERED, r.delivered_events_secs),
        (DEAD, r.dead_events_secs),
    ] {
        let cutoff = r.now.saturating_sub(kept);
        let mut old = Vec::new();
        for row in finished
            .range((outcome, i64::MIN, "")..=(outcome, cutoff, LAST))?
            .take(r.batch)
        {
            let (k, _) = row?;
            let (_, at, id) = k.value();
            old.push((at, id.to_string()));
        }
        for (at, id) in &old {
            finished.remove((outcome, *at, id.as_str()))?;
            outbox.remove(id.as_str())?;
        }
        swept.events += old.len();
    }
    Ok(swept)
}

impl Store {
    /// Removes, in one transaction, at most `r.batch` records of each kind
    /// that have outlived their window; call again while [`Swept::full`].
    pub async fn sweep(&self, r: Retention) -> Result<Swept, StoreError> {
        self.write(move |txn| sweep_in(txn, &r)).await
    }

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
        for row in index.range((account_id, since, "")..=(account_id, i64::MAX, LAST))? {
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
        self.write(move |txn| put_quote_in(txn, &q)).await
    }

    /// An account's record for an Idempotency-Key, whatever its age.
    pub fn idempotency(
        &self,
        account: &str,
        key: &str,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        let txn = self.read()?;
        let table = txn.open_table(IDEMPOTENCY)?;
        let v = table.get((account, key))?;
        v.map(|v| decode("video_idempotency", v.value()))
            .transpose()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db.redb")).unwrap();
        (dir, store)
    }

    fn quote(id: &str, expires_at: i64) -> Quote {
        Quote {
            id: id.into(),
            account_id: "a".into(),
            token_id: "t".into(),
            model: "m".into(),
            seconds: 5,
            unit_price: 1,
            quota: 5,
            created_at: expires_at - 1800,
            expires_at,
            used_by: None,
        }
    }

    fn record(created_at: i64) -> IdempotencyRecord {
        IdempotencyRecord {
            fingerprint: "f".into(),
            created_at,
            state: IdempotencyState::Done {
                status: 200,
                body: "{}".into(),
            },
        }
    }

    fn event(id: &str, state: EventStatus, at: i64) -> OutboxEvent {
        OutboxEvent {
            event_id: id.into(),
            task_id: "task".into(),
            account_id: "a".into(),
            event: "video.completed".into(),
            status: "completed".into(),
            progress: "100".into(),
            model: "m".into(),
            fail_reason: None,
            task_created_at: 0,
            target: WebhookTarget {
                url: "https://example.com/hook".into(),
                secret: None,
                secret_prev: None,
            },
            created_at: 0,
            attempts: 1,
            next_attempt_at: at,
            state,
            last_error: None,
            delivered_at: (state == EventStatus::Delivered).then_some(at),
            dead_at: (state == EventStatus::Dead).then_some(at),
        }
    }

    fn rules(now: i64, batch: usize) -> Retention {
        Retention {
            now,
            quotes_after_expiry_secs: 100,
            idempotency_window_secs: 1000,
            delivered_events_secs: 50,
            dead_events_secs: 500,
            batch,
        }
    }

    fn write(
        store: &Store,
        f: impl FnOnce(&WriteTransaction) -> Result<(), StoreError> + Send + 'static,
    ) {
        store.write_blocking(f).unwrap();
    }

    fn sweep(store: &Store, r: Retention) -> Swept {
        store.write_blocking(move |txn| sweep_in(txn, &r)).unwrap()
    }

    #[test]
    fn each_kind_goes_after_its_own_window_and_not_before() {
        let (_dir, store) = store();
        write(&store, |txn| {
            put_quote_in(txn, &quote("q-old", 1000))?;
            put_quote_in(txn, &quote("q-new", 1950))?;
            put_idempotency(txn, "a", "k-old", &record(900))?;
            put_idempotency(txn, "a", "k-new", &record(1500))?;
            put_event(txn, &event("e-delivered-old", EventStatus::Delivered, 1900))?;
            put_event(txn, &event("e-delivered-new", EventStatus::Delivered, 1960))?;
            put_event(txn, &event("e-dead-old", EventStatus::Dead, 1400))?;
            put_event(txn, &event("e-dead-new", EventStatus::Dead, 1600))?;
            put_event(txn, &event("e-pending", EventStatus::Pending, 0))
        });
        // At 2000: quotes expired by 1900, keys made by 1000, deliveries by
        // 1950 and deaths by 1500 are past their windows.
        let swept = sweep(&store, rules(2000, 100));
        assert_eq!(
            swept,
            Swept {
                quotes: 1,
                idempotency: 1,
                events: 2
            }
        );
        assert!(store.quote("q-old").unwrap().is_none());
        assert!(store.quote("q-new").unwrap().is_some());
        assert!(store.idempotency("a", "k-old").unwrap().is_none());
        assert!(store.idempotency("a", "k-new").unwrap().is_some());
        for (id, kept) in [
            ("e-delivered-old", false),
            ("e-delivered-new", true),
            ("e-dead-old", false),
            ("e-dead-new", true),
            ("e-pending", true),
        ] {
            assert_eq!(store.event(id).unwrap().is_some(), kept, "{id}");
        }
        // Nothing more is due at the same time.
        assert_eq!(sweep(&store, rules(2000, 100)), Swept::default());
    }

    #[test]
    fn a_sweep_removes_at_most_one_batch_of_each_kind() {
        let (_dir, store) = store();
        write(&store, |txn| {
            for i in 0..25 {
                put_quote_in(txn, &quote(&format!("q{i:02}"), 10 + i))?;
                put_idempotency(txn, "a", &format!("k{i:02}"), &record(i))?;
            }
            Ok(())
        });
        let r = rules(10_000, 10);
        let mut rounds = Vec::new();
        loop {
            let s = sweep(&store, r);
            rounds.push((s.quotes, s.idempotency));
            if !s.full(r.batch) {
                break;
            }
        }
        assert_eq!(rounds, vec![(10, 10), (10, 10), (5, 5)]);
        // Oldest first: after the first round the oldest ten are gone.
        assert!(store.quote("q24").unwrap().is_none());
    }

    #[test]
    fn a_resent_event_leaves_the_finished_index_and_a_reused_key_moves_in_time() {
        let (_dir, store) = store();
        write(&store, |txn| {
            put_event(txn, &event("e", EventStatus::Dead, 100))?;
            put_idempotency(txn, "a", "k", &record(100))
        });
        // An operator resends the dead event; the key is used again after
        // its window.
        write(&store, |txn| {
            put_event(txn, &event("e", EventStatus::Pending, 5000))?;
            put_idempotency(txn, "a", "k", &record(5000))
        });
        let swept = sweep(&store, rules(5100, 100));
        assert_eq!(swept, Swept::default(), "nothing is past its window now");
        assert!(store.event("e").unwrap().is_some());
        assert_eq!(
            store.idempotency("a", "k").unwrap().unwrap().created_at,
            5000
        );
    }

    #[test]
    fn indexes_are_built_for_records_written_before_they_existed() {
        let (_dir, store) = store();
        // Records as an older gateway wrote them: no index entries, and no
        // marker saying the indexes were built.
        write(&store, |txn| {
            txn.open_table(QUOTES)?
                .insert("q", encode(&quote("q", 10)).as_slice())?;
            txn.open_table(IDEMPOTENCY)?
                .insert(("a", "k"), encode(&record(10)).as_slice())?;
            let ev = event("e", EventStatus::Delivered, 10);
            txn.open_table(OUTBOX)?
                .insert("e", encode(&ev).as_slice())?;
            txn.open_table(crate::store::META)?.remove("indexes")?;
            Ok(())
        });
        assert_eq!(sweep(&store, rules(10_000, 100)), Swept::default());
        // What `Store::open` does for such a file.
        write(&store, crate::store::ensure_indexes);
        let swept = sweep(&store, rules(10_000, 100));
        assert_eq!(
            swept,
            Swept {
                quotes: 1,
                idempotency: 1,
                events: 1
            }
        );
    }
}
