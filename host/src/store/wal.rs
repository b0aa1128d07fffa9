//! The money write-ahead log.
//!
//! Every change to accounts, tokens, holds and usage is first appended here as
//! one JSON line `{"seq": N, "facts": [...]}`; a background checkpointer then
//! folds the facts into redb in large batches. The call that changes the
//! books writes its own line (one `pwrite(2)`, see [`WalWriter`]), so the
//! per-call cost of billing is that write: no thread hand-off, no wake-up,
//! and no redb transaction per call.
//!
//! Durability, by `[billing] wal_sync`:
//! - `batched` (default): a change is acknowledged once it is written to the
//!   operating system, which survives the process dying (a crash, `SIGKILL`);
//!   the file is fsynced within 10 ms of a write, so a power cut can lose at
//!   most the last 10 ms of changes.
//! - `always`: a change is acknowledged only after fsync (group commit: one
//!   fsync covers every change queued meanwhile).
//!
//! Files are segments `ledger-<first seq>.wal` in the data folder. Redb keeps
//! the sequence number of the last record it holds (`meta.wal_seq`, written in
//! the same transaction as the facts), so replay at start-up applies exactly
//! the records it is missing; segments wholly in redb are deleted. A segment
//! is closed at 32 MiB, or after a checkpoint once it holds 1 MiB, so the log
//! on disk stays within a few MiB however many calls go through.
//!
//! A segment is written ahead with zeros (`PREALLOCATED_BYTES`, fsynced with
//! its directory entry before the first record goes in) and records are
//! written into that space at their offset, not appended: an fsync of data
//! written into blocks the file already has needs no journal commit for a
//! new file size, and cost about a third less CPU in a test on the bench
//! machine (one `fdatasync` per settlement when streams end apart). No JSON
//! line holds a NUL byte, so a segment's records end at its first NUL; what
//! follows must be zeros (see [`recover`]).

use super::records::Fact;
use super::{Store, StoreError, META};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How often the `batched` mode fsyncs.
const SYNC_EVERY: Duration = Duration::from_millis(10);
/// How often the checkpointer looks at what redb lacks: it folds the facts
/// in when `CHECKPOINT_BATCH` of them wait, ...
const CHECKPOINT_EVERY: Duration = Duration::from_millis(250);
/// ... and otherwise once this long after the last fold. A redb commit
/// costs about the same (its fsyncs and page writes: about 0.6 ms of CPU on
/// the bench machine) for six facts as for a thousand, so a light load
/// (a few calls a second, a few dozen streams) pays for one a second
/// instead of four, and a heavy one still folds every `CHECKPOINT_EVERY`,
/// which keeps the facts in memory to about a quarter-second's worth (and
/// to `FOLD_AT` of them, whichever comes first).
/// Nothing waits on the cadence: a reader that needs redb current asks
/// for a checkpoint (`WalWriter::checkpoint`), which runs at once.
const CHECKPOINT_AT_LEAST: Duration = Duration::from_secs(1);
/// Facts waiting that make a tick fold them at once. A text call logs four
/// (its charge, the account's balance, the token's spend, its usage row),
/// so a load of more than about a thousand calls a second folds at every
/// tick.
const CHECKPOINT_BATCH: usize = 1024;
/// Facts waiting that make the writer who logs the last of them ask for a
/// fold at once rather than wait for the tick, so that a batch holds about
/// a thousand calls' facts (some 1.3 KB a call) at any rate. Bounded by the
/// tick alone, a batch grew with the load: at 30,000 calls a second a
/// quarter-second's facts were some 30,000, about 10 MiB, two batches are
/// alive while one is folded (the one in the transaction, the one filling),
/// and the gateway's memory swung by 20 MiB from one sample to the next.
/// Measured in 90-s soaks at 32 connections (about 13,000 calls a second,
/// the release build), the private memory's middle 80% of 0.5-s samples:
/// 19.6–27.3 MiB by the tick alone, 18.1–23.0 with this bound at 8,192,
/// 15.3–18.7 at 4,096, 14.7–16.9 at 2,048; the checkpointer's share of the
/// gateway's CPU about 1.3%, 1.8%, 1.7% and 2.4% (a redb commit's fixed
/// cost, its page writes and fsyncs, is a few tenths of a millisecond). With
/// the store writer's, the bound at 4,096 costs 0.6–0.9 points of the
/// gateway's CPU at 11,000 calls a second (docs/performance.md).
const FOLD_AT: usize = 4 * 1024;
/// A new segment starts once the current one is this large.
const SEGMENT_BYTES: u64 = 32 * 1024 * 1024;
/// What a new segment is written ahead with, in zeros: room for what a
/// segment takes before the checkpoint that closes it at
/// `CHECKPOINTED_SEGMENT_BYTES` (records beyond it extend the file as an
/// append would).
const PREALLOCATED_BYTES: u64 = 2 * CHECKPOINTED_SEGMENT_BYTES;
/// ... or, after a checkpoint, once it is this large: its records are then
/// all in redb or about to be, so the next checkpoint deletes it, and the
/// log on disk stays within a few of these instead of growing with every
/// call up to `SEGMENT_BYTES`.
const CHECKPOINTED_SEGMENT_BYTES: u64 = 1024 * 1024;
/// Records that need no acknowledgement wait in memory until the next
/// acknowledged one, or until this many bytes have gathered.
const BUFFER_BYTES: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WalSync {
    Batched,
    Always,
}

#[derive(Serialize, Deserialize)]
pub struct Record {
    pub seq: u64,
    pub facts: Vec<Fact>,
}

/// A record as written: the facts are borrowed, then handed to the
/// checkpointer without a copy.
#[derive(Serialize)]
struct RecordOut<'a> {
    seq: u64,
    facts: &'a [Fact],
}

pub type Ack = oneshot::Sender<Result<(), StoreError>>;

