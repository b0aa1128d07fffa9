//! The binary form of the two records every billed call appends for good:
//! its usage row and its ledger entry.
//!
//! They are most of what the store grows by, and they are written once and
//! read rarely (dashboards, admin reads), so they are laid out for size, not
//! for reading by eye: `postcard` (varint integers, length-prefixed strings,
//! fields in declaration order), with the generated ids (`req_`, `acct_`,
//! `tok_`, ... followed by 32 hex digits) packed into their 16 bytes.
//!
//! They are stored in blocks of one account's rows (`history`): a version
//! byte (2), then the rows, with the strings they share (token ids, model
//! and channel names) once per block and `seq` and `at` as steps from the
//! row before. The account is in the block's key. A text call's usage row
//! takes some 45 bytes this way and its `charge` entry some 32.
//!
//! Older versions stored a row per key: JSON (which always starts with `{`),
//! then version byte 1 and one row in postcard. Those are read only to move
//! them into blocks (`history::migrate`). The wire structs below are the
//! format: a new field goes at the end under a new version byte, and a new
//! `LedgerKind` or `MeterKind` variant goes after the existing ones (postcard
//! stores a variant by its position).

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

/// What a usage row measured and charged: the same fields, in the same
/// order, at the end of both row forms (postcard writes a nested struct as
/// its fields one after another, so nesting changes no byte).
#[derive(Serialize, Deserialize)]
struct FiguresWire<'a> {
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

impl<'a> FiguresWire<'a> {
    fn of(u: &'a UsageRecord) -> FiguresWire<'a> {
        FiguresWire {
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
        }
    }

    /// A row with these figures (its other fields empty).
    fn into_record(self) -> UsageRecord {
        UsageRecord {
            input_tokens: self.input_tokens,
            cached_tokens: self.cached_tokens,
            cache_write_tokens: self.cache_write_tokens,
            output_tokens: self.output_tokens,
            reasoning_tokens: self.reasoning_tokens,
            meters: self
                .meters
                .into_iter()
                .map(|m| Meter {
                    kind: m.kind,
                    quantity: m.quantity,
                    detail: m.detail.map(Cow::into_owned),
                })
                .collect(),
            counted_by_gateway: self.counted_by_gateway,
            cost: self.cost,
            latency_ms: self.latency_ms,
            status: self.status,
            stream: self.stream,
            error: self.error.map(Cow::into_owned),
            ..UsageRecord::default()
        }
    }
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
    #[serde(borrow)]
    figures: FiguresWire<'a>,
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

/// A value: its version byte, then `wire` in postcard.
fn with_version<T: Serialize>(version: u8, wire: &T) -> Vec<u8> {
    let mut out = vec![version];
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

/// A usage row's value (its `seq` is the key), as versions before blocks
/// wrote it (tests write old databases with it).
#[cfg(test)]
pub(crate) fn encode_usage(u: &UsageRecord) -> Vec<u8> {
    with_version(
        V1,
        &UsageWire {
            at: u.at,
            request_id: Id::pack(&u.request_id),
            account_id: Id::pack(&u.account_id),
            token_id: u.token_id.as_deref().map(Id::pack),
            model: Cow::Borrowed(&u.model),
            channel: u.channel.as_deref().map(Cow::Borrowed),
            figures: FiguresWire::of(u),
        },
    )
}

/// Reads a usage row an older version stored under `seq`, binary or JSON.
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
        ..w.figures.into_record()
    })
}

/// A ledger entry's value (its `seq` is in the key), as versions before
/// blocks wrote it.
#[cfg(test)]
pub(crate) fn encode_ledger(e: &LedgerEntry) -> Vec<u8> {
    with_version(
        V1,
        &LedgerWire {
            kind: e.kind,
            amount: e.amount,
            balance_after: e.balance_after,
            reference: Id::pack(&e.reference),
            at: e.at,
            charged: e.charged,
        },
    )
}

/// Reads a ledger entry an older version stored under `seq`, binary or
/// JSON.
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

/// The first byte of a block value (`history`): many rows of one account.
const V2_BLOCK: u8 = 2;

/// Strings a block's rows share (token ids, model and channel names),
/// stored once per block and referred to by position.
#[derive(Default)]
struct Dictionary<'a> {
    tokens: Vec<&'a str>,
    names: Vec<&'a str>,
}

