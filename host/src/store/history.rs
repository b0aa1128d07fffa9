//! Usage rows and ledger entries: what every billed call adds to the store
//! for good, kept in blocks of one account's rows.
//!
//! Why blocks. These rows are most of what the store grows by, they are
//! written once and read rarely (dashboards, the console, admin reads), and
//! a row per key cost three times its own size: the account id (37 bytes)
//! again in every key and index entry, and redb's leaves, which appends
//! split in the middle, left half empty. A block stores an account's rows
//! side by side under one key, with the strings they share (token ids,
//! model and channel names) once per block and `seq` and `at` as steps
//! (`compact`): a text call's usage row and `charge` entry take some 80
//! bytes together.
//!
//! Tables:
//! - `usage_blocks`: (account, first seq) → up to [`BLOCK_ROWS`] of the
//!   account's usage rows, in `seq` order.
//! - `usage_blocks_by_time`: (account, latest `at` in the block, first seq)
//!   → (): an account's blocks by time, for dated queries.
//! - `usage_blocks_by_seq`: last seq in the block → (account, first seq):
//!   the order rows were logged in, across accounts.
//! - `ledger_blocks`: (account, first seq) → up to [`BLOCK_ROWS`] of the
//!   account's ledger entries, in `seq` order.
//! - `meta.usage_span`: the widest stretch of time (latest − earliest `at`)
//!   one block covers, so a dated query knows how far before its start a
//!   block that holds its rows can begin.
//!
//! Each checkpoint (`wal`) appends its rows here. An account's newest block
//! is topped up until it is full, so an account that calls now and then
//! does not get a block per call. Rows at or below the newest block's last
//! `seq` are already stored and are skipped, so applying the same facts
//! twice changes nothing (the promise `Fact` makes).
//!
//! Nothing is dropped or rolled up: every row stays readable as it was
//! written. A database written before blocks holds one row per key (tables
//! `usage`, `usage_by_account`, `ledger`); [`migrate`] moves those rows into
//! blocks once, at start-up, in one transaction.

use super::records::{LedgerEntry, UsageRecord};
use super::{compact, Store, StoreError, META};
use redb::{ReadableTable, Table, TableDefinition, WriteTransaction};
use std::collections::BTreeMap;

const USAGE_BLOCKS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("usage_blocks");
const USAGE_BY_TIME: TableDefinition<(&str, i64, u64), ()> =
    TableDefinition::new("usage_blocks_by_time");
const USAGE_BY_SEQ: TableDefinition<u64, (&str, u64)> = TableDefinition::new("usage_blocks_by_seq");
const LEDGER_BLOCKS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("ledger_blocks");
/// `META` key: the widest time one usage block covers, in seconds.
const SPAN_KEY: &str = "usage_span";

/// The one-row-per-key tables of earlier versions, read only by [`migrate`].
const OLD_USAGE: TableDefinition<u64, &[u8]> = TableDefinition::new("usage");
const OLD_USAGE_BY_ACCOUNT: TableDefinition<(&str, i64, u64), ()> =
    TableDefinition::new("usage_by_account");
const OLD_LEDGER: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("ledger");

/// Rows per block. A block being topped up is rewritten whole at each
/// checkpoint, so this bounds that rewrite (some 6 KB of usage rows); at
/// 128 the key and index entries a block costs are under a byte per row.
pub(crate) const BLOCK_ROWS: usize = 128;

pub(crate) fn create_tables(txn: &WriteTransaction) -> Result<(), StoreError> {
    txn.open_table(USAGE_BLOCKS)?;
    txn.open_table(USAGE_BY_TIME)?;
    txn.open_table(USAGE_BY_SEQ)?;
    txn.open_table(LEDGER_BLOCKS)?;
    Ok(())
}

/// Earliest and latest `at` among rows.
fn time_range(rows: &[UsageRecord]) -> (i64, i64) {
    rows.iter().fold((i64::MAX, i64::MIN), |(lo, hi), u| {
        (lo.min(u.at), hi.max(u.at))
    })
}

