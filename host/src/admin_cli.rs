//! `gateway admin ...`: a command-line client of the admin API. Every command
//! prints the API's answer as readable tables (`comfy-table`), or with
//! `--json` the API's JSON as it came, for scripts; errors print the error
//! envelope's message to stderr and exit non-zero. Operations that take a
//! while (a plugin rescan, a config reload) say on stderr what they are doing
//! and what came of it, so stdout stays the answer alone.

use clap::{Args, Subcommand};
use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};
use serde_json::{json, Map, Value};
use std::process::ExitCode;

#[derive(Args)]
pub struct AdminArgs {
    /// Base URL of the admin API.
    #[arg(
        long,
        env = "GATEWAY_ADMIN_URL",
        default_value = "http://127.0.0.1:8081"
    )]
    pub admin_url: String,
    /// The admin key (`[admin] key` in the gateway's config).
    #[arg(long, env = "GATEWAY_ADMIN_KEY", hide_env_values = true)]
    pub admin_key: String,
    /// Print the admin API's JSON answer instead of tables (for scripts).
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: AdminCommand,
}

#[derive(Subcommand)]
pub enum AdminCommand {
    /// Accounts and their balances.
    #[command(subcommand)]
    Account(AccountCommand),
    /// API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Usage rows, newest first.
    Usage {
        #[arg(long)]
        account: Option<String>,
        #[arg(long)]
        token: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Webhook events: list them, re-send one.
    #[command(subcommand)]
    Webhook(WebhookCommand),
    /// Channels with their health: state (healthy, resting, probing,
    /// disabled), recent error rate and latency; `--enable NAME` puts a
    /// disabled or resting channel back in service.
    Channels {
        #[arg(long, value_name = "NAME")]
        enable: Option<String>,
    },
    /// Loaded plugins; `--reload` rescans the plugin folders first.
    Plugins {
        #[arg(long)]
        reload: bool,
    },
    /// Reload channels, models, prices and policy lists from the gateway's
    /// config file (as `SIGHUP` does); an invalid file is refused and the
    /// running configuration keeps serving.
    Reload,
}

#[derive(Subcommand)]
pub enum AccountCommand {
    /// Create an account (it receives the trial credit).
    Create {
        #[arg(long)]
        name: String,
        /// Trial credit in CNY for this account (default from config).
        #[arg(long)]
        trial_credit: Option<String>,
        /// Concurrency group for text calls.
        #[arg(long)]
        group: Option<String>,
    },
    /// Balance (CNY and quota) and the ledger.
    Show { id: String },
    /// All accounts.
    List,
    /// Add CNY to an account.
    Topup { id: String, cny: String },
}

#[derive(Subcommand)]
pub enum WebhookCommand {
    /// Events, newest first.
    List {
        /// pending, delivered, dead or all
        #[arg(long, default_value = "all")]
        state: String,
    },
    /// Queue an event for delivery now (the console's "resend").
    Resend { event_id: String },
}

#[derive(Subcommand)]
pub enum TokenCommand {
    /// Create a token; its key is printed once and never again.
    Create {
        #[arg(long)]
        account: String,
        #[arg(long)]
        name: Option<String>,
        /// Model whitelist, comma-separated.
        #[arg(long, value_delimiter = ',')]
        models: Option<Vec<String>>,
        /// IP whitelist (addresses or CIDRs), comma-separated.
        #[arg(long, value_delimiter = ',')]
        ip: Option<Vec<String>>,
        /// Spending cap in CNY.
        #[arg(long)]
        quota: Option<String>,
        /// Expiry, Unix seconds.
        #[arg(long)]
        expires: Option<i64>,
    },
    /// Tokens of an account.
    List {
        #[arg(long)]
        account: String,
    },
    /// Disable a token (it stops authenticating; can be inspected).
    Disable { token_id: String },
    /// Delete a token (its key can never authenticate again).
    Delete { token_id: String },
}

enum Call {
    Get(String),
    Post(String, Value),
    Delete(String),
}

fn call_for(cmd: &AdminCommand) -> Call {
    use AccountCommand as A;
    use TokenCommand as T;
    match cmd {
        AdminCommand::Account(A::Create {
            name,
            trial_credit,
            group,
        }) => Call::Post(
            "/admin/v1/accounts".into(),
            json!({ "name": name, "trial_credit_cny": trial_credit, "group": group }),
        ),
        AdminCommand::Account(A::Show { id }) => Call::Get(format!("/admin/v1/accounts/{id}")),
        AdminCommand::Account(A::List) => Call::Get("/admin/v1/accounts".into()),
        AdminCommand::Account(A::Topup { id, cny }) => Call::Post(
            format!("/admin/v1/accounts/{id}/topup"),
            json!({ "cny": cny }),
        ),
        AdminCommand::Token(T::Create {
            account,
            name,
            models,
            ip,
            quota,
            expires,
        }) => Call::Post(
            "/admin/v1/tokens".into(),
            json!({
                "account": account, "name": name, "models": models, "ips": ip,
                "quota_cny": quota, "expires_at": expires,
            }),
        ),
        AdminCommand::Token(T::List { account }) => {
            Call::Get(format!("/admin/v1/tokens?account={account}"))
        }
        AdminCommand::Token(T::Disable { token_id }) => {
            Call::Post(format!("/admin/v1/tokens/{token_id}/disable"), json!({}))
        }
        AdminCommand::Token(T::Delete { token_id }) => {
            Call::Delete(format!("/admin/v1/tokens/{token_id}"))
        }
        AdminCommand::Usage {
            account,
            token,
            limit,
        } => {
            let mut q = format!("/admin/v1/usage?limit={limit}");
            if let Some(a) = account {
                q.push_str(&format!("&account={a}"));
            }
            if let Some(t) = token {
                q.push_str(&format!("&token={t}"));
            }
            Call::Get(q)
        }
        AdminCommand::Webhook(WebhookCommand::List { state }) => {
            Call::Get(format!("/admin/v1/webhooks?state={state}"))
        }
        AdminCommand::Webhook(WebhookCommand::Resend { event_id }) => {
            Call::Post(format!("/admin/v1/webhooks/{event_id}/resend"), json!({}))
        }
        AdminCommand::Channels { enable: None } => Call::Get("/admin/v1/channels".into()),
        AdminCommand::Channels { enable: Some(name) } => {
            Call::Post(format!("/admin/v1/channels/{name}/enable"), json!({}))
        }
        AdminCommand::Plugins { reload: false } => Call::Get("/admin/v1/plugins".into()),
        AdminCommand::Plugins { reload: true } => {
            Call::Post("/admin/v1/plugins/reload".into(), json!({}))
        }
        AdminCommand::Reload => Call::Post("/admin/v1/reload".into(), json!({})),
    }
}

/// What a long operation says on stderr before it starts, if it is one.
fn progress_before(cmd: &AdminCommand, base: &str) -> Option<String> {
    match cmd {
        AdminCommand::Plugins { reload: true } => Some(format!(
            "rescanning the plugin folders of the gateway at {base} (new or changed components are compiled; this can take a few seconds)..."
        )),
        AdminCommand::Reload => Some(format!(
            "asking the gateway at {base} to re-read its config file (plugin folders rescanned first, every start-up check run)..."
        )),
        _ => None,
    }
}

/// What a long operation says on stderr once it is done.
fn progress_after(cmd: &AdminCommand, v: &Value) -> Option<String> {
    let count = |key: &str| v[key].as_array().map_or(0, Vec::len);
    match cmd {
        AdminCommand::Plugins { reload: true } => Some(format!(
            "done: {} component(s) loaded, {} refused; changed on disk and reloaded: {}",
            count("data"),
            count("refused"),
            yes_no(&v["reloaded"]),
        )),
        AdminCommand::Reload => {
            let restart: Vec<String> = v["restart_needed"]
                .as_array()
                .map(|a| a.iter().map(cell).collect())
                .unwrap_or_default();
            Some(format!(
                "done: the config file is applied ({} model(s), {} video model(s), {} channel(s); plugins reloaded: {}){}",
                number_or_len(&v["models"]),
                number_or_len(&v["video_models"]),
                number_or_len(&v["channels"]),
                yes_no(&v["plugins_reloaded"]),
                if restart.is_empty() {
                    String::new()
                } else {
                    format!("; these need a restart to change: {}", restart.join(", "))
                }
            ))
        }
        _ => None,
    }
}

fn number_or_len(v: &Value) -> String {
    match v {
        Value::Array(a) => a.len().to_string(),
        other => cell(other),
    }
}

fn yes_no(v: &Value) -> &'static str {
    match v {
        Value::Bool(true) => "yes",
        Value::Bool(false) | Value::Null => "no",
        Value::Array(a) if a.is_empty() => "no",
        Value::Number(n) if n.as_u64() == Some(0) => "no",
        _ => "yes",
    }
}

