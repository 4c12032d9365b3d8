//! The operations the engine runs, one per kind of call. Each says what to reserve, how to make
//! one attempt through its transport port, and what the result reports as usage.

use std::future::Future;

use polygateway_errors::AttemptFailure;
use polygateway_ports::{ChatRequest, ChatResult, ChatTransport, SourceSpec, Usage};

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
