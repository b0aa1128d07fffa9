//! The admin API: accounts, tokens, usage, channels, plugins, config
//! reload. It listens on a loopback address only (the config refuses
//! anything else) and every call needs
//! `Authorization: Bearer <admin key>`. The public API never issues tokens
//! (spec §5); `gateway admin ...` is a thin client of this API.

use crate::auth::presented_key;
use crate::billing::ledger::NewToken;
use crate::error::ApiError;
use crate::protocol::KeyPlace;
use crate::state::SharedState;
use crate::store::records::{Token, TokenStatus};
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use subtle::ConstantTimeEq;

pub fn router(_state: SharedState) -> Router<SharedState> {
    Router::new()
        .route("/admin/v1/health", get(health))
        .route(
            "/admin/v1/accounts",
            post(create_account).get(list_accounts),
        )
        .route("/admin/v1/accounts/{id}", get(show_account))
        .route("/admin/v1/accounts/{id}/topup", post(top_up))
        .route("/admin/v1/tokens", post(create_token).get(list_tokens))
        .route(
            "/admin/v1/tokens/{id}",
            get(show_token).delete(delete_token),
        )
        .route("/admin/v1/tokens/{id}/disable", post(disable_token))
        .route("/admin/v1/usage", get(usage))
        .route("/admin/v1/holds", get(holds))
        .route("/admin/v1/channels", get(channels))
        .route("/admin/v1/channels/{name}/enable", post(enable_channel))
        .route("/admin/v1/plugins", get(plugins))
        .route("/admin/v1/plugins/reload", post(reload_plugins))
        .route("/admin/v1/reload", post(reload_config))
        .route("/admin/v1/clock/advance", post(advance_clock))
        .route("/admin/v1/video/poll", post(video_poll))
        .route("/admin/v1/webhooks", get(webhook_list))
        .route("/admin/v1/webhooks/dispatch", post(webhook_dispatch))
        .route("/admin/v1/webhooks/{id}", get(webhook_show))
        .route("/admin/v1/webhooks/{id}/resend", post(webhook_resend))
        .route("/admin/v1/retention/sweep", post(retention_sweep))
        .route("/metrics", get(metrics))
}

/// Proof that the caller presented the admin key.
pub struct Admin;

impl FromRequestParts<SharedState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &SharedState) -> Result<Self, ApiError> {
        if admin_key_presented(&parts.headers, state) {
            Ok(Admin)
        } else {
            Err(ApiError::InvalidToken)
        }
    }
}

/// Whether the request carries the admin key (bearer or `x-api-key`),
/// compared in constant time.
fn admin_key_presented(headers: &HeaderMap, state: &SharedState) -> bool {
    let presented =
        presented_key(headers, None, &[KeyPlace::Bearer, KeyPlace::XApiKey]).unwrap_or("");
    presented
        .as_bytes()
        .ct_eq(state.config.admin.key.as_bytes())
        .into()
}

/// `GET /metrics`: the Prometheus text exposition (`metrics`). Scrapers
/// send the admin key as a bearer token (`authorization` in a Prometheus
/// scrape config) unless `[metrics] require_admin_key = false`.
async fn metrics(
    State(state): State<SharedState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    if state.config.metrics.require_admin_key && !admin_key_presented(&headers, &state) {
        return Err(ApiError::InvalidToken);
    }
    let body = state.metrics.render(state.ledger.holds().len());
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response())
}

type Reply = Result<Json<Value>, ApiError>;

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::InvalidRequest(msg.into())
}

async fn health(_: Admin) -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

fn account_json(state: &SharedState, a: &crate::store::records::Account) -> Value {
    let cur = &state.config.currency;
    json!({
        "id": a.id,
        "name": a.name,
        "group": a.group,
        "created_at": a.created_at,
        "balance": a.balance,
        "balance_cny": cur.to_cny(a.balance),
        "held": state.ledger.held(&a.id),
    })
}

#[derive(Deserialize)]
struct NewAccount {
    name: String,
    #[serde(default)]
    trial_credit_cny: Option<String>,
    #[serde(default)]
    group: Option<String>,
}

async fn create_account(
    State(state): State<SharedState>,
    _: Admin,
    Json(req): Json<NewAccount>,
) -> Reply {
    if req.name.trim().is_empty() {
        return Err(bad("`name` must not be empty"));
    }
    let trial = match &req.trial_credit_cny {
        Some(t) => state
            .config
            .currency
            .parse_cny(t)
            .map_err(|e| bad(format!("trial_credit_cny: {e}")))?,
        None => state.config.trial_credit,
    };
    let group = req.group.unwrap_or_else(|| "default".into());
    let a = state
        .ledger
        .create_account(&req.name, &group, trial, state.clock.now_secs())
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(account_json(&state, &a)))
}

