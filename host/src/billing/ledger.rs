//! The books: every account's balance, every token's spending, every hold on
//! money for a call in flight — kept in memory, where the checks happen, and
//! logged before they are acknowledged (see `store::wal`).
//!
//! Rules, enforced here and nowhere else:
//! - a balance changes only by a ledger entry (trial, top-up, charge,
//!   reserve, settle, refund) posted in the same step, so `balance == Σ entries`;
//! - a hold never takes more than the balance has free (the balance less
//!   the text holds open on it), nor a token past its cap;
//! - closing a hold charges the real cost; a cost beyond the hold is taken
//!   from the balance only as far as its free part reaches.
//!
//! Two kinds of hold. A *text* hold lasts as long as one HTTP call and lives
//! only here, in memory: opening it logs nothing, and closing it logs one
//! `charge` entry with the call's usage row — a call costs one log record,
//! whatever its hold. If the process dies mid-call, the hold dies with it and
//! nothing was taken, so there is nothing to refund. A *video* hold backs a
//! task for hours, across restarts: it takes the money out of the balance
//! with a logged `reserve` entry, fsynced before the task is accepted, and is
//! closed by `settle` and `refund` entries.
//!
//! One mutex guards the books. Every operation holds it for a few
//! microseconds of arithmetic and queues its log record before releasing it,
//! so the log order is the order the books changed in.

use super::money::Quota;
use crate::store::records::*;
use crate::store::wal::{self, Durability, SyncWait, WalSync, WalWriter};
use crate::store::{Store, StoreError};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

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

impl Settlement {
    /// Closing a hold of `held` at `cost` (both at least zero): the cost,
    /// but past the hold only as far as the balance's `free` part reaches;
    /// the rest of the hold is let go.
    fn of(held: Quota, cost: Quota, free: Quota) -> Settlement {
        let charged = cost.min(held.saturating_add(free.max(0)));
        Settlement {
            charged,
            refunded: (held - charged).max(0),
        }
    }
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

/// A token's settings (shared with requests, which only read them) and its
/// spending (which changes on every call).
struct TokenEntry {
    meta: Arc<Token>,
    used: Quota,
    /// Held by video holds (logged, so it survives a restart).
    reserved: Quota,
    /// Held by text holds (memory only).
    held: Quota,
}

impl TokenEntry {
    fn snapshot(&self) -> Token {
        Token {
            used: self.used,
            reserved: self.reserved + self.held,
            ..(*self.meta).clone()
        }
    }

    fn money_fact(&self) -> Fact {
        Fact::TokenMoney {
            token_id: self.meta.id.clone(),
            used: self.used,
            reserved: self.reserved,
        }
    }
}

fn balance_fact(a: &Account) -> Fact {
    Fact::Balance {
        account_id: a.id.clone(),
        balance: a.balance,
        ledger_seq: a.ledger_seq,
        credited: a.credited,
    }
}

/// An open hold.
struct Held {
    res: Reservation,
    /// Opened by a logged `reserve` entry and closed by logged `settle` and
    /// `refund` entries: video holds, and text holds an earlier version of
    /// the gateway logged. A text hold lives in memory only.
    logged: bool,
}

#[derive(Default)]
struct Books {
    accounts: foldhash::HashMap<String, Account>,
    tokens: foldhash::HashMap<String, TokenEntry>,
    /// Key hash → token id, for tokens that can still authenticate.
    by_key: foldhash::HashMap<String, String>,
    holds: foldhash::HashMap<String, Held>,
    /// Account id → the sum of its open text holds, which its balance still
    /// counts but no other hold may take.
    text_held: foldhash::HashMap<String, Quota>,
    next_seq: u64,
    next_usage_seq: u64,
}

impl Books {
    /// Why a hold of `amount` for this account and token would be refused.
    fn refusal(
        &self,
        account_id: &str,
        token_id: Option<&str>,
        amount: Quota,
    ) -> Option<ReserveRefusal> {
        let Some(balance) = self.free(account_id) else {
            return Some(ReserveRefusal::NoAccount);
        };
        if balance < amount {
            return Some(ReserveRefusal::Insufficient { balance });
        }
        let token = token_id.and_then(|id| self.tokens.get(id))?;
        let limit = token.meta.quota_limit?;
        (token.used + token.reserved + token.held + amount > limit).then_some(
            ReserveRefusal::TokenQuota {
                limit,
                used: token.used,
            },
        )
    }

