//! The task store and the progress model: what a task looks like at each
//! poll, as a pure function of its polls so far, or of the time elapsed.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::clip::Geometry;
use super::request::{ContentFault, Outcome, Submission};
use super::VideoSpeed;
use crate::faults::lock;

/// Tasks kept; older ones are forgotten (404) so a long demo stays bounded.
pub const MAX_TASKS: usize = 10_000;
const ID_PREFIX: &str = "vt_";

#[derive(Clone, Debug)]
pub struct Task {
    pub seconds: u32,
    pub geometry: Geometry,
    pub outcome: Outcome,
    pub content: ContentFault,
    submitted: Instant,
    polls: u32,
}

/// A task's state as the vendor reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    Pending,
    Running {
        progress: u8,
    },
    Succeeded,
    Failed {
        code: &'static str,
        message: &'static str,
    },
}

impl Status {
    pub fn name(&self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running { .. } => "running",
            Self::Succeeded => "succeeded",
            Self::Failed { .. } => "failed",
        }
    }

    pub fn progress(&self) -> u8 {
        match self {
            Self::Pending | Self::Failed { .. } => 0,
            Self::Running { progress } => *progress,
            Self::Succeeded => 100,
        }
    }
}

impl Task {
    fn new(s: &Submission, now: Instant) -> Self {
        Self {
            seconds: s.seconds,
            geometry: s.geometry,
            outcome: s.directives.outcome,
            content: s.directives.content,
            submitted: now,
            polls: 0,
        }
    }

    /// The state at `now`. Directed endings take effect at the first poll
    /// whatever the speed, so tests of them need no waiting.
    pub fn status(&self, speed: &VideoSpeed, now: Instant) -> Status {
        match (self.outcome, self.polls > 0) {
            (Outcome::Reject, true) => Status::Failed {
                code: "content_policy",
                message: "The prompt was refused by the content safety system.",
            },
            (Outcome::Fail, true) => Status::Failed {
                code: "generation_error",
                message: "The video could not be generated; please try again.",
            },
            (Outcome::Never, true) => Status::Running { progress: 50 },
            (Outcome::Reject | Outcome::Fail | Outcome::Never, false) => Status::Pending,
            (Outcome::Succeed, _) => match speed {
                VideoSpeed::Polls(n) => by_polls(self.polls, *n),
                VideoSpeed::Millis(ms) => {
                    by_time(now.saturating_duration_since(self.submitted), *ms)
                }
            },
        }
    }
}

/// The k-th poll of n: running at k/n, succeeded from the n-th on.
fn by_polls(polls: u32, n: u32) -> Status {
    let n = n.max(1);
    if polls >= n {
        return Status::Succeeded;
    }
    if polls == 0 {
        return Status::Pending;
    }
    // polls < n, so the quotient is below 100.
    Status::Running {
        progress: (100 * u64::from(polls) / u64::from(n)) as u8,
    }
}

/// Pending for the first 10% of `total_ms`, then running in proportion to
/// the time elapsed, then succeeded.
fn by_time(elapsed: Duration, total_ms: u64) -> Status {
    let total = u128::from(total_ms);
    let elapsed = elapsed.as_millis();
    if elapsed >= total {
        return Status::Succeeded;
    }
    if elapsed * 10 < total {
        return Status::Pending;
    }
    // elapsed < total, so the quotient is below 100.
    Status::Running {
        progress: (100 * elapsed / total).clamp(1, 99) as u8,
    }
}

/// Every task of one server, by number.
#[derive(Default)]
pub struct TaskStore {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    tasks: BTreeMap<u64, Task>,
    created: u64,
    /// Idempotency-Key → task number, so a client's resubmission finds the
    /// task it already created (as real vendors that honour the header do).
    by_key: std::collections::HashMap<String, u64>,
}

impl TaskStore {
    /// Stores a new task and returns its id (`vt_1`, `vt_2`, ...); with an
    /// idempotency key seen before, returns that task's id instead.
    pub fn create(&self, s: &Submission, key: Option<&str>, now: Instant) -> String {
        let mut inner = lock(&self.inner);
        if let Some(n) = key.and_then(|k| inner.by_key.get(k).copied()) {
            if inner.tasks.contains_key(&n) {
                return format!("{ID_PREFIX}{n}");
            }
        }
        inner.created += 1;
        let n = inner.created;
        if inner.tasks.len() >= MAX_TASKS {
            inner.tasks.pop_first();
        }
        inner.tasks.insert(n, Task::new(s, now));
        if let Some(k) = key {
            if inner.by_key.len() >= MAX_TASKS {
                inner.by_key.clear();
            }
            inner.by_key.insert(k.to_string(), n);
        }
        format!("{ID_PREFIX}{n}")
    }

