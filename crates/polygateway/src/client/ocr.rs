//! `OcrClient`: text recognition and layout parsing on the same pipeline (SPEC §16).

use std::sync::Arc;
use std::time::Duration;

use polygateway_errors::{ConfigError, GatewayError, Scope};
use polygateway_middleware::{CallSummary, OcrLayoutCall, OcrTextCall, Operation, SourceStats};
use polygateway_ports::{OcrLayout, OcrRequest, OcrReturnType, OcrText};
use polygateway_transports::MonkeyOcrTransport;

use super::{ClientBuilder, Core};
use crate::config::{self, GatewaySettings, ScopeConfig};

/// Options of one OCR call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OcrOptions {
    /// A deadline for this call; `Some` overrides the client's.
    pub call_deadline: Option<Duration>,
    /// The file name sent with the upload; default `document.<ext>` from the detected type.
    pub filename: Option<String>,
}

/// The media type and usual extension of a document, from its magic bytes: PNG, JPEG, GIF,
/// WebP, TIFF, BMP or PDF. `None` for anything else.
pub fn detect_document_type(bytes: &[u8]) -> Option<(&'static str, &'static str)> {
    const SIGNATURES: [(&[u8], &str, &str); 9] = [
        (b"\x89PNG\r\n\x1a\n", "image/png", "png"),
        (b"\xff\xd8\xff", "image/jpeg", "jpg"),
        (b"GIF87a", "image/gif", "gif"),
        (b"GIF89a", "image/gif", "gif"),
        (b"II*\x00", "image/tiff", "tif"),
        (b"MM\x00*", "image/tiff", "tif"),
        (b"BM", "image/bmp", "bmp"),
        (b"%PDF-", "application/pdf", "pdf"),
        (b"RIFF", "image/webp", "webp"),
    ];
    SIGNATURES.iter().find_map(|(magic, media, ext)| {
        let riff_is_webp = *media != "image/webp" || bytes.get(8..12) == Some(b"WEBP");
        (bytes.starts_with(magic) && riff_is_webp).then_some((*media, *ext))
    })
}

/// Document OCR through the whole pipeline: text recognition (`POST /ocr/text`) and layout
/// parsing (`POST /parse`). The input is checked before anything else — not empty, within
/// `OCR__MAX_FILE_BYTES`, an image or PDF by its magic bytes — and an OCR call settles 0 tokens
/// on every path while its RPM and concurrency still count (SPEC §6 S6). Cheap to clone.
///
/// ```
/// # use polygateway_mock::{MockUpstream, Scenario};
/// use polygateway::config::{GatewaySettings, SourceSettings};
/// use polygateway::{OcrClient, Scope};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), polygateway::GatewayError> {
/// # let mock = MockUpstream::start(Scenario::default()).await.expect("mock upstream");
/// # let base_url = mock.ocr_base_url("MONKEY");
/// let mut settings = GatewaySettings::new(Scope::Ocr);
/// settings.sources.push(SourceSettings::new("MONKEY", base_url)); // e.g. "http://127.0.0.1:7861"
/// let client = OcrClient::from_settings(&settings)?;
/// let png = b"\x89PNG\r\n\x1a\n...image data...".to_vec();
/// let text = client.recognize_text(png).await?;
/// assert_eq!(text.content, "text of document.png (24 bytes)");
/// let error = client.recognize_text(b"plain text".to_vec()).await.unwrap_err();
/// assert!(error.to_string().contains("not an image or PDF"));
/// client.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct OcrClient {
    inner: Arc<Inner>,
}

struct Inner {
    core: Core,
    transport: MonkeyOcrTransport,
}

impl std::fmt::Debug for OcrClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OcrClient")
            .field("engine", &self.inner.core.engine)
            .finish_non_exhaustive()
    }
}

impl OcrClient {
    pub(super) fn assemble(core: Core) -> Result<OcrClient, GatewayError> {
        let transport = MonkeyOcrTransport::new(core.http.clone());
        Ok(OcrClient {
            inner: Arc::new(Inner { core, transport }),
        })
    }

    /// A client from the process environment and `.env` (`OCR__…` keys).
    pub fn from_env() -> Result<OcrClient, GatewayError> {
        ClientBuilder::new(config::from_process_env(Scope::Ocr)?).build_ocr()
    }

    /// A client from settings built in code (scope `OCR`).
    pub fn from_settings(settings: &GatewaySettings) -> Result<OcrClient, GatewayError> {
        ClientBuilder::new(settings.validate()?).build_ocr()
    }

    /// A builder, to choose the telemetry sink, the clock or the HTTP settings.
    pub fn builder(config: ScopeConfig) -> ClientBuilder {
        ClientBuilder::new(config)
    }

    /// The text of `document` (an image or a PDF).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future cancels the call at once; the attempt settles 0 tokens (S6) and
    /// frees its slot, without the caller waiting.
    pub async fn recognize_text(&self, document: Vec<u8>) -> Result<OcrText, GatewayError> {
        self.recognize_text_with(document, OcrOptions::default())
            .await
    }