/// What the checkpointer is asked for, besides its own cadence.
enum Ask {
    /// A checkpoint, answered once redb holds everything logged before it.
    Checkpoint(Ack),
    /// A fold of a batch that reached `FOLD_AT`; nobody waits on it.
    Fold,
}

/// How durable a record must be before `append` returns (or, for
/// `Synced`, before the returned [`SyncWait`] resolves).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// May wait in memory for the next acknowledged record: a crash can
    /// lose it (a text call's hold, which only ever held money back).
    Buffered,
    /// Written to the operating system: survives the process dying.
    Written,
    /// Also fsynced: survives a power cut.
    Synced,
}

/// An fsync the caller still has to wait for (run on the blocking pool, so
/// no async worker and no other writer waits on the disk).
#[must_use = "a synced record is durable only once this is awaited"]
pub struct SyncWait(Arc<File>);

impl SyncWait {
    pub async fn wait(self) -> Result<(), StoreError> {
        let file = self.0;
        let synced = tokio::task::spawn_blocking(move || file.sync_data())
            .await
            .map_err(|_| StoreError::WriterGone)?;
        if let Err(e) = synced {
            fatal(&format!("fsync failed: {e}"));
        }
        Ok(())
    }
}

/// The log's open segment and what redb does not hold yet.
struct Log {
    dir: PathBuf,
    segment: Segment,
    sync: WalSync,
    /// Encoded records not written yet (only ever `Buffered` ones).
    buf: Vec<u8>,
    /// Facts logged but not yet folded into redb, in log order, and the
    /// last sequence number among them.
    unapplied: Vec<Fact>,
    unapplied_seq: u64,
    /// Whether a writer asked for these facts to be folded (they reached
    /// `FOLD_AT`); reset when the checkpointer takes them, so a batch asks
    /// once.
    fold_asked: bool,
    /// Full segments, with their last sequence number, kept until redb
    /// holds all of it.
    closed: Vec<(PathBuf, u64)>,
}

impl Log {
    /// Writes the buffered records with one `pwrite(2)`.
    fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        if let Err(e) = self
            .segment
            .file
            .write_all_at(&self.buf, self.segment.bytes)
        {
            fatal(&format!(
                "writing {} failed: {e}",
                self.segment.path.display()
            ));
        }
        self.segment.bytes += self.buf.len() as u64;
        self.buf.clear();
        if self.segment.bytes >= SEGMENT_BYTES {
            self.rotate();
        }
    }

    /// Closes a segment grown to `SEGMENT_BYTES` (a checkpoint closes it
    /// long before, unless checkpoints fail): the next one is made here,
    /// under the lock, since writers are already past the size.
    fn rotate(&mut self) {
        if let Err(e) = self.segment.file.sync_data() {
            fatal(&format!(
                "fsync of {} failed: {e}",
                self.segment.path.display()
            ));
        }
        if let Some(next) = Segment::create_or_log(&self.dir, self.next_segment_number()) {
            self.start_segment(next);
        }
    }

    /// Whether the facts waiting have just reached `FOLD_AT`, so the writer
    /// who logged them asks for a fold (noted: the rest of the batch's
    /// writers do not ask again).
    fn fold_now(&mut self) -> bool {
        let ask = !self.fold_asked && self.unapplied.len() >= FOLD_AT;
        self.fold_asked |= ask;
        ask
    }

    /// Hands the facts redb lacks, and the last sequence number among
    /// them, to the checkpointer, leaving `next` to fill; the next batch
    /// may ask for its own fold.
    fn take_batch(&mut self, next: Vec<Fact>) -> (Vec<Fact>, u64) {
        self.fold_asked = false;
        (
            std::mem::replace(&mut self.unapplied, next),
            self.unapplied_seq,
        )
    }

    /// The number to name the next segment with: the sequence number the
    /// next record will have at the earliest. Recovery orders records by
    /// their own numbers, not by file names, which only have to differ.
    fn next_segment_number(&self) -> u64 {
        (self.segment.last_seq + 1).max(self.segment.number + 1)
    }

    /// Makes `next` the segment written to and returns the one it replaces,
    /// which the caller must fsync (the fsync thread only syncs the
    /// current one).
    fn start_segment(&mut self, next: Segment) -> Arc<File> {
        let old = std::mem::replace(&mut self.segment, next);
        self.closed.push((old.path, old.last_seq));
        old.file
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        self.flush();
        let _ = self.segment.file.sync_data();
    }
}

struct Shared {
    log: Mutex<Log>,
    /// Written since the last fsync (the `batched` mode's syncer reads it).
    dirty: AtomicBool,
    stop: AtomicBool,
    /// The fsync thread, parked while nothing is unsynced.
    syncer: OnceLock<Thread>,
}

impl Shared {
    /// The log with a new segment, its threads not started yet.
    fn open(dir: &Path, sync: WalSync, next_seq: u64) -> Result<Arc<Shared>, StoreError> {
        let segment = Segment::create(dir, next_seq)?;
        Ok(Arc::new(Shared {
            log: Mutex::new(Log {
                dir: dir.to_path_buf(),
                segment,
                sync,
                buf: Vec::with_capacity(BUFFER_BYTES),
                unapplied: Vec::new(),
                unapplied_seq: 0,
                fold_asked: false,
                closed: Vec::new(),
            }),
            dirty: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            syncer: OnceLock::new(),
        }))
    }

    /// Notes a write not yet fsynced, waking the fsync thread if it was
    /// idle (at most once per fsync, not once per write).
    fn mark_dirty(&self) {
        if !self.dirty.swap(true, Ordering::AcqRel) {
            if let Some(t) = self.syncer.get() {
                t.unpark();
            }
        }
    }

    fn stop_syncer(&self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.syncer.get() {
            t.unpark();
        }
    }

