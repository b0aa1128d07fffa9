//! Quotes and submissions (spec §4.5, §4.4b rules 4–7, §7.3, §8).
//!
//! A submission is decided in one critical section: Idempotency-Key, quote,
//! the account's caps, the full-price hold, and the task record with the
//! quote's use and the idempotency outcome in one transaction. Nothing in it
//! waits on the upstream (the poller submits the task there), so holding the
//! lock costs one log write and one commit.

use super::params::{self, RawFields, Submission};
use super::render;
use crate::auth::Caller;
use crate::config::VideoModelConfig;
use crate::error::ApiError;
use crate::state::SharedState;
use crate::store::records::ReservationKind;
use crate::store::video::{
    put_idempotency, put_quote_in, put_task, IdempotencyRecord, IdempotencyState, Quote,
    TaskStatus, VideoTask,
};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// Longest accepted Idempotency-Key.
pub const MAX_IDEMPOTENCY_KEY: usize = 200;

/// The model a request names, or 404 `model_not_found`.
pub fn video_model(state: &SharedState, name: &str) -> Result<Arc<VideoModelConfig>, ApiError> {
    state
        .catalog()
        .video_models
        .get(name)
        .cloned()
        .ok_or_else(|| ApiError::ModelNotFound(name.to_string()))
}

/// `POST /v1/videos/quote`.
pub async fn quote(
    state: &SharedState,
    caller: &Caller,
    raw: &RawFields,
) -> Result<render::QuoteView, ApiError> {
    let model = video_model(state, &params::model_of(raw)?)?;
    caller.check_model(&model.name)?;
    let (seconds, _size) = params::quote_terms(raw, &model)?;
    let now = state.clock.now_secs();
    let q = Quote {
        id: crate::ids::new_id("quote_"),
        account_id: caller.token.account_id.clone(),
        token_id: caller.token.id.clone(),
        model: model.name.clone(),
        seconds,
        unit_price: model.price_per_second,
        quota: model.price_per_second.saturating_mul(seconds as i64),
        created_at: now,
        expires_at: now + state.config.video.quote_validity_secs,
        used_by: None,
    };
    state
        .store
        .put_quote(q.clone())
        .await
        .map_err(ApiError::internal)?;
    Ok(render::quote(
        &q,
        &state.config.currency,
        model.min_seconds,
        model.max_seconds,
    ))
}

/// What a submission answers: status, JSON body, whether it is a replay.
pub struct Answer {
    pub status: u16,
    pub body: String,
    pub replayed: bool,
}

fn quote_error(
    status: u16,
    code: &'static str,
    message: String,
    extra: Map<String, Value>,
) -> ApiError {
    ApiError::Quote {
        status,
        code,
        message,
        extra,
    }
}

/// Checks a quote against the submission (spec §4.4b rule 6).
fn check_quote(
    state: &SharedState,
    caller: &Caller,
    sub: &Submission,
    model: &VideoModelConfig,
    id: &str,
    now: i64,
) -> Result<Quote, ApiError> {
    let cur = &state.config.currency;
    let q = state
        .store
        .quote(id)
        .map_err(ApiError::internal)?
        .ok_or_else(|| {
            quote_error(
                404,
                "quote_not_found",
                format!("no quote `{id}`"),
                Map::new(),
            )
        })?;
    if q.token_id != caller.token.id {
        return Err(quote_error(
            403,
            "quote_token_mismatch",
            "the quote was issued to another token".into(),
            Map::new(),
        ));
    }
    if now > q.expires_at {
        return Err(quote_error(
            410,
            "quote_expired",
            format!(
                "the quote expired at {} (quotes are valid for 30 minutes)",
                q.expires_at
            ),
            Map::new(),
        ));
    }
    if let Some(task) = &q.used_by {
        return Err(quote_error(
            409,
            "quote_already_used",
            format!("the quote was already used by {task}"),
            Map::new(),
        ));
    }
    if q.model != sub.model {
        return Err(quote_error(
            409,
            "quote_model_mismatch",
            format!(
                "the quote is for {}, the submission is for {}",
                q.model, sub.model
            ),
            Map::new(),
        ));
    }
    if q.seconds != sub.seconds {
        return Err(quote_error(
            409,
            "quote_duration_mismatch",
            format!(
                "the quote is for {} s, the submission asks for {} s",
                q.seconds, sub.seconds
            ),
            Map::new(),
        ));
    }
    if q.unit_price != model.price_per_second {
        let mut extra = Map::new();
        extra.insert("old_price".into(), json!(cur.to_cny(q.unit_price)));
        extra.insert(
            "new_price".into(),
            json!(cur.to_cny(model.price_per_second)),
        );
        return Err(quote_error(
            409,
            "quote_price_changed",
            format!(
                "the price changed from {} to {} CNY per second since the quote; request a new quote",
                cur.format_cny(q.unit_price),
                cur.format_cny(model.price_per_second)
            ),
            extra,
        ));
    }
    Ok(q)
}

