//! Create-like subresources (`POST .../<name>/<subresource>`).

use axum::response::Response;
use bytes::Bytes;

use super::objects::{unknown_subresource, Scope};
use crate::status::ApiError;

pub async fn create_subresource(s: &Scope, sub: &str, _body: Bytes) -> Result<Response, ApiError> {
    Err(unknown_subresource(s, sub))
}
