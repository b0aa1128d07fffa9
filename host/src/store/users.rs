//! The web console's people and their logins: users (e-mail, password hash,
//! verified or not, their account), e-mail verification links and sessions.
//!
//! Secrets are never stored: a verification link's token and a session's id
//! are kept only as their SHA-256 (the caller hashes; this module only sees
//! hex digests), so a copy of the file lets nobody log in or verify. A link
//! is taken out of the table in the same transaction that checks it, so two
//! openings of one link cannot both succeed. Expiry is decided by the
//! caller's clock (`now` arguments), never the system's.

use super::{decode, encode, Store, StoreError};
use redb::{ReadableTable, TableDefinition, WriteTransaction};
use serde::{Deserialize, Serialize};

/// Lower-cased e-mail → [`User`].
const USERS: TableDefinition<&str, &[u8]> = TableDefinition::new("console_users");
/// Hash of a verification token → [`Verification`].
const VERIFICATIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("console_verifications");
/// Hash of a session id → [`Session`].
const SESSIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("console_sessions");

pub fn create_tables(txn: &WriteTransaction) -> Result<(), StoreError> {
    txn.open_table(USERS)?;
    txn.open_table(VERIFICATIONS)?;
    txn.open_table(SESSIONS)?;
    Ok(())
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct User {
    /// Lower-cased; the key.
    pub email: String,
    /// Argon2id, in the PHC string format (salt and parameters included).
    pub password_hash: String,
    pub verified: bool,
    /// Set when the e-mail is verified (the account is created then).
    pub account_id: Option<String>,
    pub created_at: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Verification {
    pub email: String,
    pub expires_at: i64,
}

/// Who a session is for.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SessionOwner {
    /// A verified user (by e-mail).
    Customer { email: String },
    /// Someone who presented the admin key.
    Operator,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Session {
    pub owner: SessionOwner,
    /// The CSRF token every form of this session carries.
    pub csrf: String,
    pub created_at: i64,
    pub expires_at: i64,
}

/// What opening a verification link found.
#[derive(Debug, Clone, PartialEq)]
pub enum Redeemed {
    /// Valid: the link is now used up.
    Email(String),
    /// Known but past its expiry (removed too).
    Expired,
    /// Never issued, or already used.
    Unknown,
}

impl Store {
    pub fn user(&self, email: &str) -> Result<Option<User>, StoreError> {
        let txn = self.read()?;
        let t = txn.open_table(USERS)?;
        let v = t.get(email)?;
        v.map(|v| decode("console_users", v.value())).transpose()
    }

    /// Stores a new user, or replaces one that never verified its e-mail (a
    /// second sign-up before the first link was opened); false, and nothing
    /// written, when the e-mail belongs to a verified user.
    pub async fn put_unverified_user(&self, user: User) -> Result<bool, StoreError> {
        self.write(move |txn| {
            let mut t = txn.open_table(USERS)?;
            let existing: Option<User> = t
                .get(user.email.as_str())?
                .map(|v| decode("console_users", v.value()))
                .transpose()?;
            if existing.is_some_and(|u| u.verified) {
                return Ok(false);
            }
            t.insert(user.email.as_str(), encode(&user).as_slice())?;
            Ok(true)
        })
        .await
    }

    /// Marks a user verified with its new account.
    pub async fn verify_user(&self, email: &str, account_id: &str) -> Result<bool, StoreError> {
        let (email, account_id) = (email.to_string(), account_id.to_string());
        self.write(move |txn| {
            let mut t = txn.open_table(USERS)?;
            let user: Option<User> = t
                .get(email.as_str())?
                .map(|v| decode("console_users", v.value()))
                .transpose()?;
            let Some(mut user) = user else {
                return Ok(false);
            };
            user.verified = true;
            user.account_id = Some(account_id);
            t.insert(email.as_str(), encode(&user).as_slice())?;
            Ok(true)
        })
        .await
    }

    pub async fn put_verification(
        &self,
        token_hash: String,
        v: Verification,
    ) -> Result<(), StoreError> {
        self.write(move |txn| {
            let mut t = txn.open_table(VERIFICATIONS)?;
            t.insert(token_hash.as_str(), encode(&v).as_slice())?;
            Ok(())
        })
        .await
    }

    /// Takes a verification link out of the table (single use) and says
    /// whether it was valid at `now`.
    pub async fn redeem_verification(
        &self,
        token_hash: String,
        now: i64,
    ) -> Result<Redeemed, StoreError> {
        self.write(move |txn| {
            let mut t = txn.open_table(VERIFICATIONS)?;
            let Some(v) = t.remove(token_hash.as_str())? else {
                return Ok(Redeemed::Unknown);
            };
            let v: Verification = decode("console_verifications", v.value())?;
            Ok(if now > v.expires_at {
                Redeemed::Expired
            } else {
                Redeemed::Email(v.email)
            })
        })
        .await
    }

    pub async fn put_session(&self, id_hash: String, s: Session) -> Result<(), StoreError> {
        self.write(move |txn| {
            let mut t = txn.open_table(SESSIONS)?;
            t.insert(id_hash.as_str(), encode(&s).as_slice())?;
            Ok(())
        })
        .await
    }

    /// A session that has not expired at `now`.
    pub fn session(&self, id_hash: &str, now: i64) -> Result<Option<Session>, StoreError> {
        let txn = self.read()?;
        let t = txn.open_table(SESSIONS)?;
        let v = t.get(id_hash)?;
        let s: Option<Session> = v
            .map(|v| decode("console_sessions", v.value()))
            .transpose()?;
        Ok(s.filter(|s| now < s.expires_at))
    }

    pub async fn delete_session(&self, id_hash: String) -> Result<(), StoreError> {
        self.write(move |txn| {
            let mut t = txn.open_table(SESSIONS)?;
            t.remove(id_hash.as_str())?;
            Ok(())
        })
        .await
    }

    /// Removes sessions and verification links expired at `now`; returns
    /// how many.
    pub async fn sweep_console(&self, now: i64) -> Result<usize, StoreError> {
        self.write(move |txn| {
            let mut removed = 0;
            {
                let mut t = txn.open_table(SESSIONS)?;
                let mut old = Vec::new();
                for row in t.iter()? {
                    let (k, v) = row?;
                    let s: Session = decode("console_sessions", v.value())?;
                    if now >= s.expires_at {
                        old.push(k.value().to_string());
                    }
                }
                for k in &old {
                    t.remove(k.as_str())?;
                }
                removed += old.len();
            }
            let mut t = txn.open_table(VERIFICATIONS)?;
            let mut old = Vec::new();
            for row in t.iter()? {
                let (k, v) = row?;
                let s: Verification = decode("console_verifications", v.value())?;
                if now > s.expires_at {
                    old.push(k.value().to_string());
                }
            }
            for k in &old {
                t.remove(k.as_str())?;
            }
            Ok(removed + old.len())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_link_is_single_use_and_expires() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db.redb")).unwrap();
        let v = |e: &str| Verification {
            email: e.into(),
            expires_at: 100,
        };
        store.put_verification("h1".into(), v("a@x")).await.unwrap();
        store.put_verification("h2".into(), v("b@x")).await.unwrap();
        assert_eq!(
            store.redeem_verification("h1".into(), 100).await.unwrap(),
            Redeemed::Email("a@x".into())
        );
        assert_eq!(
            store.redeem_verification("h1".into(), 100).await.unwrap(),
            Redeemed::Unknown
        );
        assert_eq!(
            store.redeem_verification("h2".into(), 101).await.unwrap(),
            Redeemed::Expired
        );
    }

    #[tokio::test]
    async fn a_verified_user_is_not_replaced_and_sessions_expire() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db.redb")).unwrap();
        let user = User {
            email: "a@x".into(),
            password_hash: "h".into(),
            verified: false,
            account_id: None,
            created_at: 1,
        };
        assert!(store.put_unverified_user(user.clone()).await.unwrap());
        assert!(store.put_unverified_user(user.clone()).await.unwrap());
        assert!(store.verify_user("a@x", "acct_1").await.unwrap());
        assert!(!store.put_unverified_user(user).await.unwrap());
        let u = store.user("a@x").unwrap().unwrap();
        assert!(u.verified);
        assert_eq!(u.account_id.as_deref(), Some("acct_1"));

        let s = Session {
            owner: SessionOwner::Operator,
            csrf: "c".into(),
            created_at: 0,
            expires_at: 10,
        };
        store.put_session("s".into(), s.clone()).await.unwrap();
        assert_eq!(store.session("s", 9).unwrap(), Some(s));
        assert_eq!(store.session("s", 10).unwrap(), None);
        assert_eq!(store.sweep_console(10).await.unwrap(), 1);
        store.delete_session("s".into()).await.unwrap();
        assert_eq!(store.session("s", 0).unwrap(), None);
    }
}