/// Start of the UTC day containing `now`.
fn day_start(now: i64) -> i64 {
    now - now.rem_euclid(86_400)
}

/// Checks the account's unfinished-task and daily-spend caps for `price` more.
fn check_caps(state: &SharedState, account: &str, price: i64, now: i64) -> Result<(), ApiError> {
    let v = &state.config.video;
    let cur = &state.config.currency;
    // Unfinished tasks are younger than the expiry (plus a poll's slack).
    let since = day_start(now).min(now - v.task_expiry_secs - 3600);
    let tasks = state
        .store
        .tasks_of_since(account, since)
        .map_err(ApiError::internal)?;
    let unfinished = tasks.iter().filter(|t| !t.status.is_final()).count() as u32;
    if unfinished >= v.max_unfinished_per_account {
        return Err(ApiError::UserConcurrencyLimit {
            current: unfinished,
            limit: v.max_unfinished_per_account,
        });
    }
    let today = day_start(now);
    let spent: i64 = tasks
        .iter()
        .filter(|t| t.created_at >= today)
        .map(|t| {
            if t.status.is_final() {
                t.settled
            } else {
                t.reserved
            }
        })
        .sum();
    if spent + price > v.daily_budget {
        return Err(ApiError::DailyBudgetExceeded {
            spent_cny: cur.format_cny(spent),
            would_be_cny: cur.format_cny(spent + price),
            limit_cny: cur.format_cny(v.daily_budget),
        });
    }
    Ok(())
}

/// The first answer to an Idempotency-Key, if this is a repeat within the
/// window; 409 if the key was used with another body.
fn replay(
    state: &SharedState,
    account: &str,
    key: &str,
    fingerprint: &str,
    now: i64,
) -> Result<Option<Answer>, ApiError> {
    let Some(rec) = state
        .store
        .idempotency(account, key)
        .map_err(ApiError::internal)?
    else {
        return Ok(None);
    };
    if now - rec.created_at >= state.config.video.idempotency_window_secs {
        return Ok(None);
    }
    if rec.fingerprint != fingerprint {
        return Err(ApiError::IdempotencyKeyReuse);
    }
    let IdempotencyState::Done { status, body } = rec.state;
    Ok(Some(Answer {
        status,
        body,
        replayed: true,
    }))
}

