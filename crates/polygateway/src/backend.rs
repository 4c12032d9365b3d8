//! The backend a client runs on, chosen by `{SCOPE}__BACKEND` at assembly: memory or Redis.
//! An enum rather than a trait object, so the pipeline's calls stay static. The Redis arms box
//! their futures: fred's are kilobytes large, and unboxed they would make every call's future
//! that large — copied on every move — even on the memory backend. Next to a round trip to
//! Redis, the allocation is nothing.

use polygateway_backends::{MemoryAdmission, MemoryBreakers, RedisBackend};
use polygateway_ports::{
    Admission, AdmissionBackend, AdmissionRequest, BackendError, BreakerDecision, BreakerOutcome,
    BreakerPolicy, BreakerReport, BreakerState, BreakerStore, GuardedAdmission, Limits, Permit,
    SourceUsage,
};

/// Admission in memory or in Redis.
pub(crate) enum AnyAdmission {
    Memory(MemoryAdmission),
    Redis(RedisBackend),
}

/// Breakers in memory or in Redis.
pub(crate) enum AnyBreakers {
    Memory(MemoryBreakers),
    Redis(RedisBackend),
}

impl AdmissionBackend for AnyAdmission {
    async fn reserve(&self, request: AdmissionRequest<'_>) -> Result<Admission, BackendError> {
        match self {
            AnyAdmission::Memory(b) => b.reserve(request).await,
            AnyAdmission::Redis(b) => Box::pin(b.reserve(request)).await,
        }
    }

    async fn settle(&self, permit: &Permit, actual_tokens: u64) -> Result<(), BackendError> {
        match self {
            AnyAdmission::Memory(b) => b.settle(permit, actual_tokens).await,
            AnyAdmission::Redis(b) => Box::pin(b.settle(permit, actual_tokens)).await,
        }
    }

    async fn release(&self, permit: &Permit) -> Result<(), BackendError> {
        match self {
            AnyAdmission::Memory(b) => b.release(permit).await,
            AnyAdmission::Redis(b) => Box::pin(b.release(permit)).await,
        }
    }

    async fn settle_and_release(
        &self,
        permit: &Permit,
        actual_tokens: u64,
    ) -> Result<(), BackendError> {
        match self {
            AnyAdmission::Memory(b) => b.settle_and_release(permit, actual_tokens).await,
            AnyAdmission::Redis(b) => Box::pin(b.settle_and_release(permit, actual_tokens)).await,
        }
    }

    async fn reserve_guarded(
        &self,
        request: AdmissionRequest<'_>,
        policy: &BreakerPolicy,
    ) -> Option<Result<GuardedAdmission, BackendError>> {
        match self {
            // Memory breakers are a separate store; the pipeline asks them directly.
            AnyAdmission::Memory(_) => None,
            // The same RedisBackend holds this scope's breakers (see `ClientBuilder`): one
            // script, one round trip.
            AnyAdmission::Redis(b) => Box::pin(b.reserve_guarded(request, policy)).await,
        }
    }

    async fn settle_reporting(
        &self,
        permit: &Permit,
        actual_tokens: u64,
        report: BreakerReport<'_>,
    ) -> Option<Result<bool, BackendError>> {
        match self {
            AnyAdmission::Memory(_) => None,
            AnyAdmission::Redis(b) => {
                Box::pin(b.settle_reporting(permit, actual_tokens, report)).await
            }
        }
    }

    async fn usage(&self, source: &str, limits: Limits) -> Result<SourceUsage, BackendError> {
        match self {
            AnyAdmission::Memory(b) => b.usage(source, limits).await,
            AnyAdmission::Redis(b) => Box::pin(b.usage(source, limits)).await,
        }
    }
}

impl BreakerStore for AnyBreakers {
    async fn try_acquire(
        &self,
        source: &str,
        policy: &BreakerPolicy,
    ) -> Result<BreakerDecision, BackendError> {
        match self {
            AnyBreakers::Memory(b) => b.try_acquire(source, policy).await,
            AnyBreakers::Redis(b) => Box::pin(b.try_acquire(source, policy)).await,
        }
    }

    async fn record(
        &self,
        source: &str,
        policy: &BreakerPolicy,
        outcome: BreakerOutcome,
        was_probe: bool,
    ) -> Result<bool, BackendError> {
        match self {
            AnyBreakers::Memory(b) => b.record(source, policy, outcome, was_probe).await,
            AnyBreakers::Redis(b) => Box::pin(b.record(source, policy, outcome, was_probe)).await,
        }
    }

    async fn state(
        &self,
        source: &str,
        policy: &BreakerPolicy,
    ) -> Result<BreakerState, BackendError> {
        match self {
            AnyBreakers::Memory(b) => b.state(source, policy).await,
            AnyBreakers::Redis(b) => Box::pin(b.state(source, policy)).await,
        }
    }
}