    fn lock(&self) -> MutexGuard<'_, Log> {
        // A holder that panicked left the log as it was between records.
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Appends records to the log. Cheap to clone.
///
/// The caller writes its own record (one `pwrite(2)` under a mutex held for
/// the encoding and the write, a few microseconds), so acknowledging a
/// change costs no thread wake-up: the background threads only fsync every
/// `SYNC_EVERY` and fold facts into redb on the checkpointer's cadence
/// (`CHECKPOINT_EVERY`, `CHECKPOINT_AT_LEAST`), each on its own clock,
/// never once per call; the writer whose facts bring a batch to `FOLD_AT`
/// wakes the checkpointer (about once per thousand calls under load).
#[derive(Clone)]
pub struct WalWriter {
    shared: Arc<Shared>,
    checkpoints: mpsc::Sender<Ask>,
}

impl WalWriter {
    /// Logs a record. Records are logged in the order of the calls (the
    /// ledger calls this under its own lock, so log order is the order
    /// the books changed in). Returns once the record is as durable as
    /// `durability` asks, except that `Synced` hands back the fsync to
    /// await.
    pub fn append(
        &self,
        seq: u64,
        facts: Vec<Fact>,
        durability: Durability,
    ) -> Result<Option<SyncWait>, StoreError> {
        let mut log = self.shared.lock();
        if let Err(e) = serde_json::to_writer(&mut log.buf, &RecordOut { seq, facts: &facts }) {
            fatal(&format!("cannot encode a ledger record: {e}"));
        }
        log.buf.push(b'\n');
        log.segment.last_seq = log.segment.last_seq.max(seq);
        log.unapplied_seq = log.unapplied_seq.max(seq);
        log.unapplied.extend(facts);
        let fold = log.fold_now();
        let durability = match (durability, log.sync) {
            (Durability::Written, WalSync::Always) => Durability::Synced,
            (d, _) => d,
        };
        // Whether this call wrote the log (so the fsync thread has work),
        // and the fsync its caller waits for itself, if it asked for one.
        let (wrote, sync_wait) = match durability {
            Durability::Buffered if log.buf.len() < BUFFER_BYTES => (false, None),
            Durability::Buffered | Durability::Written => {
                log.flush();
                (true, None)
            }
            Durability::Synced => {
                log.flush();
                (true, Some(SyncWait(log.segment.file.clone())))
            }
        };
        // The fsync thread (and the checkpointer) are woken once the lock
        // is released: woken under it, the first step (taking the lock for
        // the file) can find the lock still held, sleep on it and need
        // waking again (two more futex calls for a lone write, such as a
        // stream's settlement, as `strace` showed).
        drop(log);
        if fold {
            // Gone only when the gateway stops; the facts are in the log.
            let _ = self.checkpoints.send(Ask::Fold);
        }
        if wrote && sync_wait.is_none() {
            self.shared.mark_dirty();
        }
        Ok(sync_wait)
    }

    /// Waits until everything logged so far is in redb.
    pub async fn checkpoint(&self) -> Result<(), StoreError> {
        let (tx, rx) = oneshot::channel();
        self.checkpoints
            .send(Ask::Checkpoint(tx))
            .map_err(|_| StoreError::WriterGone)?;
        rx.await.map_err(|_| StoreError::WriterGone)?
    }
}

fn segment_path(dir: &Path, first_seq: u64) -> PathBuf {
    dir.join(format!("ledger-{first_seq:020}.wal"))
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("ledger-") && n.ends_with(".wal"))
        })
        .collect();
    v.sort();
    v
}

/// The records part of a segment: everything before its first NUL byte
/// (none is in a JSON line), the rest being the zeros it was made with.
/// Anything else after the first NUL is `Err` with that NUL's offset.
fn records_of(bytes: &[u8]) -> Result<&[u8], usize> {
    let Some(end) = bytes.iter().position(|b| *b == 0) else {
        return Ok(bytes);
    };
    match bytes[end..].iter().all(|b| *b == 0) {
        true => Ok(&bytes[..end]),
        false => Err(end),
    }
}

/// Applies every logged record redb does not hold yet, then deletes the
/// segments. Returns the last sequence number in redb afterwards.
pub fn recover(
    dir: &Path,
    store: &Store,
    apply: fn(&redb::WriteTransaction, &[Fact]) -> Result<(), StoreError>,
) -> Result<u64, StoreError> {
    let applied = {
        let txn = store.read()?;
        let meta = txn.open_table(META)?;
        let v = meta.get("wal_seq")?.map(|v| v.value()).unwrap_or(0);
        v
    };
    let mut pending: Vec<Record> = Vec::new();
    let files = segments(dir);
    for path in &files {
        let bytes = std::fs::read(path)
            .map_err(|e| StoreError::Storage(format!("{}: {e}", path.display())))?;
        let written = records_of(&bytes).map_err(|at| StoreError::Corrupt {
            table: "ledger log",
            detail: format!(
                "{}: bytes after the zeros at offset {at}; a power cut can leave \
                 these where the disk wrote a later page before an earlier one \
                 (what follows the zeros was then never fsynced: truncating the \
                 file at that offset keeps every fsynced record), and so can \
                 damage; the files are left untouched",
                path.display()
            ),
        })?;
        let lines: Vec<&[u8]> = written.split(|b| *b == b'\n').collect();
        for (i, line) in lines.iter().enumerate() {
            if line.is_empty() {
                continue;
            }
            match serde_json::from_slice::<Record>(line) {
                Ok(r) if r.seq > applied => pending.push(r),
                Ok(_) => {}
                // A torn last line: the process died mid-write; that record
                // was never acknowledged.
                Err(_) if lines[i + 1..].iter().all(|l| l.is_empty()) => {
                    tracing::warn!("{}: ignoring an incomplete last record", path.display());
                }
                // Damage before the end is not a crash artefact: refuse to
                // guess, and keep the files for a person to look at.
                Err(e) => {
                    return Err(StoreError::Corrupt {
                        table: "ledger log",
                        detail: format!(
                            "{} line {}: {e}; the files are left untouched",
                            path.display(),
                            i + 1
                        ),
                    })
                }
            }
        }
    }
    let mut last = applied;
    if !pending.is_empty() {
        pending.sort_by_key(|r| r.seq);
        last = pending.last().map(|r| r.seq).unwrap_or(applied);
        let count = pending.len();
        store.write_blocking(move |txn| {
            for r in &pending {
                apply(txn, &r.facts)?;
            }
            txn.open_table(META)?.insert("wal_seq", last)?;
            Ok(())
        })?;
        tracing::info!("replayed {count} ledger record(s) from the write-ahead log");
    }
    for path in files {
        std::fs::remove_file(&path)
            .map_err(|e| StoreError::Storage(format!("{}: {e}", path.display())))?;
    }
    Ok(last)
}