/// The usage tables, open for writing.
struct UsageTables<'t> {
    blocks: Table<'t, (&'static str, u64), &'static [u8]>,
    by_time: Table<'t, (&'static str, i64, u64), ()>,
    by_seq: Table<'t, u64, (&'static str, u64)>,
    span: u64,
}

impl UsageTables<'_> {
    /// Writes one block of `account`'s rows (non-empty, in `seq` order)
    /// under `first` with its two index entries.
    fn put(&mut self, account: &str, first: u64, rows: &[UsageRecord]) -> Result<(), StoreError> {
        let (Some(last), (lo, hi)) = (rows.last(), time_range(rows)) else {
            return Ok(());
        };
        self.blocks.insert(
            (account, first),
            compact::encode_usage_block(first, rows).as_slice(),
        )?;
        self.by_time.insert((account, hi, first), ())?;
        self.by_seq.insert(last.seq, (account, first))?;
        self.span = self.span.max(hi.abs_diff(lo));
        Ok(())
    }

    /// Appends one account's rows (in `seq` order) after its newest block.
    fn append(&mut self, account: &str, rows: &[&UsageRecord]) -> Result<(), StoreError> {
        let tail = match self
            .blocks
            .range((account, 0)..=(account, u64::MAX))?
            .next_back()
        {
            Some(row) => {
                let (k, v) = row?;
                let first = k.value().1;
                Some((
                    first,
                    compact::decode_usage_block(account, first, v.value())?,
                ))
            }
            None => None,
        };
        // The newest block's index entries, gone if it is rewritten.
        let old = tail.as_ref().and_then(|(first, rows)| {
            let last = rows.last()?.seq;
            Some((*first, time_range(rows).1, last))
        });
        let blocks = fill(tail, rows, |u| u.seq);
        if let (Some((first, latest, last)), Some((rewritten, _))) = (old, blocks.first()) {
            if *rewritten == first {
                self.by_time.remove((account, latest, first))?;
                self.by_seq.remove(last)?;
            }
        }
        for (first, block) in &blocks {
            self.put(account, *first, block)?;
        }
        Ok(())
    }
}

/// The blocks to write when `new` rows (in `seq` order) follow an account's
/// newest block `tail` (its first `seq` and its rows): the tail topped up
/// while it has room, then new blocks of [`BLOCK_ROWS`], each with its
/// first `seq`. Rows at or below the tail's last `seq` are stored already
/// and skipped, so applying the same facts twice changes nothing. Empty
/// when nothing is new.
fn fill<T: Clone>(
    tail: Option<(u64, Vec<T>)>,
    new: &[&T],
    seq: impl Fn(&T) -> u64,
) -> Vec<(u64, Vec<T>)> {
    let stored = tail
        .as_ref()
        .and_then(|(_, rows)| rows.last())
        .map_or(0, &seq);
    let mut new = new.iter().filter(|r| seq(r) > stored).peekable();
    let Some(first_new) = new.peek().map(|r| seq(r)) else {
        return Vec::new();
    };
    let mut current = match tail {
        Some((first, rows)) if rows.len() < BLOCK_ROWS => (first, rows),
        _ => (first_new, Vec::new()),
    };
    let mut out = Vec::new();
    for r in new {
        if current.1.len() == BLOCK_ROWS {
            let next = (seq(r), Vec::new());
            out.push(std::mem::replace(&mut current, next));
        }
        current.1.push((*r).clone());
    }
    out.push(current);
    out
}