/// The columns a list is shown with, in order (other fields are left out
/// of the table; `--json` shows everything).
fn list_columns(cmd: &AdminCommand) -> Option<&'static [&'static str]> {
    Some(match cmd {
        AdminCommand::Account(AccountCommand::List) => &[
            "id",
            "name",
            "group",
            "balance_cny",
            "balance",
            "created_at",
        ],
        AdminCommand::Token(TokenCommand::List { .. }) => &[
            "id",
            "name",
            "status",
            "key_hint",
            "models",
            "ips",
            "quota_limit_cny",
            "used_cny",
            "expires_at",
        ],
        AdminCommand::Usage { .. } => &[
            "at",
            "request_id",
            "model",
            "channel",
            "input_tokens",
            "cached_tokens",
            "output_tokens",
            "reasoning_tokens",
            "cost",
            "status",
            "stream",
            "latency_ms",
        ],
        AdminCommand::Webhook(WebhookCommand::List { .. }) => &[
            "event_id",
            "event",
            "task_id",
            "state",
            "attempts",
            "next_attempt_at",
            "url",
            "last_error",
        ],
        AdminCommand::Channels { enable: None } => &[
            "name",
            "adapter",
            "state",
            "models",
            "priority",
            "weight",
            "recent_error_rate",
            "latency_ms_mean",
            "latency_ms_p95",
            "attempts",
            "failures",
        ],
        AdminCommand::Plugins { .. } => &["name", "kind", "version", "mapped", "sha256", "source"],
        _ => return None,
    })
}

