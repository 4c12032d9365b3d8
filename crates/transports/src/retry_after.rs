//! `Retry-After` (SPEC §8): delta-seconds (integer or decimal) and HTTP-date (RFC 9110
//! §10.2.3) are hints; `retry-after-ms` is honoured first where present.
//!
//! * Negative, empty and unparsable values are no hint, silently.
//! * `nan` is no hint, silently.
//! * `inf`, `-inf` and values that overflow (`1e999`, or finite seconds too large for a
//!   `Duration`) are no hint and log exactly one warning per response that names the source and
//!   the rule `retry_after_not_finite` — never the raw header, which is upstream-controlled.
//! * A date in the past is a negative delta: no hint.

use std::time::{Duration, SystemTime};

use hyper::HeaderMap;

/// The rule named in the warning for non-finite values.
pub const NOT_FINITE_RULE: &str = "retry_after_not_finite";

/// What one header value says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hint {
    /// A usable hint.
    After(Duration),
    /// No hint, nothing to say.
    None,
    /// No hint, and the value was non-finite or overflowed: worth one warning.
    NotFinite,
}

/// The retry hint in `headers` for a response from `source`, at wall-clock `now` (for
/// HTTP-dates).
pub fn parse_retry_after(headers: &HeaderMap, source: &str, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| headers.get(name).map(|v| v.to_str().unwrap_or("\u{fffd}"));
    let mut not_finite = false;
    let mut result = None;
    if let Some(ms) = header("retry-after-ms") {
        match parse_millis(ms) {
            Hint::After(d) => result = Some(d),
            Hint::NotFinite => not_finite = true,
            Hint::None => {}
        }
    }
    if result.is_none() {
        if let Some(value) = header("retry-after") {
            match parse_value(value, now) {
                Hint::After(d) => result = Some(d),
                Hint::NotFinite => not_finite = true,
                Hint::None => {}
            }
        }
    }
    if not_finite && result.is_none() {
        tracing::warn!(
            source,
            rule = NOT_FINITE_RULE,
            "ignored a non-finite Retry-After hint"
        );
    }
    result
}

/// `Retry-After`: delta-seconds or an HTTP-date.
fn parse_value(value: &str, now: SystemTime) -> Hint {
    let value = value.trim();
    if value.is_empty() {
        return Hint::None;
    }
    match value.parse::<f64>() {
        Ok(secs) => seconds(secs, 1.0),
        Err(_) => match httpdate::parse_http_date(value) {
            Ok(date) => date.duration_since(now).map_or(Hint::None, Hint::After),
            Err(_) => Hint::None,
        },
    }
}

/// `retry-after-ms`: milliseconds, integer or decimal.
fn parse_millis(value: &str) -> Hint {
    match value.trim().parse::<f64>() {
        Ok(ms) => seconds(ms, 1000.0),
        Err(_) => Hint::None,
    }
}

fn seconds(amount: f64, per_second: f64) -> Hint {
    if amount.is_nan() {
        return Hint::None;
    }
    if amount.is_infinite() {
        return Hint::NotFinite;
    }
    if amount < 0.0 {
        return Hint::None;
    }
    Duration::try_from_secs_f64(amount / per_second).map_or(Hint::NotFinite, Hint::After)
}

#[cfg(test)]
mod tests {
    use hyper::header::HeaderValue;

    use super::*;

    use crate::test_capture::Capture;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    /// 1994-11-06T08:49:37Z, the RFC's example date.
    const EXAMPLE_DATE: u64 = 784_111_777;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).expect("test header"));
        }
        map
    }

    #[test]
    fn every_form_per_the_table() {
        let now = at(EXAMPLE_DATE - 30);
        type Headers<'a> = &'a [(&'static str, &'a str)];
        let table: &[(Headers<'_>, Option<Duration>)] = &[
            (&[("retry-after", "2")], Some(Duration::from_secs(2))),
            (&[("retry-after", " 7 ")], Some(Duration::from_secs(7))),
            (&[("retry-after", "1.5")], Some(Duration::from_millis(1500))),
            (&[("retry-after", "0")], Some(Duration::ZERO)),
            (
                &[("retry-after", "Sun, 06 Nov 1994 08:49:37 GMT")],
                Some(Duration::from_secs(30)),
            ),
            (
                &[("retry-after", "Sunday, 06-Nov-94 08:49:37 GMT")],
                Some(Duration::from_secs(30)),
            ),
            (
                &[("retry-after", "Sun Nov  6 08:49:37 1994")],
                Some(Duration::from_secs(30)),
            ),
            (
                &[("retry-after-ms", "250")],
                Some(Duration::from_millis(250)),
            ),
            (
                &[("retry-after-ms", "12.5")],
                Some(Duration::from_micros(12_500)),
            ),
            (
                &[("retry-after-ms", "250"), ("retry-after", "9")],
                Some(Duration::from_millis(250)),
            ),
            (
                &[("retry-after-ms", "junk"), ("retry-after", "9")],
                Some(Duration::from_secs(9)),
            ),
            (&[("retry-after", "-1")], None),
            (&[("retry-after", "")], None),
            (&[("retry-after", "soon")], None),
            (&[("retry-after", "12abc")], None),
            (&[("retry-after", "Sun, 06 Nov 1994 08:49:00 GMT")], None), // in the past
            (&[("retry-after", "nan")], None),
            (&[("retry-after", "inf")], None),
            (&[("retry-after", "-inf")], None),
            (&[("retry-after", "1e999")], None),
            (&[("retry-after-ms", "inf")], None),
            (&[], None),
        ];
        for (pairs, expected) in table {
            assert_eq!(
                parse_retry_after(&headers(pairs), "A", now),
                *expected,
                "{pairs:?}"
            );
        }
    }

    fn logs_for(pairs: &[(&'static str, &str)]) -> Vec<String> {
        let capture = Capture::default();
        tracing::subscriber::with_default(capture.clone(), || {
            parse_retry_after(&headers(pairs), "DEEPSEEK", at(EXAMPLE_DATE));
        });
        capture.lines()
    }

    #[test]
    fn non_finite_values_warn_once_naming_source_and_rule_never_the_value() {
        for raw in ["inf", "-inf", "1e999", "Infinity", "1e300"] {
            let logs = logs_for(&[("retry-after", raw)]);
            assert_eq!(logs.len(), 1, "{raw}: {logs:?}");
            let line = &logs[0];
            assert!(line.starts_with("WARN "), "{line}");
            assert!(line.contains("source=\"DEEPSEEK\""), "{line}");
            assert!(line.contains("rule=\"retry_after_not_finite\""), "{line}");
            assert!(!line.contains(raw), "raw header {raw} in {line}");
        }
        // Both headers non-finite: still one warning for the response.
        assert_eq!(
            logs_for(&[("retry-after", "inf"), ("retry-after-ms", "inf")]).len(),
            1
        );
    }

    #[test]
    fn nan_negative_empty_and_garbage_log_nothing() {
        for raw in ["nan", "NaN", "-1", "", "later", "-0.5"] {
            assert_eq!(
                logs_for(&[("retry-after", raw)]),
                Vec::<String>::new(),
                "{raw}"
            );
        }
    }
}
