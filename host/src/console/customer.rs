//! The customer's pages: sign-up, e-mail verification, login and logout,
//! then the account (balance, trial credit, usage chart), tokens, per-call
//! usage, video tasks and webhook deliveries. Every page shows only the
//! logged-in user's own account; another account's token or event answers
//! "not found", exactly as one that does not exist.

use super::pages::{cny, csrf_field, layout, respond, when, Bar, Nav};
use super::{digest, random_token, Customer, SharedConsole, Visitor, SESSION_COOKIE};
use crate::api::admin::{issue_token, NewTokenReq};
use crate::error::{ApiError, ConsoleError};
use crate::store::records::{LedgerKind, TokenStatus, UsageRecord};
use crate::store::users::{Redeemed, SessionOwner, User, Verification};
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use maud::{html, Markup};
use serde::Deserialize;
use std::net::SocketAddr;

type Page = Result<Response, ConsoleError>;

/// A page that may set the visitor's CSRF cookie.
fn visitor_page(v: &Visitor, markup: Markup) -> Response {
    let mut resp = respond(markup);
    if let Some(c) = &v.set_cookie {
        if let Ok(value) = c.parse() {
            resp.headers_mut().insert(header::SET_COOKIE, value);
        }
    }
    resp
}

fn nav(c: &Customer) -> Nav<'_> {
    Nav::Customer {
        email: &c.email,
        csrf: &c.csrf,
    }
}

pub async fn home(State(console): State<SharedConsole>, headers: HeaderMap) -> Page {
    let to = match console.session(&headers)? {
        Some((_, s)) if s.owner == SessionOwner::Operator => "/operator",
        Some(_) => "/account",
        None => "/login",
    };
    Ok(Redirect::to(to).into_response())
}

// ---- sign-up and verification ----------------------------------------------

fn signup_form(csrf: &str, email: &str, problem: Option<&str>) -> Markup {
    html! {
        @if let Some(p) = problem { p.error role="alert" { (p) } }
        form.box method="post" action="/signup" {
            (csrf_field(csrf))
            label for="email" { "E-mail" }
            input #email type="email" name="email" value=(email) required autocomplete="email";
            label for="password" { "Password" }
            input #password type="password" name="password" required minlength="10" autocomplete="new-password";
            p.hint { "At least 10 characters. We send a link to this address; the account works once you open it." }
            button type="submit" { "Sign up" }
        }
        p { "Already signed up? " a href="/login" { "Log in" } }
    }
}

pub async fn signup_page(v: Visitor) -> Response {
    visitor_page(
        &v,
        layout("Sign up", Nav::Visitor, signup_form(&v.csrf, "", None)),
    )
}

#[derive(Deserialize)]
pub struct SignupForm {
    email: String,
    password: String,
}

/// A lower-cased address lettre accepts, or why not.
fn checked_email(text: &str) -> Result<String, String> {
    let email = text.trim().to_lowercase();
    match email.parse::<lettre::Address>() {
        Ok(_) if email.len() <= 254 => Ok(email),
        _ => Err(format!("`{}` is not an e-mail address", text.trim())),
    }
}

pub async fn signup(
    State(console): State<SharedConsole>,
    v: Visitor,
    Form(form): Form<SignupForm>,
) -> Page {
    let refuse = |problem: &str, email: &str| -> Page {
        let mut resp = visitor_page(
            &v,
            layout(
                "Sign up",
                Nav::Visitor,
                signup_form(&v.csrf, email, Some(problem)),
            ),
        );
        *resp.status_mut() = ConsoleError::BadForm(String::new()).status();
        Ok(resp)
    };
    let email = match checked_email(&form.email) {
        Ok(e) => e,
        Err(why) => return refuse(&why, &form.email),
    };
    if form.password.chars().count() < 10 {
        return refuse("the password must have at least 10 characters", &email);
    }
    if form.password.len() > 1024 {
        return refuse("the password is too long", &email);
    }
    let Some(mailer) = &console.mailer else {
        return Err(ConsoleError::MailFailed(
            "no SMTP server is configured ([console.smtp])".into(),
        ));
    };
    let password_hash = hash_password(form.password).await?;
    let now = console.now();
    let fresh = console
        .app
        .store
        .put_unverified_user(User {
            email: email.clone(),
            password_hash,
            verified: false,
            account_id: None,
            created_at: now,
        })
        .await
        .map_err(ConsoleError::internal)?;
    if fresh {
        let token = random_token();
        console
            .app
            .store
            .put_verification(
                digest(&token),
                Verification {
                    email: email.clone(),
                    expires_at: now + console.cfg.verify_link_ttl_secs,
                },
            )
            .await
            .map_err(ConsoleError::internal)?;
        let link = format!("{}/verify?token={token}", console.public_url);
        let hours = console.cfg.verify_link_ttl_secs as f64 / 3600.0;
        let text = format!(
            "Welcome to the gateway.\n\nOpen this link to activate your account:\n\n{link}\n\n\
             The link works once and expires in {hours:.0} hours. If you did not sign up, ignore this message.\n"
        );
        mailer
            .send(&email, "Activate your gateway account", text)
            .await
            .map_err(ConsoleError::MailFailed)?;
    }
    // The same answer whether or not the address was already verified, so
    // the page does not tell who has an account.
    Ok(visitor_page(
        &v,
        layout(
            "Check your e-mail",
            Nav::Visitor,
            html! {
                p.notice { "We sent a link to " strong { (email) } ". Open it to activate your account, then log in." }
                p { a href="/login" { "Log in" } }
            },
        ),
    ))
}

