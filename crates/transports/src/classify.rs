//! Classification of HTTP outcomes into the four attempt kinds (SPEC §4), and redaction of
//! what upstreams say before it becomes a message.

use std::time::Duration;

use polygateway_errors::{AttemptFailure, FailureKind};
use polygateway_ports::Secret;
use serde_json::Value;

/// Longest upstream message kept, in characters.
const MAX_MESSAGE_CHARS: usize = 300;

/// Classify a non-2xx response from its status and body.
///
/// The body's OpenAI error fields (`error.code`, `error.type`) win over the status where they
/// are specific: `insufficient_quota` is `SourceDead` even on a 429 (the key has no money, not
/// a rate problem), `rate_limit_exceeded` is `Transient`, `context_length_exceeded` and content
/// policy are `RequestRejected`, an invalid key or unknown model is `SourceDead`. Otherwise:
///
/// | status | kind |
/// | --- | --- |
/// | 401, 402, 403, 404, 410, 3xx | `SourceDead` (bad key, no money, no such model or URL) |
/// | 408, 409, 425, 429, 5xx, 1xx | `Transient` (with `Retry-After` when given) |
/// | 400, 413, 422 and other 4xx | `RequestRejected` |
pub fn classify_status(
    status: u16,
    body: &[u8],
    retry_after: Option<Duration>,
    api_key: Option<&Secret>,
) -> AttemptFailure {
    let detail = ErrorDetail::parse(body);
    let message = redact(&detail.message(status), api_key);
    let by_code = detail.codes().find_map(|code| match code {
        "insufficient_quota" | "billing_hard_limit_reached" => {
            Some((FailureKind::SourceDead, "insufficient_quota"))
        }
        "invalid_api_key" => Some((FailureKind::SourceDead, "invalid_api_key")),
        "model_not_found" => Some((FailureKind::SourceDead, "model_not_found")),
        "rate_limit_exceeded" => Some((FailureKind::Transient, "rate_limited")),
        "context_length_exceeded" => {
            Some((FailureKind::RequestRejected, "context_length_exceeded"))
        }
        "content_policy_violation" | "content_filter" => {
            Some((FailureKind::RequestRejected, "content_policy"))
        }
        _ => None,
    });
    let (kind, code) = by_code.unwrap_or(match status {
        429 => (FailureKind::Transient, "rate_limited"),
        408 | 409 | 425 => (FailureKind::Transient, "http_status"),
        500..=599 | 100..=199 => (FailureKind::Transient, "server_error"),
        401 | 403 => (FailureKind::SourceDead, "unauthorized"),
        402 => (FailureKind::SourceDead, "payment_required"),
        404 | 410 => (FailureKind::SourceDead, "not_found"),
        300..=399 => (FailureKind::SourceDead, "redirect"),
        _ => (FailureKind::RequestRejected, "http_status"),
    });
    let failure = AttemptFailure::new(kind, code, message).with_status(status);
    if kind == FailureKind::Transient {
        failure.with_retry_after(retry_after)
    } else {
        failure
    }
}

/// The fields of an error body, in the shapes upstreams use: OpenAI's
/// `{"error": {"message", "type", "code"}}`, FastAPI's `{"detail": …}`, a plain
/// `{"message": …}`, or text.
struct ErrorDetail {
    message: Option<String>,
    kind: Option<String>,
    code: Option<String>,
}

impl ErrorDetail {
    fn parse(body: &[u8]) -> ErrorDetail {
        let text = String::from_utf8_lossy(body);
        let Ok(value) = serde_json::from_slice::<Value>(body) else {
            let text = text.trim();
            return ErrorDetail {
                message: (!text.is_empty()).then(|| text.to_owned()),
                kind: None,
                code: None,
            };
        };
        let error = value.get("error").unwrap_or(&value);
        let string = |v: Option<&Value>| match v {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            Some(Value::Null) | None => None,
            Some(other) => Some(other.to_string()),
        };
        ErrorDetail {
            message: string(error.get("message").or_else(|| value.get("detail")))
                .or_else(|| error.as_str().map(str::to_owned)),
            kind: string(error.get("type")),
            code: string(error.get("code")),
        }
    }

    fn codes(&self) -> impl Iterator<Item = &str> {
        self.code.as_deref().into_iter().chain(self.kind.as_deref())
    }

    fn message(&self, status: u16) -> String {
        match &self.message {
            Some(message) => format!("HTTP {status}: {message}"),
            None => format!("HTTP {status} with no error message"),
        }
    }
}

