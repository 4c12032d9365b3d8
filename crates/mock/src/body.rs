//! The response bodies the mock can send, including the broken ones.

use std::convert::Infallible;
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
    /// Yields `sent`, then ends although `Content-Length` promised more; hyper then closes
    /// the connection, which the client sees as a truncated body.
    Truncated(Option<Bytes>),
    /// `remaining` bytes of filler, streamed in chunks.
    Huge { remaining: u64 },
}

impl MockBody {
    pub(crate) fn full(bytes: impl Into<Bytes>) -> Self {
        MockBody::Full(Some(bytes.into()))
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
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        match this {
            MockBody::Full(bytes) | MockBody::Truncated(bytes) => {
                Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b))))
            }
            // The connection task stays registered with no waker to call: the body simply
            // never progresses until the client goes away and the connection is dropped.
            MockBody::Pending => Poll::Pending,
            MockBody::Huge { remaining } => {
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
            MockBody::Huge { remaining } => *remaining == 0,
            MockBody::Pending | MockBody::Truncated(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            MockBody::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            MockBody::Full(None) => SizeHint::with_exact(0),
            MockBody::Huge { remaining } => SizeHint::with_exact(*remaining),
            MockBody::Pending | MockBody::Truncated(_) => SizeHint::default(),
        }
    }
}
