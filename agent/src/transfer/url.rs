//! The check every presigned URL passes before any I/O: the agent holds no
//! credential and only calls URLs that name exactly the request's object.
//!
//! On AWS that is the virtual-hosted regional form,
//! `https://<bucket>.s3.<region>.amazonaws.com/<key>`; on the local backend
//! the emulator's path-style S3 endpoint, `http://<addr>/<bucket>/<key>`
//! (and nothing else). The refusals never repeat the URL, bucket or key.

use std::net::SocketAddr;

use tonic::Status;

use crate::pb;

/// Longest presigned URL accepted.
pub(crate) const MAX_URL_BYTES: usize = 8192;
/// Most headers a presigned request may carry, and the longest one.
const MAX_HEADERS: usize = 32;
const MAX_HEADER_BYTES: usize = 4096;

/// Where the URLs of this agent's transfers must point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum S3Endpoint {
    /// AWS's regional virtual-hosted endpoints, over HTTPS.
    Aws,
    /// The local emulator's path-style endpoint, over plain HTTP.
    Local(SocketAddr),
}

/// A presigned request that passed the check.
#[derive(Clone, Debug)]
pub(crate) struct Checked {
    pub uri: http::Uri,
    pub headers: http::HeaderMap,
}

fn refused() -> Status {
    Status::invalid_argument("a presigned URL does not name the request's object")
}

/// Checks the object itself (bucket and key present and plausible).
#[allow(clippy::result_large_err)]
pub(crate) fn check_object(object: Option<&pb::S3Object>) -> Result<&pb::S3Object, Status> {
    let object = object.ok_or_else(|| Status::invalid_argument("object is required"))?;
    let bucket_ok = (3..=63).contains(&object.bucket.len())
        && object
            .bucket
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    if !bucket_ok {
        return Err(Status::invalid_argument("invalid object bucket"));
    }
    if object.key.is_empty() || object.key.len() > 1024 || object.key.contains('\0') {
        return Err(Status::invalid_argument("invalid object key"));
    }
    if !object
        .region
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(Status::invalid_argument("invalid object region"));
    }
    Ok(object)
}

/// Checks one presigned request against `object` and `endpoint`.
#[allow(clippy::result_large_err)]
pub(crate) fn check(
    request: Option<&pb::PresignedRequest>,
    object: &pb::S3Object,
    endpoint: S3Endpoint,
) -> Result<Checked, Status> {
    let request =
        request.ok_or_else(|| Status::invalid_argument("a presigned request is required"))?;
    if request.url.len() > MAX_URL_BYTES {
        return Err(Status::invalid_argument(
            "a presigned URL is longer than 8192 bytes",
        ));
    }
    let uri: http::Uri = request.url.parse().map_err(|_| refused())?;
    let authority = uri.authority().ok_or_else(refused)?;
    if authority.as_str().contains('@') {
        return Err(refused());
    }
    let path = uri.path();
    let expected_path = match endpoint {
        S3Endpoint::Aws => {
            if uri.scheme_str() != Some("https")
                || object.region.is_empty()
                || authority.port_u16().is_some_and(|p| p != 443)
            {
                return Err(refused());
            }
            let host = format!("{}.s3.{}.amazonaws.com", object.bucket, object.region);
            if !authority.host().eq_ignore_ascii_case(&host) {
                return Err(refused());
            }
            format!("/{}", object.key)
        }
        S3Endpoint::Local(addr) => {
            if uri.scheme_str() != Some("http")
                || authority.port_u16() != Some(addr.port())
                || !host_is(authority.host(), addr)
            {
                return Err(refused());
            }
            format!("/{}/{}", object.bucket, object.key)
        }
    };
    if percent_decode(path).as_deref() != Some(expected_path.as_bytes()) {
        return Err(refused());
    }
    if request.headers.len() > MAX_HEADERS {
        return Err(Status::invalid_argument("too many presigned headers"));
    }
    let mut headers = http::HeaderMap::new();
    for (name, value) in &request.headers {
        if name.len() + value.len() > MAX_HEADER_BYTES {
            return Err(Status::invalid_argument("a presigned header is too long"));
        }
        let name = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| Status::invalid_argument("invalid presigned header"))?;
        if name == http::header::HOST || name == http::header::CONTENT_LENGTH {
            return Err(Status::invalid_argument("invalid presigned header"));
        }
        let value = http::HeaderValue::from_str(value)
            .map_err(|_| Status::invalid_argument("invalid presigned header"))?;
        headers.insert(name, value);
    }
    Ok(Checked { uri, headers })
}

