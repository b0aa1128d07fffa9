//! `gateway admin ...` against a running gateway's admin API.

use crate::common::*;
use serde_json::Value;
use std::process::Command;

fn admin(env: &Env, args: &[&str]) -> (bool, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gateway"))
        .arg("admin")
        .args(args)
        .env("GATEWAY_ADMIN_URL", format!("http://{}", env.gw.admin_addr))
        .env("GATEWAY_ADMIN_KEY", ADMIN_KEY)
        .output()
        .expect("gateway binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    (
        out.status.success(),
        serde_json::from_str(&stdout).unwrap_or(Value::Null),
        stderr,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_cli_manages_accounts_and_tokens() {
    let env = Env::start().await;
    let e = &env;
    let (ok, acct, err) = tokio::task::block_in_place(|| {
        admin(
            e,
            &[
                "account",
                "create",
                "--name",
                "cli",
                "--trial-credit",
                "2.5",
            ],
        )
    });
    assert!(ok, "{err}");
    assert_eq!(acct["balance"], 1_250_000);
    let id = acct["id"].as_str().unwrap().to_string();

    let (ok, _, _) = tokio::task::block_in_place(|| admin(e, &["account", "topup", &id, "1.5"]));
    assert!(ok);
    let (ok, tok, err) = tokio::task::block_in_place(|| {
        admin(
            e,
            &[
                "token",
                "create",
                "--account",
                &id,
                "--name",
                "ci",
                "--models",
                "gpt-4o-mini,qwen-plus",
                "--ip",
                "127.0.0.1",
                "--quota",
                "1",
            ],
        )
    });
    assert!(ok, "{err}");
    let key = tok["key"].as_str().unwrap().to_string();
    assert!(key.starts_with("sk-"));
    assert_eq!(
        tok["models"],
        serde_json::json!(["gpt-4o-mini", "qwen-plus"])
    );
    assert_eq!(
        env.chat(&key, user("gpt-4o-mini", "hi")).await.status(),
        200
    );

    let (ok, shown, _) = tokio::task::block_in_place(|| admin(e, &["account", "show", &id]));
    assert!(ok);
    assert_eq!(shown["balance"], shown["ledger_sum"]);
    assert_eq!(shown["ledger"][0]["kind"], "trial");
    assert_eq!(shown["ledger"][1]["kind"], "top_up");
    assert!(shown["balance_cny"].as_f64().unwrap() < 4.0);

    let (ok, list, _) =
        tokio::task::block_in_place(|| admin(e, &["token", "list", "--account", &id]));
    assert!(ok);
    let tid = list["data"][0]["id"].as_str().unwrap().to_string();
    assert!(
        list["data"][0].get("key").is_none(),
        "the key is shown once only"
    );
    let (ok, usage, _) = tokio::task::block_in_place(|| admin(e, &["usage", "--account", &id]));
    assert!(ok);
    assert_eq!(usage["data"].as_array().unwrap().len(), 1);

    let (ok, _, _) = tokio::task::block_in_place(|| admin(e, &["token", "disable", &tid]));
    assert!(ok);
    assert_eq!(
        env.chat(&key, user("gpt-4o-mini", "hi")).await.status(),
        401
    );
    let (ok, _, _) = tokio::task::block_in_place(|| admin(e, &["token", "delete", &tid]));
    assert!(ok);

    let (ok, _, err) =
        tokio::task::block_in_place(|| admin(e, &["account", "show", "acct_missing"]));
    assert!(!ok);
    assert!(err.contains("404"), "{err}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_cli_shows_channel_health_and_enables_a_channel() {
    let env = Env::start().await;
    let key = env.key().await;
    assert_eq!(
        env.chat(&key, user("gpt-4o-mini", "hi")).await.status(),
        200
    );
    let e = &env;
    let (ok, v, err) = tokio::task::block_in_place(|| admin(e, &["channels"]));
    assert!(ok, "{err}");
    let sim = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "sim")
        .cloned()
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(sim["state"], "healthy");
    assert_eq!(sim["attempts"], 1);
    assert_eq!(sim["recent_error_rate"], 0.0);
    assert!(sim["latency_ms_mean"].is_u64(), "{sim}");
    let (ok, v, err) = tokio::task::block_in_place(|| admin(e, &["channels", "--enable", "sim"]));
    assert!(ok, "{err}");
    assert_eq!(v["name"], "sim");
    let (ok, _, err) =
        tokio::task::block_in_place(|| admin(e, &["channels", "--enable", "no-such"]));
    assert!(!ok && err.contains("no channel named"), "{err}");
    env.stop().await;
}
