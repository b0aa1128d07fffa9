//! The protocol matrix: each of the five client protocols against each of the
//! three vendor adapters (OpenAI chat, Anthropic Messages, Gemini), plain and
//! streamed — text, parallel tool calls and their results fed back, thinking
//! with signatures, every finish reason — with the usage the client sees
//! checked against what the vendor reported, and the account charged exactly
//! that usage at the model's prices (cache reads and writes at their own).
//!
//! One test per (client, vendor) cell, so cells run in parallel and a failure
//! names its cell.

use crate::common::protocols::{Answer, Ask, Client, Turn};
use crate::common::*;
use serde_json::Value;

/// A vendor adapter, as the test config serves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vendor {
    OpenAi,
    Anthropic,
    Gemini,
}

impl Vendor {
    /// The model the test config routes to this vendor's channel.
    pub fn model(self) -> &'static str {
        match self {
            Vendor::OpenAi => "gpt-4o-mini",
            Vendor::Anthropic => "claude-sonnet-4-5",
            Vendor::Gemini => "gemini-2.5-flash",
        }
    }

    fn has_signatures(self) -> bool {
        self != Vendor::OpenAi
    }

    /// The usage the simulator reported, in canonical terms
    /// (input incl. cache, output incl. reasoning, cache read, cache write).
    fn canonical(self, u: &Value) -> (u64, u64, u64, u64) {
        let n = |v: &Value| v.as_u64().unwrap_or(0);
        match self {
            Vendor::OpenAi => (
                n(&u["prompt_tokens"]),
                n(&u["completion_tokens"]),
                n(&u["prompt_tokens_details"]["cached_tokens"]),
                0,
            ),
            Vendor::Anthropic => {
                let (r, w) = (
                    n(&u["cache_read_input_tokens"]),
                    n(&u["cache_creation_input_tokens"]),
                );
                (n(&u["input_tokens"]) + r + w, n(&u["output_tokens"]), r, w)
            }
            Vendor::Gemini => (
                n(&u["promptTokenCount"]),
                n(&u["candidatesTokenCount"]) + n(&u["thoughtsTokenCount"]),
                n(&u["cachedContentTokenCount"]),
                0,
            ),
        }
    }

    /// The reasoning tokens the vendor counted, where its usage has such a
    /// count (Anthropic's folds thinking into `output_tokens` and says no
    /// more).
    fn reasoning(self, u: &Value) -> Option<u64> {
        let n = |v: &Value| v.as_u64().unwrap_or(0);
        match self {
            Vendor::OpenAi => Some(n(&u["completion_tokens_details"]["reasoning_tokens"])),
            Vendor::Anthropic => None,
            Vendor::Gemini => Some(n(&u["thoughtsTokenCount"])),
        }
    }

    /// Prices in quota per 1M tokens: (input, output, cache read, cache write),
    /// as `default_models` configures them.
    fn prices(self) -> (i64, i64, i64, i64) {
        match self {
            Vendor::OpenAi => (500_000, 2_000_000, 125_000, 500_000),
            Vendor::Anthropic => (1_500_000, 7_500_000, 150_000, 1_875_000),
            Vendor::Gemini => (150_000, 1_250_000, 37_500, 150_000),
        }
    }

    /// The raw finish reason `[[sim:finish=...]]` uses, in the vendor's style.
    fn raw_finish(self) -> &'static str {
        match self {
            Vendor::OpenAi => "insufficient_system_resource",
            Vendor::Anthropic => "pause_turn",
            Vendor::Gemini => "MALFORMED_FUNCTION_CALL",
        }
    }
}

/// Why an answer ended, in neutral terms.
#[derive(Debug, Clone, Copy)]
enum Why {
    Stop,
    Length,
    Tools,
    StopSequence,
    Filter,
    Raw,
}

/// The word a client protocol uses for `why`, given the vendor that said it.
fn word(client: Client, vendor: Vendor, why: Why) -> String {
    // What the vendor itself reports for a stop sequence and a refusal.
    let why = match (why, vendor) {
        (Why::StopSequence, Vendor::OpenAi | Vendor::Gemini) => Why::Stop,
        (w, _) => w,
    };
    let raw = vendor.raw_finish();
    match client {
        Client::Chat | Client::Completions => match why {
            Why::Stop | Why::StopSequence => "stop",
            Why::Length => "length",
            Why::Tools => "tool_calls",
            Why::Filter => "content_filter",
            Why::Raw => raw,
        },
        Client::Responses => match why {
            Why::Stop | Why::StopSequence | Why::Tools => "completed",
            Why::Length => "max_output_tokens",
            Why::Filter => "content_filter",
            Why::Raw => raw,
        },
        Client::Messages => match why {
            Why::Stop => "end_turn",
            Why::StopSequence => "stop_sequence",
            Why::Length => "max_tokens",
            Why::Tools => "tool_use",
            Why::Filter => "refusal",
            Why::Raw => raw,
        },
        Client::Gemini => match why {
            Why::Stop | Why::StopSequence | Why::Tools => "STOP",
            Why::Length => "MAX_TOKENS",
            Why::Filter => "SAFETY",
            Why::Raw if raw.chars().all(|c| c.is_ascii_uppercase() || c == '_') => raw,
            Why::Raw => "OTHER",
        },
    }
    .to_string()
}

