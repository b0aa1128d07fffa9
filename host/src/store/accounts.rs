//! The redb side of accounts, ledgers, tokens, holds and usage: applying the
//! facts the ledger logs, and reading them back for the admin API and for
//! loading the ledger at start-up. The money logic itself lives in
//! `billing::ledger`.

use super::records::*;
use super::{decode, encode, history, Store, StoreError};
use super::{ACCOUNTS, BALANCES, RESERVATIONS, TOKENS, TOKEN_KEYS, TOKEN_MONEY};
use redb::{ReadableTable, WriteTransaction};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Folds logged facts into the tables. Facts are coalesced first: only the
/// last balance of an account and the last spending of a token are written,
/// a hold opened and closed within the batch is not written at all, and
/// usage rows and ledger entries go into blocks (`history`) together.
pub fn apply_facts(txn: &WriteTransaction, facts: &[Fact]) -> Result<(), StoreError> {
    let mut accounts = txn.open_table(ACCOUNTS)?;
    let mut tokens = txn.open_table(TOKENS)?;
    let mut keys = txn.open_table(TOKEN_KEYS)?;
    let mut holds = txn.open_table(RESERVATIONS)?;
    let mut balances: HashMap<&str, (i64, u64, i64)> = HashMap::new();
    let mut money: HashMap<&str, (i64, i64)> = HashMap::new();
    let mut entries: BTreeMap<&str, Vec<&LedgerEntry>> = BTreeMap::new();
    let mut usage: Vec<&UsageRecord> = Vec::new();
    let opened_here: HashSet<&str> = facts
        .iter()
        .filter_map(|f| match f {
            Fact::HoldOpened(r) => Some(r.id.as_str()),
            _ => None,
        })
        .collect();
    let closed_here: HashSet<&str> = facts
        .iter()
        .filter_map(|f| match f {
            Fact::HoldClosed { id } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    for fact in facts {
        match fact {
            Fact::Account(a) => {
                accounts.insert(a.id.as_str(), encode(a).as_slice())?;
                balances.insert(a.id.as_str(), (a.balance, a.ledger_seq, a.credited));
            }
            Fact::Ledger { account_id, entry } => {
                entries.entry(account_id.as_str()).or_default().push(entry);
            }
            Fact::Balance {
                account_id,
                balance,
                ledger_seq,
                credited,
            } => {
                balances.insert(account_id.as_str(), (*balance, *ledger_seq, *credited));
            }
            Fact::Token(t) => {
                tokens.insert(t.id.as_str(), encode(t).as_slice())?;
                if t.status == TokenStatus::Deleted {
                    keys.remove(t.key_hash.as_str())?;
                } else {
                    keys.insert(t.key_hash.as_str(), t.id.as_str())?;
                }
            }
            Fact::TokenMoney {
                token_id,
                used,
                reserved,
            } => {
                money.insert(token_id.as_str(), (*used, *reserved));
            }
            Fact::HoldOpened(r) => {
                if !closed_here.contains(r.id.as_str()) {
                    holds.insert(r.id.as_str(), encode(r).as_slice())?;
                }
            }
            Fact::HoldClosed { id } => {
                if !opened_here.contains(id.as_str()) {
                    holds.remove(id.as_str())?;
                }
            }
            Fact::Usage(u) => usage.push(u),
        }
    }
    let mut bal = txn.open_table(BALANCES)?;
    for (id, v) in balances {
        bal.insert(id, v)?;
    }
    let mut tm = txn.open_table(TOKEN_MONEY)?;
    for (id, v) in money {
        tm.insert(id, v)?;
    }
    for (account, list) in entries {
        history::append_ledger(txn, account, &list)?;
    }
    history::append_usage(txn, &usage)
}

impl Store {
    /// Every account, with its current balance.
    pub fn accounts(&self) -> Result<Vec<Account>, StoreError> {
        let txn = self.read()?;
        let t = txn.open_table(ACCOUNTS)?;
        let bal = txn.open_table(BALANCES)?;
        let mut out = Vec::new();
        for row in t.iter()? {
            let (_, v) = row?;
            let mut a: Account = decode("accounts", v.value())?;
            if let Some(b) = bal.get(a.id.as_str())? {
                (a.balance, a.ledger_seq, a.credited) = b.value();
            }
            out.push(a);
        }
        Ok(out)
    }

    /// Every token, with its current spending.
    pub fn tokens(&self) -> Result<Vec<Token>, StoreError> {
        let txn = self.read()?;
        let t = txn.open_table(TOKENS)?;
        let money = txn.open_table(TOKEN_MONEY)?;
        let mut out = Vec::new();
        for row in t.iter()? {
            let (_, v) = row?;
            let mut tok: Token = decode("tokens", v.value())?;
            if let Some(m) = money.get(tok.id.as_str())? {
                (tok.used, tok.reserved) = m.value();
            }
            out.push(tok);
        }
        Ok(out)
    }

    pub fn open_reservations(&self) -> Result<Vec<Reservation>, StoreError> {
        let txn = self.read()?;
        let t = txn.open_table(RESERVATIONS)?;
        let mut out = Vec::new();
        for row in t.iter()? {
            let (_, v) = row?;
            out.push(decode("reservations", v.value())?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(seq: u64, account: &str, token: &str, at: i64) -> Fact {
        Fact::Usage(UsageRecord {
            seq,
            at,
            request_id: format!("r{seq}"),
            account_id: account.into(),
            token_id: Some(token.into()),
            model: "m".into(),
            ..UsageRecord::default()
        })
    }

    fn seqs(rows: &[UsageRecord]) -> Vec<u64> {
        rows.iter().map(|u| u.seq).collect()
    }

    #[test]
    fn usage_queries_by_account_read_the_index_in_time_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db.redb")).unwrap();
        // Interleaved accounts; row 5 is logged after row 4 but happened
        // before it (rows are numbered as they are logged).
        let facts = vec![
            row(1, "a", "t1", 100),
            row(2, "b", "t2", 100),
            row(3, "a", "t3", 200),
            row(4, "a", "t1", 300),
            row(5, "a", "t1", 250),
            row(6, "b", "t2", 300),
        ];
        store
            .write_blocking(move |txn| apply_facts(txn, &facts))
            .unwrap();

        assert_eq!(
            seqs(&store.usage_between("a", 100, 300).unwrap()),
            [1, 3, 5, 4]
        );
        assert_eq!(seqs(&store.usage_between("a", 150, 260).unwrap()), [3, 5]);
        assert_eq!(
            seqs(&store.usage_between("b", 0, 99).unwrap()),
            [] as [u64; 0]
        );
        assert_eq!(
            seqs(&store.usage_between("a", 300, 100).unwrap()),
            [] as [u64; 0]
        );
        assert_eq!(
            seqs(&store.usage_between("c", 0, 1000).unwrap()),
            [] as [u64; 0]
        );

        // Newest first, with the limit and the token filter.
        assert_eq!(
            seqs(&store.usage(Some("a"), None, 10).unwrap()),
            [4, 5, 3, 1]
        );
        assert_eq!(seqs(&store.usage(Some("a"), None, 2).unwrap()), [4, 5]);
        assert_eq!(
            seqs(&store.usage(Some("a"), Some("t1"), 10).unwrap()),
            [4, 5, 1]
        );
        assert_eq!(seqs(&store.usage(None, Some("t2"), 10).unwrap()), [6, 2]);
        assert_eq!(seqs(&store.usage(None, None, 3).unwrap()), [6, 5, 4]);
    }
}