/// Appends usage rows (of any accounts, in `seq` order).
pub(crate) fn append_usage(
    txn: &WriteTransaction,
    rows: &[&UsageRecord],
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut by_account: BTreeMap<&str, Vec<&UsageRecord>> = BTreeMap::new();
    for u in rows {
        by_account.entry(u.account_id.as_str()).or_default().push(u);
    }
    let mut meta = txn.open_table(META)?;
    let mut t = UsageTables {
        blocks: txn.open_table(USAGE_BLOCKS)?,
        by_time: txn.open_table(USAGE_BY_TIME)?,
        by_seq: txn.open_table(USAGE_BY_SEQ)?,
        span: meta.get(SPAN_KEY)?.map_or(0, |v| v.value()),
    };
    for (account, rows) in by_account {
        t.append(account, &rows)?;
    }
    meta.insert(SPAN_KEY, t.span)?;
    Ok(())
}

/// Appends one account's ledger entries (in `seq` order) after its newest
/// block.
pub(crate) fn append_ledger(
    txn: &WriteTransaction,
    account: &str,
    entries: &[&LedgerEntry],
) -> Result<(), StoreError> {
    let mut blocks = txn.open_table(LEDGER_BLOCKS)?;
    let tail = match blocks
        .range((account, 0)..=(account, u64::MAX))?
        .next_back()
    {
        Some(row) => {
            let (k, v) = row?;
            let first = k.value().1;
            Some((first, compact::decode_ledger_block(first, v.value())?))
        }
        None => None,
    };
    for (first, block) in fill(tail, entries, |e| e.seq) {
        blocks.insert(
            (account, first),
            compact::encode_ledger_block(first, &block).as_slice(),
        )?;
    }
    Ok(())
}

/// Rows moved per append while migrating, to bound the memory it takes.
const MIGRATE_CHUNK: usize = 8 * BLOCK_ROWS;

/// Moves the rows of a database written before blocks into blocks (once:
/// the old tables are deleted afterwards). Every row is kept.
pub(crate) fn migrate(txn: &WriteTransaction) -> Result<(), StoreError> {
    let mut moved = 0usize;
    {
        let old = txn.open_table(OLD_USAGE)?;
        let mut chunk: Vec<UsageRecord> = Vec::new();
        for row in old.iter()? {
            let (k, v) = row?;
            chunk.push(compact::decode_usage(k.value(), v.value())?);
            if chunk.len() == MIGRATE_CHUNK {
                moved += chunk.len();
                append_usage(txn, &chunk.iter().collect::<Vec<_>>())?;
                chunk.clear();
            }
        }
        moved += chunk.len();
        append_usage(txn, &chunk.iter().collect::<Vec<_>>())?;
    }
    {
        let old = txn.open_table(OLD_LEDGER)?;
        let mut chunk: Vec<(String, LedgerEntry)> = Vec::new();
        let flush = |chunk: &mut Vec<(String, LedgerEntry)>| -> Result<(), StoreError> {
            let mut by_account: BTreeMap<&str, Vec<&LedgerEntry>> = BTreeMap::new();
            for (account, e) in chunk.iter() {
                by_account.entry(account.as_str()).or_default().push(e);
            }
            for (account, entries) in by_account {
                append_ledger(txn, account, &entries)?;
            }
            chunk.clear();
            Ok(())
        };
        for row in old.iter()? {
            let (k, v) = row?;
            let (account, seq) = k.value();
            chunk.push((account.to_string(), compact::decode_ledger(seq, v.value())?));
            if chunk.len() == MIGRATE_CHUNK {
                moved += chunk.len();
                flush(&mut chunk)?;
            }
        }
        moved += chunk.len();
        flush(&mut chunk)?;
    }
    txn.delete_table(OLD_USAGE)?;
    txn.delete_table(OLD_USAGE_BY_ACCOUNT)?;
    txn.delete_table(OLD_LEDGER)?;
    if moved > 0 {
        tracing::info!("moved {moved} usage row(s) and ledger entries into blocks");
    }
    Ok(())
}