/// The eight words the simulator thinks for a reasoning answer.
const REASONING: &str = "Let me think about this step by step.";

struct Cell<'a> {
    env: &'a Env,
    key: String,
    account: String,
    client: Client,
    vendor: Vendor,
}

impl Cell<'_> {
    async fn ask(&self, ask: &Ask) -> Answer {
        let a = self
            .client
            .ask(&self.env.http, &self.env.url(""), &self.key, ask)
            .await;
        assert_eq!(
            a.status, 200,
            "{:?} → {:?} {}: {:?}",
            self.client, self.vendor, ask.stream, a.error
        );
        assert!(a.error.is_none(), "no error event: {:?}", a.error);
        a
    }

    /// The usage the vendor reported for the last call, in its own terms.
    fn vendor_usage(&self) -> Value {
        let recorded = self.env.sim.requests();
        let last = recorded.last().expect("the vendor was called");
        last.usage.clone().expect("the simulator reported usage")
    }

    /// The client saw the vendor's usage, and the account paid exactly that.
    async fn check_usage_and_charge(&self, a: &Answer) {
        let reported = self.vendor_usage();
        let (input, output, read, write) = self.vendor.canonical(&reported);
        let seen = a.usage.expect("the client was told the usage");
        assert_eq!(
            (seen.0, seen.1, seen.2),
            (input, output, read),
            "{:?} → {:?}",
            self.client,
            self.vendor
        );
        if matches!(self.client, Client::Messages) {
            assert_eq!(seen.3, write, "cache writes shown to the Anthropic client");
        }
        let (pi, po, pr, pw) = self.vendor.prices();
        let per_million = |tokens: u64, price: i64| (tokens as i64 * price + 999_999) / 1_000_000;
        let expected = per_million(input - read - write, pi)
            + per_million(read, pr)
            + per_million(write, pw)
            + per_million(output, po);
        let row = crate::billing::usage_row(self.env, &a.request_id).await;
        assert_eq!(
            row["cost"], expected,
            "{:?} → {:?}: {row}",
            self.client, self.vendor
        );
        assert_eq!(row["cache_write_tokens"], write);
        if let Some(reasoning) = self.vendor.reasoning(&reported) {
            assert_eq!(
                row["reasoning_tokens"], reasoning,
                "{:?} → {:?}: the vendor's reasoning count recorded: {row}",
                self.client, self.vendor
            );
        }
        let (balance, sum) = self.env.balance(&self.account).await;
        assert_eq!(balance, sum, "the ledger adds up");
    }
}

async fn run_cell(client: Client, vendor: Vendor) {
    let env = Env::start().await;
    let account = env.account("100").await;
    let (_, key) = env.token_with(&account, serde_json::json!({})).await;
    let cell = Cell {
        env: &env,
        key,
        account,
        client,
        vendor,
    };
    let model = vendor.model();
    for stream in [false, true] {
        // Text, with a system prompt (the simulator caches it).
        let a = cell
            .ask(
                &Ask::new(model, "Name three primary colours")
                    .system("Be very brief")
                    .streamed(stream),
            )
            .await;
        assert!(
            a.text
                .starts_with("Simulated reply to: Name three primary colours."),
            "{client:?} → {vendor:?} stream={stream}: {:?}",
            a.text
        );
        assert_eq!(
            a.finish.as_deref(),
            Some(word(client, vendor, Why::Stop).as_str())
        );
        cell.check_usage_and_charge(&a).await;

        // Finish reasons kept what they were.
        let a = cell
            .ask(
                &Ask::new(model, "count slowly please")
                    .max_tokens(3)
                    .streamed(stream),
            )
            .await;
        assert_eq!(
            a.finish.as_deref(),
            Some(word(client, vendor, Why::Length).as_str()),
            "length"
        );
        cell.check_usage_and_charge(&a).await;
        if client.has_stop() {
            let a = cell
                .ask(
                    &Ask::new(model, "count slowly please")
                        .stop("reply")
                        .streamed(stream),
                )
                .await;
            assert_eq!(a.text, "Simulated", "the stop sequence cut the answer");
            assert_eq!(
                a.finish.as_deref(),
                Some(word(client, vendor, Why::StopSequence).as_str()),
                "stop sequence"
            );
        }
        let a = cell
            .ask(&Ask::new(model, "something bad [[sim:refuse]]").streamed(stream))
            .await;
        assert_eq!(
            a.finish.as_deref(),
            Some(word(client, vendor, Why::Filter).as_str()),
            "content filter"
        );
        let raw = format!("hi [[sim:finish={}]]", vendor.raw_finish());
        let a = cell.ask(&Ask::new(model, &raw).streamed(stream)).await;
        assert_eq!(
            a.finish.as_deref(),
            Some(word(client, vendor, Why::Raw).as_str()),
            "raw reason"
        );

        if client.has_tools() {
            tools(&cell, stream).await;
        }
        if client.has_thinking() {
            thinking(&cell, stream).await;
        }
    }
    env.stop().await;
}