/// One log file: records are written at `bytes`, into the zeros it was
/// made with (see the module doc).
struct Segment {
    path: PathBuf,
    /// The number in its name, which orders the files (recovery goes by
    /// each record's own `seq`).
    number: u64,
    file: Arc<File>,
    /// Records written so far: where the next one goes.
    bytes: u64,
    last_seq: u64,
}

impl Segment {
    /// Makes `ledger-<number>.wal` with `PREALLOCATED_BYTES` of zeros, the
    /// zeros and the file's directory entry fsynced, so that what is later
    /// written into it needs no metadata of its own to be durable. A few
    /// milliseconds: done at start-up and by the checkpointer outside the
    /// log's lock.
    fn create(dir: &Path, number: u64) -> Result<Segment, StoreError> {
        let path = segment_path(dir, number);
        let err = |e: std::io::Error| StoreError::Storage(format!("{}: {e}", path.display()));
        let mut file = OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(&path)
            .map_err(err)?;
        // Copied through std's small stack buffer: no 2-MiB buffer on the
        // heap for each segment (which the allocator would zero, and keep
        // resident a while, when it reuses freed pages for it).
        std::io::copy(&mut std::io::repeat(0).take(PREALLOCATED_BYTES), &mut file).map_err(err)?;
        file.sync_all().map_err(err)?;
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| StoreError::Storage(format!("{}: {e}", dir.display())))?;
        Ok(Segment {
            path,
            number,
            file: Arc::new(file),
            bytes: 0,
            last_seq: number.saturating_sub(1),
        })
    }

    /// [`Segment::create`] for a rotation, which goes on in the current
    /// segment (and tries again at the next one) when it fails.
    fn create_or_log(dir: &Path, number: u64) -> Option<Segment> {
        Segment::create(dir, number)
            .map_err(|e| tracing::error!("cannot start a new ledger log segment: {e}"))
            .ok()
    }
}

/// Opens a new segment and starts the fsync and checkpoint threads;
/// `next_seq` is the first sequence number the caller will use.
pub fn start(
    dir: &Path,
    store: Store,
    sync: WalSync,
    next_seq: u64,
    apply: fn(&redb::WriteTransaction, &[Fact]) -> Result<(), StoreError>,
) -> Result<WalWriter, StoreError> {
    start_threads(
        Shared::open(dir, sync, next_seq)?,
        store,
        apply,
        CHECKPOINT_EVERY,
    )
}

/// [`start`]'s threads over an opened log, the checkpointer looking at
/// what redb lacks every `tick` (a test gives it one so long that only an
/// ask folds).
fn start_threads(
    shared: Arc<Shared>,
    store: Store,
    apply: fn(&redb::WriteTransaction, &[Fact]) -> Result<(), StoreError>,
    tick: Duration,
) -> Result<WalWriter, StoreError> {
    let (tx, rx) = mpsc::channel::<Ask>();
    let for_sync = shared.clone();
    let syncer = std::thread::Builder::new()
        .name("ledger-fsync".into())
        .spawn(move || sync_loop(&for_sync))
        .map_err(|e| StoreError::Storage(e.to_string()))?;
    let _ = shared.syncer.set(syncer.thread().clone());
    let for_checkpoint = shared.clone();
    std::thread::Builder::new()
        .name("ledger-checkpoint".into())
        .spawn(move || checkpoint_loop(&for_checkpoint, &store, &rx, apply, tick))
        .map_err(|e| StoreError::Storage(e.to_string()))?;
    Ok(WalWriter {
        shared,
        checkpoints: tx,
    })
}

/// Fsyncs the current segment at most `SYNC_EVERY` after a write, outside
/// the log's lock (a writer never waits on the disk). Parked while nothing
/// is unsynced, so an idle gateway has no thread waking up every 10 ms.
///
/// A write that finds the thread parked is fsynced at once if the last
/// fsync began `SYNC_EVERY` ago or more ([`sync_wait`]): a write now and
/// then (streams ending apart) costs one wake-up, not a wake-up and a
/// timer's. Writes closer together wait for the rest of `SYNC_EVERY`, so a
/// busy spell still shares one fsync among all of them.
fn sync_loop(shared: &Shared) {
    let mut last: Option<Instant> = None;
    while !shared.stop.load(Ordering::Acquire) {
        if !shared.dirty.load(Ordering::Acquire) {
            // A write between the check and here leaves the unpark's
            // token, and `park` returns at once.
            std::thread::park();
            continue;
        }
        let wait = sync_wait(last.map(|at| at.elapsed()));
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
        if shared.dirty.swap(false, Ordering::AcqRel) {
            last = Some(Instant::now());
            let file = shared.lock().segment.file.clone();
            if let Err(e) = file.sync_data() {
                fatal(&format!("fsync of the ledger log failed: {e}"));
            }
        }
    }
}

/// How long the fsync thread, finding a write unsynced, waits before its
/// fsync, the last one having begun `since_last` ago (`None`: never).
/// Never more than `SYNC_EVERY`, so every write is fsynced within it.
fn sync_wait(since_last: Option<Duration>) -> Duration {
    since_last.map_or(Duration::ZERO, |since| SYNC_EVERY.saturating_sub(since))
}