    /// The part of an account's balance no text hold has claimed.
    fn free(&self, account_id: &str) -> Option<Quota> {
        let a = self.accounts.get(account_id)?;
        Some(a.balance - self.text_held.get(account_id).copied().unwrap_or(0))
    }

    /// Closes a memory-only text hold: one `charge` entry for what the call
    /// cost. A cost beyond the hold takes only what the balance has free.
    fn close_text(
        &mut self,
        res: &Reservation,
        cost: Quota,
        now: i64,
        facts: &mut Vec<Fact>,
    ) -> Settlement {
        // Free before this hold is released: what lies beyond this hold and
        // every other text hold.
        let free = self.free(&res.account_id).unwrap_or(0);
        if let Some(held) = self.text_held.get_mut(&res.account_id) {
            *held -= res.amount;
            if *held <= 0 {
                self.text_held.remove(&res.account_id);
            }
        }
        let Settlement { charged, refunded } = Settlement::of(res.amount, cost, free);
        let token = res.token_id.as_ref().and_then(|id| self.tokens.get_mut(id));
        if let Some(t) = token {
            t.held = (t.held - res.amount).max(0);
            if charged > 0 {
                t.used += charged;
                facts.push(t.money_fact());
            }
        }
        if let (Some(a), true) = (self.accounts.get_mut(&res.account_id), charged > 0) {
            Books::post(
                a,
                LedgerKind::Charge,
                -charged,
                &res.reference,
                now,
                Some(charged),
                facts,
            );
            facts.push(balance_fact(a));
        }
        Settlement { charged, refunded }
    }

    /// Closes a logged hold (the money already left the balance at
    /// `reserve`): `settle` for the cost, `refund` for the rest.
    fn close_logged(
        &mut self,
        res: &Reservation,
        cost: Quota,
        now: i64,
        facts: &mut Vec<Fact>,
    ) -> Settlement {
        let free = self.free(&res.account_id).unwrap_or(0);
        let out = Settlement::of(res.amount, cost, free);
        if let Some(a) = self.accounts.get_mut(&res.account_id) {
            // The hold left the balance at `reserve`: the settlement moves it
            // only by what the cost took beyond the hold.
            if cost > res.amount || out.charged > 0 {
                let beyond = out.charged - res.amount.min(out.charged);
                let entry = Some(out.charged);
                Books::post(a, LedgerKind::Settle, -beyond, &res.id, now, entry, facts);
            }
            if out.refunded > 0 {
                Books::post(
                    a,
                    LedgerKind::Refund,
                    out.refunded,
                    &res.id,
                    now,
                    None,
                    facts,
                );
            }
            facts.push(balance_fact(a));
        }
        if let Some(t) = res.token_id.as_ref().and_then(|id| self.tokens.get_mut(id)) {
            t.reserved = (t.reserved - res.amount).max(0);
            t.used += out.charged;
            facts.push(t.money_fact());
        }
        facts.push(Fact::HoldClosed { id: res.id.clone() });
        out
    }

