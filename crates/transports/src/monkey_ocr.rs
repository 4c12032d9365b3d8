//! The MonkeyOCR transport (SPEC §16): `POST {base_url}/ocr/text` and
//! `POST {base_url}/parse?return_type=…`, each a multipart upload with the field `file`.

use polygateway_errors::{AttemptFailure, FailureKind};
use polygateway_ports::{OcrLayout, OcrRequest, OcrReturnType, OcrText, OcrTransport, SourceSpec};
use serde::Deserialize;

use crate::classify::redact;
use crate::exchange::{Success, exchange, unusable};
use crate::http::HttpClient;
use crate::multipart::single_file_form;

/// Text recognition and layout parsing against a MonkeyOCR service.
#[derive(Debug, Clone)]
pub struct MonkeyOcrTransport {
    http: HttpClient,
}

impl MonkeyOcrTransport {
    /// A transport over the shared client `http`.
    pub fn new(http: HttpClient) -> Self {
        MonkeyOcrTransport { http }
    }

    async fn upload(
        &self,
        source: &SourceSpec,
        request: &OcrRequest,
        path: &str,
    ) -> Result<Success, AttemptFailure> {
        let (content_type, body) = single_file_form(
            "file",
            &request.filename,
            request.content_type,
            &request.bytes,
        );
        let url = format!("{}{path}", source.base_url);
        exchange(&self.http, source, &url, &content_type, body).await
    }
}

#[derive(Deserialize)]
struct TextResponse {
    success: Option<bool>,
    task_type: Option<String>,
    content: Option<String>,
    message: Option<String>,
}

#[derive(Deserialize)]
struct ParseResponse {
    success: Option<bool>,
    message: Option<String>,
    content: Option<serde_json::Value>,
    content_type: Option<String>,
    files: Option<Vec<String>>,
    download_url: Option<String>,
}

/// `success: false` is the service telling us it failed: `ResultInvalid` with its message.
fn check_success(
    success: Option<bool>,
    message: Option<&str>,
    source: &SourceSpec,
    response: &Success,
) -> Result<(), AttemptFailure> {
    match success {
        Some(true) => Ok(()),
        Some(false) => Err(AttemptFailure::new(
            FailureKind::ResultInvalid,
            "ocr_failed",
            format!(
                "the OCR service reported failure: {}",
                redact(message.unwrap_or("(no message)"), source.api_key.as_ref())
            ),
        )
        .with_status(200)),
        None => Err(unusable(
            response,
            "missing_success",
            "the body has no success field",
        )),
    }
}

impl OcrTransport for MonkeyOcrTransport {
    /// # Cancel safety
    ///
    /// Dropping the future drops the upload; the connection is closed or returned to the pool.
    async fn recognize_text(
        &self,
        source: &SourceSpec,
        request: &OcrRequest,
    ) -> Result<OcrText, AttemptFailure> {
        let success = self.upload(source, request, "/ocr/text").await?;
        let response: TextResponse = serde_json::from_slice(&success.body).map_err(|e| {
            unusable(
                &success,
                "bad_json",
                format!("the body is not an OCR result: {e}"),
            )
        })?;
        check_success(
            response.success,
            response.message.as_deref(),
            source,
            &success,
        )?;
        let content = response
            .content
            .ok_or_else(|| unusable(&success, "missing_content", "the body has no content"))?;
        Ok(OcrText {
            task_type: response.task_type.unwrap_or_else(|| "text".to_owned()),
            content,
            message: response.message.unwrap_or_default(),
        })
    }

    /// # Cancel safety
    ///
    /// As for [`OcrTransport::recognize_text`].
    async fn parse_layout(
        &self,
        source: &SourceSpec,
        request: &OcrRequest,
        return_type: OcrReturnType,
    ) -> Result<OcrLayout, AttemptFailure> {
        let path = match return_type {
            OcrReturnType::Markdown => "/parse?return_type=markdown",
            OcrReturnType::Json => "/parse?return_type=json",
        };
        let success = self.upload(source, request, path).await?;
        let response: ParseResponse = serde_json::from_slice(&success.body).map_err(|e| {
            unusable(
                &success,
                "bad_json",
                format!("the body is not a parse result: {e}"),
            )
        })?;
        check_success(
            response.success,
            response.message.as_deref(),
            source,
            &success,
        )?;
        let content = response
            .content
            .ok_or_else(|| unusable(&success, "missing_content", "the body has no content"))?;
        Ok(OcrLayout {
            content,
            content_type: response.content_type,
            files: response.files.unwrap_or_default(),
            download_url: response.download_url,
            message: response.message.unwrap_or_default(),
        })
    }
}
