//! The records kept in the store, as serialised into redb values: JSON,
//! except usage rows and ledger entries (`compact`).

use crate::billing::money::Quota;
use crate::billing::usage::Meter;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Account {
    pub id: String,
    pub name: String,
    /// Concurrency group for text calls.
    pub group: String,
    pub created_at: i64,
    /// Always equal to the sum of the account's ledger amounts.
    pub balance: Quota,
    /// Sequence number of the newest ledger entry.
    pub ledger_seq: u64,
    /// Everything ever credited (trial credit and top-ups), for the
    /// dashboard's "hard limit".
    #[serde(default)]
    pub credited: Quota,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LedgerKind {
    /// New-account credit.
    Trial,
    TopUp,
    /// A text call's cost, taken when the call ends (negative amount; its
    /// hold lived only in the ledger's memory). `charged` repeats the cost
    /// and `reference` is the call's request id.
    Charge,
    /// Money held for a video task (negative amount); in a database written
    /// before text holds moved to memory, also for a text call.
    Reserve,
    /// A call's real cost confirmed. Its amount is zero when the reservation
    /// covered the cost (the money already left the balance at `reserve`);
    /// negative when the cost ran past the reservation and the difference
    /// was taken from the balance.
    Settle,
    /// The unspent part of a reservation returned (positive amount).
    Refund,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LedgerEntry {
    pub seq: u64,
    pub kind: LedgerKind,
    /// Change to the balance.
    pub amount: Quota,
    pub balance_after: Quota,
    /// What the entry is about: a reservation id, task id or operator note.
    pub reference: String,
    pub at: i64,
    /// For `settle`: the amount charged for the call in total.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charged: Option<Quota>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TokenStatus {
    Active,
    Disabled,
    Deleted,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Token {
    pub id: String,
    pub account_id: String,
    pub name: String,
    /// Hex SHA-256 of the key; the key itself is never stored.
    pub key_hash: String,
    /// Shown in listings so people can tell keys apart (`sk-abcd…wxyz`).
    pub key_hint: String,
    /// Model whitelist; `None` allows every model.
    pub models: Option<Vec<String>>,
    /// IP whitelist (CIDRs or addresses); `None` allows every address.
    pub ips: Option<Vec<String>>,
    /// Spending cap in quota units; `None` means no cap.
    pub quota_limit: Option<Quota>,
    /// Charged so far.
    pub used: Quota,
    /// Held by calls in flight.
    pub reserved: Quota,
    /// Unix seconds; `None` never expires.
    pub expires_at: Option<i64>,
    pub status: TokenStatus,
    pub created_at: i64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ReservationKind {
    Text,
    Video,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Reservation {
    pub id: String,
    pub account_id: String,
    pub token_id: Option<String>,
    pub amount: Quota,
    pub kind: ReservationKind,
    /// Request id (text) or task id (video).
    pub reference: String,
    pub created_at: i64,
}

/// One row per billed call.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct UsageRecord {
    #[serde(default)]
    pub seq: u64,
    pub at: i64,
    pub request_id: String,
    pub account_id: String,
    pub token_id: Option<String>,
    pub model: String,
    pub channel: Option<String>,
    /// All prompt tokens (cache reads and writes included).
    pub input_tokens: u64,
    /// The part of `input_tokens` read from the vendor's cache.
    pub cached_tokens: u64,
    /// The part of `input_tokens` written to the vendor's cache.
    #[serde(default)]
    pub cache_write_tokens: u64,
    pub output_tokens: u64,
    pub reasoning_tokens: u64,
    /// The non-token quantities billed (images, characters, audio ms, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub meters: Vec<Meter>,
    /// The quantities were measured by the gateway, not reported by the
    /// vendor.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub counted_by_gateway: bool,
    /// Quota units charged.
    pub cost: Quota,
    pub latency_ms: u64,
    /// HTTP status the client saw.
    pub status: u16,
    pub stream: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One change to the money-related records, as logged in the write-ahead log
/// and folded into redb by the checkpointer. Every fact is an upsert or a
/// delete keyed by id, so applying one twice is harmless, and of several
/// `Balance` / `TokenMoney` facts for the same id only the last matters.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "fact", rename_all = "snake_case")]
pub enum Fact {
    /// A new account (its balance then moves by `Balance` facts).
    Account(Account),
    Ledger {
        account_id: String,
        entry: LedgerEntry,
    },
    /// An account's balance and ledger position after a change.
    Balance {
        account_id: String,
        balance: Quota,
        ledger_seq: u64,
        credited: Quota,
    },
    /// A token's settings (new token, status change).
    Token(Token),
    /// A token's spending after a change.
    TokenMoney {
        token_id: String,
        used: Quota,
        reserved: Quota,
    },
    HoldOpened(Reservation),
    HoldClosed {
        id: String,
    },
    Usage(UsageRecord),
}