    /// Posts one entry to an account: moves the balance, returns the facts.
    fn post(
        account: &mut Account,
        kind: LedgerKind,
        amount: Quota,
        reference: &str,
        at: i64,
        charged: Option<Quota>,
        facts: &mut Vec<Fact>,
    ) {
        account.balance = account.balance.saturating_add(amount);
        account.ledger_seq += 1;
        if matches!(kind, LedgerKind::Trial | LedgerKind::TopUp) {
            account.credited = account.credited.saturating_add(amount);
        }
        facts.push(Fact::Ledger {
            account_id: account.id.clone(),
            entry: LedgerEntry {
                seq: account.ledger_seq,
                kind,
                amount,
                balance_after: account.balance,
                reference: reference.to_string(),
                at,
                charged,
            },
        });
    }
}

pub struct Ledger {
    books: Mutex<Books>,
    wal: WalWriter,
    store: Store,
}

impl Ledger {
    /// Replays the log into redb, loads the books from redb and starts
    /// logging. Video holds belong to tasks and stay. Text holds are never
    /// logged; any found were logged by an earlier version of the gateway
    /// (which took them from the balance) and are refunded, their calls
    /// having died with that process.
    pub fn open(store: Store, dir: &Path, sync: WalSync, now: i64) -> Result<Ledger, StoreError> {
        let last_seq = wal::recover(dir, &store, crate::store::accounts::apply_facts)?;
        let mut books = Books {
            next_seq: last_seq + 1,
            next_usage_seq: store.last_usage_seq()? + 1,
            ..Books::default()
        };
        for a in store.accounts()? {
            books.accounts.insert(a.id.clone(), a);
        }
        for t in store.tokens()? {
            if t.status != TokenStatus::Deleted {
                books.by_key.insert(t.key_hash.clone(), t.id.clone());
            }
            books.tokens.insert(
                t.id.clone(),
                TokenEntry {
                    used: t.used,
                    reserved: t.reserved,
                    held: 0,
                    meta: Arc::new(t),
                },
            );
        }
        for res in store.open_reservations()? {
            books
                .holds
                .insert(res.id.clone(), Held { res, logged: true });
        }
        let wal = wal::start(
            dir,
            store.clone(),
            sync,
            books.next_seq,
            crate::store::accounts::apply_facts,
        )?;
        let ledger = Ledger {
            books: Mutex::new(books),
            wal,
            store,
        };
        let stale: Vec<String> = ledger
            .lock()
            .holds
            .values()
            .filter(|h| h.res.kind == ReservationKind::Text)
            .map(|h| h.res.id.clone())
            .collect();
        for id in &stale {
            // Logged before the first call is served; at start-up a
            // refund waits for nothing.
            let _ = ledger.close_hold(id, 0, None, now)?;
        }
        if !stale.is_empty() {
            tracing::warn!(
                "refunded {} text hold(s) left open by an earlier run",
                stale.len()
            );
        }
        Ok(ledger)
    }

    fn lock(&self) -> MutexGuard<'_, Books> {
        // The books stay consistent even if a holder panicked: every
        // operation validates before it mutates.
        self.books.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Logs the facts under the books' lock (so log order = change order).
    fn log(
        &self,
        books: &mut Books,
        facts: Vec<Fact>,
        durability: Durability,
    ) -> Result<Option<SyncWait>, StoreError> {
        if facts.is_empty() {
            return Ok(None);
        }
        let seq = books.next_seq;
        books.next_seq += 1;
        self.wal.append(seq, facts, durability)
    }

    /// Waits for an fsync the log handed back, if any (outside the lock).
    async fn acked(wait: Option<SyncWait>) -> Result<(), StoreError> {
        match wait {
            Some(w) => w.wait().await,
            None => Ok(()),
        }
    }

    // ---- accounts -----------------------------------------------------------

    pub async fn create_account(
        &self,
        name: &str,
        group: &str,
        trial: Quota,
        now: i64,
    ) -> Result<Account, StoreError> {
        let rx;
        let account;
        {
            let mut books = self.lock();
            let mut a = Account {
                id: crate::ids::new_id("acct_"),
                name: name.to_string(),
                group: group.to_string(),
                created_at: now,
                balance: 0,
                ledger_seq: 0,
                credited: 0,
            };
            let mut facts = Vec::new();
            if trial > 0 {
                Books::post(
                    &mut a,
                    LedgerKind::Trial,
                    trial,
                    "trial credit",
                    now,
                    None,
                    &mut facts,
                );
            }
            facts.push(Fact::Account(a.clone()));
            books.accounts.insert(a.id.clone(), a.clone());
            rx = self.log(&mut books, facts, Durability::Synced)?;
            account = a;
        }
        Self::acked(rx).await?;
        Ok(account)
    }

