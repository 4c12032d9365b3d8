//! A `multipart/form-data` body with one file field (RFC 7578), written by hand: the format is
//! a few lines, and a crate for it would pull in a stream stack we do not need.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{BufMut, Bytes, BytesMut};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The content type and body of a form whose only field `field` is the file `filename` of
/// type `content_type`.
pub fn single_file_form(
    field: &str,
    filename: &str,
    content_type: &str,
    data: &[u8],
) -> (String, Bytes) {
    let boundary = boundary_not_in(data);
    let mut body = BytesMut::with_capacity(data.len() + 256);
    body.put_slice(b"--");
    body.put_slice(boundary.as_bytes());
    body.put_slice(b"\r\nContent-Disposition: form-data; name=\"");
    body.put_slice(quoted(field).as_bytes());
    body.put_slice(b"\"; filename=\"");
    body.put_slice(quoted(filename).as_bytes());
    body.put_slice(b"\"\r\nContent-Type: ");
    body.put_slice(content_type.as_bytes());
    body.put_slice(b"\r\n\r\n");
    body.put_slice(data);
    body.put_slice(b"\r\n--");
    body.put_slice(boundary.as_bytes());
    body.put_slice(b"--\r\n");
    (
        format!("multipart/form-data; boundary={boundary}"),
        body.freeze(),
    )
}

/// A boundary that does not occur in `data` (a collision is astronomically unlikely; it is
/// checked anyway, because a collision would corrupt the upload silently).
fn boundary_not_in(data: &[u8]) -> String {
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let mixed = (n ^ u64::from(nanos).rotate_left(32)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let boundary = format!("polygateway-{mixed:016x}{n:08x}");
        if !data
            .windows(boundary.len())
            .any(|w| w == boundary.as_bytes())
        {
            return boundary;
        }
    }
}

/// A value for a quoted header parameter: `"`, CR and LF percent-encoded (RFC 7578 §4.2).
fn quoted(value: &str) -> String {
    value
        .replace('"', "%22")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_one_well_formed_part() {
        let (content_type, body) =
            single_file_form("file", "scan \"1\".png", "image/png", b"\x89PNG");
        let boundary = content_type
            .strip_prefix("multipart/form-data; boundary=")
            .expect("boundary parameter");
        let expected = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"scan %221%22.png\"\r\nContent-Type: image/png\r\n\r\n\u{89}PNG\r\n--{boundary}--\r\n"
        );
        assert_eq!(body.len(), expected.len() - 1); // \u{89} is one byte in the body, two in UTF-8
        assert!(body.starts_with(format!("--{boundary}\r\n").as_bytes()));
        assert!(body.ends_with(format!("\r\n--{boundary}--\r\n").as_bytes()));
    }

    #[test]
    fn boundaries_differ_and_avoid_the_data() {
        let a = boundary_not_in(b"");
        let b = boundary_not_in(b"");
        assert_ne!(a, b);
        assert!(a.len() <= 70, "RFC 2046 limit");
    }
}
