//! The answers of injected faults (see [`crate::faults`]): the JSON envelope, a proxy's
//! `text/html` page, and connection resets before the response or in the middle of its body.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use http_body::{Frame, SizeHint};

use super::conn::ResetSwitch;
use crate::error::ApiError;
use crate::faults::InjectedError;

/// The JSON error envelope of an injected error.
pub(crate) fn envelope(e: InjectedError) -> Response {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let message = if e.message.is_empty() { format!("injected fault: {}", e.code) } else { e.message };
    ApiError::with_status(status, &e.code, message).into_response()
}

/// A 5xx page as nginx in front of an API sends it (`text/html`, no JSON).
pub(crate) fn html(status: u16) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    let title = format!("{} {}", status.as_u16(), status.canonical_reason().unwrap_or("Error"));
    let page = format!(
        "<html>\r\n<head><title>{title}</title></head>\r\n<body>\r\n<center><h1>{title}</h1></center>\r\n\
         <hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
    );
    (status, [(header::CONTENT_TYPE, HeaderValue::from_static("text/html"))], page).into_response()
}

fn reset_error() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionReset, "connection reset by an injected fault")
}

/// A body that sends `first`, lets the connection flush it, then pulls the switch and fails,
/// while announcing `full_len` bytes (so the client knows the body was cut short).
struct HalfThenReset {
    first: Option<Bytes>,
    flushed: bool,
    full_len: u64,
    switch: Option<Arc<ResetSwitch>>,
}

impl http_body::Body for HalfThenReset {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(Some(Ok(Frame::data(first))));
        }
        if !self.flushed {
            // Pending makes hyper flush what it has buffered (headers and the first half)
            // before it polls again.
            self.flushed = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if let Some(switch) = &self.switch {
            switch.pull();
        }
        Poll::Ready(Some(Err(reset_error())))
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.full_len)
    }
}

/// A reset before any byte of the answer. With a switch the write of the headers fails and
/// the socket closes with a RST; without one the body fails at once and the connection is
/// closed.
pub(crate) fn reset_before_response(switch: Option<Arc<ResetSwitch>>) -> Response {
    if let Some(s) = &switch {
        s.pull();
    }
    let body = HalfThenReset { first: None, flushed: true, full_len: 0, switch };
    (StatusCode::INTERNAL_SERVER_ERROR, Body::new(body)).into_response()
}

/// The handler's answer cut after its headers and half of its body, then a reset.
pub(crate) async fn reset_mid_body(resp: Response, switch: Option<Arc<ResetSwitch>>) -> Response {
    let (parts, body) = resp.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
    let full_len = bytes.len() as u64;
    let first = bytes.slice(..bytes.len() / 2);
    let mut resp =
        Response::from_parts(parts, Body::new(HalfThenReset { first: Some(first), flushed: false, full_len, switch }));
    resp.headers_mut().remove(header::CONTENT_LENGTH);
    resp
}