    pub fn account(&self, id: &str) -> Option<Account> {
        self.lock().accounts.get(id).cloned()
    }

    pub fn accounts(&self) -> Vec<Account> {
        let mut v: Vec<Account> = self.lock().accounts.values().cloned().collect();
        v.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        v
    }

    /// Adds money. `None` when the account does not exist.
    pub async fn top_up(
        &self,
        id: &str,
        amount: Quota,
        note: &str,
        now: i64,
    ) -> Result<Option<Account>, StoreError> {
        let (rx, account) = {
            let mut books = self.lock();
            let Some(a) = books.accounts.get_mut(id) else {
                return Ok(None);
            };
            let mut facts = Vec::new();
            Books::post(a, LedgerKind::TopUp, amount, note, now, None, &mut facts);
            facts.push(balance_fact(a));
            let a = a.clone();
            (self.log(&mut books, facts, Durability::Synced)?, a)
        };
        Self::acked(rx).await?;
        Ok(Some(account))
    }

    // ---- tokens -------------------------------------------------------------

    /// Creates a token; returns it with its key, which is never stored.
    pub async fn create_token(
        &self,
        new: NewToken,
        now: i64,
    ) -> Result<Option<(Token, String)>, StoreError> {
        let key = crate::ids::new_api_key();
        let token = Token {
            id: crate::ids::new_id("tok_"),
            account_id: new.account_id,
            name: new.name,
            key_hash: hash_key(&key),
            key_hint: format!("{}…{}", &key[..7], &key[key.len() - 4..]),
            models: new.models,
            ips: new.ips,
            quota_limit: new.quota_limit,
            used: 0,
            reserved: 0,
            expires_at: new.expires_at,
            status: TokenStatus::Active,
            created_at: now,
        };
        let rx = {
            let mut books = self.lock();
            if !books.accounts.contains_key(&token.account_id) {
                return Ok(None);
            }
            books
                .by_key
                .insert(token.key_hash.clone(), token.id.clone());
            books.tokens.insert(
                token.id.clone(),
                TokenEntry {
                    meta: Arc::new(token.clone()),
                    used: 0,
                    reserved: 0,
                    held: 0,
                },
            );
            self.log(
                &mut books,
                vec![Fact::Token(token.clone())],
                Durability::Synced,
            )?
        };
        Self::acked(rx).await?;
        Ok(Some((token, key)))
    }

    /// The token a presented key belongs to (active, disabled or expired;
    /// deleted tokens are gone).
    pub fn token_by_key(&self, key: &str) -> Option<Arc<Token>> {
        let hash = hash_key(key);
        let books = self.lock();
        let id = books.by_key.get(&hash)?;
        books.tokens.get(id).map(|t| t.meta.clone())
    }

    /// A token with its current spending.
    pub fn token(&self, id: &str) -> Option<Token> {
        self.lock().tokens.get(id).map(TokenEntry::snapshot)
    }

    pub fn tokens_of(&self, account_id: &str) -> Vec<Token> {
        let mut v: Vec<Token> = self
            .lock()
            .tokens
            .values()
            .filter(|t| t.meta.account_id == account_id && t.meta.status != TokenStatus::Deleted)
            .map(TokenEntry::snapshot)
            .collect();
        v.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        v
    }

    /// Disables or deletes a token; a deleted token's key never works again.
    pub async fn set_token_status(
        &self,
        id: &str,
        status: TokenStatus,
    ) -> Result<Option<Token>, StoreError> {
        let (rx, token) = {
            let mut books = self.lock();
            let Some(entry) = books.tokens.get_mut(id) else {
                return Ok(None);
            };
            let mut meta = (*entry.meta).clone();
            meta.status = status;
            entry.meta = Arc::new(meta.clone());
            let token = entry.snapshot();
            if status == TokenStatus::Deleted {
                books.by_key.remove(&meta.key_hash);
            }
            (
                self.log(&mut books, vec![Fact::Token(meta)], Durability::Synced)?,
                token,
            )
        };
        Self::acked(rx).await?;
        Ok(Some(token))
    }