/// A JSON value as one table cell: text as it is, times (`*_at`, `until`)
/// as UTC dates, lists joined, absent values as `-`.
fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => if *b { "yes" } else { "no" }.into(),
        Value::Number(n) => n.to_string(),
        Value::Array(a) if a.is_empty() => "-".into(),
        Value::Array(a) => a.iter().map(cell).collect::<Vec<_>>().join(", "),
        Value::Object(_) => v.to_string(),
    }
}

fn field_cell(key: &str, v: &Value) -> String {
    let is_time = key.ends_with("_at") || key == "at" || key == "until" || key == "now";
    match (is_time, v.as_i64()) {
        (true, Some(secs)) if secs > 0 => time::OffsetDateTime::from_unix_timestamp(secs)
            .ok()
            .and_then(|t| {
                t.format(time::macros::format_description!(
                    "[year]-[month]-[day] [hour]:[minute]:[second]Z"
                ))
                .ok()
            })
            .unwrap_or_else(|| secs.to_string()),
        _ => cell(v),
    }
}

fn new_table(header: Vec<String>) -> Table {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header);
    t
}

/// Rows of objects as a table with `columns` (or every key of the rows).
fn rows_table(rows: &[Value], columns: Option<&[&str]>) -> Table {
    let columns: Vec<String> = match columns {
        Some(c) => c.iter().map(|s| s.to_string()).collect(),
        None => {
            let mut keys: Vec<String> = Vec::new();
            for r in rows {
                for k in r.as_object().into_iter().flat_map(Map::keys) {
                    if !keys.contains(k) {
                        keys.push(k.clone());
                    }
                }
            }
            keys
        }
    };
    let mut t = new_table(columns.clone());
    for r in rows {
        t.add_row(columns.iter().map(|c| field_cell(c, &r[c.as_str()])));
    }
    t
}

/// An answer as text: a list as one table, a record as a two-column table
/// with its lists of records (an account's ledger) as tables after it.
pub fn render(cmd: &AdminCommand, v: &Value) -> String {
    let mut out = String::new();
    if let Some(rows) = v.get("data").and_then(Value::as_array) {
        if rows.is_empty() {
            out.push_str("(none)\n");
        } else {
            out.push_str(&format!("{}\n", rows_table(rows, list_columns(cmd))));
        }
        if let Some(refused) = v.get("refused").and_then(Value::as_array) {
            if !refused.is_empty() {
                out.push_str(&format!("refused:\n{}\n", rows_table(refused, None)));
            }
        }
        return out;
    }
    let Some(fields) = v.as_object() else {
        return format!("{}\n", cell(v));
    };
    let mut record = new_table(vec!["field".into(), "value".into()]);
    let mut nested = Vec::new();
    for (k, x) in fields {
        match x.as_array() {
            Some(rows) if rows.first().is_some_and(Value::is_object) => nested.push((k, rows)),
            _ => {
                record.add_row(vec![k.clone(), field_cell(k, x)]);
            }
        }
    }
    out.push_str(&format!("{record}\n"));
    for (k, rows) in nested {
        out.push_str(&format!("{k}:\n{}\n", rows_table(rows, None)));
    }
    out
}

