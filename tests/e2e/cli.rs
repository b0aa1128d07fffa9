//! `gateway admin ...` against a running gateway's admin API, and
//! `gateway adapter test` against fixtures written for the test.

use crate::common::*;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

fn admin(env: &Env, args: &[&str]) -> (bool, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gateway"))
        .args(["admin", "--json"])
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

/// A fixture of the repo's, read so a test can change it.
fn repo_fixture(adapter: &str, name: &str) -> Value {
    let path = repo_root()
        .join("adapters")
        .join(adapter)
        .join("fixtures")
        .join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Writes `fixtures` (name, content) into a fresh folder, runs `gateway
/// adapter test` with the built component on it, and returns the exit code
/// and what it printed.
fn adapter_test(component: &Path, fixtures: &[(&str, &Value)]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    for (name, fixture) in fixtures {
        let text = serde_json::to_string_pretty(fixture).unwrap();
        std::fs::write(dir.path().join(format!("{name}.json")), text).unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_gateway"))
        .args(["adapter", "test"])
        .arg(component)
        .arg(dir.path())
        .output()
        .expect("gateway binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    (out.status.code(), format!("{stdout}{stderr}"))
}

#[test]
fn the_adapter_kit_passes_fixtures_that_match() {
    let plain = repo_fixture("openai", "chat-plain-cached");
    let stream = repo_fixture("openai", "chat-stream");
    let (code, out) = adapter_test(
        &component("adapters", "openai"),
        &[("plain", &plain), ("stream", &stream)],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("ok   plain\n") && out.contains("ok   stream\n"),
        "{out}"
    );
    assert!(out.contains(": 2 passed, 0 failed"), "{out}");

    let submit = repo_fixture("genvideo", "submit");
    let poll = repo_fixture("genvideo", "poll-succeeded");
    let (code, out) = adapter_test(
        &component("adapters", "genvideo"),
        &[("submit", &submit), ("poll", &poll)],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains(": 2 passed, 0 failed"), "{out}");
}

#[test]
fn the_adapter_kit_fails_a_wrong_fixture_with_a_diff_naming_the_field() {
    let right = repo_fixture("openai", "chat-plain-cached");
    let mut wrong = right.clone();
    wrong["client_response"]["body"]["choices"][0]["finish_reason"] = json!("length");
    wrong["usage"]["cache_read_tokens"] = json!(1000);
    let (code, out) = adapter_test(
        &component("adapters", "openai"),
        &[("right", &right), ("wrong", &wrong)],
    );
    assert_eq!(code, Some(1), "{out}");
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    assert!(lines.contains(&"ok   right"), "{out}");
    assert!(lines.contains(&"FAIL wrong"), "{out}");
    assert!(
        lines.contains(
            &r#"client_response.body.choices[0].finish_reason: expected "length", got "stop""#
        ),
        "{out}"
    );
    assert!(
        lines.contains(&"usage.cache_read_tokens: expected 1000, got 1024"),
        "{out}"
    );
    assert!(out.contains(": 1 passed, 1 failed"), "{out}");

    let mut wrong = repo_fixture("genvideo", "poll-succeeded");
    wrong["task_status"]["actual_seconds"] = json!(5);
    let (code, out) = adapter_test(&component("adapters", "genvideo"), &[("poll", &wrong)]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.lines()
            .any(|l| l.trim() == "task_status.actual_seconds: expected 5, got 4"),
        "{out}"
    );
}

#[test]
fn the_adapter_kit_fails_an_adapter_whose_answer_is_not_the_hosts_splice() {
    // The misbehaving guest asks the host to finish its answers (as the
    // SDK's driver does for an OpenAI chat passthrough) and writes another.
    let mut case = repo_fixture("openai", "chat-plain-cached");
    case["upstream_model"] = json!("splice-lies");
    let (code, out) = adapter_test(&component("test-guests", "misbehave"), &[("lies", &case)]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("FAIL lies"), "{out}");
    assert!(
        out.contains("the adapter asks the host to splice, but the answer the host finishes"),
        "{out}"
    );
    assert!(out.contains(r#""lie":true"#), "{out}");
}

#[test]
fn the_adapter_kit_fails_an_adapter_whose_request_is_not_the_hosts_edit() {
    // The misbehaving guest says calls alike to this one get the host's
    // edit of their body (as the SDK's driver does for an OpenAI chat
    // passthrough) and sends another body.
    for name in ["chat-plain-cached", "chat-stream"] {
        let mut case = repo_fixture("openai", name);
        case["upstream_model"] = json!("alike-lies");
        let (code, out) = adapter_test(&component("test-guests", "misbehave"), &[("lies", &case)]);
        assert_eq!(code, Some(1), "{name}: {out}");
        assert!(out.contains("FAIL lies"), "{name}: {out}");
        assert!(
            out.contains(
                "the adapter says calls alike to this one get the request the host's edit makes"
            ),
            "{name}: {out}"
        );
        assert!(out.contains(r#""lie":true"#), "{name}: {out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_cli_prints_tables_by_default_and_says_what_long_operations_do() {
    let env = Env::start().await;
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_gateway"))
            .arg("admin")
            .args(args)
            .env("GATEWAY_ADMIN_URL", format!("http://{}", env.gw.admin_addr))
            .env("GATEWAY_ADMIN_KEY", ADMIN_KEY)
            .output()
            .expect("gateway binary runs")
    };
    let out = tokio::task::block_in_place(|| run(&["account", "create", "--name", "tabled"]));
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(serde_json::from_str::<Value>(&text).is_err(), "{text}");
    assert!(
        text.contains("│ field") && text.contains("tabled"),
        "{text}"
    );

    let out = tokio::task::block_in_place(|| run(&["account", "list"]));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let header = text.lines().nth(1).unwrap_or_default();
    assert!(
        header.contains("balance_cny") && header.contains("created_at"),
        "{text}"
    );
    assert!(text.contains("tabled"));
    // `--json` anywhere after `admin` gives the API's JSON.
    let out = tokio::task::block_in_place(|| run(&["account", "list", "--json"]));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON with --json");
    assert!(v["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["name"] == "tabled"));

    let out = tokio::task::block_in_place(|| run(&["plugins", "--reload"]));
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(err.contains("rescanning the plugin folders"), "{err}");
    assert!(err.contains("component(s) loaded"), "{err}");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains("openai") && text.contains("mapped") && text.contains("sha256"),
        "{text}"
    );

    let out = tokio::task::block_in_place(|| run(&["reload"]));
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("re-read its config file") && err.contains("done:"),
        "{err}"
    );
    env.stop().await;
}