async fn list_accounts(State(state): State<SharedState>, _: Admin) -> Reply {
    let list = state.ledger.accounts();
    Ok(Json(json!({
        "object": "list",
        "data": list.iter().map(|a| account_json(&state, a)).collect::<Vec<_>>(),
    })))
}

async fn show_account(State(state): State<SharedState>, _: Admin, Path(id): Path<String>) -> Reply {
    let a = state
        .ledger
        .account(&id)
        .ok_or_else(|| ApiError::NotFound(format!("no account `{id}`")))?;
    // The ledger rows are read from the store: wait until it holds everything.
    state
        .ledger
        .checkpoint()
        .await
        .map_err(ApiError::internal)?;
    let ledger = state.store.ledger(&id).map_err(ApiError::internal)?;
    let ledger_sum: i64 = ledger.iter().map(|e| e.amount).sum();
    let mut v = account_json(&state, &a);
    v["ledger_sum"] = json!(ledger_sum);
    v["ledger"] = serde_json::to_value(&ledger).map_err(ApiError::internal)?;
    Ok(Json(v))
}

#[derive(Deserialize)]
struct TopUp {
    cny: String,
}

async fn top_up(
    State(state): State<SharedState>,
    _: Admin,
    Path(id): Path<String>,
    Json(req): Json<TopUp>,
) -> Reply {
    let amount = state
        .config
        .currency
        .parse_cny(&req.cny)
        .map_err(|e| bad(format!("cny: {e}")))?;
    if amount == 0 {
        return Err(bad("cny: the amount must be greater than 0"));
    }
    let a = state
        .ledger
        .top_up(&id, amount, "top-up", state.clock.now_secs())
        .await
        .map_err(ApiError::internal)?
        .ok_or_else(|| ApiError::NotFound(format!("no account `{id}`")))?;
    Ok(Json(account_json(&state, &a)))
}

fn token_json(state: &SharedState, t: &Token) -> Value {
    let cur = &state.config.currency;
    json!({
        "id": t.id,
        "account_id": t.account_id,
        "name": t.name,
        "key_hint": t.key_hint,
        "models": t.models,
        "ips": t.ips,
        "quota_limit": t.quota_limit,
        "quota_limit_cny": t.quota_limit.map(|q| cur.to_cny(q)),
        "used": t.used,
        "used_cny": cur.to_cny(t.used),
        "expires_at": t.expires_at,
        "status": t.status,
        "created_at": t.created_at,
    })
}

/// A token to issue, as the admin API and the web console take it.
#[derive(Deserialize)]
pub(crate) struct NewTokenReq {
    pub account: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub models: Option<Vec<String>>,
    #[serde(default)]
    pub ips: Option<Vec<String>>,
    #[serde(default)]
    pub quota_cny: Option<String>,
    #[serde(default)]
    pub expires_at: Option<i64>,
}

async fn create_token(
    State(state): State<SharedState>,
    _: Admin,
    Json(req): Json<NewTokenReq>,
) -> Reply {
    let (token, key) = issue_token(&state, req).await?;
    let mut v = token_json(&state, &token);
    v["key"] = json!(key);
    Ok(Json(v))
}

/// Checks a token request (IPs, models, quota) and issues the token; the
/// key is returned here once and never stored.
pub(crate) async fn issue_token(
    state: &SharedState,
    req: NewTokenReq,
) -> Result<(Token, String), ApiError> {
    if let Some(ips) = &req.ips {
        for ip in ips {
            let ok = ip.parse::<ipnet::IpNet>().is_ok() || ip.parse::<std::net::IpAddr>().is_ok();
            if !ok {
                return Err(bad(format!("ips: `{ip}` is not an IP address or CIDR")));
            }
        }
    }
    if let Some(models) = &req.models {
        let catalog = state.catalog();
        for m in models {
            let known = catalog.models.contains_key(m) || catalog.video_models.contains_key(m);
            if !known {
                return Err(bad(format!("models: `{m}` is not a configured model")));
            }
        }
    }
    let quota_limit = req
        .quota_cny
        .as_deref()
        .map(|q| state.config.currency.parse_cny(q))
        .transpose()
        .map_err(|e| bad(format!("quota_cny: {e}")))?;
    let new = NewToken {
        account_id: req.account.clone(),
        name: req.name.unwrap_or_else(|| "default".into()),
        models: req.models,
        ips: req.ips,
        quota_limit,
        expires_at: req.expires_at,
    };
    let (token, key) = state
        .ledger
        .create_token(new, state.clock.now_secs())
        .await
        .map_err(ApiError::internal)?
        .ok_or_else(|| ApiError::NotFound(format!("no account `{}`", req.account)))?;
    Ok((token, key))
}

