//! A real S3 on loopback for the agent's tests: the S3 REST API of `s3s`
//! (SigV4 checked against one access key) over `s3s-fs` (objects kept as
//! files in a temporary directory), path-style at
//! `http://127.0.0.1:PORT/<bucket>/<key>`, as the emulator serves it.
//!
//! [`TestS3::local_s3`] is what the agent signs with on the local backend;
//! [`TestS3::client`] is an `aws-sdk-s3` client for the test's own checks.

use std::net::SocketAddr;

use hyper_util::rt::{TokioExecutor, TokioIo};
use rayito_agent::persist::LocalS3;
use s3s::service::S3ServiceBuilder;
use tokio::task::JoinHandle;

/// The access key every request must be signed with.
pub const ACCESS_KEY: &str = "AKIARAYITOTESTKEY001";
/// Its secret.
pub const SECRET_KEY: &str = "rayito-test-secret-key-0000000000000000000";
/// The region requests are signed for.
pub const REGION: &str = "us-east-1";

/// One S3 server, stopped when dropped.
#[derive(Debug)]
pub struct TestS3 {
    addr: SocketAddr,
    root: tempfile::TempDir,
    task: JoinHandle<()>,
}

impl Drop for TestS3 {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestS3 {
    /// Binds 127.0.0.1:0 and serves on the current runtime.
    pub async fn start() -> Self {
        let root = tempfile::tempdir().expect("temp dir for the objects");
        let fs = s3s_fs::FileSystem::new(root.path()).expect("s3s-fs over the temp dir");
        let mut builder = S3ServiceBuilder::new(fs);
        builder.set_auth(s3s::auth::SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
        let service = builder.build();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let service = service.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(
                        move |req: http::Request<hyper::body::Incoming>| {
                            let service = service.clone();
                            async move { service.call(req.map(s3s::Body::from)).await }
                        },
                    );
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Self { addr, root, task }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The directory the objects live in (`<root>/<bucket>/<key>`).
    pub fn root(&self) -> &std::path::Path {
        self.root.path()
    }

    /// What the agent signs with: this server and its key.
    pub fn local_s3(&self) -> LocalS3 {
        LocalS3 {
            endpoint_url: self.endpoint(),
            region: REGION.to_owned(),
            access_key_id: ACCESS_KEY.to_owned(),
            secret_access_key: SECRET_KEY.to_owned(),
            session_token: None,
        }
    }

    /// This server with a key it does not know (every request is 403).
    pub fn local_s3_unknown_key(&self) -> LocalS3 {
        LocalS3 {
            access_key_id: "AKIANOTAKEYOFTHISS3".to_owned(),
            ..self.local_s3()
        }
    }

    /// An `aws-sdk-s3` client of this server (path-style).
    pub fn client(&self) -> aws_sdk_s3::Client {
        let creds =
            aws_sdk_s3::config::Credentials::new(ACCESS_KEY, SECRET_KEY, None, None, "test");
        let config = aws_sdk_s3::Config::builder()
            .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
            .region(aws_sdk_s3::config::Region::new(REGION))
            .endpoint_url(self.endpoint())
            .force_path_style(true)
            .credentials_provider(creds)
            .build();
        aws_sdk_s3::Client::from_conf(config)
    }

    /// Creates `bucket` (an empty one).
    pub async fn create_bucket(&self, bucket: &str) {
        self.client()
            .create_bucket()
            .bucket(bucket)
            .send()
            .await
            .expect("CreateBucket");
    }

    /// PutObject of `body` at `bucket`/`key`.
    pub async fn put(&self, bucket: &str, key: &str, body: impl Into<Vec<u8>>) {
        self.client()
            .put_object()
            .bucket(bucket)
            .key(key)
            .body(aws_sdk_s3::primitives::ByteStream::from(body.into()))
            .send()
            .await
            .expect("PutObject");
    }

    /// Writes an object straight into the store (for large test objects:
    /// no upload through the API), `len` bytes of [`pattern`].
    pub fn put_pattern_file(&self, bucket: &str, key: &str, len: u64) {
        use std::io::Write as _;
        let path = self.root().join(bucket).join(key);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("key's directories");
        let mut file = std::io::BufWriter::new(std::fs::File::create(&path).expect("object file"));
        let mut at = 0u64;
        let mut buf = vec![0u8; 1 << 20];
        while at < len {
            let n = (len - at).min(buf.len() as u64) as usize;
            pattern(at, &mut buf[..n]);
            file.write_all(&buf[..n]).expect("write object");
            at += n as u64;
        }
        file.flush().expect("flush object");
    }

    /// GetObject: the body, or `None` when there is no such key.
    pub async fn get(&self, bucket: &str, key: &str) -> Option<Vec<u8>> {
        match self
            .client()
            .get_object()
            .bucket(bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => Some(
                out.body
                    .collect()
                    .await
                    .expect("object body")
                    .into_bytes()
                    .to_vec(),
            ),
            Err(e) => {
                let service = e.into_service_error();
                assert!(service.is_no_such_key(), "GetObject failed: {service:?}");
                None
            }
        }
    }
}

/// The bytes of a pattern object from offset `at` (not periodic at any
/// power of two, so a misplaced range shows).
pub fn pattern(at: u64, out: &mut [u8]) {
    for (i, b) in out.iter_mut().enumerate() {
        let x = at + i as u64;
        *b = ((x % 251) as u8) ^ ((x / 251 % 13) as u8);
    }
}