/// The books in memory already hold a change the log could not take: going
/// on would let them drift from what a restart rebuilds. Stop, loudly; the
/// restart replays the log and starts from a consistent state.
fn fatal(why: &str) -> ! {
    tracing::error!("ledger log: {why}; stopping the gateway to keep the books consistent");
    eprintln!("fatal: ledger log: {why}");
    std::process::abort()
}

/// Whether the checkpointer's tick folds `waiting` facts into redb, the
/// last fold `since` ago.
fn fold_due(waiting: usize, since: Duration) -> bool {
    waiting >= CHECKPOINT_BATCH || since >= CHECKPOINT_AT_LEAST
}

/// At once when asked (a checkpoint, or a batch at `FOLD_AT`), else on the
/// cadence of `tick` (`CHECKPOINT_EVERY`) and `CHECKPOINT_AT_LEAST`, folds
/// the facts redb lacks into it in one transaction, then deletes the
/// segments it now wholly holds. Ends (after a last checkpoint) when every
/// writer is gone.
fn checkpoint_loop(
    shared: &Shared,
    store: &Store,
    rx: &mpsc::Receiver<Ask>,
    apply: fn(&redb::WriteTransaction, &[Fact]) -> Result<(), StoreError>,
    tick: Duration,
) {
    let mut waiters: Vec<Ack> = Vec::new();
    // How many facts the last batch held: the next one gets that much room,
    // so a steady load fills it without growing it (each doubling of a
    // batch of megabytes copied it, on a caller's settlement).
    let mut room = 0;
    let mut folded = Instant::now();
    loop {
        let last = match rx.recv_timeout(tick) {
            Ok(ask) => {
                // Everything asked meanwhile is answered by this one fold.
                for ask in std::iter::once(ask).chain(rx.try_iter()) {
                    if let Ask::Checkpoint(ack) = ask {
                        waiters.push(ack);
                    }
                }
                false
            }
            Err(RecvTimeoutError::Timeout) => {
                let waiting = shared.lock().unapplied.len();
                if !fold_due(waiting, folded.elapsed()) {
                    continue;
                }
                false
            }
            Err(RecvTimeoutError::Disconnected) => true,
        };
        folded = Instant::now();
        // Allocated before the lock, which settling callers wait on.
        let next = Vec::with_capacity(room);
        let (facts, seq) = shared.lock().take_batch(next);
        room = facts.len();
        let result = if facts.is_empty() {
            Ok(())
        } else {
            let batch = Arc::new(facts);
            let for_txn = batch.clone();
            let result = store.write_blocking(move |txn| {
                apply(txn, &for_txn)?;
                txn.open_table(META)?.insert("wal_seq", seq)?;
                Ok(())
            });
            match &result {
                Ok(()) => {
                    // The next segment is written ahead outside the lock
                    // (writers go on into the current one meanwhile), and
                    // only swapped in under it.
                    let due = {
                        let log = shared.lock();
                        (log.segment.bytes >= CHECKPOINTED_SEGMENT_BYTES)
                            .then(|| (log.dir.clone(), log.next_segment_number()))
                    };
                    let next = due.and_then(|(dir, n)| Segment::create_or_log(&dir, n));
                    let replaced = next.map(|next| {
                        let mut log = shared.lock();
                        log.flush();
                        log.start_segment(next)
                    });
                    // Outside the lock: writers go on into the new segment.
                    if let Some(file) = replaced {
                        if let Err(e) = file.sync_data() {
                            fatal(&format!("fsync of a ledger log segment failed: {e}"));
                        }
                    }
                    let done: Vec<PathBuf> = {
                        let mut log = shared.lock();
                        let (done, kept) = std::mem::take(&mut log.closed)
                            .into_iter()
                            .partition(|(_, last)| *last <= seq);
                        log.closed = kept;
                        done.into_iter().map(|(path, _)| path).collect()
                    };
                    for path in done {
                        let _ = std::fs::remove_file(path);
                    }
                }
                Err(e) => {
                    // Keep the facts for the next attempt: `wal_seq` must
                    // never pass a record redb does not hold.
                    tracing::error!("ledger checkpoint failed, retrying: {e}");
                    let mut again = Arc::try_unwrap(batch).unwrap_or_else(|a| (*a).clone());
                    let mut log = shared.lock();
                    again.append(&mut log.unapplied);
                    log.unapplied = again;
                    // Retried on the tick, not by the next writer's ask:
                    // a store that keeps failing is not hammered.
                    log.fold_asked = true;
                }
            }
            result
        };
        for w in waiters.drain(..) {
            let _ = w.send(result.clone());
        }
        if last {
            shared.stop_syncer();
            break;
        }
    }
}

#[cfg(test)]
mod recovery_tests_support {
    use super::*;
    use crate::store::records::UsageRecord;

    /// `n` usage rows from `from` on.
    pub fn usages(from: u64, n: u64) -> Vec<Fact> {
        (from..from + n).map(|s| usage(s, "m")).collect()
    }

    /// A fact: one usage row.
    pub fn usage(seq: u64, model: &str) -> Fact {
        Fact::Usage(UsageRecord {
            seq,
            at: seq as i64,
            request_id: format!("r{seq}"),
            account_id: "a".into(),
            model: model.into(),
            ..UsageRecord::default()
        })
    }
}

/// Recovery, deterministically: segment files written by hand as a crash
/// would leave them, replayed into a fresh store.
#[cfg(test)]
mod recovery_tests {
    use super::recovery_tests_support::usage;
    use super::*;
    use crate::store::accounts::apply_facts;

    struct Case {
        _dir: tempfile::TempDir,
        logs: PathBuf,
        store: Store,
    }

    impl Case {
        fn new() -> Case {
            let dir = tempfile::tempdir().unwrap();
            let logs = dir.path().join("logs");
            std::fs::create_dir_all(&logs).unwrap();
            let store = Store::open(&dir.path().join("db.redb")).unwrap();
            Case {
                _dir: dir,
                logs,
                store,
            }
        }

