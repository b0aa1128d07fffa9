//! The redb side of accounts, ledgers, tokens, holds and usage: applying the
//! facts the ledger logs, and reading them back for the admin API and for
//! loading the ledger at start-up. The money logic itself lives in
//! `billing::ledger`.

use super::records::*;
use super::{compact, decode, encode, Store, StoreError};
use super::{
    ACCOUNTS, BALANCES, LEDGER, RESERVATIONS, TOKENS, TOKEN_KEYS, TOKEN_MONEY, USAGE,
    USAGE_BY_ACCOUNT,
};
use redb::{ReadableTable, WriteTransaction};
use std::collections::{HashMap, HashSet};

/// Folds logged facts into the tables. Facts are coalesced first: only the
/// last balance of an account and the last spending of a token are written,
/// and a hold opened and closed within the batch is not written at all.
pub fn apply_facts(txn: &WriteTransaction, facts: &[Fact]) -> Result<(), StoreError> {
    let mut accounts = txn.open_table(ACCOUNTS)?;
    let mut ledger = txn.open_table(LEDGER)?;
    let mut tokens = txn.open_table(TOKENS)?;
    let mut keys = txn.open_table(TOKEN_KEYS)?;
    let mut holds = txn.open_table(RESERVATIONS)?;
    let mut usage = txn.open_table(USAGE)?;
    let mut usage_index = txn.open_table(USAGE_BY_ACCOUNT)?;
    let mut balances: HashMap<&str, (i64, u64, i64)> = HashMap::new();
    let mut money: HashMap<&str, (i64, i64)> = HashMap::new();
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
                ledger.insert(
                    (account_id.as_str(), entry.seq),
                    compact::encode_ledger(entry).as_slice(),
                )?;
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
            Fact::Usage(u) => {
                usage.insert(u.seq, compact::encode_usage(u).as_slice())?;
                usage_index.insert((u.account_id.as_str(), u.at, u.seq), ())?;
            }
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
    Ok(())
}

/// Fills the account-and-time index from the usage rows (once, for a
/// database written before the index existed).
pub(crate) fn build_usage_index(txn: &WriteTransaction) -> Result<(), StoreError> {
    let usage = txn.open_table(USAGE)?;
    let mut index = txn.open_table(USAGE_BY_ACCOUNT)?;
    for row in usage.iter()? {
        let (k, v) = row?;
        let u = compact::decode_usage(k.value(), v.value())?;
        index.insert((u.account_id.as_str(), u.at, u.seq), ())?;
    }
    Ok(())
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

    pub fn ledger(&self, account_id: &str) -> Result<Vec<LedgerEntry>, StoreError> {
        let txn = self.read()?;
        let t = txn.open_table(LEDGER)?;
        let mut out = Vec::new();
        for row in t.range((account_id, 0)..=(account_id, u64::MAX))? {
            let (k, v) = row?;
            out.push(compact::decode_ledger(k.value().1, v.value())?);
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

    /// The highest usage row number stored.
    pub fn last_usage_seq(&self) -> Result<u64, StoreError> {
        let txn = self.read()?;
        let t = txn.open_table(USAGE)?;
        let last = t.last()?.map(|(k, _)| k.value()).unwrap_or(0);
        Ok(last)
    }

    /// Usage rows, newest first, optionally for one account or token. With
    /// an account, only that account's rows are read (through its index).
    pub fn usage(
        &self,
        account_id: Option<&str>,
        token_id: Option<&str>,
        limit: usize,
    ) -> Result<Vec<UsageRecord>, StoreError> {
        let txn = self.read()?;
        let t = txn.open_table(USAGE)?;
        let wanted = |u: &UsageRecord| token_id.is_none_or(|t| Some(t) == u.token_id.as_deref());
        let mut out = Vec::new();
        match account_id {
            Some(account) => {
                let index = txn.open_table(USAGE_BY_ACCOUNT)?;
                for row in index
                    .range((account, i64::MIN, 0)..=(account, i64::MAX, u64::MAX))?
                    .rev()
                {
                    if out.len() >= limit {
                        break;
                    }
                    let (k, _) = row?;
                    let (_, _, seq) = k.value();
                    if let Some(v) = t.get(seq)? {
                        let u = compact::decode_usage(seq, v.value())?;
                        if wanted(&u) {
                            out.push(u);
                        }
                    }
                }
            }
            None => {
                for row in t.iter()?.rev() {
                    if out.len() >= limit {
                        break;
                    }
                    let (k, v) = row?;
                    let u = compact::decode_usage(k.value(), v.value())?;
                    if wanted(&u) {
                        out.push(u);
                    }
                }
            }
        }
        Ok(out)
    }

    /// Usage rows of an account between two times (inclusive, Unix seconds),
    /// oldest first, read through the account-and-time index.
    pub fn usage_between(
        &self,
        account_id: &str,
        from: i64,
        to: i64,
    ) -> Result<Vec<UsageRecord>, StoreError> {
        let txn = self.read()?;
        let t = txn.open_table(USAGE)?;
        let index = txn.open_table(USAGE_BY_ACCOUNT)?;
        let mut out = Vec::new();
        if from > to {
            return Ok(out);
        }
        for row in index.range((account_id, from, 0)..=(account_id, to, u64::MAX))? {
            let (k, _) = row?;
            let (_, _, seq) = k.value();
            if let Some(v) = t.get(seq)? {
                out.push(compact::decode_usage(seq, v.value())?);
            }
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