impl<'a> Dictionary<'a> {
    fn place(list: &mut Vec<&'a str>, s: &'a str) -> u32 {
        match list.iter().position(|x| *x == s) {
            Some(i) => i as u32,
            None => {
                list.push(s);
                (list.len() - 1) as u32
            }
        }
    }
}

#[derive(Serialize, Deserialize)]
struct UsageBlockWire<'a> {
    #[serde(borrow)]
    tokens: Vec<Id<'a>>,
    #[serde(borrow)]
    names: Vec<Cow<'a, str>>,
    #[serde(borrow)]
    rows: Vec<UsageRowWire<'a>>,
}

/// A usage row inside a block: its account is the block's, its strings are
/// positions in the block's dictionary, and its `seq` and `at` are steps
/// from the row before (the first row's from the block's first `seq`, and
/// from zero).
#[derive(Serialize, Deserialize)]
struct UsageRowWire<'a> {
    seq_step: u64,
    at_step: i64,
    #[serde(borrow)]
    request_id: Id<'a>,
    token: Option<u32>,
    model: u32,
    channel: Option<u32>,
    #[serde(borrow)]
    figures: FiguresWire<'a>,
}

#[derive(Serialize, Deserialize)]
struct LedgerBlockWire<'a> {
    #[serde(borrow)]
    rows: Vec<LedgerRowWire<'a>>,
}

/// A ledger entry inside a block, `seq` and `at` as steps (see
/// [`UsageRowWire`]).
#[derive(Serialize, Deserialize)]
struct LedgerRowWire<'a> {
    seq_step: u64,
    at_step: i64,
    kind: LedgerKind,
    amount: Quota,
    balance_after: Quota,
    #[serde(borrow)]
    reference: Id<'a>,
    charged: Option<Quota>,
}

fn block_body<'b>(table: &'static str, bytes: &'b [u8]) -> Result<&'b [u8], StoreError> {
    match bytes.split_first() {
        Some((&V2_BLOCK, body)) => Ok(body),
        _ => Err(corrupt(table, "not a block")),
    }
}

/// One account's usage rows (in `seq` order) as a block stored under
/// `first_seq`, the first row's `seq`.
pub(crate) fn encode_usage_block(first_seq: u64, rows: &[UsageRecord]) -> Vec<u8> {
    let mut dict = Dictionary::default();
    let (mut seq, mut at) = (first_seq, 0i64);
    let mut wire_rows = Vec::with_capacity(rows.len());
    for u in rows {
        wire_rows.push(UsageRowWire {
            seq_step: u.seq.wrapping_sub(seq),
            at_step: u.at.wrapping_sub(at),
            request_id: Id::pack(&u.request_id),
            token: u
                .token_id
                .as_deref()
                .map(|t| Dictionary::place(&mut dict.tokens, t)),
            model: Dictionary::place(&mut dict.names, &u.model),
            channel: u
                .channel
                .as_deref()
                .map(|c| Dictionary::place(&mut dict.names, c)),
            figures: FiguresWire::of(u),
        });
        (seq, at) = (u.seq, u.at);
    }
    with_version(
        V2_BLOCK,
        &UsageBlockWire {
            tokens: dict.tokens.into_iter().map(Id::pack).collect(),
            names: dict.names.into_iter().map(Cow::Borrowed).collect(),
            rows: wire_rows,
        },
    )
}

/// Reads a block of `account_id`'s usage rows stored under `first_seq`.
pub(crate) fn decode_usage_block(
    account_id: &str,
    first_seq: u64,
    bytes: &[u8],
) -> Result<Vec<UsageRecord>, StoreError> {
    const TABLE: &str = "usage_blocks";
    let w: UsageBlockWire =
        postcard::from_bytes(block_body(TABLE, bytes)?).map_err(|e| corrupt(TABLE, e))?;
    let tokens: Vec<String> = w
        .tokens
        .into_iter()
        .map(Id::unpack)
        .collect::<Result<_, _>>()
        .map_err(|e| corrupt(TABLE, e))?;
    let name = |i: u32| {
        w.names
            .get(i as usize)
            .map(|s| s.to_string())
            .ok_or_else(|| corrupt(TABLE, format!("no name {i} in the block")))
    };
    let (mut seq, mut at) = (first_seq, 0i64);
    let mut out = Vec::with_capacity(w.rows.len());
    for r in w.rows {
        seq = seq.wrapping_add(r.seq_step);
        at = at.wrapping_add(r.at_step);
        let token_id = match r.token {
            Some(i) => Some(
                tokens
                    .get(i as usize)
                    .cloned()
                    .ok_or_else(|| corrupt(TABLE, format!("no token {i} in the block")))?,
            ),
            None => None,
        };
        out.push(UsageRecord {
            seq,
            at,
            request_id: r.request_id.unpack().map_err(|e| corrupt(TABLE, e))?,
            account_id: account_id.to_string(),
            token_id,
            model: name(r.model)?,
            channel: r.channel.map(name).transpose()?,
            ..r.figures.into_record()
        });
    }
    Ok(out)
}