        /// A segment starting at `first` with these lines, verbatim.
        fn segment(&self, first: u64, lines: &[String]) -> PathBuf {
            let path = segment_path(&self.logs, first);
            std::fs::write(&path, lines.concat()).unwrap();
            path
        }

        fn recover(&self) -> Result<u64, StoreError> {
            recover(&self.logs, &self.store, apply_facts)
        }

        /// As if redb already held every record up to `seq` (with these
        /// rows, made by an earlier checkpoint).
        fn applied_up_to(&self, seq: u64, rows: Vec<Fact>) {
            self.store
                .write_blocking(move |txn| {
                    apply_facts(txn, &rows)?;
                    txn.open_table(META)?.insert("wal_seq", seq)?;
                    Ok(())
                })
                .unwrap();
        }

        fn wal_seq(&self) -> u64 {
            let txn = self.store.read().unwrap();
            let meta = txn.open_table(META).unwrap();
            let seq = meta.get("wal_seq").unwrap().map(|v| v.value()).unwrap_or(0);
            seq
        }

        /// Usage rows in redb: (seq, model), oldest first.
        fn rows(&self) -> Vec<(u64, String)> {
            let mut rows: Vec<(u64, String)> = self
                .store
                .usage(None, None, 1000)
                .unwrap()
                .into_iter()
                .map(|u| (u.seq, u.model))
                .collect();
            rows.reverse();
            rows
        }

        fn files(&self) -> usize {
            segments(&self.logs).len()
        }
    }

    /// One logged record with one usage row, as the writer encodes it.
    fn line(seq: u64) -> String {
        let mut out = serde_json::to_string(&Record {
            seq,
            facts: vec![usage(seq, "logged")],
        })
        .unwrap();
        out.push('\n');
        out
    }

    fn logged(seqs: &[u64]) -> Vec<(u64, String)> {
        seqs.iter().map(|s| (*s, "logged".to_string())).collect()
    }

    #[test]
    fn a_torn_last_line_is_ignored_and_the_rest_replayed() {
        let c = Case::new();
        let torn = line(3);
        c.segment(1, &[line(1), line(2), torn[..torn.len() / 2].to_string()]);
        assert_eq!(c.recover().unwrap(), 2);
        assert_eq!(c.rows(), logged(&[1, 2]));
        assert_eq!(c.wal_seq(), 2);
        assert_eq!(c.files(), 0, "replayed segments are removed");
    }

    #[test]
    fn a_torn_line_followed_only_by_empty_lines_is_still_the_last() {
        let c = Case::new();
        c.segment(
            1,
            &[line(1), "\n".into(), line(2), "{\"seq\":3,\"fa\n\n".into()],
        );
        assert_eq!(c.recover().unwrap(), 2);
        assert_eq!(c.rows(), logged(&[1, 2]));
    }

    #[test]
    fn corruption_before_the_end_refuses_to_guess_and_keeps_the_files() {
        let c = Case::new();
        let path = c.segment(
            1,
            &[line(1), "{\"seq\":2,\"facts\":[{\"fact\"\n".into(), line(3)],
        );
        match c.recover() {
            Err(StoreError::Corrupt { table, detail }) => {
                assert_eq!(table, "ledger log");
                let name = path.file_name().unwrap().to_str().unwrap();
                assert!(
                    detail.contains(name) && detail.contains("line 2"),
                    "{detail}"
                );
            }
            other => panic!("expected a corrupt log, got {other:?}"),
        }
        assert_eq!(c.rows(), vec![], "nothing is applied from a damaged log");
        assert_eq!(c.wal_seq(), 0);
        assert_eq!(c.files(), 1, "the files are left for a person to look at");
        // A later segment cannot mask it either.
        c.segment(4, &[line(4)]);
        assert!(matches!(c.recover(), Err(StoreError::Corrupt { .. })));
        assert_eq!(c.files(), 2);
    }

    #[test]
    fn a_partly_applied_segment_replays_only_what_redb_lacks() {
        let c = Case::new();
        // A checkpoint folded records 1 and 2 in before the crash.
        c.applied_up_to(2, vec![usage(1, "checkpointed"), usage(2, "checkpointed")]);
        let lines = [line(1), line(2), line(3), line(4)];
        c.segment(1, &lines);
        assert_eq!(c.recover().unwrap(), 4);
        let expected = vec![
            (1, "checkpointed".to_string()),
            (2, "checkpointed".to_string()),
            (3, "logged".to_string()),
            (4, "logged".to_string()),
        ];
        assert_eq!(c.rows(), expected);
        assert_eq!(c.wal_seq(), 4);
        // Recovering again from the same log (a crash during the first
        // recovery, before the files went) changes nothing.
        c.segment(1, &lines);
        assert_eq!(c.recover().unwrap(), 4);
        assert_eq!(c.rows(), expected);
    }

    #[test]
    fn rotated_segments_replay_in_sequence_order() {
        let c = Case::new();
        // Segment 1 is wholly in redb; 4 partly; 8 holds the newest records
        // and a torn last line.
        c.applied_up_to(5, (1..=5).map(|s| usage(s, "checkpointed")).collect());
        c.segment(1, &[line(1), line(2), line(3)]);
        c.segment(4, &[line(4), line(5), line(6), line(7)]);
        let torn = line(10);
        c.segment(8, &[line(8), line(9), torn[..10].to_string()]);
        assert_eq!(c.recover().unwrap(), 9);
        let rows = c.rows();
        assert_eq!(
            rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            (1..=9).collect::<Vec<_>>()
        );
        assert!(rows[..5].iter().all(|r| r.1 == "checkpointed"));
        assert!(rows[5..].iter().all(|r| r.1 == "logged"));
        assert_eq!(c.wal_seq(), 9);
        assert_eq!(c.files(), 0);
    }

