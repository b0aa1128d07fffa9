//! Durable state in one redb file.
//!
//! Everything money or a customer depends on (accounts and their ledgers,
//! tokens, reservations, usage, video tasks, quotes, idempotency keys, the
//! webhook outbox) is written here in a transaction before the response that
//! depends on it is sent. Handlers never see redb: they call the domain
//! methods in the submodules, so another backend (a shared SQL database for
//! several nodes) can replace this one behind the same methods.
//!
//! Writes go through one writer thread that commits whatever has queued up in
//! a single durable transaction (group commit): under load one fsync covers
//! many writes, and nothing is acknowledged before its commit returns. Money
//! changes reach redb through the ledger's write-ahead log (`wal`), in batches.

pub mod accounts;
mod compact;
pub mod history;
pub mod models;
pub mod records;
pub mod users;
pub mod video;
pub mod wal;

use redb::{Database, ReadTransaction, ReadableTable, TableDefinition, WriteTransaction};
use std::path::Path;
use std::sync::mpsc;
use std::sync::Arc;
use tokio::sync::oneshot;

pub(crate) const ACCOUNTS: TableDefinition<&str, &[u8]> = TableDefinition::new("accounts");
pub(crate) const TOKENS: TableDefinition<&str, &[u8]> = TableDefinition::new("tokens");
pub(crate) const TOKEN_KEYS: TableDefinition<&str, &str> = TableDefinition::new("token_keys");
pub(crate) const RESERVATIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("reservations");
/// Account id → (balance, ledger position, credited): the part of an account that
/// changes on every call, kept apart so updating it is one small write.
pub(crate) const BALANCES: TableDefinition<&str, (i64, u64, i64)> =
    TableDefinition::new("balances");
/// Token id → (used, reserved), for the same reason.
pub(crate) const TOKEN_MONEY: TableDefinition<&str, (i64, i64)> =
    TableDefinition::new("token_money");
pub const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// `META` key: which generation of derived indexes the file holds.
const INDEXES_KEY: &str = "indexes";
const INDEXES_VERSION: u64 = 1;