    // ---- holds ----------------------------------------------------------------

    /// Holds `amount` of the account's free balance (and of the token's cap)
    /// for a call in flight. A text hold is made in memory and logs nothing;
    /// a video hold is logged as a `reserve` entry and returns once fsynced
    /// (it must survive a power cut with its task).
    pub async fn reserve(
        &self,
        account_id: &str,
        token_id: Option<&str>,
        amount: Quota,
        kind: ReservationKind,
        reference: &str,
        now: i64,
    ) -> Result<Result<Reservation, ReserveRefusal>, StoreError> {
        let amount = amount.max(0);
        let (rx, res) = {
            let mut books = self.lock();
            if let Some(refusal) = books.refusal(account_id, token_id, amount) {
                return Ok(Err(refusal));
            }
            let res = Reservation {
                id: crate::ids::new_id("res_"),
                account_id: account_id.to_string(),
                token_id: token_id.map(str::to_string),
                amount,
                kind,
                reference: reference.to_string(),
                created_at: now,
            };
            if kind == ReservationKind::Text {
                *books.text_held.entry(account_id.to_string()).or_default() += amount;
                if let Some(t) = token_id.and_then(|id| books.tokens.get_mut(id)) {
                    t.held += amount;
                }
                let held = Held {
                    res: res.clone(),
                    logged: false,
                };
                books.holds.insert(res.id.clone(), held);
                return Ok(Ok(res));
            }
            let mut facts = Vec::new();
            if let Some(a) = books.accounts.get_mut(account_id) {
                if amount > 0 {
                    Books::post(
                        a,
                        LedgerKind::Reserve,
                        -amount,
                        &res.id,
                        now,
                        None,
                        &mut facts,
                    );
                    facts.push(balance_fact(a));
                }
            }
            if let Some(t) = token_id.and_then(|id| books.tokens.get_mut(id)) {
                t.reserved += amount;
                facts.push(t.money_fact());
            }
            facts.push(Fact::HoldOpened(res.clone()));
            let held = Held {
                res: res.clone(),
                logged: true,
            };
            books.holds.insert(res.id.clone(), held);
            (self.log(&mut books, facts, Durability::Synced)?, res)
        };
        Self::acked(rx).await?;
        Ok(Ok(res))
    }

    /// Settles a hold at `cost` and records the call's usage row (its `cost`
    /// set to what was charged), in one logged step; returns once logged.
    /// Settling a hold that is already closed does nothing.
    pub async fn settle(
        &self,
        hold_id: &str,
        cost: Quota,
        usage: Option<UsageRecord>,
        now: i64,
    ) -> Result<Settlement, StoreError> {
        let (out, wait) = self.close_hold(hold_id, cost, usage, now)?;
        Self::acked(wait).await?;
        Ok(out)
    }

    fn close_hold(
        &self,
        hold_id: &str,
        cost: Quota,
        usage: Option<UsageRecord>,
        now: i64,
    ) -> Result<(Settlement, Option<SyncWait>), StoreError> {
        let mut books = self.lock();
        let mut facts = Vec::new();
        let mut out = Settlement::default();
        // The settlement is written before the answer that depends on it; a
        // video hold's close must survive a power cut, like its opening.
        let mut durability = Durability::Written;
        if let Some(held) = books.holds.remove(hold_id) {
            if held.res.kind == ReservationKind::Video {
                durability = Durability::Synced;
            }
            out = if held.logged {
                books.close_logged(&held.res, cost.max(0), now, &mut facts)
            } else {
                books.close_text(&held.res, cost.max(0), now, &mut facts)
            };
        }
        if let Some(mut u) = usage {
            u.cost = out.charged;
            u.seq = books.next_usage_seq;
            books.next_usage_seq += 1;
            facts.push(Fact::Usage(u));
        }
        let wait = self.log(&mut books, facts, durability)?;
        Ok((out, wait))
    }