/// Keeps the `limit` newest rows by `key`, newest first. Called once enough
/// rows are gathered for the stop test (which reads the `limit`-th), and
/// at the end, so a query for every row sorts once.
fn newest<K: Ord>(rows: &mut Vec<UsageRecord>, limit: usize, key: impl Fn(&UsageRecord) -> K) {
    rows.sort_by_key(|u| std::cmp::Reverse(key(u)));
    rows.truncate(limit);
}

impl Store {
    /// An account's ledger, oldest entry first.
    pub fn ledger(&self, account_id: &str) -> Result<Vec<LedgerEntry>, StoreError> {
        let txn = self.read()?;
        let t = txn.open_table(LEDGER_BLOCKS)?;
        let mut out = Vec::new();
        for row in t.range((account_id, 0)..=(account_id, u64::MAX))? {
            let (k, v) = row?;
            out.extend(compact::decode_ledger_block(k.value().1, v.value())?);
        }
        Ok(out)
    }

    /// The highest usage row number stored.
    pub fn last_usage_seq(&self) -> Result<u64, StoreError> {
        let txn = self.read()?;
        let t = txn.open_table(USAGE_BY_SEQ)?;
        let last = t.last()?.map_or(0, |(k, _)| k.value());
        Ok(last)
    }

    /// Usage rows, newest first, optionally for one account or token: for
    /// an account by time (then by `seq`), across accounts in the order
    /// they were logged. Reads blocks only until no unread block can hold
    /// a row newer than the `limit` already found.
    pub fn usage(
        &self,
        account_id: Option<&str>,
        token_id: Option<&str>,
        limit: usize,
    ) -> Result<Vec<UsageRecord>, StoreError> {
        let txn = self.read()?;
        let blocks = txn.open_table(USAGE_BLOCKS)?;
        let wanted = |u: &UsageRecord| token_id.is_none_or(|t| Some(t) == u.token_id.as_deref());
        let mut out: Vec<UsageRecord> = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        match account_id {
            Some(account) => {
                // Blocks by their latest `at`, newest first: a block can
                // hold nothing newer than its key says.
                let by_time = txn.open_table(USAGE_BY_TIME)?;
                for row in by_time
                    .range((account, i64::MIN, 0)..=(account, i64::MAX, u64::MAX))?
                    .rev()
                {
                    let (k, _) = row?;
                    let (_, latest, first) = k.value();
                    if out.len() >= limit && out[limit - 1].at > latest {
                        break;
                    }
                    if let Some(v) = blocks.get((account, first))? {
                        let rows = compact::decode_usage_block(account, first, v.value())?;
                        out.extend(rows.into_iter().filter(|u| wanted(u)));
                        if out.len() >= limit {
                            newest(&mut out, limit, |u| (u.at, u.seq));
                        }
                    }
                }
                newest(&mut out, limit, |u| (u.at, u.seq));
            }
            None => {
                // Blocks by their last `seq`, newest first: a block holds
                // nothing logged after its key.
                let by_seq = txn.open_table(USAGE_BY_SEQ)?;
                for row in by_seq.iter()?.rev() {
                    let (k, v) = row?;
                    if out.len() >= limit && out[limit - 1].seq > k.value() {
                        break;
                    }
                    let (account, first) = v.value();
                    if let Some(b) = blocks.get((account, first))? {
                        let rows = compact::decode_usage_block(account, first, b.value())?;
                        out.extend(rows.into_iter().filter(|u| wanted(u)));
                        if out.len() >= limit {
                            newest(&mut out, limit, |u| u.seq);
                        }
                    }
                }
                newest(&mut out, limit, |u| u.seq);
            }
        }
        Ok(out)
    }