#[derive(Deserialize)]
struct TokenFilter {
    account: String,
}

async fn list_tokens(
    State(state): State<SharedState>,
    _: Admin,
    Query(q): Query<TokenFilter>,
) -> Reply {
    let list = state.ledger.tokens_of(&q.account);
    Ok(Json(json!({
        "object": "list",
        "data": list.iter().map(|t| token_json(&state, t)).collect::<Vec<_>>(),
    })))
}

async fn show_token(State(state): State<SharedState>, _: Admin, Path(id): Path<String>) -> Reply {
    let t = state
        .ledger
        .token(&id)
        .ok_or_else(|| ApiError::NotFound(format!("no token `{id}`")))?;
    Ok(Json(token_json(&state, &t)))
}

async fn set_status(state: &SharedState, id: &str, status: TokenStatus) -> Reply {
    let t = state
        .ledger
        .set_token_status(id, status)
        .await
        .map_err(ApiError::internal)?
        .ok_or_else(|| ApiError::NotFound(format!("no token `{id}`")))?;
    Ok(Json(token_json(state, &t)))
}

async fn disable_token(
    State(state): State<SharedState>,
    _: Admin,
    Path(id): Path<String>,
) -> Reply {
    set_status(&state, &id, TokenStatus::Disabled).await
}

async fn delete_token(State(state): State<SharedState>, _: Admin, Path(id): Path<String>) -> Reply {
    set_status(&state, &id, TokenStatus::Deleted).await
}

