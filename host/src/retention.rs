//! Removing records that have outlived their use.
//!
//! Quotes, idempotency records and finished webhook events only matter for a
//! while; kept for ever they make the store grow with every submission. The
//! store keeps each kind in a time index and removes the oldest in bounded
//! batches (`Store::sweep`, one transaction per batch, so calls writing
//! meanwhile wait for one short batch at most). This module decides when:
//! every `[retention] sweep_every_secs`, and on the admin API's request, with
//! the cut-offs from the config and the injected clock.
//!
//! Money records (ledger, holds, usage rows) are not swept here: they are
//! the books.

use crate::state::SharedState;
use crate::store::video::{Retention, Swept};
use crate::store::StoreError;
use std::sync::Arc;

/// The cut-offs for a sweep at the clock's now.
fn rules(state: &SharedState) -> Retention {
    let r = &state.config.retention;
    Retention {
        now: state.clock.now_secs(),
        quotes_after_expiry_secs: r.quotes_after_expiry_secs,
        idempotency_window_secs: state.config.video.idempotency_window_secs,
        delivered_events_secs: r.delivered_events_secs,
        dead_events_secs: r.dead_events_secs,
        batch: r.sweep_batch,
    }
}

/// Sweeps batch after batch until nothing more is due; returns the total.
pub async fn sweep(state: &SharedState) -> Result<Swept, StoreError> {
    let rules = rules(state);
    let mut total = Swept::default();
    loop {
        let swept = state.store.sweep(rules).await?;
        total.quotes += swept.quotes;
        total.idempotency += swept.idempotency;
        total.events += swept.events;
        if !swept.full(rules.batch) {
            break;
        }
        // Let other writers in between batches.
        tokio::task::yield_now().await;
    }
    if total != Swept::default() {
        tracing::info!(
            quotes = total.quotes,
            idempotency = total.idempotency,
            webhook_events = total.events,
            "removed records past their retention"
        );
    }
    Ok(total)
}

/// Sweeps every `sweep_every` while the gateway runs.
pub fn spawn(state: &SharedState) {
    let weak = Arc::downgrade(state);
    let every = state.config.retention.sweep_every;
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let Some(state) = weak.upgrade() else { break };
            if let Err(e) = sweep(&state).await {
                tracing::error!("retention sweep failed: {e}");
            }
        }
    });
}
