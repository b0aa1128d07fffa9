//! Prices, quota arithmetic, and holding / settling money for calls.

pub mod hold;
pub mod ledger;
pub mod meters;
pub mod money;
pub mod text;
pub mod tokens;
pub mod usage;

use crate::error::ApiError;
use ledger::ReserveRefusal;
use money::{Currency, Quota};

/// The client's view of a refused hold of `amount`.
pub fn refusal_error(refusal: ReserveRefusal, amount: Quota, cur: &Currency) -> ApiError {
    match refusal {
        ReserveRefusal::Insufficient { balance } => ApiError::InsufficientQuota {
            required: amount,
            required_cny: cur.format_cny(amount),
            balance,
            balance_cny: cur.format_cny(balance),
        },
        ReserveRefusal::TokenQuota { limit, used } => ApiError::TokenQuotaExhausted {
            limit_cny: cur.format_cny(limit),
            used_cny: cur.format_cny(used),
        },
        ReserveRefusal::NoAccount => ApiError::InvalidToken,
    }
}
