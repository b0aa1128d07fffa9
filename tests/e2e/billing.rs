//! Per-token billing of text calls (spec §1, §4.3): hold an estimate, settle
//! the real usage, refund the rest; the ledger always adds up.

use crate::common::*;
use futures_util::StreamExt;
use gateway::billing::tokens::{self, Encoding};
use gateway::plugins::bindings::types::Protocol;
use serde_json::{json, Value};
use std::time::Duration;

/// Waits (bounded) until the call's usage row is written, and returns it.
pub async fn usage_row(env: &Env, request_id: &str) -> Value {
    first_row(env, |r| r["request_id"] == request_id)
        .await
        .unwrap_or_else(|| panic!("no usage row for {request_id}"))
}

/// Waits (bounded) for a usage row that `fits`, and returns it.
async fn first_row(env: &Env, fits: impl Fn(&Value) -> bool) -> Option<Value> {
    for _ in 0..3000 {
        let (_, v) = env
            .admin(reqwest::Method::GET, "/admin/v1/usage?limit=1000", None)
            .await;
        if let Some(row) = v["data"].as_array().unwrap().iter().find(|r| fits(r)) {
            return Some(row.clone());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

/// A gateway-counted row (a stream cut short, a silent vendor) is charged its own token
/// counts at gpt-4o-mini's prices, and that is what left the account's
/// `credit`.
async fn billed_as_counted(env: &Env, account: &str, row: &Value, credit: i64) {
    assert_eq!(row["counted_by_gateway"], true, "{row}");
    let counted = json!({
        "prompt_tokens": row["input_tokens"],
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens": row["output_tokens"],
    });
    let cost = expected_cost(&counted);
    assert_eq!(row["cost"], cost);
    let l = ledger(env, account).await;
    assert_eq!(l["balance"], l["ledger_sum"]);
    assert_eq!(l["balance"].as_i64().unwrap(), credit - cost);
}

pub fn request_id(resp: &reqwest::Response) -> String {
    resp.headers()["x-request-id"].to_str().unwrap().to_string()
}

pub async fn ledger(env: &Env, account: &str) -> Value {
    let (s, v) = env
        .admin(
            reqwest::Method::GET,
            &format!("/admin/v1/accounts/{account}"),
            None,
        )
        .await;
    assert_eq!(s, 200);
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_is_charged_its_real_usage_in_one_ledger_entry() {
    let env = Env::start().await;
    let account = env.account("5").await;
    let (token, key) = env.token_with(&account, json!({})).await;
    let body = json!({"model": "gpt-4o-mini", "max_tokens": 500, "messages": [
        {"role": "system", "content": "you are terse"},
        {"role": "user", "content": "what is billing"}
    ]});
    let resp = env.chat(&key, body).await;
    let rid = request_id(&resp);
    let v: Value = resp.json().await.unwrap();
    let cost = expected_cost(&v["usage"]);
    assert!(cost > 0);

    let row = usage_row(&env, &rid).await;
    assert_eq!(row["cost"], cost);
    assert_eq!(row["token_id"], token.as_str());
    assert_eq!(row["model"], "gpt-4o-mini");
    assert_eq!(row["channel"], "sim");
    assert_eq!(row["status"], 200);
    assert_eq!(row["input_tokens"], v["usage"]["prompt_tokens"]);
    assert_eq!(
        row["cached_tokens"],
        v["usage"]["prompt_tokens_details"]["cached_tokens"]
    );
    assert_eq!(row["output_tokens"], v["usage"]["completion_tokens"]);

    let l = ledger(&env, &account).await;
    assert_eq!(l["balance"], 2_500_000 - cost);
    assert_eq!(l["balance"], l["ledger_sum"]);
    let kinds: Vec<&str> = l["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    // The hold lived in memory; the call left one entry, its charge.
    assert_eq!(kinds, ["trial", "charge"]);
    let entries = l["ledger"].as_array().unwrap();
    assert_eq!(entries[1]["charged"], cost);
    assert_eq!(entries[1]["amount"], -cost);
    assert_eq!(entries[1]["reference"], rid.as_str());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_call_is_charged_the_usage_the_vendor_reported() {
    let env = Env::start().await;
    let account = env.account("5").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let plain: Value = env
        .chat(&key, user("gpt-4o-mini", "stream me"))
        .await
        .json()
        .await
        .unwrap();
    let mut body = user("gpt-4o-mini", "stream me");
    body["stream"] = json!(true);
    let resp = env.chat(&key, body).await;
    let rid = request_id(&resp);
    let _ = resp.text().await.unwrap();
    let row = usage_row(&env, &rid).await;
    assert_eq!(row["cost"], expected_cost(&plain["usage"]));
    assert_eq!(row["stream"], true);
    let l = ledger(&env, &account).await;
    assert_eq!(l["balance"], l["ledger_sum"]);
    assert_eq!(l["balance"], 2_500_000 - 2 * expected_cost(&plain["usage"]));
    env.stop().await;
}

/// Streams `prompt` as gpt-4o-mini, reads the first chunk and goes away;
/// returns the call's usage row, which says the client went away.
async fn leave_after_the_first_chunk(env: &Env, key: &str, prompt: &str) -> Value {
    let mut body = user("gpt-4o-mini", prompt);
    body["stream"] = json!(true);
    let resp = env.chat(key, body).await;
    let rid = request_id(&resp);
    let mut stream = resp.bytes_stream();
    let first = stream.next().await.unwrap().unwrap();
    assert!(!first.is_empty());
    drop(stream);

    let row = usage_row(env, &rid).await;
    assert_eq!(row["status"], 200);
    assert!(
        row["error"].as_str().unwrap().contains("went away"),
        "{row}"
    );
    row
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_mid_stream_is_billed_what_was_relayed() {
    let env = Env::start().await;
    let account = env.account("5").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    // 400 words, 5 ms apart: two seconds of stream.
    let prompt = "a slow story [[sim:words=400, chunk_delay_ms=5]]";
    let row = leave_after_the_first_chunk(&env, &key, prompt).await;
    let (input, output) = (
        row["input_tokens"].as_i64().unwrap(),
        row["output_tokens"].as_i64().unwrap(),
    );
    // The prompt's estimate, and the few words relayed — not the 400 the
    // vendor would have produced had the gateway kept reading.
    assert!(input > 0, "{row}");
    assert!((0..100).contains(&output), "{row}");
    billed_as_counted(&env, &account, &row, 2_500_000).await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_while_the_vendor_is_quiet_is_settled_at_once() {
    let env = Env::start().await;
    let account = env.account("5").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    // The first word at once, then a minute before each of the others:
    // the client leaves during the first pause. `usage_row` gives up well
    // before the vendor's next word (or the idle timeout), so the row must
    // come from noticing the client, not from the vendor.
    let prompt = "a slow story [[sim:words=5, delta_delay_ms=60000]]";
    let row = leave_after_the_first_chunk(&env, &key, prompt).await;
    billed_as_counted(&env, &account, &row, 2_500_000).await;
    no_holds_left(&env).await;
    env.stop().await;
}

/// Sends `body` as a chat call and leaves as soon as the vendor has it
/// (the vendor answers 300 ms later); returns the call's usage row.
async fn hang_up_while_the_vendor_works(env: &Env, key: &str, body: Value) -> Value {
    let call = tokio::spawn({
        let request = env
            .http
            .post(env.url("/v1/chat/completions"))
            .bearer_auth(key)
            .json(&body);
        async move { request.send().await }
    });
    let mut waits = 0;
    while env.sim.requests().is_empty() {
        waits += 1;
        assert!(waits < 3000, "the vendor never got the request");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    call.abort();
    assert!(
        call.await.is_err_and(|e| e.is_cancelled()),
        "the client left"
    );
    // The client never saw the request id: the account's only row.
    first_row(env, |_| true)
        .await
        .expect("a usage row for the abandoned call")
}

async fn no_holds_left(env: &Env) {
    let (_, holds) = env
        .admin(reqwest::Method::GET, "/admin/v1/holds", None)
        .await;
    assert_eq!(holds["data"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_while_the_vendor_works_is_billed_for_the_answer() {
    let env = Env::start().await;
    let account = env.account("5").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let body = user("gpt-4o-mini", "hi [[sim:latency_ms=300]]");
    let row = hang_up_while_the_vendor_works(&env, &key, body).await;
    // The call went on without its client: the vendor answered, and the
    // row and the books say what it charged.
    let usage = env.sim.requests()[0]
        .usage
        .clone()
        .expect("the vendor answered");
    assert_eq!(row["status"], 200, "{row}");
    assert_eq!(row["cost"], expected_cost(&usage), "{row}");
    let l = ledger(&env, &account).await;
    assert_eq!(l["balance"], l["ledger_sum"]);
    assert_eq!(l["balance"], 2_500_000 - expected_cost(&usage));
    no_holds_left(&env).await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_whose_client_left_before_its_first_token_bills_no_output() {
    let env = Env::start().await;
    let account = env.account("5").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let mut body = user("gpt-4o-mini", "hi [[sim:latency_ms=300]]");
    body["stream"] = json!(true);
    let row = hang_up_while_the_vendor_works(&env, &key, body).await;
    // The stream still opened (the vendor's first events were read and
    // held), but none of it reached the client: the prompt is billed, no
    // output.
    assert_eq!(row["status"], 200, "{row}");
    assert!(
        row["error"].as_str().unwrap().contains("went away"),
        "{row}"
    );
    assert_eq!(row["output_tokens"], 0, "{row}");
    billed_as_counted(&env, &account, &row, 2_500_000).await;
    no_holds_left(&env).await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_failure_costs_nothing() {
    let env = Env::start().await;
    let account = env.account("5").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    for directive in ["[[sim:status=500]]", "[[sim:malformed]]", "[[sim:cut]]"] {
        let resp = env
            .chat(&key, user("gpt-4o-mini", &format!("x {directive}")))
            .await;
        assert!(resp.status().is_server_error(), "{directive}");
        let rid = request_id(&resp);
        let row = usage_row(&env, &rid).await;
        assert_eq!(row["cost"], 0, "{directive}");
    }
    let l = ledger(&env, &account).await;
    assert_eq!(l["balance"], 2_500_000);
    assert_eq!(l["ledger_sum"], 2_500_000);
    no_holds_left(&env).await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_after_part_of_the_answer_is_billed_what_was_relayed() {
    let env = Env::start().await;
    let account = env.account("5").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let mut body = user("gpt-4o-mini", "a story [[sim:words=300, cut]]");
    body["stream"] = json!(true);
    let resp = env.chat(&key, body).await;
    let rid = request_id(&resp);
    let text = resp.text().await.unwrap();
    assert!(
        !text.contains("[DONE]"),
        "a cut answer never looks complete"
    );
    let row = usage_row(&env, &rid).await;
    assert_eq!(row["status"], 502, "{row}");
    let (input, output) = (
        row["input_tokens"].as_i64().unwrap(),
        row["output_tokens"].as_i64().unwrap(),
    );
    // A few words went out before the cut, not the 300 planned.
    assert!(input > 0 && (1..50).contains(&output), "{row}");
    billed_as_counted(&env, &account, &row, 2_500_000).await;
    env.stop().await;
}

/// The prompt's tokens as the gateway counts them for gpt-4o-mini
/// (`o200k_base`).
fn counted(body: &Value) -> u64 {
    tokens::prompt_tokens(
        Encoding::O200kBase,
        Protocol::OpenaiChat,
        body.to_string().as_bytes(),
    )
}

/// The text of a chat stream's content deltas.
fn streamed_text(payloads: &[String]) -> String {
    payloads
        .iter()
        .filter_map(|p| serde_json::from_str::<Value>(p).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_vendors_stream_is_counted_by_the_gateway_with_a_usage_chunk_for_who_asked() {
    let env = Env::start().await;
    let account = env.account("5").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let mut body = user("gpt-4o-mini", "tell me about tokens [[sim:silent]]");
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let resp = env.chat(&key, body.clone()).await;
    let rid = request_id(&resp);
    let payloads = sse_data(resp).await;
    assert_eq!(payloads.last().map(String::as_str), Some("[DONE]"));
    let text = streamed_text(&payloads);
    assert!(!text.is_empty());
    // The usage chunk the vendor never sent: last before [DONE], no
    // choices, the gateway's counts.
    let chunk: Value = serde_json::from_str(&payloads[payloads.len() - 2]).unwrap();
    assert_eq!(chunk["choices"], json!([]), "{chunk}");
    assert_eq!(chunk["object"], "chat.completion.chunk");
    let (prompt, output) = (counted(&body), Encoding::O200kBase.count(&text));
    assert_eq!(chunk["usage"]["prompt_tokens"], prompt);
    assert_eq!(chunk["usage"]["completion_tokens"], output);
    assert_eq!(chunk["usage"]["total_tokens"], prompt + output);
    let row = usage_row(&env, &rid).await;
    assert_eq!(
        (row["status"].as_u64(), row["stream"].as_bool()),
        (Some(200), Some(true))
    );
    assert_eq!(row["input_tokens"], prompt);
    assert_eq!(row["output_tokens"], output);
    billed_as_counted(&env, &account, &row, 2_500_000).await;
    let first_cost = row["cost"].as_i64().unwrap();

    // Without include_usage: no usage chunk, the same bill.
    body.as_object_mut().unwrap().remove("stream_options");
    let resp = env.chat(&key, body.clone()).await;
    let rid = request_id(&resp);
    let payloads = sse_data(resp).await;
    assert!(payloads
        .iter()
        .filter_map(|p| serde_json::from_str::<Value>(p).ok())
        .all(|v| v["usage"].is_null() && v["choices"] != json!([])));
    let row = usage_row(&env, &rid).await;
    assert_eq!(row["counted_by_gateway"], true);
    assert_eq!(
        row["output_tokens"],
        Encoding::O200kBase.count(&streamed_text(&payloads))
    );
    billed_as_counted(&env, &account, &row, 2_500_000 - first_cost).await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_vendors_plain_answer_is_counted_and_shows_the_count() {
    let env = Env::start().await;
    let account = env.account("5").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let body = json!({"model": "gpt-4o-mini", "messages": [
        {"role": "system", "content": "you are terse"},
        {"role": "user", "content": "what is a token [[sim:silent]]"}
    ]});
    let resp = env.chat(&key, body.clone()).await;
    let rid = request_id(&resp);
    let v: Value = resp.json().await.unwrap();
    let text = v["choices"][0]["message"]["content"].as_str().unwrap();
    let (prompt, output) = (counted(&body), Encoding::O200kBase.count(text));
    assert_eq!(v["usage"]["prompt_tokens"], prompt, "{v}");
    assert_eq!(v["usage"]["completion_tokens"], output);
    let row = usage_row(&env, &rid).await;
    assert_eq!(row["input_tokens"], prompt);
    assert_eq!(row["output_tokens"], output);
    billed_as_counted(&env, &account, &row, 2_500_000).await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vendors_own_usage_wins_over_the_gateways_count() {
    let env = Env::start().await;
    let account = env.account("5").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let mut body = user("gpt-4o-mini", "tell me about tokens");
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let resp = env.chat(&key, body.clone()).await;
    let rid = request_id(&resp);
    let payloads = sse_data(resp).await;
    let chunk: Value = serde_json::from_str(&payloads[payloads.len() - 2]).unwrap();
    // The simulator counts words, not tokens: its numbers differ from the
    // tokenizer's, and they are the ones billed.
    let vendor = &chunk["usage"];
    assert_ne!(vendor["prompt_tokens"], counted(&body));
    let row = usage_row(&env, &rid).await;
    assert_ne!(row["counted_by_gateway"], true, "{row}");
    assert_eq!(row["input_tokens"], vendor["prompt_tokens"]);
    assert_eq!(row["output_tokens"], vendor["completion_tokens"]);
    assert_eq!(row["cost"], expected_cost(vendor));
    let l = ledger(&env, &account).await;
    assert_eq!(l["balance"], l["ledger_sum"]);
    assert_eq!(
        l["balance"].as_i64(),
        Some(2_500_000 - expected_cost(vendor))
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_balance_that_cannot_cover_the_hold_is_402_saying_how_much() {
    let env = Env::start().await;
    let account = env.account("0.000002").await; // 1 quota unit
    let (_, key) = env.token_with(&account, json!({})).await;
    let mut body = user("gpt-4o-mini", "hi");
    body["max_tokens"] = json!(100);
    let (code, msg) = envelope(env.chat(&key, body).await, 402).await;
    assert_eq!(code, "insufficient_user_quota");
    assert!(msg.contains("must reserve"), "{msg}");
    assert!(msg.contains("CNY"), "{msg}");
    assert!(
        env.sim.requests().is_empty(),
        "nothing reached the upstream"
    );
    assert_eq!(ledger(&env, &account).await["balance"], 1);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_ups_and_the_dashboard_report_the_accounts_figures() {
    let env = Env::start().await;
    let account = env.account("5").await;
    let (_, key) = env.token_with(&account, json!({})).await;
    let (s, v) = env
        .admin(
            reqwest::Method::POST,
            &format!("/admin/v1/accounts/{account}/topup"),
            Some(json!({"cny": "10"})),
        )
        .await;
    assert_eq!((s, v["balance"].as_i64()), (200, Some(7_500_000)));
    let resp = env.chat(&key, user("gpt-4o-mini", "hi")).await;
    let rid = request_id(&resp);
    let cost = usage_row(&env, &rid).await["cost"].as_i64().unwrap();

    let get = |path: &'static str| env.http.get(env.url(path)).bearer_auth(&key).send();
    let sub: Value = get("/v1/dashboard/billing/subscription")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(sub["object"], "billing_subscription");
    assert_eq!(sub["hard_limit_usd"], 15.0);
    let usage: Value = get("/v1/dashboard/billing/usage")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(usage["object"], "list");
    let expected_hundredths = cost as f64 / 500_000.0 * 100.0;
    assert!(
        (usage["total_usage"].as_f64().unwrap() - expected_hundredths).abs() < 1e-6,
        "{usage}"
    );
    let dated: Value = get("/v1/dashboard/billing/usage?start_date=2000-01-01&end_date=2100-01-01")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        (dated["total_usage"].as_f64().unwrap() - expected_hundredths).abs() < 1e-6,
        "{dated}"
    );
    let before: Value =
        get("/v1/dashboard/billing/usage?start_date=2000-01-01&end_date=2000-01-02")
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    assert_eq!(before["total_usage"], 0.0);
    let bad = get("/v1/dashboard/billing/usage?start_date=yesterday")
        .await
        .unwrap();
    assert_eq!(envelope(bad, 400).await.0, "invalid_request");
    env.stop().await;
}