    #[test]
    fn a_segment_ends_at_its_zeros_with_or_without_a_torn_line_before_them() {
        let c = Case::new();
        let zeros = "\0".repeat(4096);
        let torn = line(4);
        c.segment(1, &[line(1), line(2), zeros.clone()]);
        c.segment(3, &[line(3), torn[..torn.len() - 5].to_string(), zeros]);
        assert_eq!(c.recover().unwrap(), 3);
        assert_eq!(c.rows(), logged(&[1, 2, 3]));
        assert_eq!(c.files(), 0);
    }

    #[test]
    fn bytes_after_a_segments_zeros_refuse_to_guess_and_keep_the_files() {
        let c = Case::new();
        let gap = "\0".repeat(100);
        let path = c.segment(1, &[line(1), gap.clone(), line(2), gap]);
        match c.recover() {
            Err(StoreError::Corrupt { table, detail }) => {
                assert_eq!(table, "ledger log");
                let name = path.file_name().unwrap().to_str().unwrap();
                let at = format!("offset {}", line(1).len());
                assert!(detail.contains(name) && detail.contains(&at), "{detail}");
            }
            other => panic!("expected a corrupt log, got {other:?}"),
        }
        assert_eq!(c.rows(), vec![]);
        assert_eq!(c.files(), 1);
    }

    #[test]
    fn records_end_at_the_first_nul() {
        assert_eq!(records_of(b"ab\ncd\n"), Ok(&b"ab\ncd\n"[..]));
        assert_eq!(records_of(b"ab\n\0\0\0"), Ok(&b"ab\n"[..]));
        assert_eq!(records_of(b"\0\0"), Ok(&b""[..]));
        assert_eq!(records_of(b""), Ok(&b""[..]));
        assert_eq!(records_of(b"ab\n\0\0c"), Err(3));
    }

    #[test]
    fn nothing_to_replay_keeps_the_position() {
        let c = Case::new();
        assert_eq!(c.recover().unwrap(), 0);
        c.applied_up_to(7, vec![]);
        c.segment(1, &[line(1), line(7)]);
        assert_eq!(c.recover().unwrap(), 7);
        assert_eq!(c.rows(), vec![]);
        assert_eq!(c.files(), 0);
    }
}

/// The writer: what is in the file when `append` returns.
#[cfg(test)]
mod writer_tests {
    use super::recovery_tests_support::*;
    use super::*;
    use crate::store::accounts::apply_facts;

    #[test]
    fn a_light_load_is_folded_once_a_second_and_a_heavy_one_every_tick() {
        let tick = CHECKPOINT_EVERY;
        // A few facts: they wait for the second, tick after tick.
        assert!(!fold_due(6, tick));
        assert!(!fold_due(CHECKPOINT_BATCH - 1, CHECKPOINT_AT_LEAST - tick));
        assert!(fold_due(6, CHECKPOINT_AT_LEAST));
        assert!(fold_due(1, 2 * CHECKPOINT_AT_LEAST));
        // A full batch goes at the next tick, however recent the last fold.
        assert!(fold_due(CHECKPOINT_BATCH, tick));
        assert!(fold_due(CHECKPOINT_BATCH, Duration::ZERO));
        // Nothing waiting: the tick that falls due folds nothing (no
        // transaction: `checkpoint_loop` skips an empty batch).
        assert!(fold_due(0, CHECKPOINT_AT_LEAST));
    }

    /// A log in batched mode over a fresh store, from seq 1.
    struct Writer {
        _dir: tempfile::TempDir,
        store: Store,
        logs: PathBuf,
        wal: WalWriter,
    }

    impl Writer {
        fn new() -> Writer {
            Writer::ticking(CHECKPOINT_EVERY)
        }

        /// With the checkpointer looking at what waits every `tick`.
        fn ticking(tick: Duration) -> Writer {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(&dir.path().join("db.redb")).unwrap();
            let logs = dir.path().join("logs");
            std::fs::create_dir_all(&logs).unwrap();
            let shared = Shared::open(&logs, WalSync::Batched, 1).unwrap();
            let wal = start_threads(shared, store.clone(), apply_facts, tick).unwrap();
            Writer {
                _dir: dir,
                store,
                logs,
                wal,
            }
        }
    }

    /// The records in the log's files (without the zeros after them).
    fn on_disk(logs: &Path) -> String {
        segments(logs)
            .iter()
            .map(|p| {
                let bytes = std::fs::read(p).unwrap();
                String::from_utf8(records_of(&bytes).unwrap().to_vec()).unwrap()
            })
            .collect()
    }

    #[test]
    fn a_new_segment_is_written_ahead_and_records_go_into_it_from_its_start() {
        let w = Writer::new();
        let files = segments(&w.logs);
        assert_eq!(files.len(), 1);
        let size = || std::fs::metadata(&files[0]).unwrap().len();
        assert_eq!(size(), PREALLOCATED_BYTES, "made with its zeros");
        for seq in 1..=3u64 {
            w.wal
                .append(seq, vec![usage(seq, "m")], Durability::Written)
                .unwrap();
        }
        let text = on_disk(&w.logs);
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(text.starts_with("{\"seq\":1,"));
        assert_eq!(size(), PREALLOCATED_BYTES, "written into, not appended to");
    }

    #[test]
    fn a_batch_that_reaches_the_bound_asks_for_its_fold_once() {
        let dir = tempfile::tempdir().unwrap();
        // A writer whose checkpointer is this test: it sees what is asked.
        let (tx, asks) = mpsc::channel();
        let wal = WalWriter {
            shared: Shared::open(dir.path(), WalSync::Batched, 1).unwrap(),
            checkpoints: tx,
        };
        let asked = || asks.try_iter().filter(|a| matches!(a, Ask::Fold)).count();

        // One short of the bound, in two records: the tick's to fold.
        wal.append(1, usages(1, 100), Durability::Buffered).unwrap();
        let rest = FOLD_AT as u64 - 101;
        wal.append(2, usages(101, rest), Durability::Written)
            .unwrap();
        assert_eq!(asked(), 0);
        // The fact that reaches it asks; the ones after it do not.
        wal.append(3, usages(FOLD_AT as u64, 1), Durability::Buffered)
            .unwrap();
        assert_eq!(asked(), 1);
        for seq in 4..10 {
            wal.append(seq, usages(seq * 10_000, 1_000), Durability::Written)
                .unwrap();
        }
        assert_eq!(asked(), 0, "one ask per batch");

        // The checkpointer takes the batch: the next one asks anew, once.
        let (batch, last) = wal.shared.lock().take_batch(Vec::new());
        assert_eq!((batch.len(), last), (FOLD_AT + 6_000, 9));
        wal.append(10, usages(100_000, FOLD_AT as u64), Durability::Written)
            .unwrap();
        wal.append(11, usages(200_000, 1), Durability::Written)
            .unwrap();
        assert_eq!(asked(), 1);
    }

