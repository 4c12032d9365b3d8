//! The engine against fakes of the ports: every settlement row of SPEC §6 that the engine
//! decides, cancellation at each await point (after an explicit "entered" signal), panics,
//! probes, fail-over, backoff and `Retry-After`, the stall window and the attempt budget.
//! Time is tokio's paused clock.

use std::sync::Arc;
use std::time::Duration;

use polygateway_errors::{AttemptFailure, ErrorKind, FailureKind, GatewayError, UnavailableReason};
use polygateway_ports::{
    BreakerDecision, BreakerOutcome, ChatRequest, EventKind, PermitId, RefusalReason, Usage,
};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::testing::{FakeTransport, Rig, Row, Step, policy, rig, source, transient};
use crate::{CallSummary, ChatCall};

type CallResult = Result<(String, u32), GatewayError>;

/// Run one chat call as the facade does (recorder outside, finished with the result) in its
/// own task, so the test can cancel it.
fn spawn_call(rig: &Rig, transport: &Arc<FakeTransport>) -> JoinHandle<CallResult> {
    let engine = rig.engine.clone();
    let transport = transport.clone();
    tokio::spawn(async move {
        let recorder = engine.recorder();
        let request = ChatRequest::from_prompt("hi");
        let op = ChatCall {
            transport: &*transport,
            request: &request,
        };
        match engine.run(&op, &recorder, None).await {
            Ok(served) => {
                let out = (served.source.name.clone(), served.attempts);
                recorder.finish(Ok(CallSummary {
                    source: &served.source.name,
                    model: &served.source.model,
                    attempts: served.attempts,
                    usage: served.usage,
                }));
                Ok(out)
            }
            Err(error) => {
                recorder.finish(Err(&error));
                Err(error)
            }
        }
    })
}

async fn call(rig: &Rig, transport: &Arc<FakeTransport>) -> CallResult {
    spawn_call(rig, transport).await.expect("no panic")
}

/// Settlements after the settler has drained, as (permit sequence number, tokens).
async fn settlements(rig: &Rig) -> Vec<(u64, u64)> {
    rig.engine.flush().await;
    rig.admission
        .settlements()
        .into_iter()
        .map(|(PermitId(id), tokens)| (id as u64, tokens))
        .collect()
}

fn usage(p: u64, c: u64) -> Option<Usage> {
    Some(Usage {
        prompt_tokens: p,
        completion_tokens: c,
    })
}

fn one_source() -> Rig {
    rig(vec![source("A", 0)], policy(), false)
}

fn fake(steps: impl IntoIterator<Item = Step>) -> Arc<FakeTransport> {
    let transport = Arc::new(FakeTransport::default());
    transport.script("A", steps);
    transport
}

fn kinds(rows: &[Row]) -> Vec<(EventKind, Option<&str>, Option<u64>)> {
    rows.iter()
        .map(|r| (r.kind, r.error_type.as_deref(), r.settled))
        .collect()
}

// ---- settlement rows ----

#[tokio::test(start_paused = true)]
async fn s1_refused_admission_reserves_and_settles_nothing() {
    let rig = one_source();
    *rig.admission.refuse.lock().expect("lock") =
        Some((RefusalReason::Tpm, Some(Duration::from_secs(600))));
    let error = call(&rig, &fake([])).await.unwrap_err();
    let GatewayError::GatewayUnavailable(unavailable) = &error else {
        panic!("{error:?}")
    };
    assert_eq!(unavailable.reason(), UnavailableReason::QuotaWaitExceeded);
    assert_eq!(unavailable.retry_after(), Some(Duration::from_secs(600)));
    assert_eq!(settlements(&rig).await, []);
    assert!(rig.admission.granted.lock().expect("lock").is_empty());
}

