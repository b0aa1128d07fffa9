//! How long a dated usage query of one account takes with 100,000 usage rows
//! in the store (issue: the dashboard's query used to read every account's
//! rows). A benchmark, not a test: it prints timings and asserts only that
//! the answers are right. Run with `make bench-store` (or
//! `cargo bench -p gateway --bench usage_query`).
//!
//! Rows: 100 accounts × 1,000 calls spread over 30 days, logged in time
//! order with the accounts interleaved, as a busy gateway writes them. Each
//! query runs `RUNS` times; the median is printed, next to a full scan of the
//! table (what the query cost before the index) for comparison.

use gateway::store::accounts::apply_facts;
use gateway::store::records::{Fact, UsageRecord};
use gateway::store::Store;
use std::time::{Duration, Instant};

const ACCOUNTS: u64 = 100;
const ROWS: u64 = 100_000;
const SPAN_SECS: i64 = 30 * 86_400;
const START: i64 = 1_790_000_000;
const RUNS: usize = 50;

fn account(i: u64) -> String {
    format!("acct-{:03}", i % ACCOUNTS)
}

/// A named query returning how many rows it found.
type Case<'a> = (&'static str, Box<dyn Fn() -> usize + 'a>);

fn median(mut f: impl FnMut() -> usize) -> (Duration, usize) {
    let mut times = Vec::with_capacity(RUNS);
    let mut found = 0;
    for _ in 0..RUNS {
        let t = Instant::now();
        found = f();
        times.push(t.elapsed());
    }
    times.sort();
    (times[RUNS / 2], found)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(&dir.path().join("bench.redb"))?;
    let t = Instant::now();
    for chunk in (1..=ROWS).collect::<Vec<_>>().chunks(10_000) {
        let facts: Vec<Fact> = chunk
            .iter()
            .map(|&seq| {
                Fact::Usage(UsageRecord {
                    seq,
                    at: START + (seq as i64 * SPAN_SECS) / ROWS as i64,
                    request_id: format!("req-{seq}"),
                    account_id: account(seq),
                    token_id: Some(format!("tok-{}", seq % ACCOUNTS)),
                    model: "gpt-4o-mini".into(),
                    channel: Some("openai-main".into()),
                    input_tokens: 120,
                    output_tokens: 480,
                    cost: 900,
                    latency_ms: 350,
                    status: 200,
                    ..UsageRecord::default()
                })
            })
            .collect();
        store.write_blocking(move |txn| apply_facts(txn, &facts))?;
    }
    println!(
        "usage_query: {ROWS} rows, {ACCOUNTS} accounts, written in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    let who = account(7);
    let day = (START + 10 * 86_400, START + 11 * 86_400 - 1);
    let month = (START, START + SPAN_SECS);
    let cases: [Case; 4] = [
        (
            "one account, one day   (index)",
            Box::new(|| {
                store
                    .usage_between(&who, day.0, day.1)
                    .map_or(0, |r| r.len())
            }),
        ),
        (
            "one account, 30 days   (index)",
            Box::new(|| {
                store
                    .usage_between(&who, month.0, month.1)
                    .map_or(0, |r| r.len())
            }),
        ),
        (
            "one account, newest 100 (index)",
            Box::new(|| store.usage(Some(&who), None, 100).map_or(0, |r| r.len())),
        ),
        (
            "one account, one day   (full scan)",
            Box::new(|| {
                store.usage(None, None, usize::MAX).map_or(0, |rows| {
                    rows.iter()
                        .filter(|u| u.account_id == who && u.at >= day.0 && u.at <= day.1)
                        .count()
                })
            }),
        ),
    ];
    let mut found = Vec::new();
    for (name, query) in &cases {
        let (time, rows) = median(query);
        found.push(rows);
        println!(
            "usage_query: {name}: {rows:>5} rows, median {:>9.1} µs over {RUNS} runs",
            time.as_secs_f64() * 1e6
        );
    }
    // The index and the scan must agree, and every account has its share.
    assert_eq!(found[0], found[3], "index and full scan disagree");
    assert_eq!(found[1], (ROWS / ACCOUNTS) as usize);
    assert_eq!(found[2], 100);
    Ok(())
}