    /// Whether a hold of `amount` would be granted now (it is not made).
    pub fn can_reserve(
        &self,
        account_id: &str,
        token_id: Option<&str>,
        amount: Quota,
    ) -> Result<(), ReserveRefusal> {
        match self.lock().refusal(account_id, token_id, amount.max(0)) {
            Some(refusal) => Err(refusal),
            None => Ok(()),
        }
    }

    /// Money on hold for an account's calls and tasks in flight.
    pub fn held(&self, account_id: &str) -> Quota {
        self.lock()
            .holds
            .values()
            .filter(|h| h.res.account_id == account_id)
            .map(|h| h.res.amount)
            .sum()
    }

    /// Everything charged to an account so far: what it was credited, less
    /// its balance and the logged holds that took money out of it.
    pub fn spent(&self, account_id: &str) -> Option<Quota> {
        let books = self.lock();
        let a = books.accounts.get(account_id)?;
        let taken: Quota = books
            .holds
            .values()
            .filter(|h| h.logged && h.res.account_id == account_id)
            .map(|h| h.res.amount)
            .sum();
        Some(a.credited - a.balance - taken)
    }

    /// Open holds (tests, reconciliation of video holds).
    pub fn holds(&self) -> Vec<Reservation> {
        self.lock().holds.values().map(|h| h.res.clone()).collect()
    }

    /// Waits until every change so far is in redb (admin reads of the ledger
    /// and usage rows use this to see their own writes).
    pub async fn checkpoint(&self) -> Result<(), StoreError> {
        self.wal.checkpoint().await
    }

