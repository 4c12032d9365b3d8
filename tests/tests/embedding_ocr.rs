//! Embeddings and OCR on the shared pipeline, against the mock upstream over loopback:
//! batch order, one deadline over all batches, S6 and S7 settlement, cancellation, input
//! validation.

use std::sync::Arc;
use std::time::Duration;

use polygateway::config::{GatewaySettings, SourceSettings};
use polygateway::{
    CallOptions, EmbeddingClient, ErrorKind, GatewayError, ManualClock, OcrClient, OcrOptions,
    OcrReturnType, Scope,
};
use polygateway_mock::{Behaviour, Latency, MockUpstream, Route, Scenario, Script, Step};

fn embedding_settings(
    mock: &MockUpstream,
    max_batch: usize,
    batch_concurrency: usize,
) -> GatewaySettings {
    let mut settings = GatewaySettings::new(Scope::Embedding);
    settings.batch_concurrency = batch_concurrency;
    settings.sources.push(SourceSettings {
        model: Some("embed".into()),
        max_batch: Some(max_batch),
        timeout: Some(Duration::from_secs(30)),
        ..SourceSettings::new("E", mock.base_url("E"))
    });
    settings
}

fn embedding_client(settings: &GatewaySettings) -> EmbeddingClient {
    EmbeddingClient::builder(settings.validate().expect("valid"))
        .clock(Arc::new(ManualClock::new()))
        .build_embedding()
        .expect("client")
}

fn texts(n: usize) -> Vec<String> {
    (0..n).map(|i| "t".repeat(1 + i % 13)).collect()
}

#[tokio::test]
async fn vectors_keep_input_order_when_batches_answer_out_of_order() {
    let jitter = Script::always(Step::from(Behaviour::ok()).after(Latency::Range([1, 40])));
    let mock = MockUpstream::start(Scenario::default().with_rule(None, None, jitter))
        .await
        .expect("mock");
    let client = embedding_client(&embedding_settings(&mock, 3, 4));
    let input = texts(40);
    let vectors = client.embed(input.clone()).await.expect("served");
    // The mock puts each text's length in component 0.
    let lengths: Vec<usize> = vectors.iter().map(|v| v[0] as usize).collect();
    let expected: Vec<usize> = input.iter().map(String::len).collect();
    assert_eq!(lengths, expected);
    assert_eq!(
        mock.counters().requests("E", Route::Embeddings),
        14,
        "40 texts in batches of 3"
    );
    client.flush().await;
    let stats = client.stats().await.expect("stats");
    // S7: every batch settled its reported usage (⌈len/4⌉ per text, as the mock counts).
    let reported: u64 = input.iter().map(|t| (t.len() as u64).div_ceil(4)).sum();
    assert_eq!(
        (stats[0].tpm_used, stats[0].rpm_used, stats[0].inflight),
        (reported, 14, 0)
    );
}

#[tokio::test]
async fn empty_input_returns_at_once_without_a_call() {
    let mock = MockUpstream::start(Scenario::default())
        .await
        .expect("mock");
    let mut settings = embedding_settings(&mock, 8, 2);
    settings.call_deadline = Some(Duration::from_millis(1));
    let client = embedding_client(&settings);
    assert_eq!(client.embed(Vec::new()).await, Ok(Vec::new()));
    assert_eq!(mock.counters().total, 0);
}

#[tokio::test(start_paused = true)]
async fn many_batches_under_one_deadline_take_one_deadline_and_settle_their_estimates() {
    let mock = MockUpstream::start(Scenario::default().with_rule(
        None,
        None,
        Script::always(Behaviour::Hang),
    ))
    .await
    .expect("mock");
    let mut settings = embedding_settings(&mock, 2, 4);
    settings.call_deadline = Some(Duration::from_secs(2));
    let client = embedding_client(&settings);
    let started = tokio::time::Instant::now();
    let error = client.embed(texts(20)).await.unwrap_err(); // 10 batches, 4 at a time
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(2),
        "one deadline for all batches, not one per batch"
    );
    assert_eq!(error.kind(), ErrorKind::CallDeadlineExceeded);
    client.flush().await;
    let stats = client.stats().await.expect("stats");
    assert_eq!(stats[0].inflight, 0);
    assert_eq!(
        stats[0].rpm_used, 4,
        "only the batches in flight were admitted"
    );
    // S7 → S3 per batch: each batch in flight settles its estimate, ⌈len/4⌉ per text:
    // texts of 1–8 characters in pairs → 2 + 2 + 4 + 4.
    assert_eq!(stats[0].tpm_used, 12);
}

#[tokio::test]
async fn a_cancelled_embedding_call_leaves_nothing_in_flight() {
    let mock = MockUpstream::start(Scenario::default().with_rule(
        None,
        None,
        Script::always(Behaviour::Hang),
    ))
    .await
    .expect("mock");
    let client = embedding_client(&embedding_settings(&mock, 5, 3));
    let call = {
        let client = client.clone();
        tokio::spawn(async move { client.embed(texts(30)).await })
    };
    mock.until_received(3).await; // entered: three batches reached the upstream
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());
    client.flush().await;
    let stats = client.stats().await.expect("stats");
    assert_eq!((stats[0].inflight, stats[0].rpm_used), (0, 3));
    assert_eq!(stats[0].cancelled, 3);
}