/// Make an upstream message safe to show: the exact API key, and anything shaped like an
/// OpenAI-style key (`sk-…`), become `<redacted>`; the text is cut to a few hundred characters
/// and control characters become spaces.
pub fn redact(message: &str, api_key: Option<&Secret>) -> String {
    let mut text = message.to_owned();
    if let Some(key) = api_key.map(Secret::expose).filter(|k| !k.is_empty()) {
        text = text.replace(key, "<redacted>");
    }
    let mut out = String::with_capacity(text.len().min(MAX_MESSAGE_CHARS));
    let mut rest = text.as_str();
    while let Some(start) = rest.find("sk-") {
        out.push_str(&rest[..start]);
        let token_len = rest[start..]
            .find(|c: char| {
                !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '*' || c == '.')
            })
            .unwrap_or(rest.len() - start);
        if token_len >= 8 {
            out.push_str("<redacted>");
        } else {
            out.push_str(&rest[start..start + token_len]);
        }
        rest = &rest[start + token_len..];
    }
    out.push_str(rest);
    let mut shortened: String = out
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_MESSAGE_CHARS)
        .collect();
    if out.chars().count() > MAX_MESSAGE_CHARS {
        shortened.push('…');
    }
    shortened
}

#[cfg(test)]
mod tests {
    use super::*;

    fn openai(code: &str, kind: &str) -> Vec<u8> {
        format!(r#"{{"error": {{"message": "m", "type": "{kind}", "code": "{code}"}}}}"#)
            .into_bytes()
    }

    #[test]
    fn statuses_map_to_kinds() {
        let table = [
            (400, FailureKind::RequestRejected),
            (401, FailureKind::SourceDead),
            (402, FailureKind::SourceDead),
            (403, FailureKind::SourceDead),
            (404, FailureKind::SourceDead),
            (408, FailureKind::Transient),
            (409, FailureKind::Transient),
            (413, FailureKind::RequestRejected),
            (422, FailureKind::RequestRejected),
            (429, FailureKind::Transient),
            (500, FailureKind::Transient),
            (502, FailureKind::Transient),
            (503, FailureKind::Transient),
            (302, FailureKind::SourceDead),
        ];
        for (status, kind) in table {
            let failure = classify_status(status, b"", None, None);
            assert_eq!(failure.kind(), kind, "{status}");
            assert_eq!(failure.status(), Some(status));
        }
    }

    #[test]
    fn openai_error_codes_win_over_the_status() {
        let cases = [
            (
                429,
                openai("insufficient_quota", "insufficient_quota"),
                FailureKind::SourceDead,
                "insufficient_quota",
            ),
            (
                400,
                openai("context_length_exceeded", "invalid_request_error"),
                FailureKind::RequestRejected,
                "context_length_exceeded",
            ),
            (
                429,
                openai("rate_limit_exceeded", "requests"),
                FailureKind::Transient,
                "rate_limited",
            ),
            (
                400,
                openai("content_policy_violation", "invalid_request_error"),
                FailureKind::RequestRejected,
                "content_policy",
            ),
            (
                401,
                openai("invalid_api_key", "invalid_request_error"),
                FailureKind::SourceDead,
                "invalid_api_key",
            ),
            (
                404,
                openai("model_not_found", "invalid_request_error"),
                FailureKind::SourceDead,
                "model_not_found",
            ),
            (
                429,
                br#"{"error": {"message": "x", "type": "insufficient_quota", "code": null}}"#
                    .to_vec(),
                FailureKind::SourceDead,
                "insufficient_quota",
            ),
        ];
        for (status, body, kind, code) in cases {
            let failure = classify_status(status, &body, Some(Duration::from_secs(1)), None);
            assert_eq!(
                (failure.kind(), failure.code()),
                (kind, code),
                "{}",
                String::from_utf8_lossy(&body)
            );
        }
    }

    #[test]
    fn only_transient_failures_keep_the_retry_hint() {
        let hint = Some(Duration::from_secs(4));
        assert_eq!(classify_status(429, b"", hint, None).retry_after(), hint);
        assert_eq!(classify_status(503, b"", hint, None).retry_after(), hint);
        assert_eq!(
            classify_status(429, &openai("insufficient_quota", "x"), hint, None).retry_after(),
            None
        );
    }

    #[test]
    fn messages_come_from_every_body_shape() {
        assert_eq!(
            classify_status(400, br#"{"detail": "bad file"}"#, None, None).message(),
            "HTTP 400: bad file"
        );
        assert_eq!(
            classify_status(500, b"upstream exploded", None, None).message(),
            "HTTP 500: upstream exploded"
        );
        assert_eq!(
            classify_status(500, b"", None, None).message(),
            "HTTP 500 with no error message"
        );
        assert_eq!(
            classify_status(400, br#"{"error": "plain"}"#, None, None).message(),
            "HTTP 400: plain"
        );
    }

    #[test]
    fn keys_are_redacted_from_upstream_messages() {
        let key = Secret::new("my-custom-key-123");
        let body = br#"{"error": {"message": "Incorrect API key provided: my-custom-key-123; also sk-proj-abcdefgh1234", "code": "invalid_api_key"}}"#;
        let failure = classify_status(401, body, None, Some(&key));
        assert_eq!(
            failure.message(),
            "HTTP 401: Incorrect API key provided: <redacted>; also <redacted>"
        );
        assert_eq!(redact("sk-ab is short", None), "sk-ab is short");
        let long = "x".repeat(1000);
        assert_eq!(redact(&long, None).chars().count(), MAX_MESSAGE_CHARS + 1);
        assert_eq!(redact("a\nb", None), "a b");
    }
}
