//! Micro-benchmarks of `Retry-After` parsing and HTTP classification:
//! `cargo bench -p polygateway-transports`.

#![allow(missing_docs)] // benchmark functions

use std::time::{Duration, SystemTime};

use hyper::HeaderMap;
use hyper::header::HeaderValue;
use polygateway_transports::{classify_status, parse_retry_after};

fn main() {
    divan::main();
}

fn headers(name: &'static str, value: &str) -> HeaderMap {
    let mut map = HeaderMap::new();
    map.insert(name, HeaderValue::from_str(value).expect("valid header"));
    map
}

#[divan::bench(args = ["2", "1.5", "Sun, 06 Nov 1994 08:49:37 GMT", "garbage"])]
fn retry_after(value: &str) -> Option<Duration> {
    let map = headers("retry-after", value);
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_700);
    parse_retry_after(divan::black_box(&map), "A", now)
}

#[divan::bench]
fn classify_openai_error_body() -> polygateway_errors::AttemptFailure {
    let body = br#"{"error": {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}}"#;
    classify_status(
        divan::black_box(429),
        divan::black_box(body),
        Some(Duration::from_secs(2)),
        None,
    )
}

#[divan::bench]
fn classify_bare_status() -> polygateway_errors::AttemptFailure {
    classify_status(divan::black_box(503), divan::black_box(b""), None, None)
}
