//! The operator's pages, behind a login with the admin key: accounts with a
//! top-up form, channels and their health, loaded adapters and policies
//! with their versions. They show what the admin API returns (the same
//! ledger calls, `Health::view`, `api::admin::plugins_json`).

use super::customer::client;
use super::pages::{cny, csrf_field, layout, respond, when, Nav};
use super::{Operator, SharedConsole, Visitor};
use crate::error::ConsoleError;
use crate::relay::health::State as Health;
use crate::store::users::SessionOwner;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use maud::html;
use serde::Deserialize;
use serde_json::Value;
use std::net::SocketAddr;
use subtle::ConstantTimeEq;

type Page = Result<Response, ConsoleError>;

fn nav(o: &Operator) -> Nav<'_> {
    Nav::Operator { csrf: &o.csrf }
}

pub async fn login_page(v: Visitor) -> Response {
    let markup = layout(
        "Operator login",
        Nav::Visitor,
        html! {
            form.box method="post" action="/operator/login" {
                (csrf_field(&v.csrf))
                label for="key" { "Admin key" }
                input #key type="password" name="key" required autocomplete="off";
                button type="submit" { "Log in" }
            }
        },
    );
    let mut resp = respond(markup);
    if let Some(c) = v.set_cookie.as_ref().and_then(|c| c.parse().ok()) {
        resp.headers_mut().insert(header::SET_COOKIE, c);
    }
    resp
}

#[derive(Deserialize)]
pub struct KeyForm {
    key: String,
}

pub async fn login(
    State(console): State<SharedConsole>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(form): Form<KeyForm>,
) -> Page {
    console.count_login(&[
        ("operator".to_string(), console.cfg.login_attempts_per_email),
        (
            format!("ip:{}", client(&console, peer, &headers)),
            console.cfg.login_attempts_per_ip,
        ),
    ])?;
    let expected = console.app.config.admin.key.as_bytes();
    if !bool::from(form.key.as_bytes().ct_eq(expected)) {
        return Err(ConsoleError::BadAdminKey);
    }
    let cookie = console.open_session(SessionOwner::Operator).await?;
    Ok(([(header::SET_COOKIE, cookie)], Redirect::to("/operator")).into_response())
}

pub async fn accounts(State(console): State<SharedConsole>, o: Operator) -> Page {
    let list = console.app.ledger.accounts();
    let body = html! {
        table #accounts {
            thead { tr {
                th { "Account" } th { "Name" } th { "Group" } th { "Created (UTC)" } th.num { "Balance (CNY)" }
                th.num { "Credited (CNY)" } th.num { "Tokens" } th { "Top up (CNY)" }
            } }
            tbody {
                @for a in &list {
                    tr data-account=(a.id) {
                        td { code { (a.id) } }
                        td { (a.name) }
                        td { (a.group) }
                        td { (when(a.created_at)) }
                        td.num { (cny(&console, a.balance)) }
                        td.num { (cny(&console, a.credited)) }
                        td.num { (console.app.ledger.tokens_of(&a.id).len()) }
                        td {
                            form.inline method="post" action=(format!("/operator/accounts/{}/topup", a.id)) {
                                (csrf_field(&o.csrf))
                                input type="text" name="cny" size="8" inputmode="decimal" required placeholder="10.00";
                                " " button type="submit" { "Top up" }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(respond(layout("Accounts", nav(&o), body)))
}

#[derive(Deserialize)]
pub struct TopUpForm {
    cny: String,
}

pub async fn top_up(
    State(console): State<SharedConsole>,
    _o: Operator,
    Path(id): Path<String>,
    Form(form): Form<TopUpForm>,
) -> Page {
    let app = &console.app;
    let amount = app
        .config
        .currency
        .parse_cny(&form.cny)
        .map_err(|e| ConsoleError::BadForm(format!("amount: {e}")))?;
    if amount == 0 {
        return Err(ConsoleError::BadForm(
            "amount: must be greater than 0".into(),
        ));
    }
    app.ledger
        .top_up(&id, amount, "top-up (console)", console.now())
        .await
        .map_err(ConsoleError::internal)?
        .ok_or_else(|| ConsoleError::NotFound(format!("no account `{id}`")))?;
    Ok(Redirect::to("/operator").into_response())
}

pub async fn channels(State(console): State<SharedConsole>, o: Operator) -> Page {
    let all = console.app.catalog().all_channels();
    let view = console.app.health.view(&all);
    let body = html! {
        table #channels {
            thead { tr {
                th { "Channel" } th { "Adapter" } th { "Models" } th.num { "Priority" } th.num { "Weight" }
                th { "Health" } th.num { "Error rate" } th.num { "Mean / p95 latency" } th.num { "Attempts" } th.num { "Failures" }
            } }
            tbody {
                @for c in &view {
                    @let (state, detail) = match &c.state {
                        Health::Healthy => ("healthy", String::new()),
                        Health::Resting { until } => ("resting", format!("until {} UTC", when(*until))),
                        Health::Probing => ("probing", String::new()),
                        Health::Disabled { reason } => ("disabled", reason.clone()),
                    };
                    tr {
                        td { (c.name) }
                        td { (c.adapter) }
                        td { (c.models.join(", ")) }
                        td.num { (c.priority) }
                        td.num { (c.weight) }
                        td class=(format!("status-{state}")) { (state) " " span.muted { (detail) } }
                        td.num { (format!("{:.1} %", c.recent_error_rate * 100.0)) }
                        td.num {
                            (c.latency_ms_mean.map(|m| format!("{m} ms")).unwrap_or_else(|| "-".into()))
                            " / "
                            (c.latency_ms_p95.map(|m| format!("{m} ms")).unwrap_or_else(|| "-".into()))
                        }
                        td.num { (c.attempts) }
                        td.num { (c.failures) }
                    }
                }
            }
        }
    };
    Ok(respond(layout("Channels", nav(&o), body)))
}

pub async fn plugins(State(console): State<SharedConsole>, o: Operator) -> Page {
    let v = crate::api::admin::plugins_json(&console.app);
    let empty = Vec::new();
    let list = v["data"].as_array().unwrap_or(&empty);
    let refused = v["refused"].as_array().unwrap_or(&empty);
    let s = |x: &Value| x.as_str().unwrap_or("").to_string();
    let body = html! {
        table #plugins {
            thead { tr { th { "Name" } th { "Kind" } th { "Version" } th { "Source" } th { "SHA-256" } } }
            tbody {
                @for p in list {
                    tr {
                        td { (s(&p["name"])) }
                        td { (s(&p["kind"])) }
                        td { (s(&p["version"])) }
                        td.muted { (s(&p["source"])) }
                        td.muted { code { (s(&p["sha256"]).get(..16).unwrap_or("")) "…" } }
                    }
                }
            }
        }
        @if !refused.is_empty() {
            h2 { "Refused" }
            table {
                thead { tr { th { "Source" } th { "Reason" } } }
                tbody { @for r in refused { tr { td { (s(&r["source"])) } td { (s(&r["reason"])) } } } }
            }
        }
    };
    Ok(respond(layout("Plugins", nav(&o), body)))
}
