//! The settler: where drop guards hand the settlement and breaker report they cannot await
//! (the sqlx `PoolConnection::drop` pattern).
//!
//! A guard's [`Finish`] becomes one boxed job, polled once right where the guard drops: an
//! in-memory backend completes there and then — no channel, no task, no wake-up. A job that
//! has to wait (a Redis round trip) is handed to the client's background task, which runs
//! each such job as a task of its own so slow jobs proceed concurrently. The caller never
//! waits either way. A job that fails is retried a few times; the backend's lease covers the
//! rest.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Waker};
use std::time::Duration;

use polygateway_ports::{
    AdmissionBackend, BreakerOutcome, BreakerPolicy, BreakerReport, BreakerStore, Permit,
};
use tokio::sync::{Notify, mpsc, oneshot};

/// Delays between the tries of a job that failed (then it is given up, with a warning).
const RETRY_DELAYS: [Duration; 3] = [
    Duration::from_millis(50),
    Duration::from_millis(250),
    Duration::from_secs(1),
];

/// How an attempt ended, as far as the backends must hear of it.
pub(crate) struct Finish {
    /// The permit to settle with `tokens` and release, if one was (or may have been) granted.
    pub(crate) permit: Option<Permit>,
    pub(crate) tokens: u64,
    /// The breaker report, and whether the attempt held the probe.
    pub(crate) breaker: Option<(BreakerOutcome, bool)>,
    pub(crate) source: Arc<str>,
    /// Counts the breaker openings this report causes.
    pub(crate) trips: Arc<AtomicU64>,
}

type BoxedJob = Pin<Box<dyn Future<Output = ()> + Send>>;
type MakeJob = Box<dyn Fn(Finish) -> BoxedJob + Send + Sync>;

enum Message {
    /// Continue a job that could not finish where it was created.
    Run(BoxedJob),
    /// Answer once every job received before this one is done.
    Flush(oneshot::Sender<()>),
}

/// Shared by every guard of one client.
pub(crate) struct Settler {
    make: MakeJob,
    tx: mpsc::UnboundedSender<Message>,
    started: AtomicBool,
    /// The receiving side until the task is started — lazily, on the first call, so that a
    /// client can be built outside a runtime.
    start: Mutex<Option<mpsc::UnboundedReceiver<Message>>>,
}

impl Settler {
    /// A settler over the backends; `slot_freed` is notified whenever a settlement has freed a
    /// slot in the backend, so that calls waiting for room look again at once.
    pub(crate) fn new<B: AdmissionBackend, K: BreakerStore>(
        admission: Arc<B>,
        breakers: Arc<K>,
        policy: BreakerPolicy,
        slot_freed: Arc<Notify>,
    ) -> Settler {
        let (tx, rx) = mpsc::unbounded_channel();
        let make: MakeJob = Box::new(move |finish| {
            let (admission, breakers, slot_freed) =
                (admission.clone(), breakers.clone(), slot_freed.clone());
            Box::pin(async move {
                let report = finish.breaker.map(|(outcome, was_probe)| BreakerReport {
                    outcome,
                    was_probe,
                    policy: &policy,
                });
                let tripped = match (&finish.permit, report) {
                    // One step where the backend can (Redis: one script, idempotent per permit,
                    // so a retry after a timeout reports once), else two.
                    (Some(permit), Some(report)) => {
                        match admission
                            .settle_reporting(permit, finish.tokens, report)
                            .await
                        {
                            Some(Ok(opened)) => Some(opened),
                            Some(Err(_)) => {
                                retrying("settle", &finish.source, || async {
                                    admission
                                        .settle_reporting(permit, finish.tokens, report)
                                        .await
                                        .unwrap_or(Ok(false))
                                })
                                .await
                            }
                            None => {
                                retrying("settle", &finish.source, || {
                                    admission.settle_and_release(permit, finish.tokens)
                                })
                                .await;
                                retrying("breaker report", &finish.source, || {
                                    breakers.record(
                                        &finish.source,
                                        &policy,
                                        report.outcome,
                                        report.was_probe,
                                    )
                                })
                                .await
                            }
                        }
                    }
                    (Some(permit), None) => {
                        retrying("settle", &finish.source, || {
                            admission.settle_and_release(permit, finish.tokens)
                        })
                        .await;
                        None
                    }
                    (None, Some(report)) => {
                        retrying("breaker report", &finish.source, || {
                            breakers.record(
                                &finish.source,
                                &policy,
                                report.outcome,
                                report.was_probe,
                            )
                        })
                        .await
                    }
                    (None, None) => None,
                };
                if finish.permit.is_some() {
                    slot_freed.notify_waiters();
                }
                if tripped == Some(true) {
                    finish.trips.fetch_add(1, Ordering::Relaxed);
                }
            })
        });
        Settler {
            make,
            tx,
            started: AtomicBool::new(false),
            start: Mutex::new(Some(rx)),
        }
    }

    /// Start the background task if it is not running yet. Must be called from within a
    /// runtime.
    pub(crate) fn ensure_started(&self) {
        if self.started.load(Ordering::Acquire) {
            return;
        }
        let mut start = self.start.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(rx) = start.take() {
            tokio::spawn(run(rx));
            self.started.store(true, Ordering::Release);
        }
    }

    /// Settle and report `finish`: at once when the backends need no I/O, else in the
    /// background. Never waits.
    pub(crate) fn finish(&self, finish: Finish) {
        let mut job = (self.make)(finish);
        if job
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending()
        {
            // The channel only closes when the client is gone, and then nobody is left to care.
            let _ = self.tx.send(Message::Run(job));
        }
    }

    /// Wait until every job handed over so far is done.
    pub(crate) async fn flush(&self) {
        self.ensure_started();
        let (tx, rx) = oneshot::channel();
        let _ = self.tx.send(Message::Flush(tx));
        let _ = rx.await;
    }
}

async fn run(mut rx: mpsc::UnboundedReceiver<Message>) {
    let mut running = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            message = rx.recv() => match message {
                Some(Message::Run(job)) => {
                    running.spawn(job);
                }
                Some(Message::Flush(done)) => {
                    while running.join_next().await.is_some() {}
                    let _ = done.send(());
                }
                None => break,
            },
            Some(_) = running.join_next(), if !running.is_empty() => {}
        }
    }
    while running.join_next().await.is_some() {}
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
