//! The moto server the AWS-service tests use (`sdk_support::moto`): it
//! starts on a free loopback port, serves S3, and is gone once dropped.

use crate::sdk_support;

use sdk_support::moto::{MotoServer, http_get};

#[test]
fn moto_server_serves_s3_and_stops_on_drop() {
    let Some(moto) = MotoServer::start() else {
        return;
    };
    let port = moto.port();
    assert_eq!(moto.endpoint_url(), format!("http://127.0.0.1:{port}"));
    // An unsigned request is S3's ListBuckets (moto's default service).
    let (status, body) = http_get(port, "/").expect("GET /");
    assert_eq!(status, 200, "{body}");
    assert!(body.starts_with("<?xml"), "{body}");
    assert!(body.contains("<ListAllMyBucketsResult"), "{body}");
    assert!(body.contains("<Buckets/>"), "no bucket yet: {body}");
    drop(moto);
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "nothing listens on {port} after drop"
    );
}