#[derive(Deserialize)]
struct UsageFilter {
    #[serde(default)]
    account: Option<String>,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

async fn usage(State(state): State<SharedState>, _: Admin, Query(q): Query<UsageFilter>) -> Reply {
    let limit = q.limit.unwrap_or(100).clamp(1, 10_000);
    state
        .ledger
        .checkpoint()
        .await
        .map_err(ApiError::internal)?;
    let rows = state
        .store
        .usage(q.account.as_deref(), q.token.as_deref(), limit)
        .map_err(ApiError::internal)?;
    Ok(Json(json!({ "object": "list", "data": rows })))
}

/// Money currently held for calls and tasks in flight.
async fn holds(State(state): State<SharedState>, _: Admin) -> Json<Value> {
    let mut list = state.ledger.holds();
    list.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
    Json(json!({ "object": "list", "data": list }))
}

pub(crate) fn plugins_json(state: &SharedState) -> Value {
    let registry = state.plugins.registry();
    let refused: Vec<Value> = registry
        .refused
        .iter()
        .map(|(path, why)| json!({ "source": path.display().to_string(), "reason": why }))
        .collect();
    let data: Vec<Value> = registry
        .infos()
        .into_iter()
        .map(|(p, mapped)| {
            json!({
                "name": &*p.name,
                "version": p.version,
                "kind": format!("{:?}", p.kind).to_lowercase(),
                "source": p.source.display().to_string(),
                "sha256": p.sha256,
                // Its native code is in memory: it has served since it was
                // loaded (a component nobody calls is not kept mapped).
                "mapped": mapped,
            })
        })
        .collect();
    json!({ "object": "list", "data": data, "refused": refused })
}

/// Every channel with its health (`relay::health`).
async fn channels(State(state): State<SharedState>, _: Admin) -> Json<Value> {
    let all = state.catalog().all_channels();
    Json(json!({"data": state.health.view(&all)}))
}

/// Puts a disabled or resting channel back in service.
async fn enable_channel(
    State(state): State<SharedState>,
    _: Admin,
    Path(name): Path<String>,
) -> Reply {
    let all = state.catalog().all_channels();
    if !state.health.enable(&all, &name) {
        return Err(ApiError::NotFound(format!("no channel named `{name}`")));
    }
    let view = state.health.view(&all);
    Ok(Json(json!(view.iter().find(|c| c.name == name))))
}

async fn plugins(State(state): State<SharedState>, _: Admin) -> Json<Value> {
    Json(plugins_json(&state))
}

async fn reload_plugins(State(state): State<SharedState>, _: Admin) -> Json<Value> {
    let reloaded = state.plugins.reload_if_changed().await;
    let mut v = plugins_json(&state);
    v["reloaded"] = json!(reloaded);
    Json(v)
}

/// Reloads channels, models, prices and policy lists from the config file,
/// as `SIGHUP` does; an invalid file is refused (422 `config_invalid`, the
/// reason in the message) and the running configuration keeps serving.
async fn reload_config(State(state): State<SharedState>, _: Admin) -> Reply {
    let r = crate::reload::reload(&state).await?;
    Ok(Json(json!({
        "reloaded": true,
        "models": r.models,
        "video_models": r.video_models,
        "channels": r.channels,
        "plugins_reloaded": r.plugins_reloaded,
        "restart_needed": r.restart_needed,
    })))
}

#[derive(Deserialize)]
struct Advance {
    secs: i64,
}

/// Moves a manual clock (tests only; refused on a real clock).
async fn advance_clock(
    State(state): State<SharedState>,
    _: Admin,
    Json(req): Json<Advance>,
) -> Reply {
    let clock = state
        .manual_clock
        .as_ref()
        .ok_or_else(|| bad("the clock is real; set [testing] manual_clock = true to move it"))?;
    clock.advance_secs(req.secs);
    Ok(Json(json!({ "now": clock.now_ms() / 1000 })))
}

use crate::clock::Clock as _;

/// Runs one pass of the video poller now (tests drive it with a manual clock).
async fn video_poll(State(state): State<SharedState>, _: Admin) -> Json<Value> {
    let n = crate::video::poller::run_due(&state).await;
    Json(json!({ "processed": n }))
}

#[derive(Deserialize)]
struct EventFilter {
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

async fn webhook_list(
    State(state): State<SharedState>,
    _: Admin,
    Query(q): Query<EventFilter>,
) -> Reply {
    use crate::store::video::EventStatus;
    let filter = match q.state.as_deref() {
        None | Some("") | Some("all") => None,
        Some("pending") => Some(EventStatus::Pending),
        Some("delivered") => Some(EventStatus::Delivered),
        Some("dead") => Some(EventStatus::Dead),
        Some(other) => {
            return Err(bad(format!(
                "state: `{other}` is not pending, delivered, dead or all"
            )))
        }
    };
    let list = state
        .store
        .events(filter, q.limit.unwrap_or(100).clamp(1, 10_000))
        .map_err(ApiError::internal)?;
    Ok(Json(
        json!({ "object": "list", "data": list.iter().map(event_json).collect::<Vec<_>>() }),
    ))
}

/// An outbox event for the admin, without its secrets.
fn event_json(e: &crate::store::video::OutboxEvent) -> Value {
    json!({
        "event_id": e.event_id,
        "event": e.event,
        "task_id": e.task_id,
        "account_id": e.account_id,
        "status": e.status,
        "fail_reason": e.fail_reason,
        "url": e.target.url,
        "signed": e.target.secret.is_some(),
        "state": e.state,
        "attempts": e.attempts,
        "next_attempt_at": e.next_attempt_at,
        "last_error": e.last_error,
        "created_at": e.created_at,
        "delivered_at": e.delivered_at,
        "dead_at": e.dead_at,
    })
}

/// Removes every record past its retention now (the sweeper does it every
/// `[retention] sweep_every_secs`).
async fn retention_sweep(State(state): State<SharedState>, _: Admin) -> Reply {
    let swept = crate::retention::sweep(&state)
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(json!({
        "quotes": swept.quotes,
        "idempotency_records": swept.idempotency,
        "webhook_events": swept.events,
    })))
}

async fn webhook_show(State(state): State<SharedState>, _: Admin, Path(id): Path<String>) -> Reply {
    let e = state
        .store
        .event(&id)
        .map_err(ApiError::internal)?
        .ok_or_else(|| ApiError::NotFound(format!("no webhook event `{id}`")))?;
    Ok(Json(event_json(&e)))
}

/// Delivers every due event now and waits for the outcomes.
async fn webhook_dispatch(State(state): State<SharedState>, _: Admin) -> Json<Value> {
    let n = crate::webhooks::dispatch_due(&state, true).await;
    Json(json!({ "delivered_or_attempted": n }))
}

async fn webhook_resend(
    State(state): State<SharedState>,
    _: Admin,
    Path(id): Path<String>,
) -> Reply {
    let e = crate::webhooks::resend(&state, &id)
        .await
        .map_err(ApiError::internal)?
        .ok_or_else(|| ApiError::NotFound(format!("no webhook event `{id}`")))?;
    Ok(Json(event_json(&e)))
}