    /// [`recognize_text`](OcrClient::recognize_text) with per-call options.
    ///
    /// # Cancel safety
    ///
    /// As for [`recognize_text`](OcrClient::recognize_text).
    pub async fn recognize_text_with(
        &self,
        document: Vec<u8>,
        options: OcrOptions,
    ) -> Result<OcrText, GatewayError> {
        let param = "OcrClient::recognize_text(document)";
        let request = self.request(document, options.filename, param)?;
        let op = OcrTextCall {
            transport: &self.inner.transport,
            request: &request,
        };
        self.run(
            &op,
            options.call_deadline,
            "OcrClient::recognize_text_with(call_deadline)",
        )
        .await
    }

    /// The layout of `document`, as markdown or JSON blocks.
    ///
    /// # Cancel safety
    ///
    /// As for [`recognize_text`](OcrClient::recognize_text).
    pub async fn parse_layout(
        &self,
        document: Vec<u8>,
        return_type: OcrReturnType,
    ) -> Result<OcrLayout, GatewayError> {
        self.parse_layout_with(document, return_type, OcrOptions::default())
            .await
    }

    /// [`parse_layout`](OcrClient::parse_layout) with per-call options.
    ///
    /// # Cancel safety
    ///
    /// As for [`recognize_text`](OcrClient::recognize_text).
    pub async fn parse_layout_with(
        &self,
        document: Vec<u8>,
        return_type: OcrReturnType,
        options: OcrOptions,
    ) -> Result<OcrLayout, GatewayError> {
        let request = self.request(
            document,
            options.filename,
            "OcrClient::parse_layout(document)",
        )?;
        let op = OcrLayoutCall {
            transport: &self.inner.transport,
            request: &request,
            return_type,
        };
        self.run(
            &op,
            options.call_deadline,
            "OcrClient::parse_layout_with(call_deadline)",
        )
        .await
    }

    /// Check the document before anything else happens, and name its type.
    fn request(
        &self,
        bytes: Vec<u8>,
        filename: Option<String>,
        param: &str,
    ) -> Result<OcrRequest, GatewayError> {
        let limit = self.inner.core.config.max_file_bytes;
        let shown = format!("{} bytes", bytes.len());
        if bytes.is_empty() {
            return Err(ConfigError::invalid(param, shown, "the document is empty").into());
        }
        if bytes.len() > limit {
            return Err(ConfigError::invalid(
                param,
                shown,
                format!("larger than the {limit}-byte limit (OCR__MAX_FILE_BYTES)"),
            )
            .into());
        }
        let Some((content_type, ext)) = detect_document_type(&bytes) else {
            return Err(ConfigError::invalid(
                param,
                shown,
                "not an image or PDF by its magic bytes (PNG, JPEG, GIF, WebP, TIFF, BMP or PDF expected)",
            )
            .into());
        };
        Ok(OcrRequest {
            filename: filename.unwrap_or_else(|| format!("document.{ext}")),
            content_type,
            bytes,
        })
    }

    async fn run<O: Operation>(
        &self,
        op: &O,
        per_call: Option<Duration>,
        param: &str,
    ) -> Result<O::Output, GatewayError> {
        let core = &self.inner.core;
        let deadline = core.deadline(per_call, param)?;
        let call = core.begin(deadline);
        let result = core
            .bounded(&call, core.engine.run(op, &call.recorder, call.deadline_at))
            .await;
        let result = result.map(|served| {
            let summary = CallSummary {
                source: &served.source.name,
                model: &served.source.model,
                attempts: served.attempts,
                usage: None,
            };
            (served.output, summary)
        });
        call.finish(result)
    }

    /// Each source's state (see `GatewayClient::stats`).
    ///
    /// # Cancel safety
    ///
    /// Reads only; dropping the future changes nothing.
    pub async fn stats(&self) -> Result<Vec<SourceStats>, GatewayError> {
        self.inner.core.stats().await
    }

    /// Wait until every settlement queued so far is done.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops the waiting, not the settling.
    pub async fn flush(&self) {
        self.inner.core.flush().await;
    }

    /// Refuse new calls, drain the settler and flush the telemetry file.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops the waiting; the draining goes on in the background.
    pub async fn shutdown(&self) {
        self.inner.core.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_bytes_name_the_type() {
        let cases: [(&[u8], Option<&str>); 10] = [
            (b"\x89PNG\r\n\x1a\nrest", Some("image/png")),
            (b"\xff\xd8\xff\xe0", Some("image/jpeg")),
            (b"GIF89a...", Some("image/gif")),
            (b"RIFF\x00\x00\x00\x00WEBPVP8 ", Some("image/webp")),
            (b"RIFF\x00\x00\x00\x00WAVEfmt ", None),
            (b"II*\x00", Some("image/tiff")),
            (b"BM....", Some("image/bmp")),
            (b"%PDF-1.7", Some("application/pdf")),
            (b"hello", None),
            (b"", None),
        ];
        for (bytes, expected) in cases {
            assert_eq!(
                detect_document_type(bytes).map(|(media, _)| media),
                expected,
                "{bytes:?}"
            );
        }
    }
}
