//! One request/response exchange under the attempt timeout, with every failure classified:
//! the part the OpenAI-compatible and MonkeyOCR transports share.

use std::time::SystemTime;

use bytes::Bytes;
use polygateway_errors::{AttemptFailure, FailureKind};
use polygateway_ports::SourceSpec;

use crate::classify::classify_status;
use crate::http::{BodyError, HttpClient, read_capped};
use crate::retry_after::parse_retry_after;

/// A 2xx response, read whole.
pub(crate) struct Success {
    pub(crate) body: Bytes,
    /// Whether the upstream said the body is JSON.
    pub(crate) json_content_type: bool,
}

/// `POST` `body` to `url` for `source`, bounded by `source.timeout` from the first byte sent
/// to the last byte read. Non-2xx statuses, connection failures, timeouts, truncated and
/// oversized bodies come back as classified failures.
pub(crate) async fn exchange(
    http: &HttpClient,
    source: &SourceSpec,
    url: &str,
    content_type: &str,
    body: Bytes,
) -> Result<Success, AttemptFailure> {
    let attempt = async {
        let response = http
            .send(url, content_type, source.api_key.as_ref(), body)
            .await?;
        let status = response.status();
        let json_content_type = response
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("json"));
        let retry_after = if status.is_success() {
            None
        } else {
            parse_retry_after(response.headers(), &source.name, SystemTime::now())
        };
        let status = status.as_u16();
        match read_capped(response, http.max_response_bytes()).await {
            Ok(body) if (200..300).contains(&status) => Ok(Success {
                body,
                json_content_type,
            }),
            Ok(body) => Err(classify_status(
                status,
                &body,
                retry_after,
                source.api_key.as_ref(),
            )),
            Err(BodyError::TooLarge { cap }) if (200..300).contains(&status) => {
                Err(AttemptFailure::new(
                    FailureKind::ResultInvalid,
                    "body_too_large",
                    format!("response body larger than the {cap}-byte cap"),
                )
                .with_status(status))
            }
            // An error status with an oversized body: the status says enough.
            Err(BodyError::TooLarge { .. }) => Err(classify_status(
                status,
                b"",
                retry_after,
                source.api_key.as_ref(),
            )),
            Err(BodyError::Truncated(why)) => Err(AttemptFailure::new(
                FailureKind::Transient,
                "truncated_body",
                format!("the connection failed before the body was complete: {why}"),
            )
            .with_status(status)),
        }
    };
    match tokio::time::timeout(source.timeout, attempt).await {
        Ok(result) => result,
        Err(_) => Err(AttemptFailure::new(
            FailureKind::Transient,
            "timeout",
            format!(
                "no complete answer within the attempt timeout of {:?}",
                source.timeout
            ),
        )),
    }
}

/// The failure for a 2xx body that is not the JSON we need.
pub(crate) fn unusable(
    success: &Success,
    code: &'static str,
    why: impl Into<String>,
) -> AttemptFailure {
    let why = why.into();
    let (code, why) = if success.json_content_type {
        (code, why)
    } else {
        (
            "bad_content_type",
            format!("{why} (content type is not JSON)"),
        )
    };
    AttemptFailure::new(FailureKind::ResultInvalid, code, why).with_status(200)
}
