//! The backend contract (SPEC §6, §7, §17): what every admission backend and breaker store
//! must do. The cases are generic over the ports; each backend runs them through its harness
//! (memory here; Redis joins with its own issue).

use std::sync::Arc;
use std::time::Duration;

use polygateway_backends::{AGE_OUT, MemoryAdmission, MemoryBreakers};
use polygateway_errors::FailureKind;
use polygateway_ports::{
    Admission, AdmissionBackend, AdmissionRequest, BreakerDecision, BreakerOutcome, BreakerPolicy,
    BreakerState, BreakerStore, Limits, ManualClock, Permit, PermitId, RefusalReason, SourceUsage,
};

const SOURCE: &str = "A";
const LEASE: Duration = Duration::from_secs(30);

fn request(id: u128, tokens: u64, limits: Limits) -> AdmissionRequest<'static> {
    AdmissionRequest {
        source: SOURCE,
        limits,
        tokens,
        lease: LEASE,
        permit_id: PermitId(id),
    }
}

fn limits(tpm: u64, rpm: u64, max_concurrency: u32) -> Limits {
    Limits {
        tpm: Some(tpm),
        rpm: Some(rpm),
        max_concurrency: Some(max_concurrency),
    }
}

async fn grant<B: AdmissionBackend>(backend: &B, id: u128, tokens: u64, limits: Limits) -> Permit {
    match backend
        .reserve(request(id, tokens, limits))
        .await
        .expect("backend up")
    {
        Admission::Granted(permit) => permit,
        refused => panic!("expected a grant for {id}, got {refused:?}"),
    }
}

async fn usage<B: AdmissionBackend>(backend: &B) -> SourceUsage {
    backend
        .usage(SOURCE, Limits::default())
        .await
        .expect("backend up")
}

fn used(tpm: u64, rpm: u64, inflight: u64) -> SourceUsage {
    SourceUsage {
        tpm_used: tpm,
        rpm_used: rpm,
        inflight,
    }
}

// ---- admission cases, generic over the backend ----

async fn a_grant_reserves_tokens_a_request_and_a_slot<B: AdmissionBackend>(b: &B) {
    let permit = grant(b, 1, 300, limits(1000, 10, 2)).await;
    assert_eq!(
        (permit.id, permit.tokens, &*permit.source),
        (PermitId(1), 300, SOURCE)
    );
    assert_eq!(usage(b).await, used(300, 1, 1));
}

async fn a_refused_admission_counts_nothing<B: AdmissionBackend>(b: &B) {
    grant(b, 1, 800, limits(1000, 2, 2)).await;
    let refused = b
        .reserve(request(2, 300, limits(1000, 2, 2)))
        .await
        .expect("up");
    assert!(
        matches!(
            refused,
            Admission::Refused {
                reason: RefusalReason::Tpm,
                ..
            }
        ),
        "{refused:?}"
    );
    assert_eq!(
        usage(b).await,
        used(800, 1, 1),
        "a TPM refusal reserved or counted something"
    );
    grant(b, 3, 100, limits(1000, 2, 2)).await;
    let refused = b
        .reserve(request(4, 1, limits(1000, 2, 5)))
        .await
        .expect("up");
    assert!(
        matches!(
            refused,
            Admission::Refused {
                reason: RefusalReason::Rpm,
                ..
            }
        ),
        "{refused:?}"
    );
    let refused = b
        .reserve(request(5, 1, limits(1000, 10, 2)))
        .await
        .expect("up");
    assert!(
        matches!(
            refused,
            Admission::Refused {
                reason: RefusalReason::Concurrency,
                ..
            }
        ),
        "{refused:?}"
    );
    assert_eq!(usage(b).await, used(900, 2, 2));
}