/// Whether the URL's host is the endpoint's address (`127.0.0.1`, or
/// `[::1]` for an IPv6 one).
fn host_is(host: &str, addr: SocketAddr) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip == addr.ip())
}

/// `%XX` decoding of a URL path; `None` for a malformed escape.
fn percent_decode(path: &str) -> Option<Vec<u8>> {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object() -> pb::S3Object {
        pb::S3Object {
            bucket: "my-bucket".into(),
            key: "rayito-transfer/sbx/up/a b+c".into(),
            region: "eu-west-1".into(),
        }
    }

    fn req(url: &str) -> pb::PresignedRequest {
        pb::PresignedRequest {
            url: url.into(),
            headers: Default::default(),
        }
    }

    #[test]
    fn aws_urls_must_be_virtual_hosted_regional_https_for_the_object() {
        let ok = "https://my-bucket.s3.eu-west-1.amazonaws.com/rayito-transfer/sbx/up/a%20b%2Bc?X-Amz-Signature=1";
        check(Some(&req(ok)), &object(), S3Endpoint::Aws).expect("accepted");
        for bad in [
            "http://my-bucket.s3.eu-west-1.amazonaws.com/rayito-transfer/sbx/up/a%20b%2Bc",
            "https://my-bucket.s3.us-east-1.amazonaws.com/rayito-transfer/sbx/up/a%20b%2Bc",
            "https://other.s3.eu-west-1.amazonaws.com/rayito-transfer/sbx/up/a%20b%2Bc",
            "https://my-bucket.s3.eu-west-1.amazonaws.com.evil.example/rayito-transfer/sbx/up/a%20b%2Bc",
            "https://my-bucket.s3.eu-west-1.amazonaws.com:8443/rayito-transfer/sbx/up/a%20b%2Bc",
            "https://u@my-bucket.s3.eu-west-1.amazonaws.com/rayito-transfer/sbx/up/a%20b%2Bc",
            "https://my-bucket.s3.eu-west-1.amazonaws.com/rayito-transfer/sbx/up/other",
            "https://s3.eu-west-1.amazonaws.com/my-bucket/rayito-transfer/sbx/up/a%20b%2Bc",
            "https://my-bucket.s3.eu-west-1.amazonaws.com/rayito-transfer/sbx/up/a%2",
            "not a url",
        ] {
            let e = check(Some(&req(bad)), &object(), S3Endpoint::Aws).expect_err(bad);
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{bad}");
            assert!(!e.message().contains("my-bucket") && !e.message().contains("sbx"));
        }
    }

    #[test]
    fn local_urls_must_be_path_style_on_the_emulator_endpoint() {
        let ep = S3Endpoint::Local("127.0.0.1:4567".parse().unwrap());
        let ok = "http://127.0.0.1:4567/my-bucket/rayito-transfer/sbx/up/a%20b%2Bc?x=1";
        check(Some(&req(ok)), &object(), ep).expect("accepted");
        for bad in [
            "https://127.0.0.1:4567/my-bucket/rayito-transfer/sbx/up/a%20b%2Bc",
            "http://127.0.0.1:4568/my-bucket/rayito-transfer/sbx/up/a%20b%2Bc",
            "http://127.0.0.2:4567/my-bucket/rayito-transfer/sbx/up/a%20b%2Bc",
            "http://localhost:4567/my-bucket/rayito-transfer/sbx/up/a%20b%2Bc",
            "http://127.0.0.1:4567/other-bucket/rayito-transfer/sbx/up/a%20b%2Bc",
            "https://my-bucket.s3.eu-west-1.amazonaws.com/rayito-transfer/sbx/up/a%20b%2Bc",
        ] {
            let e = check(Some(&req(bad)), &object(), ep).expect_err(bad);
            assert_eq!(
                e.message(),
                "a presigned URL does not name the request's object"
            );
        }
    }

    #[test]
    fn long_urls_and_bad_headers_are_refused() {
        let ep = S3Endpoint::Local("127.0.0.1:4567".parse().unwrap());
        let long = format!(
            "http://127.0.0.1:4567/my-bucket/k?{}",
            "a".repeat(MAX_URL_BYTES)
        );
        let e = check(Some(&req(&long)), &object(), ep).expect_err("too long");
        assert_eq!(e.message(), "a presigned URL is longer than 8192 bytes");
        let mut r = req("http://127.0.0.1:4567/my-bucket/rayito-transfer/sbx/up/a%20b%2Bc");
        r.headers.insert("host".into(), "elsewhere".into());
        assert!(check(Some(&r), &object(), ep).is_err());
        assert!(check(None, &object(), ep).is_err());
    }
}