/// `POST /v1/videos`, after parsing: idempotency, quote, caps, hold, task.
/// Takes its arguments by value: the handler runs it to its end
/// (`run_to_end`), so a client that disconnects cannot cancel it halfway
/// (between the hold and the task record).
pub async fn submit(
    state: SharedState,
    caller: Caller,
    raw: RawFields,
    header_webhook: (Option<String>, Option<String>),
    idempotency_key: Option<String>,
) -> Result<Answer, ApiError> {
    let state = &state;
    let caller = &caller;
    let model = video_model(state, &params::model_of(&raw)?)?;
    caller.check_model(&model.name)?;
    let sub = params::submission(&raw, &model, header_webhook)?;
    if let Some(k) = &idempotency_key {
        if k.is_empty() || k.len() > MAX_IDEMPOTENCY_KEY {
            return Err(ApiError::InvalidRequest(format!(
                "Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} characters"
            )));
        }
    }
    let fingerprint = sub.fingerprint();
    let account = caller.token.account_id.clone();
    // A repeat is answered before anything that could have changed since
    // (a channel going down, a webhook host's DNS) gets a say.
    if let Some(key) = &idempotency_key {
        if let Some(answer) = replay(state, &account, key, &fingerprint, state.clock.now_secs())? {
            return Ok(answer);
        }
    }
    // Refuse now rather than hold money for a task nobody can generate.
    let registry = state.plugins.registry();
    let servable = state
        .catalog()
        .channels(model.concrete())
        .iter()
        .any(|c| registry.video.contains_key(&c.adapter));
    if !servable {
        return Err(ApiError::NoChannel(model.name.clone()));
    }
    if let Some(w) = &sub.webhook {
        crate::webhooks::guard::check_target(&w.url, &state.config.webhooks)
            .await
            .map_err(|m| ApiError::VideoValidation {
                code: "invalid_request",
                message: m,
            })?;
    }

    let lock = state.video.account_lock(&account);
    let _serial = lock.lock().await;
    let now = state.clock.now_secs();
    if let Some(key) = &idempotency_key {
        if let Some(answer) = replay(state, &account, key, &fingerprint, now)? {
            return Ok(answer);
        }
    }

    let quote = match &sub.quote_id {
        Some(id) => Some(check_quote(state, caller, &sub, &model, id, now)?),
        None => None,
    };
    let unit_price = quote
        .as_ref()
        .map(|q| q.unit_price)
        .unwrap_or(model.price_per_second);
    let price = unit_price.saturating_mul(sub.seconds as i64);
    check_caps(state, &account, price, now)?;

    let task_id = crate::ids::new_id("task_");
    let cur = state.config.currency;
    let hold = match state
        .ledger
        .reserve(
            &account,
            Some(&caller.token.id),
            price,
            ReservationKind::Video,
            &task_id,
            now,
        )
        .await
        .map_err(ApiError::internal)?
    {
        Ok(h) => h,
        Err(refusal) => return Err(crate::billing::refusal_error(refusal, price, &cur)),
    };
    let task = VideoTask {
        id: task_id,
        account_id: account.clone(),
        token_id: caller.token.id.clone(),
        model: sub.model.clone(),
        concrete_model: model.concrete().to_string(),
        prompt: sub.prompt.clone(),
        seconds: sub.seconds,
        size: sub.size.clone(),
        ratio: sub.ratio.clone(),
        status: TaskStatus::Queued,
        progress: 0,
        created_at: now,
        completed_at: None,
        expires_at: None,
        actual_seconds: None,
        error: None,
        unit_price,
        reserved: price,
        settled: 0,
        refunded: 0,
        hold_id: hold.id.clone(),
        channel: None,
        upstream_id: None,
        failures: 0,
        downloads: 0,
        quote_id: quote.as_ref().map(|q| q.id.clone()),
        webhook: sub.webhook.clone(),
    };
    let body =
        serde_json::to_string(&render::task(&task, &cur, true)).map_err(ApiError::internal)?;
    let answer = Answer {
        status: 200,
        body: body.clone(),
        replayed: false,
    };
    let due_ms = state.clock.now_ms();
    let written = state
        .store
        .write(move |txn| {
            put_task(txn, &task, Some(due_ms))?;
            if let Some(mut q) = quote {
                q.used_by = Some(task.id.clone());
                put_quote_in(txn, &q)?;
            }
            if let Some(key) = idempotency_key {
                let rec = IdempotencyRecord {
                    fingerprint,
                    created_at: now,
                    state: IdempotencyState::Done { status: 200, body },
                };
                put_idempotency(txn, &account, &key, &rec)?;
            }
            Ok(())
        })
        .await;
    if let Err(e) = written {
        // No task exists: give the money back before reporting.
        let _ = state.ledger.settle(&hold.id, 0, None, now).await;
        return Err(ApiError::internal(e));
    }
    state.metrics.video_task("queued");
    state.video.wake.notify_one();
    Ok(answer)
}