async fn settle_replaces_the_reservation_once<B: AdmissionBackend>(b: &B) {
    let permit = grant(b, 1, 500, limits(1000, 10, 5)).await;
    b.settle(&permit, 120).await.expect("up");
    assert_eq!(
        usage(b).await,
        used(120, 1, 1),
        "a refund is taken back exactly"
    );
    b.settle(&permit, 999).await.expect("up");
    assert_eq!(
        usage(b).await,
        used(120, 1, 1),
        "a second settle changed something"
    );
    b.release(&permit).await.expect("up");
    b.release(&permit).await.expect("up");
    assert_eq!(usage(b).await, used(120, 1, 0), "release is idempotent");
    b.settle_and_release(&permit, 7).await.expect("up");
    assert_eq!(
        usage(b).await,
        used(120, 1, 0),
        "a finished permit is finished"
    );
}

async fn settle_can_top_up_above_the_estimate<B: AdmissionBackend>(b: &B) {
    let permit = grant(b, 1, 100, limits(1000, 10, 5)).await;
    b.settle_and_release(&permit, 450).await.expect("up");
    assert_eq!(usage(b).await, used(450, 1, 0));
}

async fn a_resent_reserve_changes_nothing<B: AdmissionBackend>(b: &B) {
    grant(b, 42, 200, limits(1000, 10, 5)).await;
    let again = grant(b, 42, 200, limits(1000, 10, 5)).await;
    assert_eq!(again.id, PermitId(42));
    assert_eq!(usage(b).await, used(200, 1, 1));
}

async fn unknown_permits_are_ignored<B: AdmissionBackend>(b: &B) {
    let ghost = Permit {
        id: PermitId(77),
        source: Arc::from(SOURCE),
        tokens: 10,
    };
    b.settle_and_release(&ghost, 10).await.expect("up");
    assert_eq!(usage(b).await, used(0, 0, 0));
}

// ---- breaker cases ----

fn policy() -> BreakerPolicy {
    BreakerPolicy {
        failures_to_open: 3,
        open_for: Duration::from_secs(10),
        max_open_for: Duration::from_secs(40),
        dead_open_for: Duration::from_secs(600),
        probe_lease: Duration::from_secs(60),
    }
}

async fn fail<K: BreakerStore>(k: &K, kind: FailureKind, probe: bool) {
    k.record(SOURCE, &policy(), BreakerOutcome::Failure(kind), probe)
        .await
        .expect("up");
}

async fn decide<K: BreakerStore>(k: &K) -> BreakerDecision {
    k.try_acquire(SOURCE, &policy()).await.expect("up")
}

async fn consecutive_transient_failures_open_the_breaker<K: BreakerStore>(k: &K) {
    fail(k, FailureKind::Transient, false).await;
    fail(k, FailureKind::Transient, false).await;
    assert_eq!(decide(k).await, BreakerDecision::Allow);
    fail(k, FailureKind::Transient, false).await;
    assert_open_for(decide(k).await, Duration::from_secs(10));
}

/// A rejection whose hint is `expected`, less the few milliseconds a real clock (Redis `TIME`)
/// moves between the report and the question.
fn assert_open_for(decision: BreakerDecision, expected: Duration) {
    match decision {
        BreakerDecision::Reject {
            retry_after: Some(d),
        } => {
            assert!(
                d <= expected && d > expected - Duration::from_secs(1),
                "{d:?} for {expected:?}"
            );
        }
        other => panic!("expected an open breaker, got {other:?}"),
    }
}

