//! One call's money and capacity (chat or an endpoint family), owned by one value from the moment
//! the estimate is held to the moment the real usage is settled.
//!
//! A [`Charge`] holds the reservation, the group's concurrency permit and
//! what the usage row will say (caller, model, channel, stream). It ends in
//! exactly one of [`Charge::settle`] (the vendor's usage is billed) or
//! [`Charge::release`] (nothing is billed); both consume it, so no path can
//! settle twice, and both write the usage row and free the permit. Dropped
//! without either — a panic, a cancelled task — it releases the hold in the
//! background and still records the call.

use crate::api::body::BodyLease;
use crate::auth::Caller;
use crate::billing::hold::Hold;
use crate::billing::text as pricing;
use crate::billing::tokens::{self, Encoding};
use crate::billing::usage::{Meter, Usage};
use crate::config::ModelConfig;
use crate::error::ApiError;
use crate::plugins::bindings::types::Protocol;
use crate::state::SharedState;
use crate::store::records::{ReservationKind, UsageRecord};
use bytes::Bytes;
use std::sync::Arc;
use tokio::sync::OwnedSemaphorePermit;
use tracing::Instrument;

pub struct Charge {
    state: SharedState,
    caller: Caller,
    model: Arc<ModelConfig>,
    stream: bool,
    channel: Option<String>,
    hold: Option<Hold>,
    permit: Option<OwnedSemaphorePermit>,
    /// The prompt's estimated tokens (for the hold), billed when the
    /// vendor did not say how long the prompt was and the request is not
    /// one whose prompt the gateway can count.
    prompt_tokens_estimate: u64,
    /// The request, when it is one of a chat protocol: its prompt is then
    /// counted with the model's tokenizer when the vendor is silent.
    prompt: Option<(Protocol, Bytes)>,
    /// The request body's place in the body budget, held while the body is.
    _lease: Option<BodyLease>,
    /// The request's span (`telemetry`; none when tracing is off): the
    /// settlement's parent, also for a stream settled after the answer's
    /// head went out.
    span: tracing::Span,
}

impl Charge {
    /// Takes a concurrency slot of the caller's group and holds the estimate
    /// for a call with this prompt, output cap and meters.
    pub async fn open(
        state: &SharedState,
        caller: &Caller,
        model: Arc<ModelConfig>,
        stream: bool,
        prompt_tokens_estimate: u64,
        max_output_tokens: Option<u64>,
        meters: &[Meter],
    ) -> Result<Charge, ApiError> {
        let group = state
            .ledger
            .account(&caller.token.account_id)
            .ok_or(ApiError::InvalidToken)?
            .group;
        let permit = state
            .groups
            .acquire(&group)
            .map_err(|limit| ApiError::GroupConcurrency { group, limit })?;
        let max_out = max_output_tokens
            .or(model.default_max_tokens)
            .unwrap_or(state.config.default_max_tokens);
        let amount = pricing::estimate(&model, prompt_tokens_estimate, max_out, meters);
        let now = state.clock.now_secs();
        let outcome = state
            .ledger
            .reserve(
                &caller.token.account_id,
                Some(&caller.token.id),
                amount,
                ReservationKind::Text,
                &caller.info.id,
                now,
            )
            .instrument(crate::telemetry::span!("reserve"))
            .await
            .map_err(ApiError::internal)?;
        let hold = match outcome {
            Ok(res) => Hold::new(state.ledger.clone(), res.id, amount, now),
            Err(refusal) => {
                return Err(crate::billing::refusal_error(
                    refusal,
                    amount,
                    &state.config.currency,
                ))
            }
        };
        Ok(Charge {
            state: state.clone(),
            caller: caller.clone(),
            model,
            stream,
            channel: None,
            hold: Some(hold),
            permit,
            prompt_tokens_estimate,
            prompt: None,
            _lease: None,
            span: crate::telemetry::current(),
        })
    }

    /// Lets the gateway count the prompt of this chat-protocol request
    /// itself when the vendor does not report it; the body's `lease` in the
    /// request-body budget goes with it, as the body now lives as long as
    /// the call.
    pub fn count_prompt_of(&mut self, protocol: Protocol, body: Bytes, lease: Option<BodyLease>) {
        self.prompt = Some((protocol, body));
        self._lease = lease;
    }

    /// The prompt's tokens by the gateway's own count (`billing::tokens`),
    /// or the hold's estimate for a request it cannot count. A large prompt
    /// takes a while to count: it is counted off the async workers.
    async fn counted_prompt_tokens(&self) -> u64 {
        let Some((protocol, body)) = self.prompt.clone() else {
            return self.prompt_tokens_estimate;
        };
        let encoding = self.model.tokenizer;
        tokio::task::spawn_blocking(move || tokens::prompt_tokens(encoding, protocol, &body))
            .await
            .unwrap_or(self.prompt_tokens_estimate)
    }

    /// Counts `text` with the model's tokenizer.
    pub fn count_tokens(&self, text: &str) -> u64 {
        self.model.tokenizer.count(text)
    }

    pub fn encoding(&self) -> Encoding {
        self.model.tokenizer
    }

    /// The channel now being tried (recorded on the usage row).
    pub fn at_channel(&mut self, name: &str) {
        self.channel = Some(name.to_string());
    }

    pub fn request_id(&self) -> &str {
        &self.caller.info.id
    }

