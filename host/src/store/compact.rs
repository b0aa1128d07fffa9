//! The binary form of the two records every billed call appends for good:
//! its usage row and its ledger entry.
//!
//! They are most of what the store grows by, and they are written once and
//! read rarely (dashboards, admin reads), so they are laid out for size, not
//! for reading by eye: a version byte, then the record in `postcard` (varint
//! integers, length-prefixed strings, fields in declaration order) with the
//! generated ids (`req_`, `acct_`, `tok_`, ... followed by 32 hex digits)
//! packed into their 16 bytes. A usage row takes about 100 bytes this way
//! against some 400 as JSON. The key already holds the row's number (a usage
//! row's `seq`, a ledger entry's `seq`), so the value does not repeat it.
//!
//! Rows written by earlier versions are JSON, which always starts with `{`;
//! a binary value starts with its version byte, so both read back and
//! nothing is rewritten. The wire structs below are the format: a new field
//! goes at the end under a new version byte, and a new `LedgerKind` or
//! `MeterKind` variant goes after the existing ones (postcard stores a
//! variant by its position).

use super::records::{LedgerEntry, LedgerKind, UsageRecord};
use super::StoreError;
use crate::billing::money::Quota;
use crate::billing::usage::{Meter, MeterKind};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// The first byte of a binary value.
const V1: u8 = 1;

/// Prefixes of the ids the gateway generates (`ids::new_id`), by position.
const PREFIXES: [&str; 8] = [
    "req_", "acct_", "tok_", "res_", "task_", "quote_", "evt_", "",
];

/// An id as stored: a generated one packed, anything else as it is.
#[derive(Serialize, Deserialize)]
enum Id<'a> {
    Packed(u8, [u8; 16]),
    #[serde(borrow)]
    Text(Cow<'a, str>),
}