async fn send(base: &str, key: &str, call: Call) -> Result<Value, String> {
    let http = reqwest::Client::new();
    let req = match call {
        Call::Get(p) => http.get(format!("{base}{p}")),
        Call::Post(p, body) => http.post(format!("{base}{p}")).json(&body),
        Call::Delete(p) => http.delete(format!("{base}{p}")),
    };
    let resp = req
        .bearer_auth(key)
        .send()
        .await
        .map_err(|e| format!("cannot reach the admin API at {base}: {e}"))?;
    let status = resp.status();
    let body: Value = resp
        .json()
        .await
        .map_err(|e| format!("the admin API answered {status} with an unreadable body: {e}"))?;
    if status.is_success() {
        Ok(body)
    } else {
        let msg = body["error"]["message"]
            .as_str()
            .unwrap_or("unknown error")
            .to_string();
        Err(format!("{status}: {msg}"))
    }
}

pub fn run(args: AdminArgs) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let base = args.admin_url.trim_end_matches('/').to_string();
    let AdminArgs {
        admin_key,
        json,
        command,
        ..
    } = args;
    if let Some(msg) = progress_before(&command, &base) {
        eprintln!("{msg}");
    }
    let shown_once = matches!(command, AdminCommand::Token(TokenCommand::Create { .. }));
    let call = call_for(&command);
    match rt.block_on(send(&base, &admin_key, call)) {
        Ok(v) => {
            if let Some(msg) = progress_after(&command, &v) {
                eprintln!("{msg}");
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            } else {
                print!("{}", render(&command, &v));
                if shown_once {
                    eprintln!("the key is shown this once; the gateway keeps only its hash");
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_tables_of_their_chosen_columns_with_readable_times() {
        let cmd = AdminCommand::Account(AccountCommand::List);
        let v = json!({"object": "list", "data": [
            {"id": "acct_1", "name": "acme", "group": "default", "balance": 2_500_000,
             "balance_cny": 5.0, "created_at": 1_795_219_200, "internal": "hidden"},
        ]});
        let text = render(&cmd, &v);
        let header = text.lines().nth(1).unwrap();
        for col in [
            "id",
            "name",
            "group",
            "balance_cny",
            "balance",
            "created_at",
        ] {
            assert!(header.contains(col), "{header}");
        }
        assert!(!text.contains("internal") && !text.contains("hidden"));
        assert!(text.contains("acct_1") && text.contains("2500000"));
        assert!(text.contains("2026-11-21 00:00:00Z"), "{text}");
        assert_eq!(
            render(&cmd, &json!({"object": "list", "data": []})),
            "(none)\n"
        );
    }

    #[test]
    fn records_are_field_tables_and_their_lists_follow() {
        let cmd = AdminCommand::Account(AccountCommand::Show { id: "a".into() });
        let v = json!({"id": "acct_1", "balance": 10, "models": ["m1", "m2"], "expires_at": null,
            "ledger": [{"kind": "trial", "amount": 10}, {"kind": "top_up", "amount": 5}]});
        let text = render(&cmd, &v);
        assert!(text.contains("│ field"), "{text}");
        assert!(text.contains("m1, m2"));
        let (record, ledger) = text.split_once("ledger:\n").unwrap();
        assert!(record.contains("expires_at") && record.contains(" - "));
        assert!(ledger.contains("kind") && ledger.contains("top_up"));
        // Nothing in it parses as JSON: it is for people.
        assert!(serde_json::from_str::<Value>(&text).is_err());
    }

    #[test]
    fn long_operations_say_what_they_do_and_what_came_of_it() {
        let reload = AdminCommand::Reload;
        assert!(progress_before(&reload, "http://a")
            .unwrap()
            .contains("re-read its config"));
        let done = progress_after(
            &reload,
            &json!({"reloaded": true, "models": 3, "video_models": 1, "channels": 2,
                    "plugins_reloaded": false, "restart_needed": ["listen"]}),
        )
        .unwrap();
        assert!(
            done.contains("3 model(s)") && done.contains("restart to change: listen"),
            "{done}"
        );
        let plugins = AdminCommand::Plugins { reload: true };
        assert!(progress_before(&plugins, "http://a")
            .unwrap()
            .contains("rescanning"));
        let done = progress_after(
            &plugins,
            &json!({"data": [{}, {}], "refused": [{}], "reloaded": true}),
        )
        .unwrap();
        assert!(done.contains("2 component(s) loaded, 1 refused"), "{done}");
        assert!(progress_before(&AdminCommand::Account(AccountCommand::List), "x").is_none());
    }
}
