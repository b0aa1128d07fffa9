//! Prices, quota arithmetic, and holding / settling money for calls.

pub mod hold;
pub mod ledger;
pub mod money;
pub mod text;