    #[tokio::test]
    async fn a_full_batch_is_folded_with_nobody_asking_for_a_checkpoint() {
        // A tick so long that only the writer's ask can fold.
        let w = Writer::ticking(Duration::from_secs(3600));
        let bound = FOLD_AT as u64;
        w.wal
            .append(1, usages(1, bound - 1), Durability::Written)
            .unwrap();
        // The fact that reaches the bound: its writer asks for the fold.
        w.wal
            .append(2, usages(bound, 1), Durability::Buffered)
            .unwrap();
        // Bounded wait for the checkpointer's thread; nothing else folds.
        let mut folded = false;
        for _ in 0..10_000 {
            if w.store.last_usage_seq().unwrap() == bound {
                folded = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert!(folded, "the batch was never folded");
        // Later checkpoints are answered as before.
        w.wal
            .append(3, usages(bound + 1, 1), Durability::Written)
            .unwrap();
        w.wal.checkpoint().await.unwrap();
        assert_eq!(w.store.last_usage_seq().unwrap(), bound + 1);
    }

    #[test]
    fn the_fsync_thread_syncs_a_lone_write_at_once_and_a_busy_spell_every_tick() {
        // Nothing synced yet, or the last fsync long ago: at once.
        assert_eq!(sync_wait(None), Duration::ZERO);
        assert_eq!(sync_wait(Some(SYNC_EVERY)), Duration::ZERO);
        assert_eq!(sync_wait(Some(10 * SYNC_EVERY)), Duration::ZERO);
        // Soon after the last one: the rest of the tick, never more.
        assert_eq!(sync_wait(Some(Duration::ZERO)), SYNC_EVERY);
        assert_eq!(sync_wait(Some(SYNC_EVERY / 4)), SYNC_EVERY - SYNC_EVERY / 4);
    }

    #[tokio::test]
    async fn an_acknowledged_record_is_written_by_its_caller_and_takes_the_buffered_ones_along() {
        let w = Writer::new();
        let (store, logs, wal) = (&w.store, &w.logs, &w.wal);

        assert!(wal
            .append(1, vec![usage(1, "held")], Durability::Buffered)
            .unwrap()
            .is_none());
        assert_eq!(on_disk(logs), "", "a buffered record waits");
        assert!(wal
            .append(2, vec![usage(2, "settled")], Durability::Written)
            .unwrap()
            .is_none());
        let text = on_disk(logs);
        assert_eq!(text.lines().count(), 2, "both are in the file: {text}");
        assert!(text.starts_with("{\"seq\":1,"));

        let synced = wal
            .append(3, vec![usage(3, "video")], Durability::Synced)
            .unwrap()
            .expect("a synced record hands back its fsync");
        synced.wait().await.unwrap();
        assert_eq!(on_disk(logs).lines().count(), 3);

        wal.checkpoint().await.unwrap();
        let rows: Vec<String> = store
            .usage(None, None, 10)
            .unwrap()
            .into_iter()
            .map(|u| u.model)
            .collect();
        assert_eq!(rows, ["video", "settled", "held"]);
    }

    #[tokio::test]
    async fn a_checkpointed_segment_is_closed_and_deleted_so_the_log_stays_small() {
        let w = Writer::new();
        let (store, logs, wal) = (&w.store, &w.logs, &w.wal);
        // Records written, not the zeros the segments were made with.
        let bytes = |logs: &Path| -> u64 {
            segments(logs)
                .iter()
                .map(|p| records_of(&std::fs::read(p).unwrap()).unwrap().len() as u64)
                .sum()
        };
        // Some 3 MiB of records, a checkpoint every 2,000.
        let model = "m".repeat(200);
        for seq in 1..=12_000u64 {
            wal.append(seq, vec![usage(seq, &model)], Durability::Written)
                .unwrap();
            if seq % 2_000 == 0 {
                wal.checkpoint().await.unwrap();
                assert!(
                    bytes(logs) <= 2 * CHECKPOINTED_SEGMENT_BYTES,
                    "{} bytes of log after a checkpoint",
                    bytes(logs)
                );
            }
        }
        wal.checkpoint().await.unwrap();
        // Every record reached redb, the log written before is gone.
        assert_eq!(store.last_usage_seq().unwrap(), 12_000);
        assert_eq!(store.usage(None, None, usize::MAX).unwrap().len(), 12_000);
        assert_eq!(segments(logs).len(), 1);
        assert!(bytes(logs) < CHECKPOINTED_SEGMENT_BYTES);
    }

    #[tokio::test]
    async fn the_parked_fsync_thread_wakes_for_a_write_and_syncs_it() {
        let w = Writer::new();
        let wal = &w.wal;
        for seq in 1..=3u64 {
            wal.append(seq, vec![usage(seq, "m")], Durability::Written)
                .unwrap();
            assert!(wal.shared.dirty.load(Ordering::Acquire));
            // The thread was parked (nothing was unsynced): the write woke
            // it, and it clears the mark when it fsyncs. Bounded wait.
            let mut synced = false;
            for _ in 0..5_000 {
                if !wal.shared.dirty.load(Ordering::Acquire) {
                    synced = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            assert!(synced, "write {seq} was never fsynced");
        }
    }
}