async fn caller_faults_never_count<K: BreakerStore>(k: &K) {
    for _ in 0..10 {
        fail(k, FailureKind::RequestRejected, false).await;
        fail(k, FailureKind::ResultInvalid, false).await;
    }
    assert_eq!(decide(k).await, BreakerDecision::Allow);
    fail(k, FailureKind::Transient, false).await;
    fail(k, FailureKind::Transient, false).await;
    k.record(SOURCE, &policy(), BreakerOutcome::Success, false)
        .await
        .expect("up");
    fail(k, FailureKind::Transient, false).await;
    assert_eq!(
        decide(k).await,
        BreakerDecision::Allow,
        "a success resets the count"
    );
    // Neutral, not healthy: caller faults between transient failures do not reset the count.
    fail(k, FailureKind::RequestRejected, false).await;
    fail(k, FailureKind::Transient, false).await;
    fail(k, FailureKind::ResultInvalid, false).await;
    fail(k, FailureKind::Transient, false).await;
    assert!(
        matches!(decide(k).await, BreakerDecision::Reject { .. }),
        "three transient failures with caller faults between them open the breaker"
    );
}

async fn source_dead_opens_at_once_for_long<K: BreakerStore>(k: &K) {
    fail(k, FailureKind::SourceDead, false).await;
    assert_open_for(decide(k).await, Duration::from_secs(600));
    match k.state(SOURCE, &policy()).await.expect("up") {
        BreakerState::Open { remaining } => {
            assert!(
                remaining <= Duration::from_secs(600) && remaining > Duration::from_secs(599),
                "{remaining:?}"
            );
        }
        other => panic!("{other:?}"),
    }
}

// ---- the Redis harness: the same cases, unchanged, on the real redis-server ----

mod support;

macro_rules! redis_cases {
    ($($case:ident),* $(,)?) => {$(
        #[tokio::test]
        async fn $case() {
            let backend = crate::support::redis_backend(stringify!($case)).await;
            super::$case(&backend).await;
        }
    )*};
}

mod redis_admission {
    redis_cases!(
        a_grant_reserves_tokens_a_request_and_a_slot,
        a_refused_admission_counts_nothing,
        settle_replaces_the_reservation_once,
        settle_can_top_up_above_the_estimate,
        a_resent_reserve_changes_nothing,
        unknown_permits_are_ignored,
    );
}

mod redis_breaker {
    redis_cases!(
        consecutive_transient_failures_open_the_breaker,
        caller_faults_never_count,
        source_dead_opens_at_once_for_long,
    );
}

// ---- the memory harness ----

fn memory() -> (MemoryAdmission, MemoryBreakers, ManualClock) {
    let clock = ManualClock::new();
    (
        MemoryAdmission::new(Arc::new(clock.clone())),
        MemoryBreakers::new(Arc::new(clock.clone())),
        clock,
    )
}

macro_rules! memory_cases {
    ($($case:ident),* $(,)?) => {$(
        #[tokio::test]
        async fn $case() {
            let (admission, _breakers, _clock) = super::memory();
            super::$case(&admission).await;
        }
    )*};
}

macro_rules! memory_breaker_cases {
    ($($case:ident),* $(,)?) => {$(
        #[tokio::test]
        async fn $case() {
            let (_admission, breakers, _clock) = super::memory();
            super::$case(&breakers).await;
        }
    )*};
}

mod memory_admission {
    memory_cases!(
        a_grant_reserves_tokens_a_request_and_a_slot,
        a_refused_admission_counts_nothing,
        settle_replaces_the_reservation_once,
        settle_can_top_up_above_the_estimate,
        a_resent_reserve_changes_nothing,
        unknown_permits_are_ignored,
    );
}

mod memory_breaker {
    memory_breaker_cases!(
        consecutive_transient_failures_open_the_breaker,
        caller_faults_never_count,
        source_dead_opens_at_once_for_long,
    );
}

// ---- time-dependent cases, on the injectable clock ----

