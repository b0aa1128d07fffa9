//! A call that runs to its end even when whoever awaits it goes away.
//!
//! A text call must not be cancelled once the vendor may be working on it:
//! a client that hangs up mid-call is still billed what the vendor charges,
//! and its hold is settled, not abandoned. A task of its own per call, which
//! the handler awaits, gives that, at a price paid on every call: a spawn,
//! the scheduler's hand-over to the new task, and the handler's wake-up when
//! the task ends, once on the call's way in and once on its way out. On a
//! stream those are on the way to the first token, run cold (the runtime
//! thread has slept since the last frame).
//!
//! [`RunToEnd`] runs the call inside the future that awaits it instead, so
//! a call costs no task of its own while its client stays. Only when that
//! future is dropped before the call is done (hyper drops a request's
//! service future when its connection goes) does what is left of the call
//! become a task, which finishes it and drops its answer: the same outcome
//! as the task's, for a client that left.
//!
//! A panic inside the call is caught and returned as [`Panicked`], as a
//! task's join error was, so that the client gets an error envelope rather
//! than a connection torn down with the panicking future.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A call run where it is awaited, finished by a task of its own if it is
/// dropped first; see the module's doc.
pub struct RunToEnd<T: Send + 'static> {
    /// `None` once the call has given its answer (or panicked).
    call: Option<Pin<Box<dyn Future<Output = T> + Send>>>,
}

impl<T: Send + 'static> RunToEnd<T> {
    pub fn new(call: impl Future<Output = T> + Send + 'static) -> Self {
        RunToEnd {
            call: Some(Box::pin(call)),
        }
    }
}

/// The call panicked (or was polled after its end); its message.
#[derive(Debug)]
pub struct Panicked(String);

impl std::fmt::Display for Panicked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the call panicked: {}", self.0)
    }
}

impl Panicked {
    fn of(payload: Box<dyn std::any::Any + Send>) -> Panicked {
        let message = match payload.downcast::<String>() {
            Ok(s) => *s,
            Err(payload) => match payload.downcast::<&'static str>() {
                Ok(s) => (*s).to_string(),
                Err(_) => "(no message)".to_string(),
            },
        };
        Panicked(message)
    }
}

impl<T: Send + 'static> Future for RunToEnd<T> {
    type Output = Result<T, Panicked>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let Some(call) = this.call.as_mut() else {
            return Poll::Ready(Err(Panicked("polled after its end".into())));
        };
        // After a panic the call's state is unknown: it is dropped, as a
        // task's future is after one.
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| call.as_mut().poll(cx)));
        match polled {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(answer)) => {
                this.call = None;
                Poll::Ready(Ok(answer))
            }
            Err(payload) => {
                this.call = None;
                Poll::Ready(Err(Panicked::of(payload)))
            }
        }
    }
}

impl<T: Send + 'static> Drop for RunToEnd<T> {
    fn drop(&mut self) {
        let Some(call) = self.call.take() else {
            return;
        };
        // Outside a runtime (the process is ending) the call ends with it,
        // as a task of its own would have.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(call);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use tokio::sync::oneshot;

    #[tokio::test(flavor = "current_thread")]
    async fn a_call_awaited_to_its_end_gives_its_answer_on_the_same_task() {
        let answer = tokio::spawn(async {
            let task = tokio::task::id();
            RunToEnd::new(async move {
                tokio::task::yield_now().await;
                (tokio::task::id() == task, 7)
            })
            .await
            .map_err(|p| p.to_string())
        })
        .await
        .expect("the awaiting task ends");
        assert_eq!(answer, Ok((true, 7)), "no task of its own");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_call_dropped_midway_runs_to_its_end_on_a_task() {
        let (go_tx, go_rx) = oneshot::channel::<()>();
        let (done_tx, done_rx) = oneshot::channel::<bool>();
        let started = Arc::new(AtomicBool::new(false));
        let seen = started.clone();
        let mut call = Box::pin(RunToEnd::new(async move {
            seen.store(true, Ordering::SeqCst);
            let went_on = go_rx.await.is_ok();
            let _ = done_tx.send(went_on);
        }));
        // Polled once: it has started and waits.
        assert!(futures_util::poll!(call.as_mut()).is_pending());
        assert!(started.load(Ordering::SeqCst));
        // Whoever awaited it goes away; the call goes on.
        drop(call);
        go_tx.send(()).expect("the call still listens");
        assert_eq!(done_rx.await, Ok(true));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_panic_is_an_answer_not_a_torn_task() {
        let answer = RunToEnd::new(async {
            if std::hint::black_box(true) {
                panic!("a bug");
            }
        })
        .await;
        let message = answer.err().map(|p| p.to_string());
        assert_eq!(message.as_deref(), Some("the call panicked: a bug"));
    }

    /// Sets its flag when dropped.
    struct Dropped(Arc<AtomicBool>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn dropped_outside_a_runtime_the_call_is_dropped_with_it() {
        let dropped = Arc::new(AtomicBool::new(false));
        let guard = Dropped(dropped.clone());
        let mut call = Box::pin(RunToEnd::new(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        }));
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(call.as_mut().poll(&mut cx).is_pending());
        assert!(!dropped.load(Ordering::SeqCst));
        // No runtime to hand it to: no panic, and nothing leaked.
        drop(call);
        assert!(dropped.load(Ordering::SeqCst));
    }
}