    /// Counts a poll of task `id` and returns its state then.
    pub fn poll(&self, id: &str, speed: &VideoSpeed, now: Instant) -> Option<(Task, Status)> {
        let mut inner = lock(&self.inner);
        let task = inner.tasks.get_mut(&number(id)?)?;
        task.polls = task.polls.saturating_add(1);
        let status = task.status(speed, now);
        Some((task.clone(), status))
    }

    /// Task `id` and its state, without counting a poll.
    pub fn peek(&self, id: &str, speed: &VideoSpeed, now: Instant) -> Option<(Task, Status)> {
        let inner = lock(&self.inner);
        let task = inner.tasks.get(&number(id)?)?;
        Some((task.clone(), task.status(speed, now)))
    }

    /// Tasks created since the server started (forgotten ones included).
    pub fn created(&self) -> usize {
        usize::try_from(lock(&self.inner).created).unwrap_or(usize::MAX)
    }
}

fn number(id: &str) -> Option<u64> {
    let digits = id.strip_prefix(ID_PREFIX)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::video::request::VideoDirectives;

    fn submission(outcome: Outcome) -> Submission {
        Submission {
            seconds: 4,
            geometry: Geometry::for_request(1280, 720),
            directives: VideoDirectives {
                outcome,
                ..VideoDirectives::default()
            },
        }
    }

    fn polls(store: &TaskStore, id: &str, speed: &VideoSpeed, n: usize) -> Vec<Status> {
        let now = Instant::now();
        (0..n)
            .map(|_| store.poll(id, speed, now).expect("task").1)
            .collect()
    }

    #[test]
    fn polls_advance_one_step_each() {
        let store = TaskStore::default();
        let now = Instant::now();
        let id = store.create(&submission(Outcome::Succeed), None, now);
        assert_eq!(id, "vt_1");
        let speed = VideoSpeed::Polls(3);
        assert_eq!(
            store.peek(&id, &speed, now).expect("task").1,
            Status::Pending
        );
        assert_eq!(
            polls(&store, &id, &speed, 4),
            [
                Status::Running { progress: 33 },
                Status::Running { progress: 66 },
                Status::Succeeded,
                Status::Succeeded,
            ]
        );
        let id = store.create(&submission(Outcome::Succeed), None, now);
        assert_eq!(id, "vt_2");
        assert_eq!(
            polls(&store, &id, &VideoSpeed::Polls(0), 1),
            [Status::Succeeded]
        );
        assert_eq!(store.created(), 2);
    }

    #[test]
    fn directed_endings_come_at_the_first_poll() {
        let store = TaskStore::default();
        let now = Instant::now();
        for speed in [VideoSpeed::Polls(3), VideoSpeed::Millis(60_000)] {
            let id = store.create(&submission(Outcome::Reject), None, now);
            let got = polls(&store, &id, &speed, 2);
            assert!(matches!(
                got[0],
                Status::Failed {
                    code: "content_policy",
                    ..
                }
            ));
            assert_eq!(got[0], got[1]);
            let id = store.create(&submission(Outcome::Fail), None, now);
            let got = polls(&store, &id, &speed, 1);
            assert!(matches!(
                got[0],
                Status::Failed {
                    code: "generation_error",
                    ..
                }
            ));
            let id = store.create(&submission(Outcome::Never), None, now);
            let got = polls(&store, &id, &speed, 10);
            assert!(got.iter().all(|s| *s == Status::Running { progress: 50 }));
        }
    }

    #[test]
    fn time_based_progress() {
        let ms = Duration::from_millis;
        assert_eq!(by_time(ms(0), 1000), Status::Pending);
        assert_eq!(by_time(ms(99), 1000), Status::Pending);
        assert_eq!(by_time(ms(100), 1000), Status::Running { progress: 10 });
        assert_eq!(by_time(ms(999), 1000), Status::Running { progress: 99 });
        assert_eq!(by_time(ms(1000), 1000), Status::Succeeded);
        assert_eq!(by_time(ms(0), 0), Status::Succeeded);
    }

    #[test]
    fn unknown_and_malformed_ids_are_not_found() {
        let store = TaskStore::default();
        let now = Instant::now();
        store.create(&submission(Outcome::Succeed), None, now);
        let speed = VideoSpeed::default();
        for id in ["vt_2", "vt_", "vt_+1", "1", "VT_1", "vt_1/x"] {
            assert!(store.poll(id, &speed, now).is_none(), "{id}");
        }
        assert!(store.poll("vt_1", &speed, now).is_some());
    }

    #[test]
    fn an_idempotency_key_finds_the_task_it_created() {
        let store = TaskStore::default();
        let now = Instant::now();
        let a = store.create(&submission(Outcome::Succeed), Some("task_1"), now);
        let b = store.create(&submission(Outcome::Succeed), Some("task_1"), now);
        let c = store.create(&submission(Outcome::Succeed), Some("task_2"), now);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(store.created(), 2);
    }
}