/// Parallel calls with their arguments intact and indexed, then their
/// results fed back and seen by the vendor.
async fn tools(cell: &Cell<'_>, stream: bool) {
    let (client, vendor) = (cell.client, cell.vendor);
    let question = "weather and time in Paris";
    let ask = Ask::new(vendor.model(), &format!("{question} [[sim:parallel]]"))
        .tools(&["get_weather", "get_time"])
        .streamed(stream);
    let a = cell.ask(&ask).await;
    assert_eq!(
        a.finish.as_deref(),
        Some(word(client, vendor, Why::Tools).as_str()),
        "tools finish"
    );
    let names: Vec<&str> = a.calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["get_weather", "get_time"],
        "{client:?} → {vendor:?} stream={stream}"
    );
    assert_eq!(a.calls[0].args, serde_json::json!({"query": question}));
    assert_eq!(
        a.calls[1].args,
        serde_json::json!({"query": question, "index": 1})
    );
    if client != Client::Gemini {
        assert!(
            !a.calls[0].id.is_empty() && a.calls[0].id != a.calls[1].id,
            "ids: {:?}",
            a.calls
        );
    }
    cell.check_usage_and_charge(&a).await;

    let results = vec![
        (a.calls[0].clone(), "sunny and mild".to_string()),
        (a.calls[1].clone(), "noon exactly".to_string()),
    ];
    let next = ask.then(&a, Turn::Results(results));
    let b = cell.ask(&next).await;
    assert!(
        b.text.starts_with("Simulated reply to: noon exactly."),
        "the vendor answered the last result: {:?}",
        b.text
    );
    let sent = cell.env.sim.requests().last().unwrap().body.clone();
    let sent = String::from_utf8_lossy(&sent);
    for (call, text) in [
        (&a.calls[0], "sunny and mild"),
        (&a.calls[1], "noon exactly"),
    ] {
        assert!(sent.contains(text), "the vendor got result {text}: {sent}");
        if vendor != Vendor::Gemini && client != Client::Gemini {
            assert!(
                sent.contains(&call.id),
                "the vendor got call id {}: {sent}",
                call.id
            );
        }
    }
}

/// Thinking reaches the client; a signature survives a round trip wherever
/// both sides carry one (the simulator refuses a wrong one).
async fn thinking(cell: &Cell<'_>, stream: bool) {
    let (client, vendor) = (cell.client, cell.vendor);
    let ask = Ask::new(vendor.model(), "why is the sky blue")
        .thinking(true)
        .max_tokens(2000)
        .streamed(stream);
    let a = cell.ask(&ask).await;
    assert_eq!(
        a.thinking, REASONING,
        "{client:?} → {vendor:?} stream={stream}"
    );
    if client.has_signatures() && vendor.has_signatures() {
        assert!(
            a.signature.is_some(),
            "{client:?} → {vendor:?}: the signature reached the client"
        );
    }
    // The vendors that count reasoning counted it (one token a word), so the
    // check of the recorded count below compares something.
    if let Some(reasoning) = vendor.reasoning(&cell.vendor_usage()) {
        assert_eq!(reasoning, REASONING.split_whitespace().count() as u64);
    }
    cell.check_usage_and_charge(&a).await;
    let next = ask.then(&a, Turn::User("and at sunset".into()));
    let b = cell.ask(&next).await;
    assert!(b.text.starts_with("Simulated reply to: and at sunset."));
    if client.has_signatures() && vendor.has_signatures() {
        let sig = a.signature.clone().unwrap_or_default();
        let sent =
            String::from_utf8_lossy(&cell.env.sim.requests().last().unwrap().body).into_owned();
        assert!(
            sent.contains(&sig),
            "the signature went back to the vendor unchanged"
        );
    }
    // Switching thinking off, in the client's spelling, reaches the vendor in its own.
    let off = cell
        .ask(
            &Ask::new(vendor.model(), "why is the sky blue")
                .thinking(false)
                .streamed(stream),
        )
        .await;
    assert!(off.thinking.is_empty(), "thinking off: {:?}", off.thinking);
}

macro_rules! cells {
    ($($name:ident: $client:ident => $vendor:ident;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            run_cell(Client::$client, Vendor::$vendor).await;
        }
    )*};
}

cells! {
    chat_to_openai: Chat => OpenAi;
    chat_to_anthropic: Chat => Anthropic;
    chat_to_gemini: Chat => Gemini;
    completions_to_openai: Completions => OpenAi;
    completions_to_anthropic: Completions => Anthropic;
    completions_to_gemini: Completions => Gemini;
    responses_to_openai: Responses => OpenAi;
    responses_to_anthropic: Responses => Anthropic;
    responses_to_gemini: Responses => Gemini;
    messages_to_openai: Messages => OpenAi;
    messages_to_anthropic: Messages => Anthropic;
    messages_to_gemini: Messages => Gemini;
    gemini_to_openai: Gemini => OpenAi;
    gemini_to_anthropic: Gemini => Anthropic;
    gemini_to_gemini: Gemini => Gemini;
}