#[tokio::test]
async fn a_failed_batch_fails_the_call_and_per_call_estimates_apply_per_batch() {
    let mock = MockUpstream::start(Scenario::default().with_rule(
        None,
        None,
        Script::always(Behaviour::status(400)),
    ))
    .await
    .expect("mock");
    let client = embedding_client(&embedding_settings(&mock, 10, 1));
    let options = CallOptions {
        est_tokens: Some(77),
        ..CallOptions::default()
    };
    let error = client.embed_with(texts(25), options).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::RequestRejected);
    client.flush().await;
    let stats = client.stats().await.expect("stats");
    assert_eq!(
        (stats[0].tpm_used, stats[0].rpm_used, stats[0].inflight),
        (0, 1, 0),
        "S8 settles 0; the call stopped"
    );
}

// ---- OCR ----

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR";

fn ocr_client(mock: &MockUpstream, deadline: Option<Duration>) -> OcrClient {
    let mut settings = GatewaySettings::new(Scope::Ocr);
    settings.max_file_bytes = 1024;
    settings.call_deadline = deadline;
    settings.sources.push(SourceSettings {
        est_tokens: Some(500), // ignored: OCR settles 0 on every path
        ..SourceSettings::new("M", mock.ocr_base_url("M"))
    });
    OcrClient::builder(settings.validate().expect("valid"))
        .clock(Arc::new(ManualClock::new()))
        .build_ocr()
        .expect("client")
}

#[tokio::test]
async fn ocr_text_and_layout_settle_zero_tokens_while_requests_count() {
    let mock = MockUpstream::start(Scenario::default())
        .await
        .expect("mock");
    let client = ocr_client(&mock, None);
    let text = client.recognize_text(PNG.to_vec()).await.expect("text");
    assert_eq!(
        text.content,
        format!("text of document.png ({} bytes)", PNG.len())
    );
    let options = OcrOptions {
        filename: Some("scan-7.png".into()),
        ..OcrOptions::default()
    };
    let layout = client
        .parse_layout_with(PNG.to_vec(), OcrReturnType::Json, options)
        .await
        .expect("layout");
    assert_eq!(layout.content[0]["text"], "scan-7.png");
    client.flush().await;
    let stats = client.stats().await.expect("stats");
    assert_eq!(
        (stats[0].tpm_used, stats[0].rpm_used, stats[0].inflight),
        (0, 2, 0),
        "S6"
    );
    assert_eq!(mock.counters().multipart_rejected, 0);
}

#[tokio::test]
async fn ocr_input_is_checked_before_anything_else() {
    let mock = MockUpstream::start(Scenario::default())
        .await
        .expect("mock");
    let client = ocr_client(&mock, None);
    let cases: [(Vec<u8>, &str); 3] = [
        (Vec::new(), "the document is empty"),
        (
            [PNG, &[0u8; 2000]].concat(),
            "larger than the 1024-byte limit (OCR__MAX_FILE_BYTES)",
        ),
        (
            b"just some text".to_vec(),
            "not an image or PDF by its magic bytes",
        ),
    ];
    for (document, problem) in cases {
        let error = client.recognize_text(document).await.unwrap_err();
        let GatewayError::Config(config) = &error else {
            panic!("{error:?}")
        };
        assert_eq!(config.key(), "OcrClient::recognize_text(document)");
        assert!(config.problem().starts_with(problem), "{config}");
    }
    assert_eq!(mock.counters().total, 0, "nothing was sent");
}

#[tokio::test]
async fn ocr_success_false_is_result_invalid_with_the_service_message() {
    let failure = Behaviour::OcrFailure {
        message: "page is blank".into(),
    };
    let mock =
        MockUpstream::start(Scenario::default().with_rule(None, None, Script::always(failure)))
            .await
            .expect("mock");
    let client = ocr_client(&mock, None);
    let error = client.recognize_text(PNG.to_vec()).await.unwrap_err();
    let GatewayError::ResultInvalid(invalid) = &error else {
        panic!("{error:?}")
    };
    assert_eq!(
        invalid.why(),
        "the OCR service reported failure: page is blank"
    );
    client.flush().await;
    assert_eq!(client.stats().await.expect("stats")[0].tpm_used, 0);
}

#[tokio::test(start_paused = true)]
async fn an_ocr_call_cut_by_its_deadline_settles_zero_and_frees_its_slot() {
    let mock = MockUpstream::start(Scenario::default().with_rule(
        None,
        None,
        Script::always(Behaviour::Hang),
    ))
    .await
    .expect("mock");
    let client = ocr_client(&mock, Some(Duration::from_secs(3)));
    let error = client.recognize_text(PNG.to_vec()).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::CallDeadlineExceeded);
    client.flush().await;
    let stats = client.stats().await.expect("stats");
    assert_eq!(
        (stats[0].tpm_used, stats[0].rpm_used, stats[0].inflight),
        (0, 1, 0)
    );
}
