//! The redb side of accounts, ledgers, tokens, holds and usage: applying the
//! facts the ledger logs, and reading them back for the admin API and for
//! loading the ledger at start-up. The money logic itself lives in
//! `billing::ledger`.

use super::records::*;
use super::{decode, encode, Store, StoreError};
use super::{ACCOUNTS, LEDGER, RESERVATIONS, TOKENS, TOKEN_KEYS, USAGE};
use redb::{ReadableTable, WriteTransaction};

/// Folds logged facts into the tables.
pub fn apply_facts(txn: &WriteTransaction, facts: &[Fact]) -> Result<(), StoreError> {
    let mut accounts = txn.open_table(ACCOUNTS)?;
    let mut ledger = txn.open_table(LEDGER)?;
    let mut tokens = txn.open_table(TOKENS)?;
    let mut keys = txn.open_table(TOKEN_KEYS)?;
    let mut holds = txn.open_table(RESERVATIONS)?;
    let mut usage = txn.open_table(USAGE)?;
    for fact in facts {
        match fact {
            Fact::Account(a) => {
                accounts.insert(a.id.as_str(), encode(a).as_slice())?;
            }
            Fact::Ledger { account_id, entry } => {
                ledger.insert((account_id.as_str(), entry.seq), encode(entry).as_slice())?;
            }
            Fact::Token(t) => {
                tokens.insert(t.id.as_str(), encode(t).as_slice())?;
                if t.status == TokenStatus::Deleted {
                    keys.remove(t.key_hash.as_str())?;
                } else {
                    keys.insert(t.key_hash.as_str(), t.id.as_str())?;
                }
            }
            Fact::HoldOpened(r) => {
                holds.insert(r.id.as_str(), encode(r).as_slice())?;
            }
            Fact::HoldClosed { id } => {
                holds.remove(id.as_str())?;
            }
            Fact::Usage(u) => {
                usage.insert(u.seq, encode(u).as_slice())?;
            }
        }
    }
    Ok(())
}

impl Store {
    pub fn account(&self, id: &str) -> Result<Option<Account>, StoreError> {
        let txn = self.read()?;
        let t = txn.open_table(ACCOUNTS)?;
        let v = t.get(id)?;
        v.map(|v| decode("accounts", v.value())).transpose()
    }

    pub fn accounts(&self) -> Result<Vec<Account>, StoreError> {
        let txn = self.read()?;
        let t = txn.open_table(ACCOUNTS)?;
        let mut out = Vec::new();
        for row in t.iter()? {
            let (_, v) = row?;
            out.push(decode("accounts", v.value())?);
        }
        Ok(out)
    }

    pub fn ledger(&self, account_id: &str) -> Result<Vec<LedgerEntry>, StoreError> {
        let txn = self.read()?;
        let t = txn.open_table(LEDGER)?;
        let mut out = Vec::new();
        for row in t.range((account_id, 0)..=(account_id, u64::MAX))? {
            let (_, v) = row?;
            out.push(decode("ledger", v.value())?);
        }
        Ok(out)
    }

    pub fn tokens(&self) -> Result<Vec<Token>, StoreError> {
        let txn = self.read()?;
        let t = txn.open_table(TOKENS)?;
        let mut out = Vec::new();
        for row in t.iter()? {
            let (_, v) = row?;
            out.push(decode("tokens", v.value())?);
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

    /// Usage rows, newest first, optionally for one account or token.
    pub fn usage(
        &self,
        account_id: Option<&str>,
        token_id: Option<&str>,
        limit: usize,
    ) -> Result<Vec<UsageRecord>, StoreError> {
        let txn = self.read()?;
        let t = txn.open_table(USAGE)?;
        let mut out = Vec::new();
        for row in t.iter()?.rev() {
            let (_, v) = row?;
            let u: UsageRecord = decode("usage", v.value())?;
            if account_id.is_some_and(|a| a != u.account_id) {
                continue;
            }
            if token_id.is_some_and(|t| Some(t) != u.token_id.as_deref()) {
                continue;
            }
            out.push(u);
            if out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }

    /// Usage rows of an account between two times (inclusive, Unix seconds).
    pub fn usage_between(
        &self,
        account_id: &str,
        from: i64,
        to: i64,
    ) -> Result<Vec<UsageRecord>, StoreError> {
        let txn = self.read()?;
        let t = txn.open_table(USAGE)?;
        let mut out = Vec::new();
        for row in t.iter()? {
            let (_, v) = row?;
            let u: UsageRecord = decode("usage", v.value())?;
            if u.account_id == account_id && u.at >= from && u.at <= to {
                out.push(u);
            }
        }
        Ok(out)
    }
}
