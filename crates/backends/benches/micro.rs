//! Micro-benchmarks of the in-memory backends' hot operations: `cargo bench -p polygateway-backends`.

#![allow(missing_docs)] // benchmark functions

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use polygateway_backends::{MemoryAdmission, MemoryBreakers};
use polygateway_ports::{
    Admission, AdmissionBackend, AdmissionRequest, BreakerPolicy, BreakerStore, Limits,
    ManualClock, PermitId,
};

fn main() {
    divan::main();
}

/// The memory backends finish on the first poll; run them without a runtime.
fn now<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(value) => value,
        Poll::Pending => unreachable!("memory backends complete on the first poll"),
    }
}

#[divan::bench]
fn admission_reserve_then_settle(bencher: divan::Bencher<'_, '_>) {
    let backend = MemoryAdmission::new(Arc::new(ManualClock::new()));
    let ids = AtomicU64::new(0);
    let limits = Limits {
        tpm: Some(u64::MAX / 2),
        rpm: Some(u64::MAX / 2),
        max_concurrency: Some(1_000_000),
    };
    bencher.bench_local(|| {
        let request = AdmissionRequest {
            source: "A",
            limits,
            tokens: 100,
            lease: Duration::from_secs(60),
            permit_id: PermitId(u128::from(ids.fetch_add(1, Ordering::Relaxed))),
        };
        let Ok(Admission::Granted(permit)) = now(backend.reserve(request)) else {
            unreachable!("limits never bind")
        };
        now(backend.settle_and_release(&permit, 42)).expect("memory never fails");
    });
}

#[divan::bench]
fn breaker_check_closed(bencher: divan::Bencher<'_, '_>) {
    let breakers = MemoryBreakers::new(Arc::new(ManualClock::new()));
    let policy = BreakerPolicy {
        failures_to_open: 5,
        open_for: Duration::from_secs(30),
        max_open_for: Duration::from_secs(240),
        dead_open_for: Duration::from_secs(600),
        probe_lease: Duration::from_secs(65),
    };
    bencher.bench_local(|| now(breakers.try_acquire(divan::black_box("A"), &policy)));
}