async fn hash_password(password: String) -> Result<String, ConsoleError> {
    tokio::task::spawn_blocking(move || {
        use argon2::password_hash::{PasswordHasher as _, SaltString};
        use rand::RngCore as _;
        let mut bytes = [0u8; 16];
        rand::rng().fill_bytes(&mut bytes);
        let salt = SaltString::encode_b64(&bytes).map_err(ConsoleError::internal)?;
        argon2::Argon2::default()
            .hash_password(password.as_bytes(), &salt)
            .map(|h| h.to_string())
            .map_err(ConsoleError::internal)
    })
    .await
    .map_err(ConsoleError::internal)?
}

async fn password_matches(password: String, hash: String) -> bool {
    tokio::task::spawn_blocking(move || {
        use argon2::password_hash::{PasswordHash, PasswordVerifier as _};
        PasswordHash::new(&hash).is_ok_and(|h| {
            argon2::Argon2::default()
                .verify_password(password.as_bytes(), &h)
                .is_ok()
        })
    })
    .await
    .unwrap_or(false)
}

#[derive(Deserialize)]
pub struct VerifyQuery {
    #[serde(default)]
    token: String,
}

pub async fn verify(State(console): State<SharedConsole>, Query(q): Query<VerifyQuery>) -> Page {
    let now = console.now();
    let store = &console.app.store;
    let email = match store
        .redeem_verification(digest(&q.token), now)
        .await
        .map_err(ConsoleError::internal)?
    {
        Redeemed::Email(e) => e,
        Redeemed::Expired => return Err(ConsoleError::LinkExpired),
        Redeemed::Unknown => return Err(ConsoleError::LinkUnknown),
    };
    let user = store
        .user(&email)
        .map_err(ConsoleError::internal)?
        .ok_or(ConsoleError::LinkUnknown)?;
    if !user.verified {
        let app = &console.app;
        let account = app
            .ledger
            .create_account(&email, "default", app.config.trial_credit, now)
            .await
            .map_err(ConsoleError::internal)?;
        store
            .verify_user(&email, &account.id)
            .await
            .map_err(ConsoleError::internal)?;
    }
    Ok(respond(layout(
        "Account activated",
        Nav::Visitor,
        html! {
            p.notice { "Your e-mail " strong { (email) } " is verified and your account is active, with "
                (cny(&console, console.app.config.trial_credit)) " CNY of trial credit." }
            p { a href="/login" { "Log in" } }
        },
    )))
}

// ---- login and logout -------------------------------------------------------

fn login_form(csrf: &str, email: &str) -> Markup {
    html! {
        form.box method="post" action="/login" {
            (csrf_field(csrf))
            label for="email" { "E-mail" }
            input #email type="email" name="email" value=(email) required autocomplete="email";
            label for="password" { "Password" }
            input #password type="password" name="password" required autocomplete="current-password";
            button type="submit" { "Log in" }
        }
        p { "No account yet? " a href="/signup" { "Sign up" } }
    }
}

pub async fn login_page(v: Visitor) -> Response {
    visitor_page(&v, layout("Log in", Nav::Visitor, login_form(&v.csrf, "")))
}

#[derive(Deserialize)]
pub struct LoginForm {
    email: String,
    password: String,
}