    fn usage_row(&self, usage: Option<&Usage>, status: u16, error: Option<String>) -> UsageRecord {
        let u = usage.cloned().unwrap_or_default();
        UsageRecord {
            seq: 0,
            at: self.state.clock.now_secs(),
            request_id: self.caller.info.id.clone(),
            account_id: self.caller.token.account_id.clone(),
            token_id: Some(self.caller.token.id.clone()),
            model: self.model.name.clone(),
            channel: self.channel.clone(),
            input_tokens: u.input_tokens,
            cached_tokens: u.cache_read_tokens,
            cache_write_tokens: u.cache_write_tokens,
            output_tokens: u.output_tokens,
            reasoning_tokens: u.reasoning_tokens,
            meters: u.meters,
            counted_by_gateway: u.counted_by_gateway,
            cost: 0,
            latency_ms: self.caller.info.started.elapsed().as_millis() as u64,
            status,
            stream: self.stream,
            error,
        }
    }

    /// Bills `usage` at the model's prices (nothing when the vendor reported
    /// none), lets go of the rest of the hold, writes the usage row and frees
    /// the concurrency slot. Logged before it returns, so an answer sent
    /// after it can never be lost to a crash.
    pub async fn settle(mut self, usage: Option<&Usage>, status: u16, note: Option<String>) {
        let cost = usage.map(|u| pricing::cost(&self.model, u)).unwrap_or(0);
        self.close(cost, usage, status, note).await;
    }

    /// Bills what the gateway counted where the vendor was silent: a stream
    /// cut short, or an answer without usage (see `relay::relayed`). The
    /// vendor's usage as far as it reported it, with at least the
    /// `output_tokens` the gateway counted in what the client got, and the
    /// gateway's count of the prompt when the vendor never gave its length.
    /// Returns the usage billed.
    pub async fn settle_counted(
        self,
        vendor: Option<Usage>,
        output_tokens: u64,
        status: u16,
        note: String,
    ) -> Usage {
        let vendor = vendor.filter(|u| !u.is_empty());
        let prompt = match &vendor {
            Some(u) if u.input_tokens > 0 => 0,
            _ => self.counted_prompt_tokens().await,
        };
        let usage = counted_usage(vendor, prompt, output_tokens);
        self.settle(Some(&usage), status, Some(note)).await;
        usage
    }

    /// Charges nothing; records why.
    pub async fn release(mut self, status: u16, why: String) {
        self.close(0, None, status, Some(why)).await;
    }

    async fn close(&mut self, cost: i64, usage: Option<&Usage>, status: u16, note: Option<String>) {
        let row = self.usage_row(usage, status, note);
        let now = self.state.clock.now_secs();
        self.state.metrics.charged(&self.model.name, usage, cost);
        let span = self.span.in_scope(|| {
            crate::telemetry::span!("settle", gateway.model = %self.model.name, gateway.quota = cost)
        });
        if let Some(hold) = self.hold.take() {
            if let Err(e) = hold.settle(cost, Some(row), now).instrument(span).await {
                tracing::error!(request_id = %self.caller.info.id, "settling failed: {e}");
            }
        }
        self.permit.take();
    }
}

/// The vendor's usage completed by the gateway's counts; the parts the
/// gateway supplied mark it gateway-counted.
fn counted_usage(vendor: Option<Usage>, prompt: u64, relayed_output: u64) -> Usage {
    let mut u = vendor.unwrap_or_default();
    if u.input_tokens == 0 {
        u.input_tokens = prompt;
        u.counted_by_gateway = true;
    }
    if relayed_output > u.output_tokens {
        u.output_tokens = relayed_output;
        u.counted_by_gateway = true;
    }
    u.consistent()
}

impl Drop for Charge {
    fn drop(&mut self) {
        let Some(hold) = self.hold.take() else { return };
        let row = self.usage_row(None, 500, Some("the call ended without settling".into()));
        let now = self.state.clock.now_secs();
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                h.spawn(async move {
                    if let Err(e) = hold.release(Some(row), now).await {
                        tracing::error!("releasing an abandoned hold failed: {e}");
                    }
                });
            }
            // Outside a runtime the hold ends with the process (its drop says so).
            Err(_) => drop(hold),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_stream_bills_the_vendors_numbers_and_at_least_what_was_relayed() {
        // The vendor said nothing: the prompt estimate and the relayed text.
        let u = counted_usage(None, 40, 12);
        assert_eq!(
            (u.input_tokens, u.output_tokens, u.counted_by_gateway),
            (40, 12, true)
        );
        // Anthropic reports the prompt at the start and one output token.
        let start = Usage {
            input_tokens: 25,
            cache_read_tokens: 5,
            output_tokens: 1,
            ..Usage::default()
        };
        let u = counted_usage(Some(start), 40, 12);
        assert_eq!(
            (u.input_tokens, u.cache_read_tokens, u.output_tokens),
            (25, 5, 12)
        );
        assert!(u.counted_by_gateway);
        // The whole usage arrived before the client left: the vendor's wins.
        let whole = Usage {
            input_tokens: 25,
            output_tokens: 300,
            reasoning_tokens: 100,
            ..Usage::default()
        };
        let u = counted_usage(Some(whole.clone()), 40, 12);
        assert_eq!(u, whole);
    }
}
