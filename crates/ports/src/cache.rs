use std::future::Future;
use std::time::Duration;

use crate::BackendError;

/// Stores successful, deterministic results by key (SPEC §11). A failure here degrades to a
/// warning and never fails a call.
///
/// Cancel safety: dropping a `get` loses nothing; dropping a `put` may or may not store.
pub trait CacheStore: Send + Sync + 'static {
    /// The value stored under `key`, if present and not expired.
    fn get(&self, key: &str) -> impl Future<Output = Result<Option<Vec<u8>>, BackendError>> + Send;

    /// Store `value` under `key` for `ttl`.
    fn put(
        &self,
        key: &str,
        value: Vec<u8>,
        ttl: Duration,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;
}
