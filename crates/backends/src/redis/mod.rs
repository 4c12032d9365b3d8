//! The Redis backend (SPEC §6, §7, §11, §17): admission, breakers and cache shared by every
//! process that points at the same Redis, through `fred`.
//!
//! * Atomic Lua scripts (`lua/admission.lua`, `lua/breaker.lua`), loaded once and run by SHA,
//!   reloaded on `NOSCRIPT` (fred's `Script::evalsha_with_reload`).
//! * The clock is Redis `TIME`: no skew between processes.
//! * Idempotent per permit id: a reserve, settle or release that a client library re-sends
//!   after a dropped connection changes nothing the second time.
//! * All keys of one source share one hash tag, `{SCOPE:SOURCE}`, so the scripts run on
//!   Redis Cluster; every key starts with a configurable prefix so deployments can share a
//!   Redis.
//! * Every command has a timeout; a timeout or a lost connection is a [`BackendError`], on
//!   which the pipeline fails closed. fred reconnects by itself: when Redis is back, calls
//!   succeed again without rebuilding anything.
//! * TLS (`rediss://`) and Cluster (`redis-cluster://`) are fred's own: this crate enables
//!   fred's `enable-rustls-ring` feature — the same ring provider as the HTTP transports.

use std::time::Duration;

use fred::clients::Pool;
use fred::interfaces::{ClientLike, KeysInterface};
use fred::prelude::{Builder, Config, Expiration, ReconnectPolicy};
use fred::types::scripts::Script;
use polygateway_errors::{FailureKind, Scope};
use polygateway_ports::{
    Admission, AdmissionBackend, AdmissionRequest, BackendError, BreakerDecision, BreakerOutcome,
    BreakerPolicy, BreakerReport, BreakerState, BreakerStore, CacheStore, GuardedAdmission, Limits,
    Permit, RefusalReason, SourceUsage,
};

use crate::memory::AGE_OUT;

/// Each script is the shared breaker functions followed by its own body.
const ADMISSION_LUA: &str = concat!(
    include_str!("../../lua/breaker_core.lua"),
    include_str!("../../lua/admission.lua")
);
const BREAKER_LUA: &str = concat!(
    include_str!("../../lua/breaker_core.lua"),
    include_str!("../../lua/breaker.lua")
);

/// How to reach Redis.
#[derive(Clone)]
pub struct RedisConfig {
    /// `redis://`, `rediss://`, `redis-cluster://` or `redis-sentinel://`; may hold a
    /// password, so it is never printed.
    pub url: String,
    /// Prefix of every key, so several deployments can share one Redis.
    pub key_prefix: String,
    /// Connections in the pool.
    pub pool_size: usize,
    /// Bound on every command (and on connecting); past it the command is a backend failure.
    pub command_timeout: Duration,
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &"<redacted>")
            .field("key_prefix", &self.key_prefix)
            .field("pool_size", &self.pool_size)
            .field("command_timeout", &self.command_timeout)
            .finish()
    }
}

/// Admission, breakers and cache in Redis, for one scope. Cheap to clone (the pool is shared).
#[derive(Clone)]
pub struct RedisBackend {
    pool: Pool,
    scope: Scope,
    prefix: String,
    admission: Script,
    breaker: Script,
}

impl std::fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBackend")
            .field("scope", &self.scope)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

fn backend_error(error: &fred::error::Error) -> BackendError {
    // fred's messages name the failure (timeout, connection refused, …), never the URL.
    BackendError::new(format!("redis: {:?}: {}", error.kind(), error.details()))
        .with_retry_after(Duration::from_secs(1))
}

