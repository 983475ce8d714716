//! Request bodies nobody read are read to their end after the answer.
//!
//! Over HTTP/2, dropping a request body the client is still sending makes
//! the stream reset: with `CANCEL` when the response has not gone out yet,
//! and a client sees the reset instead of the answer (curl: `Stream error in
//! the HTTP/2 framing layer`). Any early answer can do that — 401, 403, 404,
//! 405, 413, 429 — since those handlers never look at the body. So every
//! request's body is wrapped in a [`DrainOnDrop`], which hands what is left
//! of it to a task that reads it to its end (at most [`DRAIN_LIMIT`] bytes
//! within [`DRAIN_TIME`]): the stream stays open until the answer is out and
//! then ends as it should. Over HTTP/1.1 it also keeps the connection
//! reusable.
//!
//! Over HTTP/2 that is not enough. A client that sees an error answer's
//! headers while it still sends may stop and end its stream short of the
//! `content-length` it declared (curl: "HTTP error before end of send, stop
//! sending"); the `h2` crate takes that for a malformed request and resets
//! the stream with `PROTOCOL_ERROR`, dropping the answer's body if it is not
//! out yet (curl then fails with `(92) … was not closed cleanly:
//! PROTOCOL_ERROR`, about 1 in 200 answers under load). kube-apiserver's Go
//! HTTP/2 server only fails the request body there, so its clients always
//! get the answer. So an HTTP/2 answer waits until the request body has
//! ended ([`BodyEnded`]), for at most [`ANSWER_WAIT`]: the client, which has
//! no answer yet, sends to the end, and the answer then goes out whole.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use tokio::sync::oneshot;

/// How much of an unread body is read before giving up on it (the largest
/// body the hub accepts, and a little more).
pub const DRAIN_LIMIT: usize = crate::api::body::MAX_BODY + 1024 * 1024;
/// How long an unread body is read before giving up on it.
pub const DRAIN_TIME: Duration = Duration::from_secs(10);
/// How long an HTTP/2 answer waits for the end of its request's body.
pub const ANSWER_WAIT: Duration = Duration::from_secs(2);

/// A request body that, dropped before its end, is read to its end by a
/// task of its own.
pub struct DrainOnDrop {
    inner: Option<Incoming>,
    /// Dropped once the body has ended (or reading it was given up).
    ended: Option<oneshot::Sender<()>>,
}

/// Resolves once a [`DrainOnDrop`]'s body has ended, however it was read.
pub struct BodyEnded(oneshot::Receiver<()>);

impl BodyEnded {
    /// Wait until the body has ended, for at most `limit`.
    pub async fn wait(self, limit: Duration) {
        let _ = tokio::time::timeout(limit, self.0).await;
    }
}

impl DrainOnDrop {
    pub fn new(body: Incoming) -> (Self, BodyEnded) {
        let (tx, rx) = oneshot::channel();
        let ended = (!body.is_end_stream()).then_some(tx);
        (
            DrainOnDrop {
                inner: Some(body),
                ended,
            },
            BodyEnded(rx),
        )
    }
}

impl Body for DrainOnDrop {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = match self.inner.as_mut() {
            Some(body) => Pin::new(body).poll_frame(cx),
            None => Poll::Ready(None),
        };
        if matches!(polled, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) {
            self.ended = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}

impl Drop for DrainOnDrop {
    fn drop(&mut self) {
        let Some(body) = self.inner.take() else { return };
        let ended = self.ended.take();
        if body.is_end_stream() {
            return;
        }
        // Dropped inside hyper's connection task, so a runtime is there.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                drain(body, DRAIN_LIMIT, DRAIN_TIME).await;
                drop(ended);
            });
        }
    }
}

/// Read `body` to its end, discarding it; stop after `limit` bytes or `time`.
/// Returns how many bytes were read.
async fn drain<B>(mut body: B, limit: usize, time: Duration) -> usize
where
    B: Body<Data = Bytes> + Unpin,
{
    let mut read = 0usize;
    let _ = tokio::time::timeout(time, async {
        while let Some(Ok(frame)) = body.frame().await {
            if let Some(data) = frame.data_ref() {
                read = read.saturating_add(data.len());
                if read > limit {
                    return;
                }
            }
        }
    })
    .await;
    read
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::StreamBody;

    fn chunks(n: usize, size: usize) -> impl Body<Data = Bytes, Error = std::convert::Infallible> + Unpin {
        let frames = (0..n).map(move |_| Ok(Frame::data(Bytes::from(vec![b'x'; size]))));
        StreamBody::new(futures::stream::iter(frames))
    }

    #[tokio::test]
    async fn a_body_is_read_to_its_end_within_the_limit() {
        assert_eq!(drain(chunks(4, 1000), 10_000, Duration::from_secs(1)).await, 4000);
    }

    #[tokio::test]
    async fn reading_stops_past_the_limit() {
        assert_eq!(drain(chunks(100, 1000), 2500, Duration::from_secs(1)).await, 3000);
    }

    #[tokio::test]
    async fn reading_stops_after_the_time() {
        let never = StreamBody::new(futures::stream::pending::<
            Result<Frame<Bytes>, std::convert::Infallible>,
        >());
        let started = std::time::Instant::now();
        assert_eq!(drain(never, 10, Duration::from_millis(50)).await, 0);
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