#[tokio::test]
async fn memory_windows_slide_and_refusals_say_when_room_frees() {
    // An entry counts for AGE_OUT = a minute plus the one-second arrival guard.
    assert_eq!(AGE_OUT, Duration::from_secs(61));
    let (b, _, clock) = memory();
    let l = limits(1000, 3, 10);
    let first = grant(&b, 1, 600, l).await;
    b.settle_and_release(&first, 600).await.expect("up");
    clock.advance(Duration::from_secs(20));
    let second = grant(&b, 2, 300, l).await;
    b.settle_and_release(&second, 300).await.expect("up");
    clock.advance(Duration::from_secs(10));
    match b.reserve(request(3, 200, l)).await.expect("up") {
        Admission::Refused {
            reason: RefusalReason::Tpm,
            retry_after,
        } => assert_eq!(
            retry_after,
            Some(Duration::from_secs(31)),
            "the first entry ages out at 61 s"
        ),
        other => panic!("{other:?}"),
    }
    clock.advance(Duration::from_secs(30));
    assert!(
        matches!(
            b.reserve(request(3, 200, l)).await.expect("up"),
            Admission::Refused { .. }
        ),
        "at 60 s the first entry still counts"
    );
    clock.advance(Duration::from_secs(1));
    grant(&b, 3, 200, l).await;
    assert_eq!(usage(&b).await, used(500, 2, 1));
    grant(&b, 4, 1, l).await;
    match b.reserve(request(5, 1, l)).await.expect("up") {
        Admission::Refused {
            reason: RefusalReason::Rpm,
            retry_after,
        } => assert_eq!(
            retry_after,
            Some(Duration::from_secs(20)),
            "entry 2 (at 20 s) ages out at 81 s"
        ),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn memory_an_expired_lease_frees_the_slot_but_keeps_the_tokens() {
    let (b, _, clock) = memory();
    let l = limits(1000, 100, 1);
    let crashed = grant(&b, 1, 250, l).await;
    assert!(matches!(
        b.reserve(request(2, 1, l)).await.expect("up"),
        Admission::Refused {
            reason: RefusalReason::Concurrency,
            ..
        }
    ));
    clock.advance(LEASE);
    assert_eq!(
        usage(&b).await,
        used(250, 1, 0),
        "the slot came back by itself"
    );
    grant(&b, 2, 1, l).await;
    b.settle_and_release(&crashed, 0).await.expect("up");
    assert_eq!(
        usage(&b).await,
        used(251, 2, 1),
        "a settle after the lease changes nothing"
    );
}

#[tokio::test]
async fn memory_exactly_one_probe_when_100_callers_arrive_as_the_open_period_ends() {
    let (_, k, clock) = memory();
    let k = Arc::new(k);
    fail(&*k, FailureKind::SourceDead, false).await;
    clock.advance(Duration::from_secs(600));
    let barrier = Arc::new(std::sync::Barrier::new(100));
    let threads: Vec<_> = (0..100)
        .map(|_| {
            let (k, barrier) = (k.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .expect("rt");
                runtime.block_on(decide(&*k))
            })
        })
        .collect();
    let decisions: Vec<BreakerDecision> = threads
        .into_iter()
        .map(|t| t.join().expect("thread"))
        .collect();
    let probes = decisions
        .iter()
        .filter(|d| **d == BreakerDecision::Probe)
        .count();
    assert_eq!(probes, 1, "{decisions:?}");
    assert_eq!(
        decisions
            .iter()
            .filter(|d| **d == BreakerDecision::Reject { retry_after: None })
            .count(),
        99
    );
}

#[tokio::test]
async fn memory_probe_outcomes_close_reopen_or_give_the_slot_back() {
    let (_, k, clock) = memory();
    for _ in 0..3 {
        fail(&k, FailureKind::Transient, false).await;
    }
    clock.advance(Duration::from_secs(10));
    assert_eq!(
        k.state(SOURCE, &policy()).await.expect("up"),
        BreakerState::HalfOpen
    );
    assert_eq!(decide(&k).await, BreakerDecision::Probe);
    k.record(SOURCE, &policy(), BreakerOutcome::Cancelled, true)
        .await
        .expect("up");
    assert_eq!(
        decide(&k).await,
        BreakerDecision::Probe,
        "a cancelled probe gives its slot back"
    );
    fail(&k, FailureKind::Transient, true).await;
    assert_eq!(
        decide(&k).await,
        BreakerDecision::Reject {
            retry_after: Some(Duration::from_secs(20))
        },
        "a failed probe re-opens for twice as long"
    );
    clock.advance(Duration::from_secs(20));
    assert_eq!(decide(&k).await, BreakerDecision::Probe);
    fail(&k, FailureKind::RequestRejected, true).await;
    assert_eq!(
        decide(&k).await,
        BreakerDecision::Allow,
        "a probe the source answered closes it"
    );
    assert_eq!(
        k.state(SOURCE, &policy()).await.expect("up"),
        BreakerState::Closed
    );
}

#[tokio::test]
async fn memory_repeated_trips_are_capped_and_a_lost_probe_is_reclaimed() {
    let (_, k, clock) = memory();
    fail(&k, FailureKind::Transient, false).await;
    fail(&k, FailureKind::Transient, false).await;
    fail(&k, FailureKind::Transient, false).await; // trip 1: 10 s
    for expected in [20, 40, 40] {
        clock.advance(Duration::from_secs(100));
        assert_eq!(decide(&k).await, BreakerDecision::Probe);
        fail(&k, FailureKind::Transient, true).await;
        assert_eq!(
            decide(&k).await,
            BreakerDecision::Reject {
                retry_after: Some(Duration::from_secs(expected))
            }
        );
    }
    clock.advance(Duration::from_secs(100));
    assert_eq!(decide(&k).await, BreakerDecision::Probe);
    clock.advance(Duration::from_secs(60));
    assert_eq!(
        decide(&k).await,
        BreakerDecision::Probe,
        "a probe that never reported is reclaimed after its lease"
    );
}

// ---- time-dependent cases on Redis: its clock is `TIME`, so these wait (bounded) in real time ----

fn short_policy() -> BreakerPolicy {
    BreakerPolicy {
        failures_to_open: 3,
        open_for: Duration::from_millis(200),
        max_open_for: Duration::from_millis(800),
        dead_open_for: Duration::from_millis(300),
        probe_lease: Duration::from_secs(30),
    }
}

#[tokio::test]
async fn redis_an_expired_lease_frees_the_slot_but_keeps_the_tokens() {
    let b = support::redis_backend("lease").await;
    let l = limits(1000, 100, 1);
    let short = AdmissionRequest {
        lease: Duration::from_millis(300),
        ..request(1, 250, l)
    };
    let Admission::Granted(crashed) = b.reserve(short).await.expect("up") else {
        panic!("granted")
    };
    assert!(matches!(
        b.reserve(request(2, 1, l)).await.expect("up"),
        Admission::Refused {
            reason: RefusalReason::Concurrency,
            ..
        }
    ));
    support::eventually(
        "the slot comes back when the lease runs out",
        Duration::from_secs(5),
        || async { usage(&b).await.inflight == 0 },
    )
    .await;
    assert_eq!(
        usage(&b).await,
        used(250, 1, 0),
        "the tokens stay until they age out"
    );
    grant(&b, 2, 1, l).await;
    b.settle_and_release(&crashed, 0).await.expect("up");
    assert_eq!(
        usage(&b).await,
        used(251, 2, 1),
        "a settle after the lease changes nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_exactly_one_probe_when_100_callers_arrive_as_the_open_period_ends() {
    let b = Arc::new(support::redis_backend("probe100").await);
    let policy = short_policy();
    b.record(
        SOURCE,
        &policy,
        BreakerOutcome::Failure(FailureKind::SourceDead),
        false,
    )
    .await
    .expect("up");
    support::eventually("the open period ends", Duration::from_secs(5), || async {
        b.state(SOURCE, &policy).await.expect("up") == BreakerState::HalfOpen
    })
    .await;
    let barrier = Arc::new(tokio::sync::Barrier::new(100));
    let tasks: Vec<_> = (0..100)
        .map(|_| {
            let (b, barrier) = (b.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                b.try_acquire(SOURCE, &policy).await.expect("up")
            })
        })
        .collect();
    let mut decisions = Vec::new();
    for task in tasks {
        decisions.push(task.await.expect("task"));
    }
    assert_eq!(
        decisions
            .iter()
            .filter(|d| **d == BreakerDecision::Probe)
            .count(),
        1,
        "{decisions:?}"
    );
    assert_eq!(
        decisions
            .iter()
            .filter(|d| **d == BreakerDecision::Reject { retry_after: None })
            .count(),
        99
    );
}

#[tokio::test]
async fn redis_probe_outcomes_close_reopen_or_give_the_slot_back() {
    let k = support::redis_backend("probes").await;
    let policy = short_policy();
    let record = |outcome, probe| {
        let k = &k;
        async move { k.record(SOURCE, &policy, outcome, probe).await.expect("up") }
    };
    for _ in 0..2 {
        assert!(!record(BreakerOutcome::Failure(FailureKind::Transient), false).await);
    }
    assert!(
        record(BreakerOutcome::Failure(FailureKind::Transient), false).await,
        "the third failure trips"
    );
    let half_open =
        || async { k.state(SOURCE, &policy).await.expect("up") == BreakerState::HalfOpen };
    support::eventually("half-open after 200 ms", Duration::from_secs(5), half_open).await;
    assert_eq!(
        k.try_acquire(SOURCE, &policy).await.expect("up"),
        BreakerDecision::Probe
    );
    record(BreakerOutcome::Cancelled, true).await;
    assert_eq!(
        k.try_acquire(SOURCE, &policy).await.expect("up"),
        BreakerDecision::Probe,
        "a cancelled probe gives its slot back"
    );
    assert!(
        record(BreakerOutcome::Failure(FailureKind::Transient), true).await,
        "a failed probe re-opens"
    );
    match k.try_acquire(SOURCE, &policy).await.expect("up") {
        BreakerDecision::Reject {
            retry_after: Some(d),
        } => {
            assert!(
                d > Duration::from_millis(200) && d <= Duration::from_millis(400),
                "twice as long: {d:?}"
            )
        }
        other => panic!("{other:?}"),
    }
    support::eventually("half-open again", Duration::from_secs(5), half_open).await;
    assert_eq!(
        k.try_acquire(SOURCE, &policy).await.expect("up"),
        BreakerDecision::Probe
    );
    record(BreakerOutcome::Failure(FailureKind::ResultInvalid), true).await;
    assert_eq!(
        k.state(SOURCE, &policy).await.expect("up"),
        BreakerState::Closed,
        "a probe the source answered closes it"
    );
}

#[tokio::test]
async fn redis_scripts_are_reloaded_after_a_script_flush() {
    let b = support::redis_backend("noscript").await;
    grant(&b, 1, 10, limits(1000, 100, 10)).await; // loads the scripts
    assert_eq!(
        support::redis_inline(&support::redis_url(), "SCRIPT FLUSH"),
        "+OK"
    );
    // EVALSHA now answers NOSCRIPT; the backend loads the script again and goes on.
    grant(&b, 2, 10, limits(1000, 100, 10)).await;
    assert_eq!(usage(&b).await, used(20, 2, 2));
}

#[tokio::test]
async fn redis_guarded_reserve_and_settle_pass_the_breaker_in_the_same_step() {
    use polygateway_ports::{BreakerReport, GuardedAdmission};
    let b = support::redis_backend("guarded").await;
    let policy = short_policy();
    let l = limits(1000, 100, 1);
    let guarded = |id| {
        let b = &b;
        async move {
            b.reserve_guarded(request(id, 10, l), &policy)
                .await
                .expect("supported")
                .expect("up")
        }
    };
    let GuardedAdmission::Granted {
        permit,
        probe: false,
    } = guarded(1).await
    else {
        panic!("closed breaker grants")
    };
    // Settling with a dead report opens the breaker in the same script.
    let report = BreakerReport {
        outcome: BreakerOutcome::Failure(FailureKind::SourceDead),
        was_probe: false,
        policy: &policy,
    };
    assert_eq!(
        b.settle_reporting(&permit, 0, report)
            .await
            .expect("supported"),
        Ok(true)
    );
    assert_eq!(usage(&b).await, used(0, 1, 0));
    assert!(matches!(
        guarded(2).await,
        GuardedAdmission::BreakerRejected {
            retry_after: Some(_)
        }
    ));
    assert_eq!(
        usage(&b).await,
        used(0, 1, 0),
        "a breaker refusal counts nothing"
    );
    support::eventually("half-open", Duration::from_secs(5), || async {
        b.state(SOURCE, &policy).await.expect("up") == BreakerState::HalfOpen
    })
    .await;
    // Half-open: the probe and the permit in one step; a second caller is refused.
    let GuardedAdmission::Granted {
        permit: probe_permit,
        probe: true,
    } = guarded(3).await
    else {
        panic!("the probe")
    };
    assert!(matches!(
        guarded(4).await,
        GuardedAdmission::BreakerRejected { retry_after: None }
    ));
    let report = BreakerReport {
        outcome: BreakerOutcome::Success,
        was_probe: true,
        policy: &policy,
    };
    assert_eq!(
        b.settle_reporting(&probe_permit, 7, report)
            .await
            .expect("supported"),
        Ok(false)
    );
    assert_eq!(
        b.state(SOURCE, &policy).await.expect("up"),
        BreakerState::Closed
    );
    // A probe whose caller gave up before the answer: the release of its permit id (no breaker
    // report) gives the probe back — and only the probe's own permit can.
    b.record(
        SOURCE,
        &policy,
        BreakerOutcome::Failure(FailureKind::SourceDead),
        false,
    )
    .await
    .expect("up");
    support::eventually("half-open once more", Duration::from_secs(5), || async {
        b.state(SOURCE, &policy).await.expect("up") == BreakerState::HalfOpen
    })
    .await;
    let GuardedAdmission::Granted {
        permit: abandoned,
        probe: true,
    } = guarded(20).await
    else {
        panic!("the probe")
    };
    let stranger = polygateway_ports::Permit {
        id: PermitId(21),
        source: SOURCE.into(),
        tokens: 0,
    };
    b.settle_and_release(&stranger, 0).await.expect("up");
    assert_eq!(
        b.try_acquire(SOURCE, &policy).await.expect("up"),
        BreakerDecision::Reject { retry_after: None },
        "not its probe"
    );
    b.settle_and_release(&abandoned, 0).await.expect("up");
    assert_eq!(
        b.try_acquire(SOURCE, &policy).await.expect("up"),
        BreakerDecision::Probe,
        "the probe came back"
    );
    b.record(SOURCE, &policy, BreakerOutcome::Success, true)
        .await
        .expect("up");
    // A probe whose reservation is refused gives the slot back in the same step.
    let _holder = grant(&b, 10, 1, l).await; // the only concurrency slot
    b.record(
        SOURCE,
        &policy,
        BreakerOutcome::Failure(FailureKind::SourceDead),
        false,
    )
    .await
    .expect("up");
    support::eventually("half-open again", Duration::from_secs(5), || async {
        b.state(SOURCE, &policy).await.expect("up") == BreakerState::HalfOpen
    })
    .await;
    assert!(matches!(
        guarded(11).await,
        GuardedAdmission::Refused {
            reason: RefusalReason::Concurrency,
            ..
        }
    ));
    assert_eq!(
        b.try_acquire(SOURCE, &policy).await.expect("up"),
        BreakerDecision::Probe,
        "the probe slot came back"
    );
}
