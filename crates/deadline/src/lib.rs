//! The call deadline (SPEC §9): validation of deadline values and the one wall-clock boundary
//! that wraps a logical call.
//!
//! * [`CallDeadline`] can only hold a valid value: finite and greater than zero. Building one
//!   from seconds ([`CallDeadline::from_secs_f64`], [`CallDeadline::parse_secs`]) or from a
//!   [`Duration`] ([`CallDeadline::new`]) names the origin of the value — the configuration key
//!   that was read, or the parameter it came from — in the [`ConfigError`].
//! * [`with_call_deadline`] is the boundary. The facade wraps each logical call in it exactly
//!   once; nothing inside the pipeline creates a second call-level deadline.
//!
//! **Invariant:** this crate depends only on `polygateway-errors` and tokio's timer. It uses
//! the runtime's monotonic clock (tokio's `Instant`), never an injectable clock, so a test
//! clock that drives telemetry timestamps cannot move a deadline.

use std::future::Future;
use std::time::Duration;

use polygateway_errors::{ConfigError, DeadlineExceeded, GatewayError, Scope};

/// What a duration value must be, as said in every error about one.
pub const DURATION_EXPECTATION: &str = "expected a finite number of seconds greater than 0";

/// The longest duration any setting may hold: a year. Longer values are refused rather than
/// left to overflow a clock (`Instant + Duration`) somewhere later.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// Check a duration given in code: not zero, not above [`MAX_DURATION`]. `origin` names the
/// parameter in the error.
pub fn validate_duration(duration: Duration, origin: &str) -> Result<Duration, ConfigError> {
    if duration.is_zero() {
        return Err(ConfigError::invalid(
            origin,
            format!("{duration:?}"),
            DURATION_EXPECTATION,
        ));
    }
    if duration > MAX_DURATION {
        return Err(ConfigError::invalid(
            origin,
            format!("{duration:?}"),
            TOO_LONG,
        ));
    }
    Ok(duration)
}

const TOO_LONG: &str = "longer than a year; expected at most 31536000 seconds";

/// Check that `secs` is a usable duration: finite, greater than zero and representable.
/// `origin` is the key or parameter the value came from; it is named in the error.
///
/// This is the one rule for every duration setting (deadlines, timeouts, windows), so a bad
/// value is refused the same way wherever it is written.
///
/// ```
/// use std::time::Duration;
/// use polygateway_deadline::validate_secs;
///
/// assert_eq!(validate_secs(1.5, "LLM__TIMEOUT_S").unwrap(), Duration::from_millis(1500));
/// let error = validate_secs(f64::NAN, "LLM__TIMEOUT_S").unwrap_err();
/// assert_eq!(error.key(), "LLM__TIMEOUT_S");
/// ```
pub fn validate_secs(secs: f64, origin: &str) -> Result<Duration, ConfigError> {
    if !secs.is_finite() || secs <= 0.0 {
        return Err(ConfigError::invalid(
            origin,
            secs.to_string(),
            DURATION_EXPECTATION,
        ));
    }
    match Duration::try_from_secs_f64(secs) {
        Ok(d) if d.is_zero() => Err(ConfigError::invalid(
            origin,
            secs.to_string(),
            DURATION_EXPECTATION,
        )),
        Ok(d) if d <= MAX_DURATION => Ok(d),
        _ => Err(ConfigError::invalid(origin, secs.to_string(), TOO_LONG)),
    }
}

/// Parse `text` as seconds (integer or decimal) and [`validate_secs`] it. The error shows the
/// text as read, so `abc`, `inf` and `nan` appear exactly as the user wrote them.
pub fn parse_secs(text: &str, origin: &str) -> Result<Duration, ConfigError> {
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| ConfigError::invalid(origin, text, DURATION_EXPECTATION))?;
    validate_secs(secs, origin).map_err(|e| ConfigError::invalid(origin, text, e.problem()))
}

/// A validated call deadline: a wall-clock bound on one logical call, finite and > 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct CallDeadline(Duration);

impl CallDeadline {
    /// A deadline of `duration`; zero and more than a year are refused with an error naming
    /// `origin`.
    pub fn new(duration: Duration, origin: &str) -> Result<Self, ConfigError> {
        validate_duration(duration, origin).map(CallDeadline)
    }

    /// A deadline of `secs` seconds; zero, negative, NaN and ±infinity are refused with an
    /// error naming `origin`.
    pub fn from_secs_f64(secs: f64, origin: &str) -> Result<Self, ConfigError> {
        validate_secs(secs, origin).map(CallDeadline)
    }

    /// A deadline from text as found in the environment (`"2.5"`); anything that is not a
    /// finite positive number is refused with an error naming `origin` and the text.
    pub fn parse_secs(text: &str, origin: &str) -> Result<Self, ConfigError> {
        parse_secs(text, origin).map(CallDeadline)
    }

    /// The bound.
    pub fn duration(self) -> Duration {
        self.0
    }
}

