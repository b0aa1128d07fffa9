//! Accounts, their append-only ledgers, tokens, reservations and usage rows.
//!
//! Every balance change is a ledger entry written in the same transaction as
//! the new balance, so `balance == Σ ledger.amount` holds after every commit.

use super::records::*;
use super::{decode, encode, Durability, Store, StoreError};
use super::{ACCOUNTS, LEDGER, RESERVATIONS, TOKENS, TOKEN_KEYS, USAGE};
use crate::billing::money::Quota;
use redb::{ReadableTable, WriteTransaction};
use sha2::{Digest, Sha256};

/// Why a reservation was refused.
#[derive(Debug, Clone, PartialEq)]
pub enum ReserveRefusal {
    NoAccount,
    Insufficient { balance: Quota },
    TokenQuota { limit: Quota, used: Quota },
}

/// What a settlement did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Settlement {
    pub charged: Quota,
    pub refunded: Quota,
}

pub struct NewToken {
    pub account_id: String,
    pub name: String,
    pub models: Option<Vec<String>>,
    pub ips: Option<Vec<String>>,
    pub quota_limit: Option<Quota>,
    pub expires_at: Option<i64>,
}

pub fn hash_key(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

fn load_account(txn: &WriteTransaction, id: &str) -> Result<Option<Account>, StoreError> {
    let t = txn.open_table(ACCOUNTS)?;
    let v = t.get(id)?;
    v.map(|v| decode("accounts", v.value())).transpose()
}

fn save_account(txn: &WriteTransaction, a: &Account) -> Result<(), StoreError> {
    txn.open_table(ACCOUNTS)?
        .insert(a.id.as_str(), encode(a).as_slice())?;
    Ok(())
}

fn load_token(txn: &WriteTransaction, id: &str) -> Result<Option<Token>, StoreError> {
    let t = txn.open_table(TOKENS)?;
    let v = t.get(id)?;
    v.map(|v| decode("tokens", v.value())).transpose()
}

fn save_token(txn: &WriteTransaction, t: &Token) -> Result<(), StoreError> {
    txn.open_table(TOKENS)?
        .insert(t.id.as_str(), encode(t).as_slice())?;
    Ok(())
}

/// Appends one ledger entry and moves the balance by its amount.
fn post(
    txn: &WriteTransaction,
    account: &mut Account,
    kind: LedgerKind,
    amount: Quota,
    reference: &str,
    at: i64,
    charged: Option<Quota>,
) -> Result<(), StoreError> {
    account.balance += amount;
    account.ledger_seq += 1;
    let entry = LedgerEntry {
        seq: account.ledger_seq,
        kind,
        amount,
        balance_after: account.balance,
        reference: reference.to_string(),
        at,
        charged,
    };
    txn.open_table(LEDGER)?
        .insert((account.id.as_str(), entry.seq), encode(&entry).as_slice())?;
    Ok(())
}

fn append_usage(txn: &WriteTransaction, mut usage: UsageRecord) -> Result<(), StoreError> {
    usage.seq = Store::next_counter(txn, "usage_seq")?;
    txn.open_table(USAGE)?
        .insert(usage.seq, encode(&usage).as_slice())?;
    Ok(())
}

/// Closes a reservation: confirms `cost` of it (taking any excess from the
/// balance, never below zero) and refunds the rest.
fn close_reservation(
    txn: &WriteTransaction,
    res: &Reservation,
    cost: Quota,
    at: i64,
) -> Result<Settlement, StoreError> {
    let Some(mut account) = load_account(txn, &res.account_id)? else {
        return Ok(Settlement::default());
    };
    let cost = cost.max(0);
    let mut out = Settlement::default();
    if cost <= res.amount {
        out.charged = cost;
        out.refunded = res.amount - cost;
        if cost > 0 {
            post(
                txn,
                &mut account,
                LedgerKind::Settle,
                0,
                &res.id,
                at,
                Some(cost),
            )?;
        }
        if out.refunded > 0 {
            post(
                txn,
                &mut account,
                LedgerKind::Refund,
                out.refunded,
                &res.id,
                at,
                None,
            )?;
        }
    } else {
        // The vendor used more than we estimated. Collect what the balance
        // holds, never more: the balance must not go negative.
        let extra = (cost - res.amount).min(account.balance.max(0));
        out.charged = res.amount + extra;
        post(
            txn,
            &mut account,
            LedgerKind::Settle,
            -extra,
            &res.id,
            at,
            Some(out.charged),
        )?;
    }
    save_account(txn, &account)?;
    if let Some(token_id) = &res.token_id {
        if let Some(mut token) = load_token(txn, token_id)? {
            token.reserved = (token.reserved - res.amount).max(0);
            token.used += out.charged;
            save_token(txn, &token)?;
        }
    }
    txn.open_table(RESERVATIONS)?.remove(res.id.as_str())?;
    Ok(out)
}

impl Store {
    // ---- accounts ---------------------------------------------------------

    pub async fn create_account(
        &self,
        name: &str,
        group: &str,
        trial_credit: Quota,
        now: i64,
    ) -> Result<Account, StoreError> {
        let mut account = Account {
            id: crate::ids::new_id("acct_"),
            name: name.to_string(),
            group: group.to_string(),
            created_at: now,
            balance: 0,
            ledger_seq: 0,
        };
        self.write(Durability::Durable, move |txn| {
            if trial_credit > 0 {
                post(
                    txn,
                    &mut account,
                    LedgerKind::Trial,
                    trial_credit,
                    "trial credit",
                    now,
                    None,
                )?;
            }
            save_account(txn, &account)?;
            Ok(account)
        })
        .await
    }

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

    /// Adds money to an account. `None` when the account does not exist.
    pub async fn top_up(
        &self,
        account_id: &str,
        amount: Quota,
        note: &str,
        now: i64,
    ) -> Result<Option<Account>, StoreError> {
        let id = account_id.to_string();
        let note = note.to_string();
        self.write(Durability::Durable, move |txn| {
            let Some(mut account) = load_account(txn, &id)? else {
                return Ok(None);
            };
            post(
                txn,
                &mut account,
                LedgerKind::TopUp,
                amount,
                &note,
                now,
                None,
            )?;
            save_account(txn, &account)?;
            Ok(Some(account))
        })
        .await
    }

    // ---- tokens -----------------------------------------------------------

    /// Creates a token; returns it with its key, which is never stored.
    pub async fn create_token(
        &self,
        new: NewToken,
        now: i64,
    ) -> Result<Option<(Token, String)>, StoreError> {
        let key = crate::ids::new_api_key();
        let hint = format!("{}…{}", &key[..7], &key[key.len() - 4..]);
        let token = Token {
            id: crate::ids::new_id("tok_"),
            account_id: new.account_id,
            name: new.name,
            key_hash: hash_key(&key),
            key_hint: hint,
            models: new.models,
            ips: new.ips,
            quota_limit: new.quota_limit,
            used: 0,
            reserved: 0,
            expires_at: new.expires_at,
            status: TokenStatus::Active,
            created_at: now,
        };
        self.write(Durability::Durable, move |txn| {
            if load_account(txn, &token.account_id)?.is_none() {
                return Ok(None);
            }
            save_token(txn, &token)?;
            txn.open_table(TOKEN_KEYS)?
                .insert(token.key_hash.as_str(), token.id.as_str())?;
            Ok(Some((token, key)))
        })
        .await
    }

    /// The token a presented key belongs to, whatever its status.
    pub fn token_by_key(&self, key: &str) -> Result<Option<Token>, StoreError> {
        let hash = hash_key(key);
        let txn = self.read()?;
        let keys = txn.open_table(TOKEN_KEYS)?;
        let Some(id) = keys.get(hash.as_str())? else {
            return Ok(None);
        };
        let tokens = txn.open_table(TOKENS)?;
        let v = tokens.get(id.value())?;
        v.map(|v| decode("tokens", v.value())).transpose()
    }

    pub fn token(&self, id: &str) -> Result<Option<Token>, StoreError> {
        let txn = self.read()?;
        let t = txn.open_table(TOKENS)?;
        let v = t.get(id)?;
        v.map(|v| decode("tokens", v.value())).transpose()
    }

    pub fn tokens_of(&self, account_id: &str) -> Result<Vec<Token>, StoreError> {
        let txn = self.read()?;
        let t = txn.open_table(TOKENS)?;
        let mut out = Vec::new();
        for row in t.iter()? {
            let (_, v) = row?;
            let tok: Token = decode("tokens", v.value())?;
            if tok.account_id == account_id && tok.status != TokenStatus::Deleted {
                out.push(tok);
            }
        }
        Ok(out)
    }

    /// Disables or deletes a token. A deleted token's key mapping is removed
    /// too, so the key can never authenticate again.
    pub async fn set_token_status(
        &self,
        id: &str,
        status: TokenStatus,
    ) -> Result<Option<Token>, StoreError> {
        let id = id.to_string();
        self.write(Durability::Durable, move |txn| {
            let Some(mut token) = load_token(txn, &id)? else {
                return Ok(None);
            };
            token.status = status;
            save_token(txn, &token)?;
            if status == TokenStatus::Deleted {
                txn.open_table(TOKEN_KEYS)?
                    .remove(token.key_hash.as_str())?;
            }
            Ok(Some(token))
        })
        .await
    }

    // ---- reservations -----------------------------------------------------

    /// Holds `amount` of the account's balance (and of the token's cap) for a
    /// call in flight.
    #[allow(clippy::too_many_arguments)]
    pub async fn reserve(
        &self,
        account_id: &str,
        token_id: Option<&str>,
        amount: Quota,
        kind: ReservationKind,
        reference: &str,
        now: i64,
        durability: Durability,
    ) -> Result<Result<Reservation, ReserveRefusal>, StoreError> {
        let res = Reservation {
            id: crate::ids::new_id("res_"),
            account_id: account_id.to_string(),
            token_id: token_id.map(str::to_string),
            amount: amount.max(0),
            kind,
            reference: reference.to_string(),
            created_at: now,
        };
        self.write(durability, move |txn| reserve_in(txn, res))
            .await
    }

    /// Settles a reservation at `cost` and records the call's usage row, in
    /// one durable transaction. Settling twice is a no-op the second time.
    pub async fn settle(
        &self,
        reservation_id: &str,
        cost: Quota,
        usage: Option<UsageRecord>,
        now: i64,
    ) -> Result<Settlement, StoreError> {
        let id = reservation_id.to_string();
        self.write(Durability::Durable, move |txn| {
            let out = settle_in(txn, &id, cost, now)?;
            if let Some(mut u) = usage {
                u.cost = out.charged;
                append_usage(txn, u)?;
            }
            Ok(out)
        })
        .await
    }

    /// Every reservation still open (for reconciliation and tests).
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

    /// At start-up: a text call's reservation that survived a crash has no
    /// outcome any more (the client's connection died with the process), so
    /// it is refunded in full. Video reservations belong to tasks and stay.
    pub fn reconcile_text_reservations(&self, now: i64) -> Result<usize, StoreError> {
        self.write_blocking(Durability::Durable, move |txn| {
            let open: Vec<Reservation> = {
                let t = txn.open_table(RESERVATIONS)?;
                let mut v = Vec::new();
                for row in t.iter()? {
                    let (_, val) = row?;
                    let r: Reservation = decode("reservations", val.value())?;
                    if r.kind == ReservationKind::Text {
                        v.push(r);
                    }
                }
                v
            };
            for r in &open {
                close_reservation(txn, r, 0, now)?;
            }
            Ok(open.len())
        })
    }

    // ---- usage ------------------------------------------------------------

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

    /// Records a usage row for a call that held no reservation (refused early).
    pub async fn record_usage(&self, usage: UsageRecord) -> Result<(), StoreError> {
        self.write(Durability::Lazy, move |txn| append_usage(txn, usage))
            .await
    }
}

pub(crate) fn reserve_in(
    txn: &WriteTransaction,
    res: Reservation,
) -> Result<Result<Reservation, ReserveRefusal>, StoreError> {
    let Some(mut account) = load_account(txn, &res.account_id)? else {
        return Ok(Err(ReserveRefusal::NoAccount));
    };
    if account.balance < res.amount {
        return Ok(Err(ReserveRefusal::Insufficient {
            balance: account.balance,
        }));
    }
    let mut token = match &res.token_id {
        Some(id) => load_token(txn, id)?,
        None => None,
    };
    if let Some(t) = &token {
        if let Some(limit) = t.quota_limit {
            if t.used + t.reserved + res.amount > limit {
                return Ok(Err(ReserveRefusal::TokenQuota {
                    limit,
                    used: t.used,
                }));
            }
        }
    }
    if res.amount > 0 {
        post(
            txn,
            &mut account,
            LedgerKind::Reserve,
            -res.amount,
            &res.id,
            res.created_at,
            None,
        )?;
        save_account(txn, &account)?;
    }
    if let Some(t) = token.as_mut() {
        t.reserved += res.amount;
        save_token(txn, t)?;
    }
    txn.open_table(RESERVATIONS)?
        .insert(res.id.as_str(), encode(&res).as_slice())?;
    Ok(Ok(res))
}

pub(crate) fn settle_in(
    txn: &WriteTransaction,
    reservation_id: &str,
    cost: Quota,
    now: i64,
) -> Result<Settlement, StoreError> {
    let res: Option<Reservation> = {
        let t = txn.open_table(RESERVATIONS)?;
        let v = t.get(reservation_id)?;
        v.map(|v| decode("reservations", v.value())).transpose()?
    };
    match res {
        Some(res) => close_reservation(txn, &res, cost, now),
        None => Ok(Settlement::default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger_sum(store: &Store, id: &str) -> Quota {
        store.ledger(id).unwrap().iter().map(|e| e.amount).sum()
    }

    #[tokio::test]
    async fn reserve_settle_refund_keeps_ledger_equal_to_balance() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db.redb")).unwrap();
        let a = store
            .create_account("a", "default", 1_000, 1)
            .await
            .unwrap();
        let (tok, key) = store
            .create_token(
                NewToken {
                    account_id: a.id.clone(),
                    name: "t".into(),
                    models: None,
                    ips: None,
                    quota_limit: Some(900),
                    expires_at: None,
                },
                1,
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(store.token_by_key(&key).unwrap().unwrap().id, tok.id);

        let r = store
            .reserve(
                &a.id,
                Some(&tok.id),
                600,
                ReservationKind::Text,
                "req",
                2,
                Durability::Lazy,
            )
            .await
            .unwrap()
            .unwrap();
        // The token cap counts what is held.
        let refused = store
            .reserve(
                &a.id,
                Some(&tok.id),
                400,
                ReservationKind::Text,
                "req2",
                2,
                Durability::Lazy,
            )
            .await
            .unwrap();
        assert_eq!(
            refused,
            Err(ReserveRefusal::TokenQuota {
                limit: 900,
                used: 0
            })
        );
        let s = store.settle(&r.id, 250, None, 3).await.unwrap();
        assert_eq!(
            s,
            Settlement {
                charged: 250,
                refunded: 350
            }
        );
        // Settling again changes nothing.
        assert_eq!(
            store.settle(&r.id, 250, None, 3).await.unwrap(),
            Settlement::default()
        );

        let acct = store.account(&a.id).unwrap().unwrap();
        assert_eq!(acct.balance, 750);
        assert_eq!(ledger_sum(&store, &a.id), 750);
        let tok = store.token(&tok.id).unwrap().unwrap();
        assert_eq!((tok.used, tok.reserved), (250, 0));

        // A cost beyond the reservation takes only what the balance holds.
        let r = store
            .reserve(
                &a.id,
                None,
                700,
                ReservationKind::Text,
                "req3",
                4,
                Durability::Lazy,
            )
            .await
            .unwrap()
            .unwrap();
        let s = store.settle(&r.id, 5_000, None, 5).await.unwrap();
        assert_eq!(s.charged, 750);
        assert_eq!(store.account(&a.id).unwrap().unwrap().balance, 0);
        assert_eq!(ledger_sum(&store, &a.id), 0);

        let refused = store
            .reserve(
                &a.id,
                None,
                1,
                ReservationKind::Text,
                "req4",
                6,
                Durability::Lazy,
            )
            .await
            .unwrap();
        assert_eq!(refused, Err(ReserveRefusal::Insufficient { balance: 0 }));
    }

    #[tokio::test]
    async fn reconcile_refunds_text_holds_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db.redb")).unwrap();
        let a = store
            .create_account("a", "default", 1_000, 1)
            .await
            .unwrap();
        for kind in [ReservationKind::Text, ReservationKind::Video] {
            store
                .reserve(&a.id, None, 100, kind, "x", 1, Durability::Durable)
                .await
                .unwrap()
                .unwrap();
        }
        assert_eq!(store.reconcile_text_reservations(2).unwrap(), 1);
        assert_eq!(store.open_reservations().unwrap().len(), 1);
        assert_eq!(store.account(&a.id).unwrap().unwrap().balance, 900);
        assert_eq!(ledger_sum(&store, &a.id), 900);
    }
}
