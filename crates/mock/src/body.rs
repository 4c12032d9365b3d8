//! The response bodies the mock can send, including the broken ones.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

/// Size of one chunk of a huge body.
const CHUNK: usize = 64 * 1024;

/// A response body: whole, endless silence, cut short, or large and streamed.
pub(crate) enum MockBody {
    /// The whole body at once.
    Full(Option<Bytes>),
    /// Never yields a frame: the headers were sent, the body never comes.
    Pending,
    /// Yields its bytes, waits a moment so they (and the headers) reach the wire, then ends
    /// although `Content-Length` promised more: hyper closes the connection, and the client
    /// sees a body cut off after the headers.
    Truncated(Option<Bytes>, Pin<Box<tokio::time::Sleep>>),
    /// `remaining` bytes of filler, streamed in chunks; `announced` sets `Content-Length`.
    Huge { remaining: u64, announced: bool },
}

impl MockBody {
    pub(crate) fn full(bytes: impl Into<Bytes>) -> Self {
        MockBody::Full(Some(bytes.into()))
    }

    pub(crate) fn truncated(first: &'static [u8]) -> Self {
        let pause = Box::pin(tokio::time::sleep(std::time::Duration::from_millis(20)));
        MockBody::Truncated(Some(Bytes::from_static(first)), pause)
    }

    pub(crate) fn empty() -> Self {
        MockBody::Full(None)
    }
}

impl Body for MockBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        match this {
            MockBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            MockBody::Truncated(bytes, pause) => match bytes.take() {
                Some(b) => Poll::Ready(Some(Ok(Frame::data(b)))),
                None => pause.as_mut().poll(cx).map(|()| None),
            },
            // The connection task stays registered with no waker to call: the body simply
            // never progresses until the client goes away and the connection is dropped.
            MockBody::Pending => Poll::Pending,
            MockBody::Huge { remaining, .. } => {
                if *remaining == 0 {
                    return Poll::Ready(None);
                }
                let n = usize::try_from(*remaining).map_or(CHUNK, |r| r.min(CHUNK));
                *remaining -= n as u64;
                Poll::Ready(Some(Ok(Frame::data(Bytes::from(vec![b' '; n])))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            MockBody::Full(bytes) => bytes.is_none(),
            MockBody::Huge { remaining, .. } => *remaining == 0,
            MockBody::Pending | MockBody::Truncated(..) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            MockBody::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            MockBody::Full(None) => SizeHint::with_exact(0),
            MockBody::Huge {
                remaining,
                announced: true,
            } => SizeHint::with_exact(*remaining),
            MockBody::Huge { .. } | MockBody::Pending | MockBody::Truncated(..) => {
                SizeHint::default()
            }
        }
    }
}
