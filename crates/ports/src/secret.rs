use std::fmt;

/// A secret string (an API key, a password). It has no `Display`, its `Debug` prints
/// `Secret(<redacted>)`, and it does not implement `Serialize`, so it cannot reach a log line,
/// an error message or a telemetry row by accident. Read it only where it is sent, with
/// [`Secret::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Box<str>);

impl Secret {
    /// Wrap a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into().into_boxed_str())
    }

    /// The secret itself, for the one place that sends it (an `Authorization` header).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_value() {
        let secret = Secret::new("sk-live-123456");
        assert_eq!(format!("{secret:?}"), "Secret(<redacted>)");
        assert_eq!(format!("{:?}", Some(&secret)), "Some(Secret(<redacted>))");
        assert_eq!(secret.expose(), "sk-live-123456");
    }
}