/// Run `call` within `deadline`.
///
/// * `None`: `call` is awaited directly — no timer is created, the code path is the one
///   without the feature (SPEC §9).
/// * `Some(d)`: if `call` has not finished when `d` has passed on the runtime's monotonic
///   clock, `call` is dropped (cancelling whatever it was doing; its drop guards hand any
///   settlement to the background settler) and `CallDeadlineExceeded { scope, deadline }` is
///   returned at once, without waiting for cleanup. A call that completes at the same poll the
///   deadline fires wins. An error `call` produces itself — including its own attempt timeout —
///   passes through unchanged: only this boundary's timer produces `CallDeadlineExceeded`.
///
/// # Cancel safety
///
/// Dropping the returned future drops `call` with it; nothing else is left running.
///
/// # Panics
///
/// With `Some(_)`, panics if called outside a tokio runtime with the time driver enabled.
///
/// ```
/// use std::time::Duration;
/// use polygateway_deadline::{CallDeadline, with_call_deadline};
/// use polygateway_errors::{ErrorKind, GatewayError, Scope};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), GatewayError> {
/// let deadline = CallDeadline::from_secs_f64(0.5, "LLM__CALL_DEADLINE_S")?;
/// let slow = async {
///     tokio::time::sleep(Duration::from_secs(5)).await;
///     Ok::<_, GatewayError>("late")
/// };
/// let error = with_call_deadline(Scope::Llm, Some(deadline), slow).await.unwrap_err();
/// assert_eq!(error.kind(), ErrorKind::CallDeadlineExceeded);
/// # Ok(())
/// # }
/// ```
pub async fn with_call_deadline<T, F>(
    scope: Scope,
    deadline: Option<CallDeadline>,
    call: F,
) -> Result<T, GatewayError>
where
    F: Future<Output = Result<T, GatewayError>>,
{
    match deadline {
        None => call.await,
        Some(CallDeadline(duration)) => match tokio::time::timeout(duration, call).await {
            Ok(result) => result,
            Err(_elapsed) => Err(DeadlineExceeded::new(scope, duration).into()),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use polygateway_errors::{AttemptFailure, ErrorKind, FailureKind, Unavailable};
    use polygateway_errors::{ConfigValue, UnavailableReason};
    use tokio::sync::oneshot;

    use super::*;

    const KEY: &str = "LLM__CALL_DEADLINE_S";

    fn secs(s: f64) -> Option<CallDeadline> {
        Some(CallDeadline::from_secs_f64(s, KEY).expect("valid test deadline"))
    }

    #[tokio::test(start_paused = true)]
    async fn expiry_gives_call_deadline_exceeded_with_scope_and_deadline() {
        let started = tokio::time::Instant::now();
        let error = with_call_deadline(Scope::Embedding, secs(2.0), async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok::<_, GatewayError>(())
        })
        .await
        .unwrap_err();
        assert_eq!(
            error,
            GatewayError::from(DeadlineExceeded::new(
                Scope::Embedding,
                Duration::from_secs(2)
            ))
        );
        assert_eq!(error.retry_after(), None);
        assert_eq!(started.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn inner_timeout_error_passes_through_unchanged() {
        // The attempt's own timeout (1 s) fires inside a 10 s deadline: the caller must see
        // the inner error, not CallDeadlineExceeded.
        let inner = GatewayError::from(
            Unavailable::new(Scope::Llm, UnavailableReason::AttemptsExhausted).with_sources(vec![
                polygateway_errors::SourceFailure {
                    source: "a".into(),
                    failure: AttemptFailure::new(FailureKind::Transient, "timeout", "1s"),
                },
            ]),
        );
        let expected = inner.clone();
        let result = with_call_deadline(Scope::Llm, secs(10.0), async move {
            match tokio::time::timeout(Duration::from_secs(1), std::future::pending::<()>()).await {
                Ok(()) => Ok(()),
                Err(_) => Err(inner),
            }
        })
        .await;
        assert_eq!(result, Err(expected));
    }

    #[tokio::test(start_paused = true)]
    async fn inner_timeout_firing_at_the_deadline_instant_is_still_the_inner_error() {
        // Same instant for both timers: the inner future is polled first and finishes, so the
        // caller sees what the call produced, never a relabelled deadline.
        let result = with_call_deadline(Scope::Llm, secs(1.0), async {
            match tokio::time::timeout(Duration::from_secs(1), std::future::pending::<()>()).await {
                Ok(()) => Ok("finished"),
                Err(_) => Ok("inner timeout"),
            }
        })
        .await;
        assert_eq!(result, Ok("inner timeout"));
    }

    struct SignalOnDrop(Option<oneshot::Sender<()>>);
    impl Drop for SignalOnDrop {
        fn drop(&mut self) {
            if let Some(tx) = self.0.take() {
                let _ = tx.send(());
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_the_outer_future_cancels_the_inner_one() {
        let (entered_tx, entered_rx) = oneshot::channel();
        let (dropped_tx, dropped_rx) = oneshot::channel();
        let outer = tokio::spawn(with_call_deadline(Scope::Llm, secs(60.0), async move {
            let _guard = SignalOnDrop(Some(dropped_tx));
            entered_tx.send(()).expect("test receiver alive");
            std::future::pending::<Result<(), GatewayError>>().await
        }));
        entered_rx.await.expect("inner future entered");
        outer.abort();
        dropped_rx
            .await
            .expect("inner future was dropped when the outer one was");
        assert!(outer.await.unwrap_err().is_cancelled());
    }

    #[tokio::test(start_paused = true)]
    async fn expiry_drops_the_inner_future_before_returning() {
        let (dropped_tx, mut dropped_rx) = oneshot::channel();
        let error = with_call_deadline(Scope::Ocr, secs(1.0), async move {
            let _guard = SignalOnDrop(Some(dropped_tx));
            std::future::pending::<Result<(), GatewayError>>().await
        })
        .await
        .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::CallDeadlineExceeded);
        assert_eq!(dropped_rx.try_recv(), Ok(()));
    }

    #[tokio::test(start_paused = true)]
    async fn completion_just_before_the_deadline_returns_normally() {
        let result = with_call_deadline(Scope::Llm, secs(1.0), async {
            tokio::time::sleep(Duration::from_millis(999)).await;
            Ok::<_, GatewayError>(42)
        })
        .await;
        assert_eq!(result, Ok(42));
    }

    #[test]
    fn none_awaits_directly_without_a_timer() {
        // A runtime without the time driver panics the moment a timer is created, so this
        // passing proves the `None` path creates none, even for a future that takes long.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let result = runtime.block_on(with_call_deadline(Scope::Llm, None, async {
            tokio::task::yield_now().await;
            Ok::<_, GatewayError>("direct")
        }));
        assert_eq!(result, Ok("direct"));
    }

    #[test]
    fn some_deadline_does_use_a_timer() {
        // The converse of the test above, so that it cannot pass vacuously.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            runtime.block_on(with_call_deadline(Scope::Llm, secs(1.0), async {
                Ok::<_, GatewayError>(())
            }))
        }));
        assert!(panicked.is_err());
    }

    #[tokio::test]
    async fn invalid_values_are_rejected_before_the_call_is_polled() {
        for value in [0.0, -0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let polled = Arc::new(AtomicBool::new(false));
            let flag = polled.clone();
            let call = async move {
                flag.store(true, Ordering::SeqCst);
                Ok::<_, GatewayError>(())
            };
            let result: Result<(), GatewayError> = async {
                let deadline = CallDeadline::from_secs_f64(value, KEY)?;
                with_call_deadline(Scope::Llm, Some(deadline), call).await
            }
            .await;
            let error = result.expect_err("invalid deadline must be refused");
            let GatewayError::Config(config) = error else {
                panic!("expected Config, got {error:?}");
            };
            assert_eq!(config.key(), KEY);
            assert_eq!(config.value(), &ConfigValue::Shown(value.to_string()));
            assert_eq!(config.problem(), DURATION_EXPECTATION);
            assert!(!polled.load(Ordering::SeqCst), "{value}: call was polled");
        }
    }

    #[test]
    fn parse_names_origin_and_the_text_as_written() {
        for text in [
            "0", "-1", "nan", "inf", "-inf", "infinity", "1e999", "abc", "",
        ] {
            let error = CallDeadline::parse_secs(text, KEY).expect_err(text);
            assert_eq!(error.key(), KEY);
            assert_eq!(
                error.value(),
                &ConfigValue::Shown(text.to_owned()),
                "{text}"
            );
            assert!(error.to_string().contains(KEY));
        }
        assert_eq!(
            CallDeadline::parse_secs(" 2.5 ", KEY).map(CallDeadline::duration),
            Ok(Duration::from_millis(2500))
        );
    }

    #[test]
    fn zero_duration_from_code_is_refused_with_the_parameter_name() {
        let origin = "GatewayClient::chat(call_deadline)";
        let error = CallDeadline::new(Duration::ZERO, origin).unwrap_err();
        assert_eq!(error.key(), origin);
        assert!(CallDeadline::new(Duration::from_nanos(1), origin).is_ok());
    }

    #[test]
    fn huge_finite_values_are_refused_not_panicking() {
        for secs in [1e300, 1e19, 31_536_001.0] {
            let error = validate_secs(secs, KEY).unwrap_err();
            assert_eq!(error.problem(), TOO_LONG, "{secs}");
        }
        assert!(validate_secs(31_536_000.0, KEY).is_ok());
        let error = CallDeadline::new(Duration::MAX, "GatewayClient::chat_with(call_deadline)")
            .unwrap_err();
        assert_eq!(error.problem(), TOO_LONG);
    }

    #[test]
    fn values_that_round_to_zero_are_refused() {
        let error = validate_secs(1e-12, "--deadline").unwrap_err();
        assert_eq!(
            (error.key(), error.problem()),
            ("--deadline", DURATION_EXPECTATION)
        );
    }
}
