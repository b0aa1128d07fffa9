//! What every console page shares: the layout and navigation, the
//! stylesheet, error pages, number and time formatting, and the usage chart
//! (an SVG drawn here, so the browser needs no script).

use super::SharedConsole;
use crate::error::ConsoleError;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::{html, Markup, DOCTYPE};

/// Who is looking, for the navigation.
pub enum Nav<'a> {
    Visitor,
    Customer { email: &'a str, csrf: &'a str },
    Operator { csrf: &'a str },
}

pub fn layout(title: &str, nav: Nav<'_>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Gateway console" }
                link rel="stylesheet" href="/style.css";
            }
            body {
                header {
                    a.brand href="/" { "Gateway console" }
                    nav {
                        @match &nav {
                            Nav::Visitor => {
                                a href="/login" { "Log in" }
                                a href="/signup" { "Sign up" }
                                a href="/operator/login" { "Operator" }
                            }
                            Nav::Customer { email, csrf } => {
                                a href="/account" { "Account" }
                                a href="/tokens" { "Tokens" }
                                a href="/usage" { "Usage" }
                                a href="/videos" { "Videos" }
                                a href="/webhooks" { "Webhooks" }
                                span.who { (email) }
                                (logout(csrf))
                            }
                            Nav::Operator { csrf } => {
                                a href="/operator" { "Accounts" }
                                a href="/operator/channels" { "Channels" }
                                a href="/operator/plugins" { "Plugins" }
                                span.who { "operator" }
                                (logout(csrf))
                            }
                        }
                    }
                }
                main {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

fn logout(csrf: &str) -> Markup {
    html! {
        form.inline method="post" action="/logout" {
            input type="hidden" name="csrf" value=(csrf);
            button type="submit" { "Log out" }
        }
    }
}

/// The hidden CSRF field every form carries.
pub fn csrf_field(csrf: &str) -> Markup {
    html! { input type="hidden" name="csrf" value=(csrf); }
}

/// A page as a response (200).
pub fn respond(markup: Markup) -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        markup.into_string(),
    )
        .into_response()
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        let status = self.status();
        if let ConsoleError::Internal(detail) = &self {
            tracing::error!("console: {detail}");
        }
        if matches!(self, ConsoleError::LoginRequired) {
            return (status, [(header::LOCATION, "/login")]).into_response();
        }
        let message = match &self {
            ConsoleError::Internal(_) => "internal error; see the gateway's log".to_string(),
            other => other.to_string(),
        };
        let title = match status {
            StatusCode::TOO_MANY_REQUESTS => "Too many attempts",
            StatusCode::FORBIDDEN => "Not allowed",
            StatusCode::NOT_FOUND => "Not found",
            StatusCode::GONE => "Link expired",
            StatusCode::UNAUTHORIZED => "Login failed",
            StatusCode::BAD_GATEWAY => "E-mail not sent",
            StatusCode::BAD_REQUEST => "Please check the form",
            _ => "Error",
        };
        let body = html! {
            p.error role="alert" { (message) }
            p {
                @if matches!(self, ConsoleError::OperatorRequired) {
                    a href="/operator/login" { "Operator login" }
                } @else {
                    a href="/" { "Console home" }
                }
            }
        };
        let mut resp = respond(layout(title, Nav::Visitor, body));
        *resp.status_mut() = status;
        resp
    }
}

