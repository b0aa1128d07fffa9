//! The money write-ahead log.
//!
//! Every change to accounts, tokens, holds and usage is first appended here as
//! one JSON line `{"seq": N, "facts": [...]}`; a background checkpointer then
//! folds the facts into redb in large batches. This keeps the per-call cost
//! of billing to one buffered `write(2)` shared by every call in flight,
//! instead of two redb transactions per call.
//!
//! Durability, by `[billing] wal_sync`:
//! - `batched` (default): a change is acknowledged once it is written to the
//!   operating system, which survives the process dying (a crash, `SIGKILL`);
//!   the file is fsynced every 10 ms, so a power cut can lose at most the
//!   last 10 ms of changes.
//! - `always`: a change is acknowledged only after fsync (group commit: one
//!   fsync covers every change queued meanwhile).
//!
//! Files are segments `ledger-<first seq>.wal` in the data folder. Redb keeps
//! the sequence number of the last record it holds (`meta.wal_seq`, written in
//! the same transaction as the facts), so replay at start-up applies exactly
//! the records it is missing; segments wholly in redb are deleted.

use super::records::Fact;
use super::{Store, StoreError, META};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How often the `batched` mode fsyncs.
const SYNC_EVERY: Duration = Duration::from_millis(10);
/// How often the checkpointer folds facts into redb.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(250);
/// A checkpoint happens sooner once this many facts wait.
const CHECKPOINT_FACTS: usize = 50_000;
/// A new segment starts once the current one is this large.
const SEGMENT_BYTES: u64 = 32 * 1024 * 1024;

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

pub type Ack = oneshot::Sender<Result<(), StoreError>>;

enum Msg {
    Append {
        record: Record,
        ack: Option<Ack>,
        /// Acknowledge only after fsync, whatever the mode (money held for
        /// hours, like a video task's, must survive a power cut too).
        sync: bool,
    },
    /// Acknowledged once everything before it is in redb.
    Checkpoint(Ack),
}

enum CheckpointMsg {
    /// One writer batch: the records' facts in order, and the last sequence
    /// number among them (one message per batch, so one wake-up).
    Facts(u64, Vec<Fact>),
    Now(Ack),
}

/// Sends records to the writer thread.
#[derive(Clone)]
pub struct WalWriter {
    tx: mpsc::Sender<Msg>,
}

impl WalWriter {
    /// Queues a record; `ack` (if any) fires once it is as durable as the
    /// configured mode promises. Records are written in the order queued.
    pub fn append(
        &self,
        seq: u64,
        facts: Vec<Fact>,
        ack: Option<Ack>,
        sync: bool,
    ) -> Result<(), StoreError> {
        self.tx
            .send(Msg::Append {
                record: Record { seq, facts },
                ack,
                sync,
            })
            .map_err(|_| StoreError::WriterGone)
    }

    /// Waits until everything queued so far is in redb.
    pub async fn checkpoint(&self) -> Result<(), StoreError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Msg::Checkpoint(tx))
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
        let file = File::open(path)
            .map_err(|e| StoreError::Storage(format!("{}: {e}", path.display())))?;
        let lines: Vec<Vec<u8>> = BufReader::new(file)
            .split(b'\n')
            .collect::<Result<_, _>>()
            .map_err(|e| StoreError::Storage(format!("{}: {e}", path.display())))?;
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

struct Segment {
    path: PathBuf,
    file: File,
    bytes: u64,
    last_seq: u64,
}

impl Segment {
    fn create(dir: &Path, first_seq: u64) -> Result<Segment, StoreError> {
        let path = segment_path(dir, first_seq);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| StoreError::Storage(format!("{}: {e}", path.display())))?;
        Ok(Segment {
            path,
            file,
            bytes: 0,
            last_seq: first_seq.saturating_sub(1),
        })
    }
}

/// Starts the writer and checkpointer threads; `next_seq` is the first
/// sequence number the caller will use.
pub fn start(
    dir: &Path,
    store: Store,
    sync: WalSync,
    next_seq: u64,
    apply: fn(&redb::WriteTransaction, &[Fact]) -> Result<(), StoreError>,
) -> Result<WalWriter, StoreError> {
    let segment = Segment::create(dir, next_seq)?;
    let (tx, rx) = mpsc::channel::<Msg>();
    let (ctx, crx) = mpsc::channel::<CheckpointMsg>();
    let (applied_tx, applied_rx) = mpsc::channel::<u64>();
    let dir = dir.to_path_buf();
    std::thread::Builder::new()
        .name("ledger-wal".into())
        .spawn(move || writer_loop(dir, segment, sync, rx, ctx, applied_rx))
        .map_err(|e| StoreError::Storage(e.to_string()))?;
    std::thread::Builder::new()
        .name("ledger-checkpoint".into())
        .spawn(move || checkpoint_loop(store, crx, applied_tx, apply))
        .map_err(|e| StoreError::Storage(e.to_string()))?;
    Ok(WalWriter { tx })
}