    /// Usage rows of an account between two times (inclusive, Unix seconds),
    /// oldest first (by time, then `seq`), read through the time index.
    pub fn usage_between(
        &self,
        account_id: &str,
        from: i64,
        to: i64,
    ) -> Result<Vec<UsageRecord>, StoreError> {
        let mut out = Vec::new();
        if from > to {
            return Ok(out);
        }
        let txn = self.read()?;
        let blocks = txn.open_table(USAGE_BLOCKS)?;
        let by_time = txn.open_table(USAGE_BY_TIME)?;
        let span = txn
            .open_table(META)?
            .get(SPAN_KEY)?
            .map_or(0, |v| v.value());
        // A block ending before `from` holds no row in the window; one
        // ending more than `span` after `to` began after it.
        let until = to.saturating_add(i64::try_from(span).unwrap_or(i64::MAX));
        for row in by_time.range((account_id, from, 0)..=(account_id, until, u64::MAX))? {
            let (k, _) = row?;
            let first = k.value().2;
            if let Some(v) = blocks.get((account_id, first))? {
                let rows = compact::decode_usage_block(account_id, first, v.value())?;
                out.extend(rows.into_iter().filter(|u| (from..=to).contains(&u.at)));
            }
        }
        out.sort_by_key(|u| (u.at, u.seq));
        Ok(out)
    }
}

