//! The PolyGateway error taxonomy (SPEC §4).
//!
//! Two layers live here and nowhere else:
//!
//! * [`AttemptFailure`] with its [`FailureKind`] — the classification of one failed attempt
//!   against one source, in exactly four kinds. The pipeline decides with it (fail over, back
//!   off, stop); callers see it only inside [`Unavailable::sources`].
//! * [`GatewayError`] — the one error a caller receives from a logical call. It is small,
//!   `#[non_exhaustive]`, and answers questions through methods ([`GatewayError::kind`],
//!   [`GatewayError::scope`], [`GatewayError::retry_after`]) so callers need not match internals.
//!
//! **Invariant:** this crate depends on no other workspace crate and knows nothing of HTTP,
//! Redis or tokio. No message produced here contains a secret: configuration values that are
//! secrets are carried as [`ConfigValue::Secret`] and never printed.

mod attempt;
mod config;
mod gateway;
mod scope;

pub use attempt::{AttemptFailure, FailureKind};
pub use config::{ConfigError, ConfigValue};
pub use gateway::{
    DeadlineExceeded, ErrorKind, GatewayError, Invalid, Rejected, SourceFailure, Unavailable,
    UnavailableReason,
};
pub use scope::{ParseScopeError, Scope};
