//! The MonkeyOCR transport against the mock upstream over loopback; the mock parses every
//! upload with a strict multipart parser.

use std::time::Duration;

use polygateway_errors::FailureKind;
use polygateway_mock::{Behaviour, MockUpstream, Route, Scenario, Script};
use polygateway_ports::{Limits, OcrRequest, OcrReturnType, OcrTransport, SourceKind, SourceSpec};
use polygateway_transports::{HttpClient, HttpConfig, MonkeyOcrTransport};

fn source(base_url: String) -> SourceSpec {
    SourceSpec {
        name: "OCR1".into(),
        kind: SourceKind::MonkeyOcr,
        base_url,
        api_key: None,
        model: String::new(),
        limits: Limits::default(),
        est_tokens: 0,
        timeout: Duration::from_secs(5),
        priority: 0,
        weight: 1,
        max_batch: 1,
        min_interval: Duration::ZERO,
    }
}

fn png() -> OcrRequest {
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.extend_from_slice(&[0u8, 1, 2, 3, b'-', b'-', b'\r', b'\n']);
    OcrRequest {
        bytes,
        filename: "page \"1\".png".into(),
        content_type: "image/png",
    }
}

async fn mock(scenario: Scenario) -> (MockUpstream, SourceSpec, MonkeyOcrTransport) {
    let mock = MockUpstream::start(scenario).await.expect("mock");
    let spec = source(mock.ocr_base_url("OCR1"));
    (
        mock,
        spec,
        MonkeyOcrTransport::new(HttpClient::new(&HttpConfig::default())),
    )
}

#[tokio::test]
async fn recognize_text_uploads_a_strictly_valid_multipart_body() {
    let (mock, spec, transport) = mock(Scenario::default()).await;
    let text = transport
        .recognize_text(&spec, &png())
        .await
        .expect("success");
    assert_eq!(text.content, "text of page %221%22.png (16 bytes)");
    assert_eq!(text.task_type, "text");
    assert_eq!(mock.counters().requests("OCR1", Route::OcrText), 1);
    assert_eq!(mock.counters().multipart_rejected, 0);
}

#[tokio::test]
async fn parse_layout_asks_for_the_return_type() {
    let (mock, spec, transport) = mock(Scenario::default()).await;
    let markdown = transport
        .parse_layout(&spec, &png(), OcrReturnType::Markdown)
        .await
        .expect("success");
    assert_eq!(markdown.content_type.as_deref(), Some("markdown"));
    assert!(
        markdown
            .content
            .as_str()
            .is_some_and(|c| c.starts_with("# page")),
        "{:?}",
        markdown.content
    );
    let json = transport
        .parse_layout(&spec, &png(), OcrReturnType::Json)
        .await
        .expect("success");
    assert_eq!(json.content_type.as_deref(), Some("json"));
    assert!(json.content.is_array());
    assert_eq!(mock.counters().requests("OCR1", Route::Parse), 2);
}

#[tokio::test]
async fn success_false_is_result_invalid_with_the_service_message() {
    let failure_step = Behaviour::OcrFailure {
        message: "unsupported page size".into(),
    };
    let (_mock, spec, transport) =
        mock(Scenario::default().with_rule(None, None, Script::always(failure_step))).await;
    let failure = transport.recognize_text(&spec, &png()).await.unwrap_err();
    assert_eq!(
        (failure.kind(), failure.code()),
        (FailureKind::ResultInvalid, "ocr_failed")
    );
    assert_eq!(
        failure.message(),
        "the OCR service reported failure: unsupported page size"
    );
}

#[tokio::test]
async fn ocr_errors_are_classified_like_any_other() {
    for (step, kind, code) in [
        (
            Behaviour::status(503),
            FailureKind::Transient,
            "server_error",
        ),
        (
            Behaviour::status(400),
            FailureKind::RequestRejected,
            "http_status",
        ),
        (
            Behaviour::MissingFields { usage: None },
            FailureKind::ResultInvalid,
            "missing_success",
        ),
        (Behaviour::Malformed, FailureKind::ResultInvalid, "bad_json"),
    ] {
        let (_mock, spec, transport) =
            mock(Scenario::default().with_rule(None, None, Script::always(step))).await;
        let failure = transport.recognize_text(&spec, &png()).await.unwrap_err();
        assert_eq!((failure.kind(), failure.code()), (kind, code));
    }
}