/// The address a client's attempts count against.
pub(super) fn client(console: &SharedConsole, peer: SocketAddr, headers: &HeaderMap) -> String {
    let ip = crate::limits::client_ip(peer.ip(), headers, &console.app.config.trusted_proxies);
    crate::limits::counted_as(ip, console.app.config.limits.ipv6_prefix_len).to_string()
}

pub async fn login(
    State(console): State<SharedConsole>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Page {
    let email = form.email.trim().to_lowercase();
    console.count_login(&[
        (
            format!("email:{email}"),
            console.cfg.login_attempts_per_email,
        ),
        (
            format!("ip:{}", client(&console, peer, &headers)),
            console.cfg.login_attempts_per_ip,
        ),
    ])?;
    let user = console
        .app
        .store
        .user(&email)
        .map_err(ConsoleError::internal)?;
    let Some(user) = user.filter(|u| u.verified && u.account_id.is_some()) else {
        return Err(ConsoleError::BadLogin);
    };
    if !password_matches(form.password, user.password_hash).await {
        return Err(ConsoleError::BadLogin);
    }
    let cookie = console
        .open_session(SessionOwner::Customer { email })
        .await?;
    Ok(([(header::SET_COOKIE, cookie)], Redirect::to("/account")).into_response())
}

pub async fn logout(State(console): State<SharedConsole>, headers: HeaderMap) -> Page {
    if let Some((hash, _)) = console.session(&headers)? {
        console
            .app
            .store
            .delete_session(hash)
            .await
            .map_err(ConsoleError::internal)?;
    }
    let gone = console.cookie(SESSION_COOKIE, "", Some(0));
    Ok(([(header::SET_COOKIE, gone)], Redirect::to("/login")).into_response())
}

// ---- account and usage ------------------------------------------------------

/// Usage rows in `[from, to]`, bucketed `step` seconds apart.
fn buckets(
    rows: &[UsageRecord],
    from: i64,
    step: i64,
    n: usize,
    label: fn(i64) -> String,
) -> Vec<Bar> {
    let mut bars: Vec<Bar> = (0..n)
        .map(|i| Bar {
            label: label(from + step * i as i64),
            calls: 0,
            cost: 0,
        })
        .collect();
    for r in rows {
        let i = (r.at - from).div_euclid(step);
        if let Some(b) = usize::try_from(i).ok().and_then(|i| bars.get_mut(i)) {
            b.calls += 1;
            b.cost += r.cost;
        }
    }
    bars
}

/// The usage chart for `range` (`24h`: hourly, `30d`: daily).
fn usage_chart(
    console: &SharedConsole,
    account: &str,
    range: &str,
) -> Result<Markup, ConsoleError> {
    let now = console.now();
    let (step, n, label, caption): (i64, usize, fn(i64) -> String, &str) = match range {
        "30d" => (
            86_400,
            30,
            |t| when(t)[5..10].to_string(),
            "Spend per day, last 30 days (UTC)",
        ),
        _ => (
            3600,
            24,
            |t| when(t)[11..16].to_string(),
            "Spend per hour, last 24 hours (UTC)",
        ),
    };
    let end = now - now.rem_euclid(step) + step;
    let from = end - step * n as i64;
    let rows = console
        .app
        .store
        .usage_between(account, from, now)
        .map_err(ConsoleError::internal)?;
    Ok(super::pages::chart(
        console,
        &buckets(&rows, from, step, n, label),
        caption,
    ))
}

async fn settled(console: &SharedConsole) -> Result<(), ConsoleError> {
    // Usage and ledger rows reach the store at checkpoints: wait for one.
    console
        .app
        .ledger
        .checkpoint()
        .await
        .map_err(ConsoleError::internal)
}

pub async fn account(State(console): State<SharedConsole>, c: Customer) -> Page {
    let app = &console.app;
    let a = app
        .ledger
        .account(&c.account_id)
        .ok_or_else(|| ConsoleError::internal(format!("account {} is missing", c.account_id)))?;
    settled(&console).await?;
    let ledger = app
        .store
        .ledger(&c.account_id)
        .map_err(ConsoleError::internal)?;
    let trial: i64 = ledger
        .iter()
        .filter(|e| e.kind == LedgerKind::Trial)
        .map(|e| e.amount)
        .sum();
    let topped: i64 = ledger
        .iter()
        .filter(|e| e.kind == LedgerKind::TopUp)
        .map(|e| e.amount)
        .sum();
    let held = app.ledger.held(&c.account_id);
    let chart = usage_chart(&console, &c.account_id, "24h")?;
    let body = html! {
        div.cards {
            div.card #balance { div.label { "Balance" } div.value { (cny(&console, a.balance)) " CNY" } }
            div.card #trial { div.label { "Trial credit" } div.value { (cny(&console, trial)) " CNY" } }
            div.card { div.label { "Topped up" } div.value { (cny(&console, topped)) " CNY" } }
            div.card { div.label { "Held by calls in flight" } div.value { (cny(&console, held)) " CNY" } }
        }
        p.muted { "Account " code { (a.id) } " · since " (when(a.created_at)) " UTC" }
        h2 { "Usage" }
        (chart)
        p { a href="/usage" { "Every call" } " · " a href="/tokens" { "Tokens" } }
    };
    Ok(respond(layout("Account", nav(&c), body)))
}

#[derive(Deserialize)]
pub struct UsageQuery {
    #[serde(default)]
    range: Option<String>,
}

pub async fn usage(
    State(console): State<SharedConsole>,
    c: Customer,
    Query(q): Query<UsageQuery>,
) -> Page {
    settled(&console).await?;
    let range = q.range.as_deref().unwrap_or("24h");
    let chart = usage_chart(&console, &c.account_id, range)?;
    let rows = console
        .app
        .store
        .usage(Some(&c.account_id), None, 200)
        .map_err(ConsoleError::internal)?;
    let names: std::collections::HashMap<String, String> = console
        .app
        .ledger
        .tokens_of(&c.account_id)
        .into_iter()
        .map(|t| (t.id, t.name))
        .collect();
    let body = html! {
        p { a href="/usage?range=24h" { "Last 24 hours" } " · " a href="/usage?range=30d" { "Last 30 days" } }
        (chart)
        h2 { "Calls (newest first, up to 200)" }
        @if rows.is_empty() {
            p.muted { "No calls yet." }
        } @else {
            table #usage-rows {
                thead { tr {
                    th { "Time (UTC)" } th { "Model" } th { "Token" } th.num { "Input" } th.num { "Cached" }
                    th.num { "Output" } th.num { "Reasoning" } th.num { "Cost (CNY)" } th.num { "Latency" }
                    th { "Status" } th { "Request" }
                } }
                tbody {
                    @for r in &rows {
                        tr {
                            td { (when(r.at)) }
                            td { (r.model) @if r.stream { " (stream)" } }
                            td { (r.token_id.as_ref().and_then(|t| names.get(t)).map(String::as_str).unwrap_or("-")) }
                            td.num { (r.input_tokens) }
                            td.num { (r.cached_tokens) }
                            td.num { (r.output_tokens) }
                            td.num { (r.reasoning_tokens) }
                            td.num { (cny(&console, r.cost)) }
                            td.num { (r.latency_ms) " ms" }
                            td { (r.status) @if let Some(e) = &r.error { " " span.muted { (e) } } }
                            td.muted { code { (r.request_id) } }
                        }
                    }
                }
            }
        }
    };
    Ok(respond(layout("Usage", nav(&c), body)))
}