    pub fn store(&self) -> &Store {
        &self.store
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &Path) -> Ledger {
        // A dropped ledger's threads let go of the database file shortly
        // after; a real restart is a new process and never waits.
        let mut tries = 0;
        let store = loop {
            match Store::open(&dir.join("db.redb")) {
                Ok(s) => break s,
                Err(e) if tries < 100 => {
                    tries += 1;
                    let _ = e;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => panic!("{e}"),
            }
        };
        Ledger::open(store, dir, WalSync::Batched, 1).unwrap()
    }

    fn sum(store: &Store, id: &str) -> Quota {
        store.ledger(id).unwrap().iter().map(|e| e.amount).sum()
    }

    #[tokio::test]
    async fn reserve_settle_refund_keep_the_ledger_equal_to_the_balance() {
        let dir = tempfile::tempdir().unwrap();
        let l = open(dir.path());
        let a = l.create_account("a", "default", 1_000, 1).await.unwrap();
        let (tok, key) = l
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
        assert_eq!(l.token_by_key(&key).unwrap().id, tok.id);
        let r = l
            .reserve(&a.id, Some(&tok.id), 600, ReservationKind::Text, "q", 2)
            .await
            .unwrap()
            .unwrap();
        let refused = l
            .reserve(&a.id, Some(&tok.id), 400, ReservationKind::Text, "q2", 2)
            .await
            .unwrap();
        assert_eq!(
            refused,
            Err(ReserveRefusal::TokenQuota {
                limit: 900,
                used: 0
            })
        );
        assert_eq!(
            l.settle(&r.id, 250, None, 3).await.unwrap(),
            Settlement {
                charged: 250,
                refunded: 350
            }
        );
        assert_eq!(
            l.settle(&r.id, 250, None, 3).await.unwrap(),
            Settlement::default()
        );
        assert_eq!(l.account(&a.id).unwrap().balance, 750);
        let t = l.token(&tok.id).unwrap();
        assert_eq!((t.used, t.reserved), (250, 0));

        // A cost past the hold takes only what the balance holds.
        let r = l
            .reserve(&a.id, None, 700, ReservationKind::Text, "q3", 4)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(l.settle(&r.id, 5_000, None, 5).await.unwrap().charged, 750);
        assert_eq!(l.account(&a.id).unwrap().balance, 0);
        assert_eq!(
            l.reserve(&a.id, None, 1, ReservationKind::Text, "q4", 6)
                .await
                .unwrap(),
            Err(ReserveRefusal::Insufficient { balance: 0 })
        );

        l.checkpoint().await.unwrap();
        assert_eq!(sum(l.store(), &a.id), 0);
        let stored = l.store().accounts().unwrap();
        assert_eq!(stored.iter().find(|x| x.id == a.id).unwrap().balance, 0);
    }

    #[tokio::test]
    async fn a_restart_replays_the_log_keeps_video_holds_and_forgets_text_ones() {
        let dir = tempfile::tempdir().unwrap();
        let id;
        {
            let l = open(dir.path());
            let a = l.create_account("a", "default", 1_000, 1).await.unwrap();
            id = a.id.clone();
            for kind in [ReservationKind::Text, ReservationKind::Video] {
                l.reserve(&a.id, None, 100, kind, "x", 1)
                    .await
                    .unwrap()
                    .unwrap();
            }
            let r = l
                .reserve(&a.id, None, 100, ReservationKind::Text, "y", 1)
                .await
                .unwrap()
                .unwrap();
            l.settle(&r.id, 40, None, 2).await.unwrap();
            // Dropped without a checkpoint: redb may hold none of this yet.
        }
        let l = open(dir.path());
        assert_eq!(l.holds().len(), 1, "the video hold stays");
        assert_eq!(l.account(&id).unwrap().balance, 1_000 - 100 - 40);
        l.checkpoint().await.unwrap();
        assert_eq!(sum(l.store(), &id), 1_000 - 100 - 40);
        let kinds: Vec<LedgerKind> = l
            .store()
            .ledger(&id)
            .unwrap()
            .iter()
            .map(|e| e.kind)
            .collect();
        assert_eq!(
            kinds,
            [LedgerKind::Trial, LedgerKind::Reserve, LedgerKind::Charge],
            "the open text hold left nothing behind"
        );
    }

    #[tokio::test]
    async fn a_text_hold_an_earlier_version_logged_is_refunded_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let id;
        {
            let l = open(dir.path());
            let a = l.create_account("a", "default", 1_000, 1).await.unwrap();
            id = a.id.clone();
            l.checkpoint().await.unwrap();
            // What the older gateway logged for a text call in flight.
            let res = Reservation {
                id: "res_old".into(),
                account_id: id.clone(),
                token_id: None,
                amount: 300,
                kind: ReservationKind::Text,
                reference: "req_old".into(),
                created_at: 1,
            };
            let facts = vec![
                Fact::Ledger {
                    account_id: id.clone(),
                    entry: LedgerEntry {
                        seq: 2,
                        kind: LedgerKind::Reserve,
                        amount: -300,
                        balance_after: 700,
                        reference: res.id.clone(),
                        at: 1,
                        charged: None,
                    },
                },
                Fact::Balance {
                    account_id: id.clone(),
                    balance: 700,
                    ledger_seq: 2,
                    credited: 1_000,
                },
                Fact::HoldOpened(res),
            ];
            l.store()
                .write_blocking(move |txn| crate::store::accounts::apply_facts(txn, &facts))
                .unwrap();
        }
        let l = open(dir.path());
        assert!(l.holds().is_empty());
        assert_eq!(l.account(&id).unwrap().balance, 1_000);
        l.checkpoint().await.unwrap();
        assert_eq!(sum(l.store(), &id), 1_000);
        assert!(l.store().open_reservations().unwrap().is_empty());
    }