fn writer_loop(
    dir: PathBuf,
    mut segment: Segment,
    sync: WalSync,
    rx: mpsc::Receiver<Msg>,
    checkpointer: mpsc::Sender<CheckpointMsg>,
    applied: mpsc::Receiver<u64>,
) {
    let mut closed: Vec<(PathBuf, u64)> = Vec::new();
    let syncer = Syncer::start(&segment);
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    loop {
        let first = match rx.recv_timeout(SYNC_EVERY) {
            Ok(m) => Some(m),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let mut batch: Vec<Msg> = first.into_iter().collect();
        while let Ok(m) = rx.try_recv() {
            batch.push(m);
        }
        buf.clear();
        let mut acks = Vec::new();
        let mut forwards = Vec::new();
        let mut batch_facts: Vec<Fact> = Vec::new();
        let mut batch_seq = 0u64;
        let mut must_sync = sync == WalSync::Always;
        for m in batch {
            match m {
                Msg::Append { record, ack, sync } => {
                    must_sync |= sync;
                    if let Err(e) = serde_json::to_writer(&mut buf, &record) {
                        fatal(&format!("cannot encode a ledger record: {e}"));
                    }
                    buf.push(b'\n');
                    segment.last_seq = segment.last_seq.max(record.seq);
                    batch_seq = batch_seq.max(record.seq);
                    batch_facts.extend(record.facts);
                    acks.extend(ack);
                }
                // Queued behind the appends before it, so the checkpointer
                // sees those first.
                Msg::Checkpoint(ack) => {
                    if !batch_facts.is_empty() {
                        forwards.push(CheckpointMsg::Facts(
                            batch_seq,
                            std::mem::take(&mut batch_facts),
                        ));
                    }
                    forwards.push(CheckpointMsg::Now(ack));
                }
            }
        }
        if !batch_facts.is_empty() {
            forwards.push(CheckpointMsg::Facts(batch_seq, batch_facts));
        }
        if !buf.is_empty() {
            if let Err(e) = segment.file.write_all(&buf) {
                fatal(&format!("writing {} failed: {e}", segment.path.display()));
            }
            segment.bytes += buf.len() as u64;
            if must_sync {
                if let Err(e) = segment.file.sync_data() {
                    fatal(&format!("fsync of {} failed: {e}", segment.path.display()));
                }
            } else {
                syncer.mark_dirty();
            }
        }
        for ack in acks {
            let _ = ack.send(Ok(()));
        }
        for f in forwards {
            let _ = checkpointer.send(f);
        }
        if segment.bytes >= SEGMENT_BYTES {
            if let Err(e) = segment.file.sync_data() {
                fatal(&format!("fsync of {} failed: {e}", segment.path.display()));
            }
            match Segment::create(&dir, segment.last_seq + 1) {
                Ok(next) => {
                    syncer.follow(&next);
                    let old = std::mem::replace(&mut segment, next);
                    closed.push((old.path, old.last_seq));
                }
                Err(e) => tracing::error!("cannot start a new ledger log segment: {e}"),
            }
        }
        // Segments whose every record is in redb are no longer needed.
        while let Ok(seq) = applied.try_recv() {
            closed.retain(|(path, last)| {
                if *last <= seq {
                    let _ = std::fs::remove_file(path);
                    false
                } else {
                    true
                }
            });
        }
    }
    syncer.stop();
    let _ = segment.file.sync_data();
}

/// Fsyncs the current segment every `SYNC_EVERY` when it has unsynced
/// writes, on its own thread: the writer acknowledges after `write(2)` and
/// must never sit in an fsync while calls wait for their acknowledgement.
struct Syncer {
    shared: std::sync::Arc<SyncShared>,
}

struct SyncShared {
    file: std::sync::Mutex<Option<File>>,
    dirty: std::sync::atomic::AtomicBool,
    stop: std::sync::atomic::AtomicBool,
}

impl Syncer {
    fn start(segment: &Segment) -> Syncer {
        use std::sync::atomic::{AtomicBool, Ordering};
        let shared = std::sync::Arc::new(SyncShared {
            file: std::sync::Mutex::new(segment.file.try_clone().ok()),
            dirty: AtomicBool::new(false),
            stop: AtomicBool::new(false),
        });
        let s = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("ledger-fsync".into())
            .spawn(move || {
                while !s.stop.load(Ordering::Relaxed) {
                    std::thread::sleep(SYNC_EVERY);
                    if s.dirty.swap(false, Ordering::AcqRel) {
                        let file = s.file.lock().unwrap_or_else(|p| p.into_inner());
                        if let Some(f) = file.as_ref() {
                            if let Err(e) = f.sync_data() {
                                fatal(&format!("fsync of the ledger log failed: {e}"));
                            }
                        }
                    }
                }
            });
        if let Err(e) = spawned {
            fatal(&format!("cannot start the ledger fsync thread: {e}"));
        }
        Syncer { shared }
    }

    fn mark_dirty(&self) {
        self.shared
            .dirty
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Switches to a new segment (the writer fsyncs the old one itself).
    fn follow(&self, segment: &Segment) {
        *self.shared.file.lock().unwrap_or_else(|p| p.into_inner()) = segment.file.try_clone().ok();
    }

    fn stop(&self) {
        self.shared
            .stop
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The books in memory already hold a change the log could not take: going
/// on would let them drift from what a restart rebuilds. Stop, loudly; the
/// restart replays the log and starts from a consistent state.
fn fatal(why: &str) -> ! {
    tracing::error!("ledger log: {why}; stopping the gateway to keep the books consistent");
    eprintln!("fatal: ledger log: {why}");
    std::process::abort()
}

fn checkpoint_loop(
    store: Store,
    rx: mpsc::Receiver<CheckpointMsg>,
    applied: mpsc::Sender<u64>,
    apply: fn(&redb::WriteTransaction, &[Fact]) -> Result<(), StoreError>,
) {
    let mut facts: Vec<Fact> = Vec::new();
    let mut last_seq = 0u64;
    let mut waiters: Vec<Ack> = Vec::new();
    let mut since = Instant::now();
    loop {
        let disconnected = match rx.recv_timeout(CHECKPOINT_EVERY) {
            Ok(CheckpointMsg::Facts(seq, f)) => {
                last_seq = last_seq.max(seq);
                facts.extend(f);
                false
            }
            Ok(CheckpointMsg::Now(ack)) => {
                waiters.push(ack);
                false
            }
            Err(RecvTimeoutError::Timeout) => false,
            Err(RecvTimeoutError::Disconnected) => true,
        };
        let due = !waiters.is_empty()
            || facts.len() >= CHECKPOINT_FACTS
            || (!facts.is_empty() && since.elapsed() >= CHECKPOINT_EVERY)
            || disconnected;
        if due && (!facts.is_empty() || !waiters.is_empty()) {
            let batch = std::sync::Arc::new(std::mem::take(&mut facts));
            let seq = last_seq;
            let for_txn = batch.clone();
            let result = store.write_blocking(move |txn| {
                apply(txn, &for_txn)?;
                if seq > 0 {
                    txn.open_table(META)?.insert("wal_seq", seq)?;
                }
                Ok(())
            });
            match &result {
                Ok(()) => {
                    let _ = applied.send(seq);
                }
                Err(e) => {
                    // Keep the facts for the next attempt: `wal_seq` must
                    // never pass a record redb does not hold.
                    tracing::error!("ledger checkpoint failed, retrying: {e}");
                    let mut again =
                        std::sync::Arc::try_unwrap(batch).unwrap_or_else(|a| (*a).clone());
                    again.append(&mut facts);
                    facts = again;
                }
            }
            for w in waiters.drain(..) {
                let _ = w.send(result.clone());
            }
            since = Instant::now();
        }
        if disconnected {
            break;
        }
    }
}

/// Recovery, deterministically: segment files written by hand as a crash
/// would leave them, replayed into a fresh store.
#[cfg(test)]
mod recovery_tests {
    use super::*;
    use crate::store::accounts::apply_facts;
    use crate::store::records::UsageRecord;

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

    fn usage(seq: u64, model: &str) -> Fact {
        Fact::Usage(UsageRecord {
            seq,
            at: seq as i64,
            request_id: format!("r{seq}"),
            account_id: "a".into(),
            model: model.into(),
            ..UsageRecord::default()
        })
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