impl RedisBackend {
    /// A backend for `scope` with `config`. Connects in the background (fred reconnects for
    /// ever, every 200 ms); commands issued while Redis is unreachable fail after the
    /// command timeout. Must be called inside a tokio runtime.
    pub fn connect(config: &RedisConfig, scope: Scope) -> Result<RedisBackend, BackendError> {
        let mut fred_config = Config::from_url(&config.url).map_err(|e| {
            BackendError::new(format!(
                "REDIS_URL is not a Redis URL fred accepts: {:?}",
                e.kind()
            ))
        })?;
        fred_config.fail_fast = false;
        let timeout = config.command_timeout;
        let pool = Builder::from_config(fred_config)
            .with_performance_config(|p| p.default_command_timeout = timeout)
            .with_connection_config(|c| {
                c.connection_timeout = timeout;
                c.internal_command_timeout = timeout;
                c.max_command_attempts = 1;
            })
            .set_policy(ReconnectPolicy::new_constant(0, 200))
            .build_pool(config.pool_size.max(1))
            .map_err(|e| backend_error(&e))?;
        pool.connect();
        Ok(RedisBackend {
            pool,
            scope,
            prefix: config.key_prefix.clone(),
            admission: Script::from_lua(ADMISSION_LUA),
            breaker: Script::from_lua(BREAKER_LUA),
        })
    }

    /// Wait until every connection of the pool is up.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops the waiting; the pool keeps connecting.
    pub async fn wait_connected(&self) -> Result<(), BackendError> {
        self.pool
            .wait_for_connect()
            .await
            .map_err(|e| backend_error(&e))
    }

    /// `{prefix}:{SCOPE:SOURCE}:{suffix}` — the braces are the hash tag.
    fn key(&self, source: &str, suffix: &str) -> String {
        format!("{}:{{{}:{source}}}:{suffix}", self.prefix, self.scope)
    }

    /// The admission keys, and the breaker hash last (same hash tag) for the guarded forms.
    fn admission_keys(&self, source: &str) -> Vec<String> {
        ["w", "t", "m", "c", "o", "x", "b"]
            .iter()
            .map(|s| self.key(source, s))
            .collect()
    }

    async fn admission_script(
        &self,
        source: &str,
        args: Vec<String>,
    ) -> Result<Vec<i64>, BackendError> {
        self.admission
            .evalsha_with_reload(self.pool.next(), self.admission_keys(source), args)
            .await
            .map_err(|e| backend_error(&e))
    }

    async fn breaker_script(
        &self,
        source: &str,
        args: Vec<String>,
    ) -> Result<Vec<i64>, BackendError> {
        self.breaker
            .evalsha_with_reload(self.pool.next(), vec![self.key(source, "b")], args)
            .await
            .map_err(|e| backend_error(&e))
    }

    /// Settle and/or release, and report to the breaker when `report` is given: one script.
    /// Returns whether the report opened the breaker.
    async fn settle_op(
        &self,
        permit: &Permit,
        actual: Option<u64>,
        release: bool,
        report: Option<BreakerReport<'_>>,
    ) -> Result<bool, BackendError> {
        let mut args = vec![
            "settle".to_owned(),
            permit.id.to_string(),
            actual.map_or_else(|| "-1".to_owned(), |a| a.to_string()),
            if release { "1" } else { "0" }.to_owned(),
            millis(AGE_OUT),
        ];
        if let Some(report) = report {
            args.extend(record_args(report.outcome, report.was_probe, report.policy));
        }
        let reply = self.admission_script(&permit.source, args).await?;
        match reply.as_slice() {
            [_, opened] => Ok(*opened == 1),
            other => Err(unexpected(other)),
        }
    }

    fn reserve_args(request: &AdmissionRequest<'_>) -> Vec<String> {
        vec![
            "reserve".to_owned(),
            request.permit_id.to_string(),
            request.tokens.to_string(),
            limit(request.limits.tpm),
            limit(request.limits.rpm),
            limit(request.limits.max_concurrency),
            millis(request.lease.max(Duration::from_millis(1))),
            millis(AGE_OUT),
        ]
    }
}

/// The breaker-report arguments, in the order both scripts read them: outcome, was probe,
/// failures to open, open ms, max open ms, dead open ms, probe lease ms.
fn record_args(outcome: BreakerOutcome, was_probe: bool, policy: &BreakerPolicy) -> [String; 7] {
    let outcome = match outcome {
        BreakerOutcome::Success => "success",
        BreakerOutcome::Failure(FailureKind::RequestRejected | FailureKind::ResultInvalid) => {
            "neutral"
        }
        BreakerOutcome::Failure(FailureKind::Transient) => "transient",
        BreakerOutcome::Failure(FailureKind::SourceDead) => "dead",
        BreakerOutcome::Cancelled => "cancelled",
    };
    [
        outcome.to_owned(),
        if was_probe { "1" } else { "0" }.to_owned(),
        policy.failures_to_open.to_string(),
        millis(policy.open_for),
        millis(policy.max_open_for),
        millis(policy.dead_open_for),
        millis(policy.probe_lease),
    ]
}