/// Rows, pages and bytes of each history table (for tests' messages).
#[cfg(test)]
pub(crate) fn table_stats(store: &Store) -> String {
    use redb::{ReadableTableMetadata, TableHandle};
    let mut out = String::new();
    let Ok(txn) = store.read() else {
        return out;
    };
    let mut line = |name: &str, s: Result<redb::TableStats, redb::StorageError>, len| {
        if let Ok(s) = s {
            out += &format!(
                "\n{name}: {len} keys, {} leaf pages, {} bytes stored, {} fragmented",
                s.leaf_pages(),
                s.stored_bytes(),
                s.fragmented_bytes()
            );
        }
    };
    if let Ok(t) = txn.open_table(USAGE_BLOCKS) {
        line(USAGE_BLOCKS.name(), t.stats(), t.len().unwrap_or(0));
    }
    if let Ok(t) = txn.open_table(USAGE_BY_TIME) {
        line(USAGE_BY_TIME.name(), t.stats(), t.len().unwrap_or(0));
    }
    if let Ok(t) = txn.open_table(USAGE_BY_SEQ) {
        line(USAGE_BY_SEQ.name(), t.stats(), t.len().unwrap_or(0));
    }
    if let Ok(t) = txn.open_table(LEDGER_BLOCKS) {
        line(LEDGER_BLOCKS.name(), t.stats(), t.len().unwrap_or(0));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::accounts::apply_facts;
    use crate::store::records::{Fact, LedgerKind};

    fn row(seq: u64, account: &str, at: i64) -> UsageRecord {
        UsageRecord {
            seq,
            at,
            request_id: crate::ids::new_request_id(),
            account_id: account.into(),
            token_id: Some(format!("tok_{}", seq % 3)),
            model: "gpt-4o-mini".into(),
            channel: Some("sim".into()),
            input_tokens: seq,
            cost: seq as i64 * 7,
            status: 200,
            ..UsageRecord::default()
        }
    }

    fn entry(seq: u64, at: i64) -> LedgerEntry {
        LedgerEntry {
            seq,
            kind: LedgerKind::Charge,
            amount: -(seq as i64),
            balance_after: 1_000_000 - seq as i64,
            reference: crate::ids::new_request_id(),
            at,
            charged: Some(seq as i64),
        }
    }

    fn open() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db.redb")).unwrap();
        (dir, store)
    }

    fn apply(store: &Store, facts: Vec<Fact>) {
        store
            .write_blocking(move |txn| apply_facts(txn, &facts))
            .unwrap();
    }

    fn keys(store: &Store) -> (u64, u64, u64, u64) {
        use redb::ReadableTableMetadata;
        let txn = store.read().unwrap();
        (
            txn.open_table(USAGE_BLOCKS).unwrap().len().unwrap(),
            txn.open_table(USAGE_BY_TIME).unwrap().len().unwrap(),
            txn.open_table(USAGE_BY_SEQ).unwrap().len().unwrap(),
            txn.open_table(LEDGER_BLOCKS).unwrap().len().unwrap(),
        )
    }

    #[test]
    fn fill_tops_up_the_tail_then_starts_full_blocks_and_skips_what_is_stored() {
        let seqs = |from: u64, to: u64| (from..=to).collect::<Vec<u64>>();
        let refs = |v: &[u64]| -> Vec<u64> { v.to_vec() };
        let new = seqs(11, 11 + BLOCK_ROWS as u64);
        let new_refs: Vec<&u64> = new.iter().collect();
        // A tail of 10 rows (1..=10) takes 118 more, the rest starts a block.
        let out = fill(Some((1, seqs(1, 10))), &new_refs, |s| *s);
        let shape: Vec<(u64, usize)> = out.iter().map(|(f, r)| (*f, r.len())).collect();
        assert_eq!(shape, [(1, BLOCK_ROWS), (129, 11)]);
        assert_eq!(refs(&out[1].1), seqs(129, 139));
        // A full tail is left alone.
        let out = fill(Some((1, seqs(1, 128))), &new_refs[..0], |s| *s);
        assert!(out.is_empty());
        let again: Vec<&u64> = new_refs.iter().copied().filter(|s| **s > 120).collect();
        let out = fill(Some((1, seqs(1, 128))), &again, |s| *s);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, 129);
        assert_eq!(refs(&out[0].1), seqs(129, 139));
        // Rows already stored are skipped; nothing new, nothing written.
        let out = fill(Some((1, seqs(1, 20))), &new_refs[..10], |s| *s);
        assert!(out.is_empty());
        // No tail: blocks start at the first new row.
        let out = fill(None, &new_refs, |s| *s);
        let shape: Vec<(u64, usize)> = out.iter().map(|(f, r)| (*f, r.len())).collect();
        assert_eq!(shape, [(11, BLOCK_ROWS), (139, 1)]);
    }

    #[test]
    fn checkpoints_of_a_few_rows_top_up_the_newest_block_and_lose_nothing() {
        let (_dir, store) = open();
        let mut all = Vec::new();
        // 300 checkpoints of one row per account, two accounts.
        for i in 0..300u64 {
            let a = row(2 * i + 1, "acct_a", 1_000 + i as i64);
            let b = row(2 * i + 2, "acct_b", 1_000 + i as i64);
            all.push(a.clone());
            all.push(b.clone());
            apply(
                &store,
                vec![
                    Fact::Usage(a),
                    Fact::Ledger {
                        account_id: "acct_a".into(),
                        entry: entry(i + 1, 1_000 + i as i64),
                    },
                    Fact::Usage(b),
                ],
            );
        }
        // 300 rows each: blocks of 128, 128 and 44 per account.
        assert_eq!(keys(&store), (6, 6, 6, 3));
        let a: Vec<UsageRecord> = all
            .iter()
            .filter(|u| u.account_id == "acct_a")
            .cloned()
            .collect();
        let mut got = store.usage_between("acct_a", 0, i64::MAX).unwrap();
        assert_eq!(got, a);
        got = store.usage(None, None, usize::MAX).unwrap();
        got.reverse();
        assert_eq!(got, all);
        let ledger = store.ledger("acct_a").unwrap();
        assert_eq!(ledger.len(), 300);
        assert!(ledger
            .iter()
            .enumerate()
            .all(|(i, e)| e.seq == i as u64 + 1));
        assert_eq!(store.last_usage_seq().unwrap(), 600);

        // The same facts applied again change nothing.
        let again: Vec<Fact> = all.iter().cloned().map(Fact::Usage).collect();
        apply(&store, again);
        apply(
            &store,
            vec![Fact::Ledger {
                account_id: "acct_a".into(),
                entry: entry(300, 1_299),
            }],
        );
        assert_eq!(keys(&store), (6, 6, 6, 3));
        assert_eq!(store.usage(None, None, usize::MAX).unwrap().len(), 600);
        assert_eq!(store.ledger("acct_a").unwrap().len(), 300);
    }

    #[test]
    fn dated_queries_find_rows_of_a_block_that_spans_a_long_time() {
        let (_dir, store) = open();
        // One block whose rows lie 10,000 s apart (a call that ran long),
        // then newer blocks.
        apply(
            &store,
            vec![
                Fact::Usage(row(1, "acct_a", 5_000)),
                Fact::Usage(row(2, "acct_a", 15_000)),
            ],
        );
        let later: Vec<Fact> = (3..=300)
            .map(|s| Fact::Usage(row(s, "acct_a", 20_000 + s as i64)))
            .collect();
        apply(&store, later);
        let seqs = |rows: Vec<UsageRecord>| rows.iter().map(|u| u.seq).collect::<Vec<_>>();
        assert_eq!(
            seqs(store.usage_between("acct_a", 4_000, 6_000).unwrap()),
            [1]
        );
        assert!(store
            .usage_between("acct_a", 5_001, 14_999)
            .unwrap()
            .is_empty());
        assert_eq!(
            seqs(store.usage_between("acct_a", 0, 20_004).unwrap()),
            [1, 2, 3, 4]
        );
        // Newest first by time, across blocks, with a limit.
        assert_eq!(
            seqs(store.usage(Some("acct_a"), None, 3).unwrap()),
            [300, 299, 298]
        );
        let tok1 = store.usage(Some("acct_a"), Some("tok_1"), 2).unwrap();
        assert_eq!(seqs(tok1), [298, 295]);
        assert!(store.usage(Some("acct_b"), None, 3).unwrap().is_empty());
    }

    #[test]
    fn rows_stored_one_per_key_by_earlier_versions_move_into_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.redb");
        let rows: Vec<UsageRecord> = (1..=200)
            .map(|s| row(s, if s % 2 == 0 { "acct_a" } else { "acct_b" }, s as i64))
            .collect();
        let entries: Vec<LedgerEntry> = (1..=150).map(|s| entry(s, s as i64)).collect();
        {
            // The layout before blocks, binary and JSON rows mixed.
            let db = redb::Database::create(&path).unwrap();
            let txn = db.begin_write().unwrap();
            {
                let mut usage = txn.open_table(OLD_USAGE).unwrap();
                let mut index = txn.open_table(OLD_USAGE_BY_ACCOUNT).unwrap();
                for u in &rows {
                    let value = if u.seq % 5 == 0 {
                        serde_json::to_vec(u).unwrap()
                    } else {
                        compact::encode_usage(u)
                    };
                    usage.insert(u.seq, value.as_slice()).unwrap();
                    index
                        .insert((u.account_id.as_str(), u.at, u.seq), ())
                        .unwrap();
                }
                let mut ledger = txn.open_table(OLD_LEDGER).unwrap();
                for e in &entries {
                    let value = compact::encode_ledger(e);
                    ledger.insert(("acct_a", e.seq), value.as_slice()).unwrap();
                }
            }
            txn.commit().unwrap();
        }
        let store = Store::open(&path).unwrap();
        let mut got = store.usage(None, None, usize::MAX).unwrap();
        got.reverse();
        assert_eq!(got, rows);
        assert_eq!(store.ledger("acct_a").unwrap(), entries);
        assert_eq!(store.last_usage_seq().unwrap(), 200);
        {
            use redb::TableHandle;
            let txn = store.read().unwrap();
            let names: Vec<String> = txn
                .list_tables()
                .unwrap()
                .map(|t| t.name().to_string())
                .collect();
            for old in ["usage", "usage_by_account", "ledger"] {
                assert!(!names.iter().any(|n| n == old), "{old} is still there");
            }
        }
        // Running it again (every start does) finds nothing left to move.
        store.write_blocking(migrate).unwrap();
        assert_eq!(store.usage(None, None, usize::MAX).unwrap().len(), 200);
        assert_eq!(store.ledger("acct_a").unwrap(), entries);
    }
}
