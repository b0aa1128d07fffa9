//! A property test of the money invariant: random mixes of concurrent calls —
//! plain, streamed, abandoned mid-stream, failing upstream, cut streams, calls
//! the balance cannot cover — leave every account with
//! `balance == Σ ledger`, no balance ever below zero, no hold left open, and
//! exactly the charges the usage log records.

use crate::common::*;
use futures_util::StreamExt;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::time::Duration;

#[derive(Debug, Clone, Copy)]
enum Call {
    Plain,
    Streamed,
    Abandoned,
    UpstreamFails,
    StreamCut,
    Greedy,
}

fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        Just(Call::Plain),
        Just(Call::Streamed),
        Just(Call::Abandoned),
        Just(Call::UpstreamFails),
        Just(Call::StreamCut),
        Just(Call::Greedy),
    ]
}

async fn run(env: &Env, key: &str, c: Call, i: usize) {
    let text = match c {
        Call::UpstreamFails => format!("call {i} [[sim:status=500]]"),
        Call::StreamCut => format!("call {i} [[sim:cut]]"),
        Call::Abandoned => format!("call {i} [[sim:chunk_delay_ms=5]]"),
        _ => format!("call {i}"),
    };
    let mut body = user("gpt-4o-mini", &text);
    // 300 tokens hold ~600 quota; 3000 hold ~6000, more than the account has.
    body["max_tokens"] = json!(if matches!(c, Call::Greedy) { 3000 } else { 300 });
    body["stream"] = json!(matches!(
        c,
        Call::Streamed | Call::Abandoned | Call::StreamCut
    ));
    let resp = env.chat(key, body).await;
    match c {
        Call::Abandoned if resp.status() == 200 => {
            let mut s = resp.bytes_stream();
            let _ = s.next().await;
        }
        _ => {
            let _ = resp.bytes().await;
        }
    }
}

async fn check(calls: Vec<Call>) {
    let env = Env::start().await;
    let account = env.account("0.01").await; // 5000 quota
    let (_, key) = env.token_with(&account, json!({})).await;
    let futs = calls
        .iter()
        .enumerate()
        .map(|(i, c)| run(&env, &key, *c, i));
    futures_util::stream::iter(futs)
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await;

    // Abandoned streams settle in the background: wait (bounded) for them.
    let mut open = Value::Null;
    for _ in 0..500 {
        let (_, v) = env
            .admin(reqwest::Method::GET, "/admin/v1/holds", None)
            .await;
        open = v["data"].clone();
        if open == json!([]) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(open, json!([]), "no hold left open");

    let (_, a) = env
        .admin(
            reqwest::Method::GET,
            &format!("/admin/v1/accounts/{account}"),
            None,
        )
        .await;
    let balance = a["balance"].as_i64().unwrap();
    assert_eq!(
        balance,
        a["ledger_sum"].as_i64().unwrap(),
        "balance == Σ ledger"
    );
    assert!(balance >= 0);
    for e in a["ledger"].as_array().unwrap() {
        assert!(
            e["balance_after"].as_i64().unwrap() >= 0,
            "never below zero: {e}"
        );
    }
    let (_, usage) = env
        .admin(reqwest::Method::GET, "/admin/v1/usage?limit=10000", None)
        .await;
    let charged: i64 = usage["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["cost"].as_i64().unwrap())
        .sum();
    assert_eq!(
        5_000 - balance,
        charged,
        "what left the balance is what the usage log charged"
    );
    env.stop().await;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    fn the_ledger_adds_up_under_any_mix_of_concurrent_calls(calls in prop::collection::vec(call(), 1..24)) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(check(calls));
    }
}
