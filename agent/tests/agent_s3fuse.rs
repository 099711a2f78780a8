//! The local backend's S3 mount helper (`s3fuse`), mounted for real.

mod support;

use support::s3::TestS3;

#[tokio::test(flavor = "multi_thread")]
async fn the_test_s3_serves_signed_requests() {
    let s3 = TestS3::start().await;
    s3.create_bucket("bkt").await;
    s3.put("bkt", "a/b.txt", b"hello".to_vec()).await;
    assert_eq!(
        s3.get("bkt", "a/b.txt").await.as_deref(),
        Some(&b"hello"[..])
    );
    assert_eq!(s3.get("bkt", "a/none").await, None);
}
