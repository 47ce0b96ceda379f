//! Request extraction: JSON bodies with the API's error codes, path ids, JSON responses.

use axum::Json;
use axum::body::Bytes;
use std::sync::Arc;

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde::ser::{SerializeMap, Serializer as _};
use serde_json::error::Category;

use crate::error::ApiError;
use crate::handle::FakeHandle;
use crate::wire::Meta;

/// The project of the request's token, put in the request's extensions by the pipeline.
#[derive(Debug, Clone)]
pub(crate) struct RequestProject(pub Arc<str>);

/// The fake as the request's token sees it: a handle working on that token's project (see
/// [`crate::projects`]); the default project when the pipeline named none.
#[derive(Debug)]
pub(crate) struct Scoped(pub FakeHandle);

impl FromRequestParts<FakeHandle> for Scoped {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut http::request::Parts, h: &FakeHandle) -> Result<Self, Self::Rejection> {
        Ok(Scoped(match parts.extensions.get::<RequestProject>() {
            Some(p) => h.in_project(p.0.clone()),
            None => h.clone(),
        }))
    }
}

/// A JSON body: malformed JSON is `json_error`, a well-formed body of the wrong shape is
/// `invalid_input` (naming the missing field when serde says which). An empty body counts
/// as `{}`.
#[derive(Debug)]
pub(crate) struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| ApiError::json_error(e.to_string()))?;
        parse_body(&bytes).map(ApiJson)
    }
}

/// Parses a body as described on [`ApiJson`].
pub(crate) fn parse_body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) { b"{}" } else { bytes };
    serde_json::from_slice(bytes).map_err(|e| match e.classify() {
        Category::Data => {
            let msg = e.to_string();
            let field = msg
                .strip_prefix("missing field `")
                .and_then(|rest| rest.split('`').next())
                .unwrap_or("body")
                .to_owned();
            ApiError::invalid_input(&field, msg)
        }
        _ => ApiError::json_error(format!("the request body is not valid JSON: {e}")),
    })
}

/// A numeric path id or `invalid_input` naming `id`.
pub(crate) fn parse_id(raw: &str) -> Result<u64, ApiError> {
    raw.parse().map_err(|_| ApiError::invalid_input("id", format!("'{raw}' is not a valid id")))
}

/// A JSON response.
pub(crate) fn json(status: StatusCode, body: impl Serialize) -> Response {
    (status, Json(body)).into_response()
}

/// A JSON object with one entry, serialized directly (no intermediate `Value`).
pub(crate) fn single_body<T: Serialize>(status: StatusCode, key: &str, value: &T) -> Response {
    entries(status, |map| map.serialize_entry(key, value))
}

/// A list response `{key: items, "meta": meta}`, serialized directly.
pub(crate) fn list_body<T: Serialize>(key: &str, items: &[T], meta: &Meta) -> Response {
    entries(StatusCode::OK, |map| {
        map.serialize_entry(key, items)?;
        map.serialize_entry("meta", meta)
    })
}

type Map<'a> = serde_json::ser::Compound<'a, &'a mut Vec<u8>, serde_json::ser::CompactFormatter>;

fn entries(status: StatusCode, fill: impl FnOnce(&mut Map<'_>) -> Result<(), serde_json::Error>) -> Response {
    let mut buf = Vec::with_capacity(4096);
    let mut ser = serde_json::Serializer::new(&mut buf);
    let result = ser.serialize_map(None).and_then(|mut map| {
        fill(&mut map)?;
        SerializeMap::end(map)
    });
    match result {
        Ok(()) => (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], buf).into_response(),
        Err(e) => ApiError::new("server_error", format!("serialization failed: {e}")).into_response(),
    }
}

/// `204 No Content`.
pub(crate) fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::request::DeleteServiceRequest;

    #[test]
    fn body_errors() {
        let e = parse_body::<DeleteServiceRequest>(b"{").err();
        assert_eq!(e.map(|e| e.code), Some("json_error".to_owned()));
        let e = parse_body::<DeleteServiceRequest>(b"{}").err();
        assert_eq!(e.map(|e| e.details["fields"][0]["name"].clone()), Some(serde_json::json!("listen_port")));
        let ok = parse_body::<DeleteServiceRequest>(br#"{"listen_port":80}"#);
        assert_eq!(ok.map(|r| r.listen_port).ok(), Some(80));
    }
}