    #[tokio::test]
    async fn text_holds_claim_the_balance_without_moving_it_and_no_hold_takes_anothers_money() {
        let dir = tempfile::tempdir().unwrap();
        let l = open(dir.path());
        let a = l.create_account("a", "default", 1_000, 1).await.unwrap();
        let first = l
            .reserve(&a.id, None, 600, ReservationKind::Text, "q1", 2)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            l.account(&a.id).unwrap().balance,
            1_000,
            "nothing taken yet"
        );
        assert_eq!(l.held(&a.id), 600);
        assert_eq!(
            l.reserve(&a.id, None, 500, ReservationKind::Video, "t", 2)
                .await
                .unwrap(),
            Err(ReserveRefusal::Insufficient { balance: 400 }),
            "a video hold sees only the free part"
        );
        let second = l
            .reserve(&a.id, None, 300, ReservationKind::Text, "q2", 2)
            .await
            .unwrap()
            .unwrap();
        // The second call costs far more than its hold: it may take the
        // free 100, never the first call's 600.
        let s = l.settle(&second.id, 5_000, None, 3).await.unwrap();
        assert_eq!(
            s,
            Settlement {
                charged: 400,
                refunded: 0
            }
        );
        assert_eq!(l.account(&a.id).unwrap().balance, 600);
        let s = l.settle(&first.id, 600, None, 3).await.unwrap();
        assert_eq!(
            s,
            Settlement {
                charged: 600,
                refunded: 0
            }
        );
        assert_eq!(l.account(&a.id).unwrap().balance, 0);
        assert_eq!(l.spent(&a.id), Some(1_000));
        l.checkpoint().await.unwrap();
        assert_eq!(sum(l.store(), &a.id), 0);
        let entries = l.store().ledger(&a.id).unwrap();
        let charges: Vec<(LedgerKind, Quota, &str)> = entries
            .iter()
            .map(|e| (e.kind, e.amount, e.reference.as_str()))
            .collect();
        assert_eq!(
            charges,
            [
                (LedgerKind::Trial, 1_000, "trial credit"),
                (LedgerKind::Charge, -400, "q2"),
                (LedgerKind::Charge, -600, "q1"),
            ]
        );
    }

    /// What a billed text call leaves in the store for good: its usage row
    /// (and the row's index entry) and its `charge` entry. Measured as the
    /// growth of the redb file over many calls, as `make bench` does.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_text_call_adds_at_most_300_bytes_to_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let l = open(dir.path());
        let a = l.create_account("a", "default", 1 << 40, 1).await.unwrap();
        let new = NewToken {
            account_id: a.id.clone(),
            name: "t".into(),
            models: None,
            ips: None,
            quota_limit: None,
            expires_at: None,
        };
        let (tok, _) = l.create_token(new, 1).await.unwrap().unwrap();
        let file = dir.path().join("db.redb");
        let calls = |from: u64, to: u64| {
            let (l, a, tok) = (&l, &a, &tok);
            async move {
                for i in from..to {
                    let at = 1_790_000_000 + (i as i64) / 50;
                    let rid = crate::ids::new_request_id();
                    let r = l
                        .reserve(&a.id, Some(&tok.id), 5_000, ReservationKind::Text, &rid, at)
                        .await
                        .unwrap()
                        .unwrap();
                    let row = UsageRecord {
                        at,
                        request_id: rid,
                        account_id: a.id.clone(),
                        token_id: Some(tok.id.clone()),
                        model: "gpt-4o-mini".into(),
                        channel: Some("openai-main".into()),
                        input_tokens: 380 + i % 200,
                        cached_tokens: 100,
                        output_tokens: 220 + i % 300,
                        reasoning_tokens: 40,
                        latency_ms: 800 + i % 900,
                        status: 200,
                        ..UsageRecord::default()
                    };
                    l.settle(&r.id, 636 + (i as i64 % 100), Some(row), at)
                        .await
                        .unwrap();
                }
                l.checkpoint().await.unwrap();
            }
        };
        calls(0, 5_000).await;
        let before = std::fs::metadata(&file).unwrap().len();
        const N: u64 = 40_000;
        calls(5_000, 5_000 + N).await;
        let after = std::fs::metadata(&file).unwrap().len();
        let per_call = (after - before) / N;
        // Where the bytes go, for the failure message.
        let tables = crate::store::history::table_stats(l.store());
        // See README, "Where the time goes".
        assert!(per_call <= 300, "{per_call} bytes per call{tables}");
        eprintln!("{per_call} bytes per call{tables}");
        assert_eq!(sum(l.store(), &a.id), l.account(&a.id).unwrap().balance);
    }
}
