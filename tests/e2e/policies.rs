//! Model policies edit the vendor request, after translation, in the
//! vendor's dialect — so one policy per quirk serves every client protocol.
//! `keep-thinking` keeps thinking on for a model that always thinks, and
//! `drop-sampling` drops `temperature` and `top_p` for one whose upstream
//! rejects them; without a policy, each client protocol's "thinking off"
//! (an OpenAI chat client's in all three spellings) reaches the vendor in
//! the vendor's own spelling and is obeyed.

use crate::common::protocols::{Ask, Client, ThinkingOff};
use crate::common::*;
use crate::matrix::Vendor;
use serde_json::{json, Value};

/// Reasoning models (they think unless told not to): without policies, and
/// with keep-thinking + drop-sampling.
fn models(vendor: Vendor) -> (&'static str, &'static str) {
    match vendor {
        Vendor::OpenAi => ("deepseek-reasoner", "thinker"),
        Vendor::Anthropic => ("claude-reasoner", "claude-thinker"),
        Vendor::Gemini => ("gemini-reasoner", "gemini-thinker"),
    }
}

/// Whether the vendor request asks for thinking off, in the vendor's spelling.
fn says_off(vendor: Vendor, body: &Value) -> bool {
    match vendor {
        Vendor::OpenAi => {
            body["reasoning_effort"] == "none"
                || body["enable_thinking"] == false
                || body["thinking"]["type"] == "disabled"
        }
        Vendor::Anthropic => body["thinking"]["type"] == "disabled",
        // As the client spelled it on a passthrough (the google-genai SDK
        // writes snake_case inside `generationConfig`), or as the codec wrote it.
        Vendor::Gemini => {
            let t = &body["generationConfig"]["thinkingConfig"];
            t["thinkingBudget"] == 0 || t["thinking_budget"] == 0
        }
    }
}

/// The vendor request's `(temperature, top_p)`, in the vendor's spelling.
fn sampling_of(vendor: Vendor, body: &Value) -> (Value, Value) {
    match vendor {
        Vendor::Gemini => {
            let config = &body["generationConfig"];
            (config["temperature"].clone(), config["topP"].clone())
        }
        _ => (body["temperature"].clone(), body["top_p"].clone()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_rewrite_the_vendor_request_whatever_the_client_spoke() {
    let env = Env::start().await;
    let key = env.key().await;
    let clients = [
        Client::Chat,
        Client::Responses,
        Client::Messages,
        Client::Gemini,
    ];
    for vendor in [Vendor::OpenAi, Vendor::Anthropic, Vendor::Gemini] {
        let (plain, quirky) = models(vendor);
        for client in clients {
            // An OpenAI chat client has three ways to say "off"; the others one.
            let spellings: &[ThinkingOff] = if client == Client::Chat {
                &ThinkingOff::ALL
            } else {
                &[ThinkingOff::ReasoningEffortNone]
            };
            for &spelling in spellings {
                let what = format!("{client:?} ({spelling:?}) → {vendor:?}");
                // No policy: "off" in the client's words is "off" in the vendor's.
                let ask = Ask::new(plain, "why is the sky blue")
                    .thinking_off_as(spelling)
                    .temperature(0.3)
                    .top_p(0.9);
                let a = client.ask(&env.http, &env.url(""), &key, &ask).await;
                assert_eq!(a.status, 200, "{what}: {:?}", a.error);
                assert!(a.thinking.is_empty(), "{what}: thinking was switched off");
                let sent = env.sim.requests().last().unwrap().json().unwrap();
                assert!(says_off(vendor, &sent), "{what}: {sent}");
                assert_eq!(
                    sampling_of(vendor, &sent),
                    (json!(0.3), json!(0.9)),
                    "{what}: no policy, no edit: {sent}"
                );

                // keep-thinking and drop-sampling, in the vendor's dialect.
                let ask = Ask::new(quirky, "why is the sky blue")
                    .thinking_off_as(spelling)
                    .temperature(0.3)
                    .top_p(0.9);
                let a = client.ask(&env.http, &env.url(""), &key, &ask).await;
                assert_eq!(a.status, 200, "{what}: {:?}", a.error);
                assert_eq!(
                    a.thinking, "Let me think about this step by step.",
                    "{what}: kept thinking"
                );
                let sent = env.sim.requests().last().unwrap().json().unwrap();
                assert!(
                    !says_off(vendor, &sent),
                    "{what}: the off switch was removed: {sent}"
                );
                assert_eq!(
                    sampling_of(vendor, &sent),
                    (Value::Null, Value::Null),
                    "{what}: temperature and top_p dropped: {sent}"
                );
            }
        }
    }
    env.stop().await;
}
