//! A strict `multipart/form-data` parser (RFC 7578): the mock refuses anything a real
//! FastAPI/Starlette service would refuse, so a sloppy multipart body from the OCR transport
//! fails its tests.

/// One part of a form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The `name` of `Content-Disposition`.
    pub name: String,
    /// The `filename`, when given.
    pub filename: Option<String>,
    /// The part's `Content-Type`, when given.
    pub content_type: Option<String>,
    /// The part's bytes.
    pub data: Vec<u8>,
}

/// The boundary of a `multipart/form-data` content type, or why there is none.
pub fn boundary(content_type: &str) -> Result<String, String> {
    let mut params = content_type.split(';').map(str::trim);
    let media = params.next().unwrap_or_default();
    if !media.eq_ignore_ascii_case("multipart/form-data") {
        return Err(format!(
            "content type is {media:?}, not multipart/form-data"
        ));
    }
    for param in params {
        if let Some((key, value)) = param.split_once('=') {
            if key.trim().eq_ignore_ascii_case("boundary") {
                let value = value.trim();
                let value = value
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .unwrap_or(value);
                let valid = (1..=70).contains(&value.len())
                    && value.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
                    && !value.ends_with(' ');
                return if valid {
                    Ok(value.to_owned())
                } else {
                    Err("invalid boundary".to_owned())
                };
            }
        }
    }
    Err("multipart/form-data without a boundary".to_owned())
}

/// Parse `body` with `boundary`. Every delimiter must be followed by CRLF, every part needs a
/// `Content-Disposition: form-data; name="…"` header, and the body must end with the close
/// delimiter.
pub fn parse(body: &[u8], boundary: &str) -> Result<Vec<Part>, String> {
    let delimiter = format!("--{boundary}");
    let delimiter = delimiter.as_bytes();
    let mut rest = body
        .strip_prefix(delimiter)
        .ok_or("body does not start with the boundary delimiter")?;
    let mut parts = Vec::new();
    loop {
        if let Some(after) = rest.strip_prefix(b"--") {
            if !(after.is_empty() || after == b"\r\n") {
                return Err("bytes after the close delimiter".to_owned());
            }
            if parts.is_empty() {
                return Err("no parts".to_owned());
            }
            return Ok(parts);
        }
        rest = rest
            .strip_prefix(b"\r\n")
            .ok_or("boundary delimiter not followed by CRLF")?;
        let header_end = find(rest, b"\r\n\r\n").ok_or("part headers not terminated")?;
        let headers =
            std::str::from_utf8(&rest[..header_end]).map_err(|_| "non-UTF-8 part headers")?;
        let body_start = header_end + 4;
        let mut close = Vec::with_capacity(delimiter.len() + 2);
        close.extend_from_slice(b"\r\n");
        close.extend_from_slice(delimiter);
        let body_len = find(&rest[body_start..], &close).ok_or("part not closed by a boundary")?;
        parts.push(part(
            headers,
            rest[body_start..body_start + body_len].to_vec(),
        )?);
        rest = &rest[body_start + body_len + close.len()..];
    }
}

fn part(headers: &str, data: Vec<u8>) -> Result<Part, String> {
    let mut name = None;
    let mut filename = None;
    let mut content_type = None;
    for line in headers.split("\r\n") {
        let (key, value) = line
            .split_once(':')
            .ok_or_else(|| format!("malformed part header {line:?}"))?;
        let value = value.trim();
        if key.eq_ignore_ascii_case("content-disposition") {
            let mut params = value.split(';').map(str::trim);
            if params.next() != Some("form-data") {
                return Err("part disposition is not form-data".to_owned());
            }
            for param in params {
                let (k, v) = param
                    .split_once('=')
                    .ok_or("malformed disposition parameter")?;
                let v = v
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .ok_or("disposition parameter not quoted")?;
                match k {
                    "name" => name = Some(v.to_owned()),
                    "filename" => filename = Some(v.to_owned()),
                    _ => {}
                }
            }
        } else if key.eq_ignore_ascii_case("content-type") {
            content_type = Some(value.to_owned());
        }
    }
    Ok(Part {
        name: name.ok_or("part without a name")?,
        filename,
        content_type,
        data,
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &[u8] = b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.png\"\r\nContent-Type: image/png\r\n\r\n\x89PNG\r\n--\r\n--XyZ--\r\n";

    #[test]
    fn parses_a_well_formed_upload() {
        let parts = parse(BODY, "XyZ").expect("valid");
        assert_eq!(
            parts,
            [Part {
                name: "file".into(),
                filename: Some("a.png".into()),
                content_type: Some("image/png".into()),
                data: b"\x89PNG\r\n--".to_vec(),
            }]
        );
        assert_eq!(
            boundary("multipart/form-data; boundary=\"XyZ\"").as_deref(),
            Ok("XyZ")
        );
    }

    #[test]
    fn refuses_sloppy_bodies() {
        let cases: [(&[u8], &str); 5] = [
            (
                b"--XyZ\nContent-Disposition: form-data; name=\"f\"\r\n\r\nx\r\n--XyZ--",
                "LF only",
            ),
            (
                b"--XyZ\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nx",
                "never closed",
            ),
            (
                b"--XyZ\r\nContent-Disposition: form-data\r\n\r\nx\r\n--XyZ--",
                "no name",
            ),
            (
                b"--XyZ\r\nContent-Disposition: form-data; name=f\r\n\r\nx\r\n--XyZ--",
                "unquoted",
            ),
            (b"--XyZ--", "no parts"),
        ];
        for (body, why) in cases {
            assert!(parse(body, "XyZ").is_err(), "{why}");
        }
        assert!(boundary("application/json").is_err());
        assert!(boundary("multipart/form-data").is_err());
    }
}