// ---- tokens -----------------------------------------------------------------

fn token_form(console: &SharedConsole, csrf: &str) -> Markup {
    let catalog = console.app.catalog();
    let mut models: Vec<&str> = catalog.listed.iter().map(|l| l.id.as_str()).collect();
    models.sort_unstable();
    html! {
        form.box #new-token method="post" action="/tokens" {
            (csrf_field(csrf))
            label for="name" { "Name" }
            input #name type="text" name="name" required maxlength="100";
            label { "Models" }
            p.hint { "Tick none to allow every model." }
            div.models {
                @for m in &models {
                    label { input type="checkbox" name="models" value=(m); " " (m) }
                }
            }
            label for="ips" { "IP whitelist" }
            input #ips type="text" name="ips" placeholder="203.0.113.7, 10.0.0.0/8";
            p.hint { "Addresses or CIDRs, separated by commas or spaces; empty allows every address." }
            label for="quota_cny" { "Quota cap (CNY)" }
            input #quota_cny type="text" name="quota_cny" inputmode="decimal" placeholder="no cap";
            label for="expires_at" { "Expires (UTC)" }
            input #expires_at type="datetime-local" name="expires_at";
            p.hint { "Empty: never expires." }
            button type="submit" { "Create token" }
        }
    }
}

pub async fn tokens(State(console): State<SharedConsole>, c: Customer) -> Page {
    let now = console.now();
    let mut list = console.app.ledger.tokens_of(&c.account_id);
    list.retain(|t| t.status != TokenStatus::Deleted);
    list.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
    let body = html! {
        @if list.is_empty() {
            p.muted { "No tokens yet." }
        } @else {
            table #tokens {
                thead { tr {
                    th { "Name" } th { "Key" } th { "Status" } th { "Models" } th { "IPs" }
                    th.num { "Used (CNY)" } th.num { "Cap (CNY)" } th { "Expires (UTC)" } th { "Created (UTC)" } th {}
                } }
                tbody {
                    @for t in &list {
                        @let expired = t.expires_at.is_some_and(|e| e <= now);
                        @let status = match t.status { TokenStatus::Active => "active", TokenStatus::Disabled => "disabled", TokenStatus::Deleted => "deleted" };
                        tr data-token=(t.id) {
                            td { (t.name) }
                            td { code { (t.key_hint) } }
                            td class=(format!("status-{status}")) { (status) @if expired { " (expired)" } }
                            td { (t.models.as_ref().map(|m| m.join(", ")).unwrap_or_else(|| "all".into())) }
                            td { (t.ips.as_ref().map(|m| m.join(", ")).unwrap_or_else(|| "any".into())) }
                            td.num { (cny(&console, t.used)) }
                            td.num { (t.quota_limit.map(|q| cny(&console, q)).unwrap_or_else(|| "none".into())) }
                            td { (t.expires_at.map(when).unwrap_or_else(|| "never".into())) }
                            td { (when(t.created_at)) }
                            td {
                                @if t.status == TokenStatus::Active {
                                    form.inline method="post" action=(format!("/tokens/{}/disable", t.id)) {
                                        (csrf_field(&c.csrf)) button.secondary type="submit" { "Disable" }
                                    }
                                    " "
                                }
                                form.inline method="post" action=(format!("/tokens/{}/delete", t.id)) {
                                    (csrf_field(&c.csrf)) button.danger type="submit" { "Delete" }
                                }
                            }
                        }
                    }
                }
            }
        }
        h2 { "New token" }
        (token_form(&console, &c.csrf))
    };
    Ok(respond(layout("Tokens", nav(&c), body)))
}