#[derive(Debug, thiserror::Error, Clone)]
pub enum StoreError {
    #[error("storage: {0}")]
    Storage(String),
    #[error("corrupt record in `{table}`: {detail}")]
    Corrupt { table: &'static str, detail: String },
    #[error("the store's writer has stopped")]
    WriterGone,
}

impl<E: Into<redb::Error>> From<E> for StoreError {
    fn from(e: E) -> Self {
        StoreError::Storage(e.into().to_string())
    }
}

type Completer = Box<dyn FnOnce(Result<(), StoreError>) + Send>;
/// Runs a write inside the batch transaction (or, given `None`, reports that
/// no transaction could be opened) and returns how to acknowledge it.
type JobFn = Box<dyn FnOnce(Option<&WriteTransaction>) -> (Completer, bool) + Send>;

struct Job {
    run: JobFn,
}

/// Handle to the database; cheap to clone.
#[derive(Clone)]
pub struct Store {
    db: Arc<Database>,
    jobs: mpsc::Sender<Job>,
}

/// redb's page cache. Its default (a gigabyte) is filled by the usage rows
/// and ledger entries every call appends, which are written once and read
/// rarely (dashboards, admin reads), so a large cache only grows the
/// process; the hot state (balances, holds) lives in the ledger's memory.
/// Appends touch the right edge of each tree, a few pages: with 1 MiB
/// rather than 4 the gateway's private memory after the bench's load was
/// 3.5 MiB smaller (10.6 against 14.1 MiB) and the store writer's CPU time
/// about the same (34 against 31 ticks over the same calls).
const CACHE_BYTES: usize = 1024 * 1024;

/// Largest number of queued writes folded into one transaction.
const MAX_BATCH: usize = 512;

impl Store {
    /// Opens (or creates) the database file and starts the writer thread.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Storage(e.to_string()))?;
        }
        let db = Arc::new(
            redb::Builder::new()
                .set_cache_size(CACHE_BYTES)
                .create(path)?,
        );
        {
            // Create every table up front so readers never meet a missing one.
            let txn = db.begin_write()?;
            txn.open_table(ACCOUNTS)?;
            txn.open_table(TOKENS)?;
            txn.open_table(TOKEN_KEYS)?;
            txn.open_table(RESERVATIONS)?;
            txn.open_table(BALANCES)?;
            txn.open_table(TOKEN_MONEY)?;
            history::create_tables(&txn)?;
            txn.open_table(models::MODELS_SEEN)?;
            video::create_tables(&txn)?;
            users::create_tables(&txn)?;
            txn.open_table(META)?;
            history::migrate(&txn)?;
            ensure_indexes(&txn)?;
            txn.commit()?;
        }
        let (tx, rx) = mpsc::channel::<Job>();
        let writer_db = db.clone();
        std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || writer_loop(writer_db, rx))
            .map_err(|e| StoreError::Storage(e.to_string()))?;
        Ok(Store { db, jobs: tx })
    }

    pub fn read(&self) -> Result<ReadTransaction, StoreError> {
        use redb::ReadableDatabase;
        Ok(self.db.begin_read()?)
    }

    /// Runs `f` inside the next group-commit transaction and returns its
    /// result once that transaction has committed. If `f` fails the whole
    /// batch is rolled back, so `f` must report business outcomes (such as
    /// "not enough balance") inside `R` and keep `Err` for storage failures.
    pub async fn write<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&WriteTransaction) -> Result<R, StoreError> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.submit(f, move |r| {
            let _ = tx.send(r);
        })?;
        rx.await.map_err(|_| StoreError::WriterGone)?
    }

    /// Blocking twin of [`Store::write`] for start-up code and threads
    /// outside the async runtime.
    pub fn write_blocking<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&WriteTransaction) -> Result<R, StoreError> + Send + 'static,
    {
        let (tx, rx) = std::sync::mpsc::channel();
        self.submit(f, move |r| {
            let _ = tx.send(r);
        })?;
        rx.recv().map_err(|_| StoreError::WriterGone)?
    }

    fn submit<R, F, D>(&self, f: F, deliver: D) -> Result<(), StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&WriteTransaction) -> Result<R, StoreError> + Send + 'static,
        D: FnOnce(Result<R, StoreError>) + Send + 'static,
    {
        let run: JobFn = Box::new(move |txn| {
            let outcome = match txn {
                Some(txn) => f(txn),
                None => Err(StoreError::Storage("no write transaction available".into())),
            };
            let failed = outcome.is_err();
            let completer: Completer = Box::new(move |commit| {
                deliver(commit.and(outcome));
            });
            (completer, failed)
        });
        self.jobs
            .send(Job { run })
            .map_err(|_| StoreError::WriterGone)
    }
}

fn writer_loop(db: Arc<Database>, rx: mpsc::Receiver<Job>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        run_batch(&db, batch);
    }
}

fn run_batch(db: &Database, batch: Vec<Job>) {
    let txn = match db.begin_write() {
        Ok(t) => t,
        Err(e) => {
            let err = StoreError::from(e);
            tracing::error!("store: cannot open a write transaction: {err}");
            for job in batch {
                let (complete, _) = (job.run)(None);
                complete(Err(err.clone()));
            }
            return;
        }
    };
    let mut completers = Vec::with_capacity(batch.len());
    let mut failed = false;
    for job in batch {
        let (complete, job_failed) = (job.run)(Some(&txn));
        failed |= job_failed;
        completers.push(complete);
    }
    let result = if failed {
        let _ = txn.abort();
        Err(StoreError::Storage(
            "a write in the same batch failed; nothing was committed".into(),
        ))
    } else {
        txn.commit().map_err(StoreError::from)
    };
    for complete in completers {
        complete(result.clone());
    }
}

/// Fills the indexes added after the first release from the records a
/// database already holds, once (a marker in `META` says it was done).
pub(crate) fn ensure_indexes(txn: &WriteTransaction) -> Result<(), StoreError> {
    let mut meta = txn.open_table(META)?;
    let built = meta.get(INDEXES_KEY)?.map(|v| v.value()).unwrap_or(0);
    if built < INDEXES_VERSION {
        video::build_indexes(txn)?;
        meta.insert(INDEXES_KEY, INDEXES_VERSION)?;
    }
    Ok(())
}

/// Decodes a JSON record, naming the table when it is corrupt.
pub(crate) fn decode<T: serde::de::DeserializeOwned>(
    table: &'static str,
    bytes: &[u8],
) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        table,
        detail: e.to_string(),
    })
}

pub(crate) fn encode<T: serde::Serialize>(value: &T) -> Vec<u8> {
    // Serialising our own plain records cannot fail.
    serde_json::to_vec(value).unwrap_or_default()
}