fn millis(d: Duration) -> String {
    d.as_millis().to_string()
}

fn limit<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "-1".to_owned(), |v| v.to_string())
}

fn granted(request: &AdmissionRequest<'_>, tokens: i64) -> Permit {
    Permit {
        id: request.permit_id,
        source: request.source.into(),
        tokens: u64::try_from(tokens).unwrap_or(request.tokens),
    }
}

fn refusal(reason: i64) -> RefusalReason {
    match reason {
        1 => RefusalReason::Tpm,
        2 => RefusalReason::Rpm,
        _ => RefusalReason::Concurrency,
    }
}

fn wait(ms: i64) -> Option<Duration> {
    u64::try_from(ms).ok().map(Duration::from_millis)
}

fn unexpected(reply: &[i64]) -> BackendError {
    BackendError::new(format!("redis: unexpected script reply {reply:?}"))
}

impl AdmissionBackend for RedisBackend {
    /// # Cancel safety
    ///
    /// The script runs atomically or not at all; if the future is dropped after Redis ran it,
    /// the permit exists and its lease reclaims it (the pipeline also releases its id).
    async fn reserve(&self, request: AdmissionRequest<'_>) -> Result<Admission, BackendError> {
        let reply = self
            .admission_script(request.source, Self::reserve_args(&request))
            .await?;
        match reply.as_slice() {
            [1, tokens, _] => Ok(Admission::Granted(granted(&request, *tokens))),
            [0, reason, ms] => Ok(Admission::Refused {
                reason: refusal(*reason),
                retry_after: wait(*ms),
            }),
            other => Err(unexpected(other)),
        }
    }

    /// The breaker check and the reservation in one script: one round trip on the critical
    /// path of a call.
    ///
    /// # Cancel safety
    ///
    /// Atomic. If the future is dropped after Redis ran it, the permit's lease and the probe's
    /// lease reclaim what it took (the pipeline also releases the permit id).
    async fn reserve_guarded(
        &self,
        request: AdmissionRequest<'_>,
        policy: &BreakerPolicy,
    ) -> Option<Result<GuardedAdmission, BackendError>> {
        let mut args = Self::reserve_args(&request);
        args.push(millis(policy.probe_lease));
        let reply = match self.admission_script(request.source, args).await {
            Ok(reply) => reply,
            Err(e) => return Some(Err(e)),
        };
        Some(match reply.as_slice() {
            [1, tokens, probe] => Ok(GuardedAdmission::Granted {
                permit: granted(&request, *tokens),
                probe: *probe == 1,
            }),
            [0, reason, ms] => Ok(GuardedAdmission::Refused {
                reason: refusal(*reason),
                retry_after: wait(*ms),
            }),
            [2, _, ms] => Ok(GuardedAdmission::BreakerRejected {
                retry_after: wait(*ms),
            }),
            other => Err(unexpected(other)),
        })
    }

    /// Settlement, release and the breaker report in one script, off the call's path.
    ///
    /// # Cancel safety
    ///
    /// Atomic; the settlement part is idempotent.
    async fn settle_reporting(
        &self,
        permit: &Permit,
        actual_tokens: u64,
        report: BreakerReport<'_>,
    ) -> Option<Result<bool, BackendError>> {
        Some(
            self.settle_op(permit, Some(actual_tokens), true, Some(report))
                .await,
        )
    }

    /// # Cancel safety
    ///
    /// Atomic; idempotent, so the settler may send it again.
    async fn settle(&self, permit: &Permit, actual_tokens: u64) -> Result<(), BackendError> {
        self.settle_op(permit, Some(actual_tokens), false, None)
            .await
            .map(|_| ())
    }

    /// # Cancel safety
    ///
    /// Atomic; idempotent.
    async fn release(&self, permit: &Permit) -> Result<(), BackendError> {
        self.settle_op(permit, None, true, None).await.map(|_| ())
    }

