//! The protocol's binary tensor data extension (Triton's, which `tritonclient.http` uses by
//! default): a request or an answer whose body is the JSON object followed by raw tensor bytes,
//! the JSON's length in the `Inference-Header-Content-Length` header, and each binary tensor's
//! length in its `binary_data_size` parameter. `FP32` elements are little-endian.

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::{V2Error, bad};

/// The header that carries the JSON part's length.
pub(super) const HEADER_LENGTH: &str = "inference-header-content-length";

/// The parameter that gives a binary tensor's length in bytes.
pub(super) const SIZE: &str = "binary_data_size";

/// A request body split into its JSON part and its binary part (empty without the header).
pub(super) fn split(headers: &HeaderMap, body: Bytes) -> Result<(Bytes, Bytes), V2Error> {
    let Some(length) = headers.get(HEADER_LENGTH) else { return Ok((body, Bytes::new())) };
    let length = length
        .to_str()
        .ok()
        .and_then(|text| text.trim().parse::<usize>().ok())
        .ok_or_else(|| bad(format!("{HEADER_LENGTH} is not a length: {length:?}")))?;
    if length > body.len() {
        return Err(bad(format!("{HEADER_LENGTH} is {length} but the body has {} bytes", body.len())));
    }
    let mut json = body;
    let binary = json.split_off(length);
    Ok((json, binary))
}

/// `bytes` as little-endian `FP32` elements, each finite.
pub(super) fn floats(bytes: &[u8]) -> Result<Vec<f32>, V2Error> {
    if !bytes.len().is_multiple_of(4) {
        return Err(bad(format!("{} bytes of FP32 data: not a whole number of elements", bytes.len())));
    }
    let mut values = Vec::with_capacity(bytes.len() / 4);
    for chunk in bytes.chunks_exact(4) {
        let value = f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        if !value.is_finite() {
            return Err(bad(format!("{value} is not a finite FP32 value")));
        }
        values.push(value);
    }
    Ok(values)
}

/// `values` as little-endian bytes.
#[cfg(test)]
fn bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// An answer of `head` (JSON) followed by `values` as little-endian `FP32` bytes (the body
/// allocated once, at its final size).
pub(super) fn respond(head: &[u8], values: &[f32]) -> Response {
    let length = HeaderValue::from(head.len());
    let mut body = Vec::with_capacity(head.len() + 4 * values.len());
    body.extend_from_slice(head);
    body.extend(values.iter().flat_map(|v| v.to_le_bytes()));
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream")),
        (header::HeaderName::from_static(HEADER_LENGTH), length),
    ];
    (StatusCode::OK, headers, body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_splits_at_the_header_length_and_floats_round_trip() {
        let mut headers = HeaderMap::new();
        headers.insert(HEADER_LENGTH, HeaderValue::from_static("2"));
        let (json, binary) =
            split(&headers, Bytes::from_static(b"{}abcd")).map_err(|e| e.0.status()).unwrap();
        assert_eq!((&json[..], &binary[..]), (&b"{}"[..], &b"abcd"[..]));
        headers.insert(HEADER_LENGTH, HeaderValue::from_static("7"));
        assert!(split(&headers, Bytes::from_static(b"{}abcd")).is_err());
        let values = [1.5_f32, -2.0, 0.25];
        assert_eq!(floats(&bytes(&values)).ok(), Some(values.to_vec()));
        assert!(floats(&[0, 0, 128]).is_err());
        assert!(floats(&f32::INFINITY.to_le_bytes()).is_err());
    }
}