impl<'a> Id<'a> {
    fn pack(id: &'a str) -> Id<'a> {
        for (i, prefix) in PREFIXES.iter().enumerate() {
            if let Some(hex_part) = id.strip_prefix(prefix) {
                let mut bytes = [0u8; 16];
                // Only lowercase hex round-trips through `hex::encode`.
                let lower = !hex_part.bytes().any(|b| b.is_ascii_uppercase());
                if hex_part.len() == 32
                    && lower
                    && hex::decode_to_slice(hex_part, &mut bytes).is_ok()
                {
                    return Id::Packed(i as u8, bytes);
                }
            }
        }
        Id::Text(Cow::Borrowed(id))
    }

    fn unpack(self) -> Result<String, String> {
        match self {
            Id::Packed(i, bytes) => {
                let prefix = PREFIXES
                    .get(usize::from(i))
                    .ok_or_else(|| format!("unknown id prefix {i}"))?;
                Ok(format!("{prefix}{}", hex::encode(bytes)))
            }
            Id::Text(s) => Ok(s.into_owned()),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct MeterWire<'a> {
    kind: MeterKind,
    quantity: u64,
    #[serde(borrow)]
    detail: Option<Cow<'a, str>>,
}

#[derive(Serialize, Deserialize)]
struct UsageWire<'a> {
    at: i64,
    #[serde(borrow)]
    request_id: Id<'a>,
    #[serde(borrow)]
    account_id: Id<'a>,
    #[serde(borrow)]
    token_id: Option<Id<'a>>,
    #[serde(borrow)]
    model: Cow<'a, str>,
    #[serde(borrow)]
    channel: Option<Cow<'a, str>>,
    input_tokens: u64,
    cached_tokens: u64,
    cache_write_tokens: u64,
    output_tokens: u64,
    reasoning_tokens: u64,
    #[serde(borrow)]
    meters: Vec<MeterWire<'a>>,
    counted_by_gateway: bool,
    cost: Quota,
    latency_ms: u64,
    status: u16,
    stream: bool,
    #[serde(borrow)]
    error: Option<Cow<'a, str>>,
}

#[derive(Serialize, Deserialize)]
struct LedgerWire<'a> {
    kind: LedgerKind,
    amount: Quota,
    balance_after: Quota,
    #[serde(borrow)]
    reference: Id<'a>,
    at: i64,
    charged: Option<Quota>,
}

fn with_version<T: Serialize>(wire: &T) -> Vec<u8> {
    let mut out = vec![V1];
    // Serialising plain structs into a vector cannot fail.
    if let Ok(body) = postcard::to_allocvec(wire) {
        out.extend_from_slice(&body);
    }
    out
}

fn corrupt(table: &'static str, detail: impl ToString) -> StoreError {
    StoreError::Corrupt {
        table,
        detail: detail.to_string(),
    }
}

/// A usage row's value (its `seq` is the key).
pub(crate) fn encode_usage(u: &UsageRecord) -> Vec<u8> {
    with_version(&UsageWire {
        at: u.at,
        request_id: Id::pack(&u.request_id),
        account_id: Id::pack(&u.account_id),
        token_id: u.token_id.as_deref().map(Id::pack),
        model: Cow::Borrowed(&u.model),
        channel: u.channel.as_deref().map(Cow::Borrowed),
        input_tokens: u.input_tokens,
        cached_tokens: u.cached_tokens,
        cache_write_tokens: u.cache_write_tokens,
        output_tokens: u.output_tokens,
        reasoning_tokens: u.reasoning_tokens,
        meters: u
            .meters
            .iter()
            .map(|m| MeterWire {
                kind: m.kind,
                quantity: m.quantity,
                detail: m.detail.as_deref().map(Cow::Borrowed),
            })
            .collect(),
        counted_by_gateway: u.counted_by_gateway,
        cost: u.cost,
        latency_ms: u.latency_ms,
        status: u.status,
        stream: u.stream,
        error: u.error.as_deref().map(Cow::Borrowed),
    })
}

/// Reads a usage row stored under `seq`, binary or (older) JSON.
pub(crate) fn decode_usage(seq: u64, bytes: &[u8]) -> Result<UsageRecord, StoreError> {
    const TABLE: &str = "usage";
    let Some((&V1, body)) = bytes.split_first() else {
        let mut u: UsageRecord = super::decode(TABLE, bytes)?;
        u.seq = seq;
        return Ok(u);
    };
    let w: UsageWire = postcard::from_bytes(body).map_err(|e| corrupt(TABLE, e))?;
    Ok(UsageRecord {
        seq,
        at: w.at,
        request_id: w.request_id.unpack().map_err(|e| corrupt(TABLE, e))?,
        account_id: w.account_id.unpack().map_err(|e| corrupt(TABLE, e))?,
        token_id: w
            .token_id
            .map(Id::unpack)
            .transpose()
            .map_err(|e| corrupt(TABLE, e))?,
        model: w.model.into_owned(),
        channel: w.channel.map(Cow::into_owned),
        input_tokens: w.input_tokens,
        cached_tokens: w.cached_tokens,
        cache_write_tokens: w.cache_write_tokens,
        output_tokens: w.output_tokens,
        reasoning_tokens: w.reasoning_tokens,
        meters: w
            .meters
            .into_iter()
            .map(|m| Meter {
                kind: m.kind,
                quantity: m.quantity,
                detail: m.detail.map(Cow::into_owned),
            })
            .collect(),
        counted_by_gateway: w.counted_by_gateway,
        cost: w.cost,
        latency_ms: w.latency_ms,
        status: w.status,
        stream: w.stream,
        error: w.error.map(Cow::into_owned),
    })
}

/// A ledger entry's value (its `seq` is in the key).
pub(crate) fn encode_ledger(e: &LedgerEntry) -> Vec<u8> {
    with_version(&LedgerWire {
        kind: e.kind,
        amount: e.amount,
        balance_after: e.balance_after,
        reference: Id::pack(&e.reference),
        at: e.at,
        charged: e.charged,
    })
}

/// Reads a ledger entry stored under `seq`, binary or (older) JSON.
pub(crate) fn decode_ledger(seq: u64, bytes: &[u8]) -> Result<LedgerEntry, StoreError> {
    const TABLE: &str = "ledger";
    let Some((&V1, body)) = bytes.split_first() else {
        let mut e: LedgerEntry = super::decode(TABLE, bytes)?;
        e.seq = seq;
        return Ok(e);
    };
    let w: LedgerWire = postcard::from_bytes(body).map_err(|e| corrupt(TABLE, e))?;
    Ok(LedgerEntry {
        seq,
        kind: w.kind,
        amount: w.amount,
        balance_after: w.balance_after,
        reference: w.reference.unpack().map_err(|e| corrupt(TABLE, e))?,
        at: w.at,
        charged: w.charged,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> UsageRecord {
        UsageRecord {
            seq: 7,
            at: 1_790_000_000,
            request_id: crate::ids::new_request_id(),
            account_id: crate::ids::new_id("acct_"),
            token_id: Some(crate::ids::new_id("tok_")),
            model: "gpt-4o-mini".into(),
            channel: Some("sim".into()),
            input_tokens: 412,
            cached_tokens: 100,
            cache_write_tokens: 0,
            output_tokens: 220,
            reasoning_tokens: 40,
            meters: vec![Meter {
                kind: MeterKind::Images,
                quantity: 2,
                detail: Some("1024x1024/hd".into()),
            }],
            counted_by_gateway: true,
            cost: 636,
            latency_ms: 1_234,
            status: 200,
            stream: true,
            error: Some("client went away".into()),
        }
    }

    #[test]
    fn a_usage_row_round_trips_in_about_a_quarter_of_its_json() {
        let u = row();
        let bytes = encode_usage(&u);
        assert_eq!(decode_usage(7, &bytes).unwrap(), u);
        let json = serde_json::to_vec(&u).unwrap().len();
        assert!(bytes.len() * 3 < json, "{} vs {json}", bytes.len());
        let plain = UsageRecord {
            meters: vec![],
            error: None,
            counted_by_gateway: false,
            ..row()
        };
        assert!(
            encode_usage(&plain).len() <= 100,
            "{}",
            encode_usage(&plain).len()
        );
    }

    #[test]
    fn ids_that_are_not_generated_ones_are_kept_as_they_are() {
        for odd in [
            "",
            "r1",
            "req_",
            "req_0123456789ABCDEF0123456789abcdef",
            "req_0123456789abcdef0123456789abcdeg",
            "req_0123456789abcdef0123456789abcdef0",
            "trial credit",
            "0123456789abcdef0123456789abcdef",
        ] {
            let u = UsageRecord {
                request_id: odd.into(),
                account_id: odd.into(),
                token_id: Some(odd.into()),
                ..row()
            };
            assert_eq!(decode_usage(7, &encode_usage(&u)).unwrap(), u, "{odd:?}");
        }
    }

    #[test]
    fn a_ledger_entry_round_trips_and_older_json_still_reads() {
        for kind in [
            LedgerKind::Trial,
            LedgerKind::TopUp,
            LedgerKind::Charge,
            LedgerKind::Reserve,
            LedgerKind::Settle,
            LedgerKind::Refund,
        ] {
            let e = LedgerEntry {
                seq: 3,
                kind,
                amount: -636,
                balance_after: 2_499_364,
                reference: crate::ids::new_request_id(),
                at: 1_790_000_000,
                charged: Some(636),
            };
            let bytes = encode_ledger(&e);
            assert!(bytes.len() < 40, "{}", bytes.len());
            assert_eq!(decode_ledger(3, &bytes).unwrap(), e);
            let json = serde_json::to_vec(&e).unwrap();
            assert_eq!(decode_ledger(3, &json).unwrap(), e);
        }
        let u = row();
        assert_eq!(
            decode_usage(7, &serde_json::to_vec(&u).unwrap()).unwrap(),
            u
        );
    }

    #[test]
    fn a_damaged_value_is_reported_not_guessed() {
        let mut bytes = encode_usage(&row());
        bytes.truncate(10);
        assert!(matches!(
            decode_usage(1, &bytes),
            Err(StoreError::Corrupt { table: "usage", .. })
        ));
        assert!(decode_ledger(1, &[V1, 200]).is_err());
    }
}