    /// One round trip for both.
    ///
    /// # Cancel safety
    ///
    /// Atomic; idempotent.
    async fn settle_and_release(
        &self,
        permit: &Permit,
        actual_tokens: u64,
    ) -> Result<(), BackendError> {
        self.settle_op(permit, Some(actual_tokens), true, None)
            .await
            .map(|_| ())
    }

    /// # Cancel safety
    ///
    /// Reads (and prunes expired entries); dropping it changes nothing that matters.
    async fn usage(&self, source: &str, _limits: Limits) -> Result<SourceUsage, BackendError> {
        let reply = self
            .admission_script(
                source,
                vec!["usage".to_owned(), "-".to_owned(), millis(AGE_OUT)],
            )
            .await?;
        match reply.as_slice() {
            [tpm, rpm, inflight] => Ok(SourceUsage {
                tpm_used: u64::try_from(*tpm).unwrap_or(0),
                rpm_used: u64::try_from(*rpm).unwrap_or(0),
                inflight: u64::try_from(*inflight).unwrap_or(0),
            }),
            other => Err(unexpected(other)),
        }
    }
}

impl BreakerStore for RedisBackend {
    /// # Cancel safety
    ///
    /// Atomic. A probe handed out to a dropped future is reclaimed after the probe lease.
    async fn try_acquire(
        &self,
        source: &str,
        policy: &BreakerPolicy,
    ) -> Result<BreakerDecision, BackendError> {
        let reply = self
            .breaker_script(
                source,
                vec!["acquire".to_owned(), millis(policy.probe_lease)],
            )
            .await?;
        match reply.as_slice() {
            [0] => Ok(BreakerDecision::Allow),
            [1, ms] => Ok(BreakerDecision::Reject {
                retry_after: wait(*ms),
            }),
            [2] => Ok(BreakerDecision::Reject { retry_after: None }),
            [3] => Ok(BreakerDecision::Probe),
            other => Err(unexpected(other)),
        }
    }

    /// # Cancel safety
    ///
    /// Atomic.
    async fn record(
        &self,
        source: &str,
        policy: &BreakerPolicy,
        outcome: BreakerOutcome,
        was_probe: bool,
    ) -> Result<bool, BackendError> {
        let mut args = vec!["record".to_owned(), millis(policy.probe_lease)];
        let [outcome, was_probe, failures, open, max_open, dead, _lease] =
            record_args(outcome, was_probe, policy);
        args.extend([outcome, was_probe, failures, open, max_open, dead]);
        let opened: i64 = self
            .breaker
            .evalsha_with_reload(self.pool.next(), vec![self.key(source, "b")], args)
            .await
            .map_err(|e| backend_error(&e))?;
        Ok(opened == 1)
    }

    /// # Cancel safety
    ///
    /// Reads only.
    async fn state(
        &self,
        source: &str,
        policy: &BreakerPolicy,
    ) -> Result<BreakerState, BackendError> {
        let reply = self
            .breaker_script(source, vec!["state".to_owned(), millis(policy.probe_lease)])
            .await?;
        match reply.as_slice() {
            [0] => Ok(BreakerState::Closed),
            [1, ms] => Ok(BreakerState::Open {
                remaining: wait(*ms).unwrap_or_default(),
            }),
            [2] => Ok(BreakerState::HalfOpen),
            other => Err(unexpected(other)),
        }
    }
}

impl CacheStore for RedisBackend {
    /// # Cancel safety
    ///
    /// Reads only.
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, BackendError> {
        let key = format!("{}:cache:{}:{key}", self.prefix, self.scope);
        self.pool
            .get::<Option<Vec<u8>>, _>(key)
            .await
            .map_err(|e| backend_error(&e))
    }

    /// # Cancel safety
    ///
    /// One `SET … PX`: stored or not.
    async fn put(&self, key: &str, value: Vec<u8>, ttl: Duration) -> Result<(), BackendError> {
        let key = format!("{}:cache:{}:{key}", self.prefix, self.scope);
        let px = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX).max(1);
        self.pool
            .set::<(), _, _>(key, value, Some(Expiration::PX(px)), None, false)
            .await
            .map_err(|e| backend_error(&e))
    }
}