/// The token form as sent: `models` may repeat.
fn token_request(
    console: &SharedConsole,
    account: &str,
    form: &[(String, String)],
) -> Result<NewTokenReq, String> {
    let field = |name: &str| {
        form.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let name = field("name").ok_or("the token needs a name")?;
    let models: Vec<String> = form
        .iter()
        .filter(|(k, v)| k == "models" && !v.trim().is_empty())
        .map(|(_, v)| v.trim().to_string())
        .collect();
    let ips: Vec<String> = field("ips")
        .map(|s| {
            s.split(|c: char| c == ',' || c.is_whitespace())
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let expires_at = match field("expires_at") {
        None => None,
        Some(text) => {
            let format = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]");
            let t = time::PrimitiveDateTime::parse(&text[..text.len().min(16)], &format)
                .map_err(|_| format!("expiry: `{text}` is not a date and time"))?
                .assume_utc()
                .unix_timestamp();
            if t <= console.now() {
                return Err("expiry: the time must be in the future".into());
            }
            Some(t)
        }
    };
    Ok(NewTokenReq {
        account: account.to_string(),
        name: Some(name),
        models: (!models.is_empty()).then_some(models),
        ips: (!ips.is_empty()).then_some(ips),
        quota_cny: field("quota_cny"),
        expires_at,
    })
}

pub async fn create_token(
    State(console): State<SharedConsole>,
    c: Customer,
    Form(form): Form<Vec<(String, String)>>,
) -> Page {
    let req = token_request(&console, &c.account_id, &form).map_err(ConsoleError::BadForm)?;
    let (token, key) = issue_token(&console.app, req).await.map_err(|e| match e {
        ApiError::InvalidRequest(m) => ConsoleError::BadForm(m),
        other => ConsoleError::internal(other),
    })?;
    let body = html! {
        p.notice { "Token " strong { (token.name) } " created. Copy its key now: it is shown only this once." }
        p.key #new-key { (key) }
        p { "Use it as " code { "Authorization: Bearer <key>" } " with the base URL of the API." }
        p { a href="/tokens" { "Back to tokens" } }
    };
    Ok(respond(layout("Token created", nav(&c), body)))
}

/// A token of the customer's own account, or not found.
fn own_token(console: &SharedConsole, c: &Customer, id: &str) -> Result<(), ConsoleError> {
    match console.app.ledger.token(id) {
        Some(t) if t.account_id == c.account_id && t.status != TokenStatus::Deleted => Ok(()),
        _ => Err(ConsoleError::NotFound(format!("no token `{id}`"))),
    }
}

async fn set_status(console: &SharedConsole, c: &Customer, id: &str, s: TokenStatus) -> Page {
    own_token(console, c, id)?;
    console
        .app
        .ledger
        .set_token_status(id, s)
        .await
        .map_err(ConsoleError::internal)?;
    Ok(Redirect::to("/tokens").into_response())
}

pub async fn disable_token(
    State(console): State<SharedConsole>,
    c: Customer,
    Path(id): Path<String>,
) -> Page {
    set_status(&console, &c, &id, TokenStatus::Disabled).await
}

pub async fn delete_token(
    State(console): State<SharedConsole>,
    c: Customer,
    Path(id): Path<String>,
) -> Page {
    set_status(&console, &c, &id, TokenStatus::Deleted).await
}

// ---- video tasks and webhooks -----------------------------------------------

pub async fn videos(State(console): State<SharedConsole>, c: Customer) -> Page {
    let mut tasks = console
        .app
        .store
        .tasks_of_since(&c.account_id, i64::MIN)
        .map_err(ConsoleError::internal)?;
    tasks.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
    tasks.truncate(200);
    let body = html! {
        @if tasks.is_empty() {
            p.muted { "No video tasks yet." }
        } @else {
            table #videos {
                thead { tr {
                    th { "Task" } th { "Created (UTC)" } th { "Model" } th { "Status" } th.num { "Seconds" }
                    th.num { "Held (CNY)" } th.num { "Charged (CNY)" } th.num { "Refunded (CNY)" } th { "Error" }
                } }
                tbody {
                    @for t in &tasks {
                        tr {
                            td { code { (t.id) } }
                            td { (when(t.created_at)) }
                            td { (t.model) }
                            td class=(format!("status-{}", t.status.as_str())) { (t.status.as_str()) " " span.muted { (t.progress) "%" } }
                            td.num { (t.actual_seconds.unwrap_or(t.seconds)) }
                            td.num { (cny(&console, t.reserved)) }
                            td.num { (cny(&console, t.settled)) }
                            td.num { (cny(&console, t.refunded)) }
                            td { @if let Some(e) = &t.error { (e.code) ": " (e.message) } }
                        }
                    }
                }
            }
        }
    };
    Ok(respond(layout("Video tasks", nav(&c), body)))
}

pub async fn webhooks(State(console): State<SharedConsole>, c: Customer) -> Page {
    let mut events = console
        .app
        .store
        .events(None, usize::MAX)
        .map_err(ConsoleError::internal)?;
    events.retain(|e| e.account_id == c.account_id);
    events.truncate(200);
    let body = html! {
        @if events.is_empty() {
            p.muted { "No webhook deliveries yet. They are sent when a video task with a callback URL ends." }
        } @else {
            table #webhooks {
                thead { tr {
                    th { "Event" } th { "Task" } th { "URL" } th { "State" } th.num { "Attempts" }
                    th { "Last error" } th { "Next attempt / delivered (UTC)" } th {}
                } }
                tbody {
                    @for e in &events {
                        @let state = serde_json::to_value(e.state).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
                        tr data-event=(e.event_id) {
                            td { (e.event) br; code.muted { (e.event_id) } }
                            td { code { (e.task_id) } }
                            td { (e.target.url) }
                            td class=(format!("status-{state}")) { (state) }
                            td.num { (e.attempts) }
                            td { (e.last_error.as_deref().unwrap_or("")) }
                            td { (e.delivered_at.map(when).unwrap_or_else(|| when(e.next_attempt_at))) }
                            td {
                                form.inline method="post" action=(format!("/webhooks/{}/resend", e.event_id)) {
                                    (csrf_field(&c.csrf)) button.secondary type="submit" { "Re-send" }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(respond(layout("Webhook deliveries", nav(&c), body)))
}

pub async fn resend_webhook(
    State(console): State<SharedConsole>,
    c: Customer,
    Path(id): Path<String>,
) -> Page {
    let missing = || ConsoleError::NotFound(format!("no webhook event `{id}`"));
    let e = console
        .app
        .store
        .event(&id)
        .map_err(ConsoleError::internal)?
        .ok_or_else(missing)?;
    if e.account_id != c.account_id {
        return Err(missing());
    }
    crate::webhooks::resend(&console.app, &id)
        .await
        .map_err(ConsoleError::internal)?
        .ok_or_else(missing)?;
    Ok(Redirect::to("/webhooks").into_response())
}
