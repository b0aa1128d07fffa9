//! Money held for one call in flight.
//!
//! A [`Hold`] is created by a successful reservation and must end in
//! [`Hold::settle`] (the call's real cost, the rest let go) or
//! [`Hold::release`] (nothing charged). If it is dropped without either —
//! an early return, a panic, a cancelled request — the drop releases it in
//! the background, so no code path can leave money stuck.

use super::ledger::{Ledger, Settlement};
use super::money::Quota;
use crate::store::records::UsageRecord;
use crate::store::StoreError;
use std::sync::Arc;

pub struct Hold {
    ledger: Arc<Ledger>,
    id: String,
    amount: Quota,
    now: i64,
    open: bool,
}

impl Hold {
    pub fn new(ledger: Arc<Ledger>, reservation_id: String, amount: Quota, now: i64) -> Hold {
        Hold {
            ledger,
            id: reservation_id,
            amount,
            now,
            open: true,
        }
    }

    pub fn amount(&self) -> Quota {
        self.amount
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Charges `cost` (the usage row records it) and lets go of the rest.
    pub async fn settle(
        mut self,
        cost: Quota,
        usage: Option<UsageRecord>,
        now: i64,
    ) -> Result<Settlement, StoreError> {
        self.open = false;
        self.ledger.settle(&self.id, cost, usage, now).await
    }

    /// Charges nothing.
    pub async fn release(
        self,
        usage: Option<UsageRecord>,
        now: i64,
    ) -> Result<Settlement, StoreError> {
        self.settle(0, usage, now).await
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        let (ledger, id, now) = (self.ledger.clone(), std::mem::take(&mut self.id), self.now);
        let refund = async move {
            if let Err(e) = ledger.settle(&id, 0, None, now).await {
                tracing::error!("releasing abandoned hold {id} failed: {e}");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                h.spawn(refund);
            }
            // Outside a runtime (shutdown): a text hold lives in memory only
            // and ends with the process, having taken nothing.
            Err(_) => {
                tracing::warn!("a hold left open at shutdown ended with it; nothing was charged")
            }
        }
    }
}
