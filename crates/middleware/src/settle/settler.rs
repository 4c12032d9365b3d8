//! The background settler: where drop guards send the settlements and breaker reports they
//! cannot await themselves (the sqlx `PoolConnection::drop` pattern).
//!
//! One task per client drains an unbounded channel. Each job is polled once where it is
//! received — a memory backend finishes there, with no task spawned — and a job that has to
//! wait (a Redis round trip) continues as its own task, so slow jobs run concurrently. A job
//! that fails is retried a few times; the backend's lease covers the rest.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Waker};
use std::time::Duration;

use polygateway_ports::{AdmissionBackend, BreakerOutcome, BreakerPolicy, BreakerStore, Permit};
use tokio::sync::{Notify, mpsc, oneshot};

/// Delays between the tries of a job that failed (then it is given up, with a warning).
const RETRY_DELAYS: [Duration; 3] = [
    Duration::from_millis(50),
    Duration::from_millis(250),
    Duration::from_secs(1),
];

/// What the settler does.
pub(crate) enum Job {
    /// Settle `permit` with `tokens` and release its slot.
    Settle { permit: Permit, tokens: u64 },
    /// Report a breaker outcome for `source`; `trips` counts the openings it causes.
    Breaker {
        source: Arc<str>,
        outcome: BreakerOutcome,
        was_probe: bool,
        trips: Arc<AtomicU64>,
    },
    /// Answer once every job received before this one is done.
    Flush(oneshot::Sender<()>),
}

type BoxedJob = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The sending side, shared by every guard of one client.
pub(crate) struct Settler {
    tx: mpsc::UnboundedSender<Job>,
    /// The receiving side until the task is started (lazily, on the first call, so that a
    /// client can be built outside a runtime), and what the task needs.
    start: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl Settler {
    /// A settler over the backends; `slot_freed` is notified whenever a settlement has freed a
    /// slot in the backend, so that calls waiting for room look again at once.
    pub(crate) fn new<B: AdmissionBackend, K: BreakerStore>(
        admission: Arc<B>,
        breakers: Arc<K>,
        breaker_policy: BreakerPolicy,
        slot_freed: Arc<Notify>,
    ) -> Settler {
        let (tx, rx) = mpsc::unbounded_channel();
        let start: Box<dyn FnOnce() + Send> = Box::new(move || {
            tokio::spawn(run(rx, admission, breakers, breaker_policy, slot_freed));
        });
        Settler {
            tx,
            start: Mutex::new(Some(start)),
        }
    }

    /// Start the task if it is not running yet. Must be called from within a runtime.
    pub(crate) fn ensure_started(&self) {
        let mut start = self.start.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(start) = start.take() {
            start();
        }
    }

    /// Queue a job; never waits. (The channel only closes when the client is gone, and then
    /// nobody is left to care.)
    pub(crate) fn send(&self, job: Job) {
        let _ = self.tx.send(job);
    }

    /// Wait until every job queued so far is done.
    pub(crate) async fn flush(&self) {
        self.ensure_started();
        let (tx, rx) = oneshot::channel();
        self.send(Job::Flush(tx));
        let _ = rx.await;
    }
}

async fn run<B: AdmissionBackend, K: BreakerStore>(
    mut rx: mpsc::UnboundedReceiver<Job>,
    admission: Arc<B>,
    breakers: Arc<K>,
    policy: BreakerPolicy,
    slot_freed: Arc<Notify>,
) {
    let mut running = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            job = rx.recv() => match job {
                Some(Job::Flush(done)) => {
                    while running.join_next().await.is_some() {}
                    let _ = done.send(());
                }
                Some(job) => {
                    let mut future = boxed(job, &admission, &breakers, policy, &slot_freed);
                    // Poll once here: an in-memory backend is done now, without a task.
                    if future.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_pending() {
                        running.spawn(future);
                    }
                }
                None => break,
            },
            Some(_) = running.join_next(), if !running.is_empty() => {}
        }
    }
    while running.join_next().await.is_some() {}
}

fn boxed<B: AdmissionBackend, K: BreakerStore>(
    job: Job,
    admission: &Arc<B>,
    breakers: &Arc<K>,
    policy: BreakerPolicy,
    slot_freed: &Arc<Notify>,
) -> BoxedJob {
    match job {
        Job::Settle { permit, tokens } => {
            let admission = admission.clone();
            let slot_freed = slot_freed.clone();
            Box::pin(async move {
                retrying("settle", &permit.source, || {
                    admission.settle_and_release(&permit, tokens)
                })
                .await;
                slot_freed.notify_waiters();
            })
        }
        Job::Breaker {
            source,
            outcome,
            was_probe,
            trips,
        } => {
            let breakers = breakers.clone();
            Box::pin(async move {
                let tripped = retrying("breaker report", &source, || {
                    breakers.record(&source, &policy, outcome, was_probe)
                })
                .await;
                if tripped == Some(true) {
                    trips.fetch_add(1, Ordering::Relaxed);
                }
            })
        }
        Job::Flush(done) => Box::pin(async move {
            let _ = done.send(());
        }),
    }
}

async fn retrying<T, F, Fut>(what: &str, source: &str, mut op: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, polygateway_ports::BackendError>>,
{
    let mut delays = RETRY_DELAYS.iter();
    loop {
        match op().await {
            Ok(value) => return Some(value),
            Err(error) => match delays.next() {
                Some(delay) => tokio::time::sleep(*delay).await,
                None => {
                    tracing::warn!(source, %error, "{what} failed; the backend's lease will reclaim the permit");
                    return None;
                }
            },
        }
    }
}