const STYLE: &str = r#"
:root { --fg:#1b1f24; --muted:#5b6570; --line:#d8dee4; --accent:#0b6bcb; --bg:#f6f8fa; --bad:#b42318; --good:#067647; }
* { box-sizing: border-box; }
body { margin:0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color:var(--fg); background:var(--bg); }
header { display:flex; align-items:center; gap:1.5rem; padding:.7rem 1.5rem; background:#fff; border-bottom:1px solid var(--line); }
header .brand { font-weight:700; color:var(--fg); text-decoration:none; }
header nav { display:flex; align-items:center; gap:1rem; flex:1; }
header nav a { color:var(--accent); text-decoration:none; }
header nav .who { margin-left:auto; color:var(--muted); }
main { max-width:1100px; margin:1.5rem auto; padding:0 1.5rem; }
h1 { font-size:1.5rem; margin:.2rem 0 1rem; }
h2 { font-size:1.15rem; margin:1.6rem 0 .6rem; }
table { border-collapse:collapse; width:100%; background:#fff; border:1px solid var(--line); font-size:.9rem; }
th, td { padding:.4rem .6rem; border-bottom:1px solid var(--line); text-align:left; vertical-align:top; }
th { background:#eef1f4; font-weight:600; }
td.num, th.num { text-align:right; font-variant-numeric: tabular-nums; }
.cards { display:flex; gap:1rem; flex-wrap:wrap; }
.card { background:#fff; border:1px solid var(--line); border-radius:6px; padding:.8rem 1.1rem; min-width:12rem; }
.card .label { color:var(--muted); font-size:.85rem; }
.card .value { font-size:1.35rem; font-weight:600; }
form.box { background:#fff; border:1px solid var(--line); border-radius:6px; padding:1rem 1.2rem; max-width:36rem; }
form.box label { display:block; margin:.6rem 0 .2rem; font-weight:600; }
form.box input[type=text], form.box input[type=email], form.box input[type=password], form.box input[type=number], form.box input[type=datetime-local], form.box textarea { width:100%; padding:.45rem; border:1px solid var(--line); border-radius:4px; font:inherit; }
form.box .hint { color:var(--muted); font-size:.85rem; }
form.box .models { display:flex; flex-wrap:wrap; gap:.3rem 1rem; }
form.box .models label { font-weight:normal; margin:0; }
form.inline { display:inline; margin:0; }
button { font:inherit; padding:.35rem .8rem; border:1px solid var(--accent); background:var(--accent); color:#fff; border-radius:4px; cursor:pointer; }
form.inline button { padding:.15rem .55rem; font-size:.85rem; }
button.secondary { background:#fff; color:var(--accent); }
button.danger { background:#fff; color:var(--bad); border-color:var(--bad); }
form.box button { margin-top:1rem; }
.error { color:var(--bad); background:#fef3f2; border:1px solid #fecdca; padding:.6rem .8rem; border-radius:4px; }
.notice { background:#ecfdf3; border:1px solid #abefc6; padding:.6rem .8rem; border-radius:4px; }
.key { font-family: ui-monospace, monospace; font-size:1.05rem; background:#fff; border:1px dashed var(--accent); padding:.6rem; word-break:break-all; }
.status-active, .status-delivered, .status-completed, .status-healthy { color:var(--good); }
.status-disabled, .status-deleted, .status-dead, .status-failed { color:var(--bad); }
.muted { color:var(--muted); }
.chart { background:#fff; border:1px solid var(--line); border-radius:6px; padding:.5rem; }
.chart svg { width:100%; height:auto; display:block; }
"#;

pub async fn stylesheet() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        STYLE,
    )
        .into_response()
}

/// Quota as CNY text (six decimals, as the admin API's `_cny` fields).
pub fn cny(console: &SharedConsole, quota: i64) -> String {
    format!("{:.6}", console.app.config.currency.to_cny(quota))
}

/// Unix seconds as `YYYY-MM-DD HH:MM:SS` (UTC).
pub fn when(secs: i64) -> String {
    let format = time::macros::format_description!("[year]-[month]-[day] [hour]:[minute]:[second]");
    time::OffsetDateTime::from_unix_timestamp(secs)
        .ok()
        .and_then(|t| t.format(&format).ok())
        .unwrap_or_else(|| secs.to_string())
}

/// One bar of the usage chart.
pub struct Bar {
    pub label: String,
    pub calls: u64,
    pub cost: i64,
}

/// Spend per time bucket as an SVG bar chart, with calls as a tooltip.
pub fn chart(console: &SharedConsole, bars: &[Bar], caption: &str) -> Markup {
    const W: f64 = 960.0;
    const H: f64 = 240.0;
    const LEFT: f64 = 80.0;
    const BOTTOM: f64 = 36.0;
    const TOP: f64 = 16.0;
    let max = bars.iter().map(|b| b.cost).max().unwrap_or(0).max(1);
    let n = bars.len().max(1) as f64;
    let slot = (W - LEFT - 10.0) / n;
    let plot_h = H - BOTTOM - TOP;
    let label_every = (bars.len() / 12).max(1);
    html! {
        figure.chart {
            svg xmlns="http://www.w3.org/2000/svg" viewBox=(format!("0 0 {W} {H}")) role="img"
                aria-label=(caption) {
                line x1=(LEFT) y1=(TOP) x2=(LEFT) y2=(H - BOTTOM) stroke="#8c959f" {}
                line x1=(LEFT) y1=(H - BOTTOM) x2=(W - 10.0) y2=(H - BOTTOM) stroke="#8c959f" {}
                text x=(LEFT - 6.0) y=(TOP + 4.0) text-anchor="end" font-size="11" fill="#5b6570" {
                    (cny(console, max)) " CNY"
                }
                text x=(LEFT - 6.0) y=(H - BOTTOM) text-anchor="end" font-size="11" fill="#5b6570" { "0" }
                @for (i, b) in bars.iter().enumerate() {
                    @let h = plot_h * b.cost as f64 / max as f64;
                    @let h = if b.calls > 0 { h.max(2.0) } else { h };
                    @let x = LEFT + slot * i as f64 + slot * 0.15;
                    rect class="bar" x=(format!("{x:.1}")) y=(format!("{:.1}", H - BOTTOM - h))
                        width=(format!("{:.1}", slot * 0.7)) height=(format!("{h:.1}")) fill="#0b6bcb"
                        data-calls=(b.calls) {
                        title { (b.label) ": " (b.calls) " calls, " (cny(console, b.cost)) " CNY" }
                    }
                    @if i % label_every == 0 {
                        text x=(format!("{:.1}", LEFT + slot * (i as f64 + 0.5))) y=(H - BOTTOM + 16.0)
                            text-anchor="middle" font-size="10" fill="#5b6570" { (b.label) }
                    }
                }
            }
            figcaption.muted { (caption) }
        }
    }
}