/// One account's ledger entries (in `seq` order) as a block stored under
/// `first_seq`, the first entry's `seq`.
pub(crate) fn encode_ledger_block(first_seq: u64, entries: &[LedgerEntry]) -> Vec<u8> {
    let (mut seq, mut at) = (first_seq, 0i64);
    let mut rows = Vec::with_capacity(entries.len());
    for e in entries {
        rows.push(LedgerRowWire {
            seq_step: e.seq.wrapping_sub(seq),
            at_step: e.at.wrapping_sub(at),
            kind: e.kind,
            amount: e.amount,
            balance_after: e.balance_after,
            reference: Id::pack(&e.reference),
            charged: e.charged,
        });
        (seq, at) = (e.seq, e.at);
    }
    with_version(V2_BLOCK, &LedgerBlockWire { rows })
}

/// Reads a block of ledger entries stored under `first_seq`.
pub(crate) fn decode_ledger_block(
    first_seq: u64,
    bytes: &[u8],
) -> Result<Vec<LedgerEntry>, StoreError> {
    const TABLE: &str = "ledger_blocks";
    let w: LedgerBlockWire =
        postcard::from_bytes(block_body(TABLE, bytes)?).map_err(|e| corrupt(TABLE, e))?;
    let (mut seq, mut at) = (first_seq, 0i64);
    let mut out = Vec::with_capacity(w.rows.len());
    for r in w.rows {
        seq = seq.wrapping_add(r.seq_step);
        at = at.wrapping_add(r.at_step);
        out.push(LedgerEntry {
            seq,
            kind: r.kind,
            amount: r.amount,
            balance_after: r.balance_after,
            reference: r.reference.unpack().map_err(|e| corrupt(TABLE, e))?,
            at,
            charged: r.charged,
        });
    }
    Ok(out)
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
    fn blocks_round_trip_and_share_their_strings() {
        let rows: Vec<UsageRecord> = (0..50u64)
            .map(|i| UsageRecord {
                seq: 100 + i * 3,
                // Times may step back (rows are numbered as they are
                // logged, not as they started).
                at: 1_790_000_000 + (i as i64 % 7) - 3,
                token_id: (i % 4 != 0).then(|| format!("tok_{}", i % 2)),
                channel: (i % 5 != 0).then(|| "sim".to_string()),
                meters: if i == 3 { row().meters } else { vec![] },
                error: (i == 9).then(|| "client went away".to_string()),
                ..row()
            })
            .map(|u| UsageRecord {
                account_id: "acct_x".into(),
                ..u
            })
            .collect();
        let bytes = encode_usage_block(100, &rows);
        assert_eq!(decode_usage_block("acct_x", 100, &bytes).unwrap(), rows);
        // Request ids, token and steps: well under half a row apiece.
        assert!(bytes.len() < 50 * 45, "{}", bytes.len());

        let entries: Vec<LedgerEntry> = (0..20u64)
            .map(|i| LedgerEntry {
                seq: 7 + i,
                kind: LedgerKind::Charge,
                amount: -636,
                balance_after: 2_500_000 - 636 * i as i64,
                reference: crate::ids::new_request_id(),
                at: 1_790_000_000 + i as i64,
                charged: Some(636),
            })
            .collect();
        let bytes = encode_ledger_block(7, &entries);
        assert_eq!(decode_ledger_block(7, &bytes).unwrap(), entries);
        assert!(bytes.len() < 20 * 33, "{}", bytes.len());
        assert!(decode_ledger_block(7, &bytes[..bytes.len() / 2]).is_err());
        assert!(decode_usage_block("a", 7, &encode_usage(&row())).is_err());
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
