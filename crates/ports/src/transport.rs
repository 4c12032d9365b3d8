use std::future::Future;

use polygateway_errors::AttemptFailure;

use crate::{
    ChatRequest, ChatResult, EmbeddingRequest, EmbeddingResult, OcrLayout, OcrRequest,
    OcrReturnType, OcrText, SourceSpec,
};

/// Sends one chat attempt to one source.
///
/// An implementation bounds the attempt by `source.timeout` (until the whole body is read)
/// and classifies every failure into an [`AttemptFailure`] of one of the four kinds — a
/// timeout is `Transient`, never anything the caller could mistake for its call deadline.
///
/// Cancel safety: the pipeline may drop the future at any await point (the caller cancelled,
/// the call deadline expired); the implementation must then release what it holds, and the
/// pipeline settles the attempt as "in flight" (SPEC §6 S3).
pub trait ChatTransport: Send + Sync + 'static {
    /// One attempt of `request` against `source`.
    fn chat(
        &self,
        source: &SourceSpec,
        request: &ChatRequest,
    ) -> impl Future<Output = Result<ChatResult, AttemptFailure>> + Send;
}

/// Sends one embeddings batch to one source. Same contract as [`ChatTransport`].
pub trait EmbeddingTransport: Send + Sync + 'static {
    /// One attempt of one batch against `source`.
    fn embed(
        &self,
        source: &SourceSpec,
        request: &EmbeddingRequest,
    ) -> impl Future<Output = Result<EmbeddingResult, AttemptFailure>> + Send;
}

/// Sends one document to an OCR source. Same contract as [`ChatTransport`]; a
/// `success: false` body is a `ResultInvalid` failure carrying the service's message.
pub trait OcrTransport: Send + Sync + 'static {
    /// `POST /ocr/text`.
    fn recognize_text(
        &self,
        source: &SourceSpec,
        request: &OcrRequest,
    ) -> impl Future<Output = Result<OcrText, AttemptFailure>> + Send;

    /// `POST /parse?return_type=…`.
    fn parse_layout(
        &self,
        source: &SourceSpec,
        request: &OcrRequest,
        return_type: OcrReturnType,
    ) -> impl Future<Output = Result<OcrLayout, AttemptFailure>> + Send;
}