#[tokio::test(start_paused = true)]
async fn s1_cancelled_while_waiting_for_room_settles_nothing() {
    let rig = one_source();
    *rig.admission.refuse.lock().expect("lock") =
        Some((RefusalReason::Rpm, Some(Duration::from_secs(20))));
    let reserved = rig.admission.reserved.notified();
    let handle = spawn_call(&rig, &fake([]));
    reserved.await; // entered: the first reserve was refused and the call waits for room
    handle.abort();
    assert!(handle.await.unwrap_err().is_cancelled());
    assert_eq!(settlements(&rig).await, []);
    let rows = rig.sink.rows();
    assert_eq!(
        kinds(&rows),
        [(EventKind::TerminalFailure, Some("Cancelled"), None)]
    );
}

#[tokio::test(start_paused = true)]
async fn s2_cancelled_after_the_permit_before_the_transport_settles_zero() {
    let mut a = source("A", 0);
    a.min_interval = Duration::from_secs(10); // the second call waits its turn in the pacer
    let rig = rig(vec![a], policy(), false);
    let transport = fake([Step::Ok(usage(3, 4))]);
    call(&rig, &transport).await.expect("first call");
    let reserved = rig.admission.reserved.notified();
    let handle = spawn_call(&rig, &transport);
    reserved.await; // entered: the permit is granted; the pacer holds the transport back
    handle.abort();
    assert!(handle.await.unwrap_err().is_cancelled());
    assert_eq!(settlements(&rig).await, [(0, 7), (1, 0)]);
    assert_eq!(transport.calls.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn s3_cancelled_in_flight_settles_the_estimate_and_writes_a_cancelled_row() {
    let rig = one_source();
    let transport = fake([Step::Hang]);
    let entered = transport.entered.notified();
    let handle = spawn_call(&rig, &transport);
    entered.await;
    handle.abort();
    assert!(handle.await.unwrap_err().is_cancelled());
    assert_eq!(settlements(&rig).await, [(0, 100)]);
    let rows = rig.sink.rows();
    assert_eq!(
        kinds(&rows),
        [
            (EventKind::Cancelled, Some("Cancelled"), Some(100)),
            (EventKind::TerminalFailure, Some("Cancelled"), None),
        ]
    );
    assert_eq!(rows[0].call, rows[1].call, "same logical_call_id");
}

#[tokio::test(start_paused = true)]
async fn s4_success_settles_the_reported_usage_including_zero() {
    let rig = one_source();
    call(&rig, &fake([Step::Ok(usage(12, 30))]))
        .await
        .expect("ok");
    call(&rig, &fake([Step::Ok(usage(0, 0))]))
        .await
        .expect("ok");
    assert_eq!(settlements(&rig).await, [(0, 42), (1, 0)]);
    let rows = rig.sink.rows();
    assert_eq!(
        kinds(&rows),
        [
            (EventKind::AttemptOk, None, Some(42)),
            (EventKind::TerminalSuccess, None, None),
            (EventKind::AttemptOk, None, Some(0)),
            (EventKind::TerminalSuccess, None, None),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn s4b_success_without_usage_settles_the_estimate() {
    let rig = one_source();
    call(&rig, &fake([Step::Ok(None)])).await.expect("ok");
    assert_eq!(settlements(&rig).await, [(0, 100)]);
}

#[tokio::test(start_paused = true)]
async fn s5_source_dead_settles_zero_and_fails_over() {
    let rig = rig(vec![source("A", 0), source("B", 1)], policy(), false);
    let transport = Arc::new(FakeTransport::default());
    transport.script(
        "A",
        [Step::Fail(
            AttemptFailure::new(FailureKind::SourceDead, "unauthorized", "no").with_status(401),
        )],
    );
    transport.script("B", [Step::Ok(usage(1, 2))]);
    assert_eq!(call(&rig, &transport).await, Ok(("B".to_owned(), 2)));
    assert_eq!(settlements(&rig).await, [(0, 0), (1, 3)]);
    let reports = rig.breakers.reports.lock().expect("lock").clone();
    assert_eq!(
        reports,
        [
            (
                "A".to_owned(),
                BreakerOutcome::Failure(FailureKind::SourceDead),
                false
            ),
            ("B".to_owned(), BreakerOutcome::Success, false),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn s5_transient_settles_the_estimate_even_when_cancelled_afterwards() {
    let rig = one_source();
    let transport = fake([Step::Fail(transient(503, None)), Step::Hang]);
    let entered = transport.entered.notified();
    let handle = spawn_call(&rig, &transport);
    entered.await; // the first attempt failed (known: est); the loop backs off, then retries
    let entered_again = transport.entered.notified();
    entered_again.await;
    handle.abort();
    let _ = handle.await;
    assert_eq!(settlements(&rig).await, [(0, 100), (1, 100)]);
}

#[tokio::test(start_paused = true)]
async fn s6_ocr_settles_zero_on_every_path() {
    let rig = rig(vec![source("A", 0)], policy(), true);
    call(&rig, &fake([Step::Ok(usage(50, 50))]))
        .await
        .expect("ok");
    call(
        &rig,
        &fake([Step::Fail(transient(500, None)), Step::Ok(None)]),
    )
    .await
    .expect("ok after a retry");
    let transport = fake([Step::Hang]);
    let entered = transport.entered.notified();
    let handle = spawn_call(&rig, &transport);
    entered.await;
    handle.abort();
    let _ = handle.await;
    assert_eq!(settlements(&rig).await, [(0, 0), (1, 0), (2, 0), (3, 0)]);
}

#[tokio::test(start_paused = true)]
async fn s8_request_rejected_settles_zero_and_stops() {
    let rig = rig(vec![source("A", 0), source("B", 1)], policy(), false);
    let transport = Arc::new(FakeTransport::default());
    transport.script(
        "A",
        [Step::Fail(
            AttemptFailure::new(FailureKind::RequestRejected, "http_status", "bad role")
                .with_status(400),
        )],
    );
    let error = call(&rig, &transport).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::RequestRejected);
    assert_eq!(
        transport.calls.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "no fail-over"
    );
    assert_eq!(settlements(&rig).await, [(0, 0)]);
    assert_eq!(
        rig.breakers.reports.lock().expect("lock").clone(),
        [(
            "A".to_owned(),
            BreakerOutcome::Failure(FailureKind::RequestRejected),
            false
        )],
        "reported, and the store ignores it for counting"
    );
}

#[tokio::test(start_paused = true)]
async fn s9_result_invalid_settles_the_reported_usage_or_zero() {
    let rig = one_source();
    let invalid = AttemptFailure::new(FailureKind::ResultInvalid, "missing_choices", "no choices")
        .with_status(200);
    let error = call(
        &rig,
        &fake([Step::Fail(invalid.clone().with_reported_tokens(12))]),
    )
    .await
    .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::ResultInvalid);
    call(&rig, &fake([Step::Fail(invalid)])).await.unwrap_err();
    assert_eq!(settlements(&rig).await, [(0, 12), (1, 0)]);
}

#[tokio::test(start_paused = true)]
async fn s10_a_panicking_attempt_settles_zero_and_frees_its_slot() {
    let mut a = source("A", 0);
    a.limits.max_concurrency = Some(1);
    let rig = rig(vec![a], policy(), false);
    let outcome = spawn_call(&rig, &fake([Step::Panic])).await;
    assert!(outcome.unwrap_err().is_panic());
    assert_eq!(settlements(&rig).await, [(0, 0)]);
    let rows = rig.sink.rows();
    assert_eq!(
        kinds(&rows)[0],
        (EventKind::Cancelled, Some("Panicked"), Some(0))
    );
    // The local slot came back: the next call is admitted and served.
    call(&rig, &fake([Step::Ok(usage(1, 1))]))
        .await
        .expect("slot freed");
}

#[tokio::test(start_paused = true)]
async fn known_outcome_is_not_overwritten_by_a_later_drop() {
    // S4: the guard settles what was known, even if the future is dropped right after.
    let rig = one_source();
    let a = &rig.engine.sources[0];
    let recorder = rig.engine.recorder();
    let trace = recorder.trace();
    let permit = polygateway_ports::Permit {
        id: PermitId(9),
        source: a.name.clone(),
        tokens: 100,
    };
    let mut guard = crate::settle::guard::AttemptGuard::new(
        a,
        &rig.engine.settler,
        &trace,
        permit,
        1,
        100,
        false,
        false,
    );
    guard.transport_started();
    guard.succeeded(usage(5, 6));
    drop(guard); // as a cancellation would
    assert_eq!(settlements(&rig).await, [(9, 11)]);
}

// ---- breaker probe ----

#[tokio::test(start_paused = true)]
async fn a_cancelled_probe_gives_its_slot_back() {
    let rig = one_source();
    *rig.breakers.decision.lock().expect("lock") = BreakerDecision::Probe;
    let transport = fake([Step::Hang]);
    let entered = transport.entered.notified();
    let handle = spawn_call(&rig, &transport);
    entered.await;
    handle.abort();
    let _ = handle.await;
    rig.engine.flush().await;
    assert_eq!(
        rig.breakers.reports.lock().expect("lock").clone(),
        [("A".to_owned(), BreakerOutcome::Cancelled, true)]
    );
    assert!(rig.sink.rows()[0].is_probe);
}

#[tokio::test(start_paused = true)]
async fn a_probe_refused_by_admission_is_given_back() {
    let rig = one_source();
    *rig.breakers.decision.lock().expect("lock") = BreakerDecision::Probe;
    *rig.admission.refuse.lock().expect("lock") =
        Some((RefusalReason::Concurrency, Some(Duration::from_secs(600))));
    call(&rig, &fake([])).await.unwrap_err();
    rig.engine.flush().await;
    let reports = rig.breakers.reports.lock().expect("lock").clone();
    assert!(!reports.is_empty());
    assert!(
        reports
            .iter()
            .all(|r| *r == ("A".to_owned(), BreakerOutcome::Cancelled, true)),
        "{reports:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn open_breakers_everywhere_fail_with_circuit_open_and_the_hint() {
    let rig = rig(vec![source("A", 0), source("B", 0)], policy(), false);
    *rig.breakers.decision.lock().expect("lock") = BreakerDecision::Reject {
        retry_after: Some(Duration::from_secs(300)),
    };
    let error = call(&rig, &fake([])).await.unwrap_err();
    let GatewayError::GatewayUnavailable(u) = &error else {
        panic!("{error:?}")
    };
    assert_eq!(u.reason(), UnavailableReason::CircuitOpen);
    assert_eq!(u.retry_after(), Some(Duration::from_secs(300)));
}

// ---- retry, fail-over, backoff ----

#[tokio::test(start_paused = true)]
async fn transient_failure_fails_over_at_once_to_another_source() {
    let rig = rig(vec![source("A", 0), source("B", 1)], policy(), false);
    let transport = Arc::new(FakeTransport::default());
    transport.script("A", [Step::Fail(transient(503, None))]);
    let started = Instant::now();
    assert_eq!(call(&rig, &transport).await, Ok(("B".to_owned(), 2)));
    assert_eq!(
        started.elapsed(),
        Duration::ZERO,
        "no sleep when another source is free"
    );
}

#[tokio::test(start_paused = true)]
async fn retry_after_on_the_only_source_is_waited_for_uncapped_by_backoff_max() {
    let rig = one_source(); // backoff_max 2 s
    let transport = fake([
        Step::Fail(transient(429, Some(Duration::from_secs(7)))),
        Step::Ok(usage(1, 1)),
    ]);
    let started = Instant::now();
    assert_eq!(call(&rig, &transport).await, Ok(("A".to_owned(), 2)));
    assert_eq!(started.elapsed(), Duration::from_secs(7));
    let reports = rig.breakers.reports.lock().expect("lock").clone();
    assert_eq!(
        reports.len(),
        1,
        "a 429 with Retry-After is a cool-down, not a breaker failure: {reports:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_long_retry_after_makes_the_loop_use_another_source() {
    let rig = rig(vec![source("A", 0), source("B", 1)], policy(), false);
    let transport = Arc::new(FakeTransport::default());
    transport.script(
        "A",
        [Step::Fail(transient(429, Some(Duration::from_secs(3600))))],
    );
    let started = Instant::now();
    assert_eq!(call(&rig, &transport).await, Ok(("B".to_owned(), 2)));
    assert_eq!(started.elapsed(), Duration::ZERO);
    // The cool-down is shared: the next call goes straight to B.
    assert_eq!(call(&rig, &transport).await, Ok(("B".to_owned(), 1)));
}

#[tokio::test(start_paused = true)]
async fn backoff_between_attempts_on_one_source_is_jittered_under_the_ceiling() {
    let rig = one_source();
    let transport = fake([
        Step::Fail(transient(503, None)),
        Step::Fail(transient(503, None)),
        Step::Ok(None),
    ]);
    let started = Instant::now();
    assert_eq!(call(&rig, &transport).await, Ok(("A".to_owned(), 3)));
    assert!(
        started.elapsed() <= Duration::from_millis(100 + 200),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn max_attempts_ends_with_every_source_s_last_error() {
    let rig = rig(vec![source("A", 0), source("B", 0)], policy(), false);
    let transport = Arc::new(FakeTransport::default());
    transport.script("A", [Step::Fail(transient(502, None))]);
    transport.script(
        "B",
        [Step::Fail(transient(500, Some(Duration::from_secs(1))))],
    );
    let error = call(&rig, &transport).await.unwrap_err();
    let GatewayError::GatewayUnavailable(u) = &error else {
        panic!("{error:?}")
    };
    assert_eq!(u.reason(), UnavailableReason::AttemptsExhausted);
    assert_eq!(transport.calls.load(std::sync::atomic::Ordering::SeqCst), 4);
    let mut names: Vec<&str> = u.sources().iter().map(|s| s.source.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["A", "B"]);
    assert!(
        u.retry_after().is_some(),
        "the earliest moment a source frees up"
    );
}

#[tokio::test(start_paused = true)]
async fn a_wait_that_would_outlast_the_stall_window_fails_at_once() {
    let mut retry = policy();
    retry.stall_window = Duration::from_secs(30);
    let rig = rig(vec![source("A", 0)], retry, false);
    let transport = fake([Step::Fail(transient(429, Some(Duration::from_secs(90))))]);
    let started = Instant::now();
    let error = call(&rig, &transport).await.unwrap_err();
    assert_eq!(started.elapsed(), Duration::ZERO);
    let GatewayError::GatewayUnavailable(u) = &error else {
        panic!("{error:?}")
    };
    assert_eq!(u.reason(), UnavailableReason::QuotaWaitExceeded);
    assert_eq!(u.retry_after(), Some(Duration::from_secs(90)));
}

#[tokio::test(start_paused = true)]
async fn no_progress_for_the_stall_window_fails_stalled() {
    let mut retry = policy();
    retry.stall_window = Duration::from_secs(1);
    retry.max_attempts = 100;
    let rig = rig(vec![source("A", 0)], retry, false);
    // Connect errors carry no status: no response, no progress.
    let transport = fake([Step::Fail(AttemptFailure::new(
        FailureKind::Transient,
        "connect",
        "refused",
    ))]);
    let error = call(&rig, &transport).await.unwrap_err();
    let GatewayError::GatewayUnavailable(u) = &error else {
        panic!("{error:?}")
    };
    assert_eq!(u.reason(), UnavailableReason::Stalled);
}

#[tokio::test(start_paused = true)]
async fn every_logical_call_writes_exactly_one_terminal_row() {
    let rig = rig(vec![source("A", 0), source("B", 1)], policy(), false);
    let transport = Arc::new(FakeTransport::default());
    transport.script("A", [Step::Fail(transient(503, None))]);
    call(&rig, &transport).await.expect("ok");
    let rows = rig.sink.rows();
    assert_eq!(
        rows.iter()
            .map(|r| (r.kind, r.attempt, r.source.as_deref()))
            .collect::<Vec<_>>(),
        [
            (EventKind::AttemptFailed, 1, Some("A")),
            (EventKind::AttemptOk, 2, Some("B")),
            (EventKind::TerminalSuccess, 2, Some("B")),
        ]
    );
    assert!(rows.iter().all(|r| r.call == rows[0].call));
}

#[tokio::test(start_paused = true)]
async fn shutdown_drains_the_settler_and_refuses_new_calls() {
    let rig = one_source();
    call(&rig, &fake([Step::Ok(usage(2, 2))]))
        .await
        .expect("ok");
    rig.engine.shutdown().await;
    assert_eq!(
        rig.admission.settlements(),
        [(
            PermitId(rig.admission.granted.lock().expect("lock")[0].0),
            4
        )]
    );
    let error = call(&rig, &fake([])).await.unwrap_err();
    let GatewayError::GatewayUnavailable(u) = &error else {
        panic!("{error:?}")
    };
    assert_eq!(u.reason(), UnavailableReason::ShutDown);
}

#[tokio::test(start_paused = true)]
async fn a_probe_cooled_down_by_retry_after_gives_its_slot_back() {
    let rig = one_source();
    *rig.breakers.decision.lock().expect("lock") = BreakerDecision::Probe;
    let transport = fake([
        Step::Fail(transient(429, Some(Duration::from_secs(7)))),
        Step::Ok(None),
    ]);
    call(&rig, &transport)
        .await
        .expect("served after the cool-down");
    rig.engine.flush().await;
    let reports = rig.breakers.reports.lock().expect("lock").clone();
    assert_eq!(
        reports,
        [
            ("A".to_owned(), BreakerOutcome::Cancelled, true),
            ("A".to_owned(), BreakerOutcome::Success, true),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_refusal_without_a_date_gives_no_fake_hint() {
    let rig = one_source();
    *rig.admission.refuse.lock().expect("lock") = Some((RefusalReason::Concurrency, None));
    let error = call(&rig, &fake([])).await.unwrap_err();
    let GatewayError::GatewayUnavailable(u) = &error else {
        panic!("{error:?}")
    };
    assert_eq!(u.reason(), UnavailableReason::QuotaWaitExceeded);
    assert_eq!(
        u.retry_after(),
        None,
        "nobody knows when a slot held elsewhere frees up"
    );
}

#[tokio::test(start_paused = true)]
async fn an_absurd_retry_after_is_clamped_not_a_panic() {
    let rig = rig(vec![source("A", 0), source("B", 1)], policy(), false);
    let transport = Arc::new(FakeTransport::default());
    transport.script(
        "A",
        [Step::Fail(transient(
            429,
            Some(Duration::from_secs(u64::MAX / 2)),
        ))],
    );
    assert_eq!(call(&rig, &transport).await, Ok(("B".to_owned(), 2)));
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_backend_fails_closed_at_once_with_a_hint() {
    let rig = one_source();
    *rig.admission.down.lock().expect("lock") = true;
    let started = Instant::now();
    let error = call(&rig, &fake([])).await.unwrap_err();
    assert_eq!(started.elapsed(), Duration::ZERO);
    let GatewayError::GatewayUnavailable(u) = &error else {
        panic!("{error:?}")
    };
    assert_eq!(u.reason(), UnavailableReason::BackendUnavailable);
    assert_eq!(u.retry_after(), Some(Duration::from_secs(2)));
    assert!(rig.admission.granted.lock().expect("lock").is_empty());
}
