//! The operations the engine runs, one per kind of call. Each says what to reserve, how to make
//! one attempt through its transport port, and what the result reports as usage.

use std::future::Future;

use polygateway_errors::AttemptFailure;
use polygateway_ports::{
    ChatRequest, ChatResult, ChatTransport, EmbeddingRequest, EmbeddingResult, EmbeddingTransport,
    OcrLayout, OcrRequest, OcrReturnType, OcrText, OcrTransport, SourceSpec, Usage,
};

use crate::engine::Operation;

/// One chat completion through a [`ChatTransport`].
#[derive(Debug)]
pub struct ChatCall<'a, T> {
    /// The transport.
    pub transport: &'a T,
    /// The request; its `est_tokens`, if set, replaces the source's estimate.
    pub request: &'a ChatRequest,
}

impl<T: ChatTransport> Operation for ChatCall<'_, T> {
    type Output = ChatResult;

    fn estimate(&self, source: &SourceSpec) -> u64 {
        source.effective_est_tokens(self.request.est_tokens)
    }

    fn attempt<'a>(
        &'a self,
        source: &'a SourceSpec,
    ) -> impl Future<Output = Result<ChatResult, AttemptFailure>> + Send + 'a {
        self.transport.chat(source, self.request)
    }

    fn usage(output: &ChatResult) -> Option<Usage> {
        output.usage
    }
}

/// One embeddings batch through an [`EmbeddingTransport`]: an attempt chain of its own, with
/// its own permit (SPEC §6 S7).
#[derive(Debug)]
pub struct EmbedBatch<'a, T> {
    /// The transport.
    pub transport: &'a T,
    /// The batch; its `est_tokens` (from the texts' size) replaces the source's estimate.
    pub request: &'a EmbeddingRequest,
}

impl<T: EmbeddingTransport> Operation for EmbedBatch<'_, T> {
    type Output = EmbeddingResult;

    fn estimate(&self, source: &SourceSpec) -> u64 {
        source.effective_est_tokens(self.request.est_tokens)
    }

    fn attempt<'a>(
        &'a self,
        source: &'a SourceSpec,
    ) -> impl Future<Output = Result<EmbeddingResult, AttemptFailure>> + Send + 'a {
        self.transport.embed(source, self.request)
    }

    fn usage(output: &EmbeddingResult) -> Option<Usage> {
        output.usage
    }
}

/// One OCR text recognition through an [`OcrTransport`]. OCR settles 0 tokens on every path
/// (S6): the engine for the OCR scope is built with `zero_tokens`.
#[derive(Debug)]
pub struct OcrTextCall<'a, T> {
    /// The transport.
    pub transport: &'a T,
    /// The document.
    pub request: &'a OcrRequest,
}

impl<T: OcrTransport> Operation for OcrTextCall<'_, T> {
    type Output = OcrText;

    fn estimate(&self, _source: &SourceSpec) -> u64 {
        0
    }

    fn attempt<'a>(
        &'a self,
        source: &'a SourceSpec,
    ) -> impl Future<Output = Result<OcrText, AttemptFailure>> + Send + 'a {
        self.transport.recognize_text(source, self.request)
    }

    fn usage(_output: &OcrText) -> Option<Usage> {
        None
    }
}

/// One OCR layout parse through an [`OcrTransport`].
#[derive(Debug)]
pub struct OcrLayoutCall<'a, T> {
    /// The transport.
    pub transport: &'a T,
    /// The document.
    pub request: &'a OcrRequest,
    /// Markdown or JSON.
    pub return_type: OcrReturnType,
}

impl<T: OcrTransport> Operation for OcrLayoutCall<'_, T> {
    type Output = OcrLayout;

    fn estimate(&self, _source: &SourceSpec) -> u64 {
        0
    }

    fn attempt<'a>(
        &'a self,
        source: &'a SourceSpec,
    ) -> impl Future<Output = Result<OcrLayout, AttemptFailure>> + Send + 'a {
        self.transport
            .parse_layout(source, self.request, self.return_type)
    }

    fn usage(_output: &OcrLayout) -> Option<Usage> {
        None
    }
}
