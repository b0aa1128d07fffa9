//! `gateway admin ...`: a command-line client of the admin API. Every command
//! prints the API's JSON answer; errors print the error envelope's message to
//! stderr and exit non-zero.

use clap::{Args, Subcommand};
use serde_json::{json, Value};
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

fn call_for(cmd: AdminCommand) -> Call {
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

async fn send(args: AdminArgs) -> Result<Value, String> {
    let base = args.admin_url.trim_end_matches('/').to_string();
    let http = reqwest::Client::new();
    let req = match call_for(args.command) {
        Call::Get(p) => http.get(format!("{base}{p}")),
        Call::Post(p, body) => http.post(format!("{base}{p}")).json(&body),
        Call::Delete(p) => http.delete(format!("{base}{p}")),
    };
    let resp = req
        .bearer_auth(&args.admin_key)
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
    match rt.block_on(send(args)) {
        Ok(v) => {
            println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
