//! Model policies edit the vendor request, after translation, in the
//! vendor's dialect — so one policy per quirk serves every client protocol.
//! `keep-thinking` keeps thinking on for a model that always thinks, and
//! `drop-sampling` drops `temperature` for one whose upstream rejects it;
//! without a policy, each client protocol's "thinking off" reaches the
//! vendor in the vendor's own spelling and is obeyed.

use crate::common::protocols::{Ask, Client};
use crate::common::*;
use crate::matrix::Vendor;
use serde_json::Value;

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

fn temperature_of(vendor: Vendor, body: &Value) -> Value {
    match vendor {
        Vendor::Gemini => body["generationConfig"]["temperature"].clone(),
        _ => body["temperature"].clone(),
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
            let what = format!("{client:?} → {vendor:?}");
            // No policy: "off" in the client's words is "off" in the vendor's.
            let ask = Ask::new(plain, "why is the sky blue")
                .thinking(false)
                .temperature(0.3);
            let a = client.ask(&env.http, &env.url(""), &key, &ask).await;
            assert_eq!(a.status, 200, "{what}: {:?}", a.error);
            assert!(a.thinking.is_empty(), "{what}: thinking was switched off");
            let sent = env.sim.requests().last().unwrap().json().unwrap();
            assert!(says_off(vendor, &sent), "{what}: {sent}");
            assert_eq!(
                temperature_of(vendor, &sent),
                0.3,
                "{what}: no policy, no edit"
            );

            // keep-thinking and drop-sampling, in the vendor's dialect.
            let ask = Ask::new(quirky, "why is the sky blue")
                .thinking(false)
                .temperature(0.3);
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
                temperature_of(vendor, &sent),
                Value::Null,
                "{what}: temperature dropped: {sent}"
            );
        }
    }
    env.stop().await;
}
