//! The DynamoDB metadata index (`SandboxIndex`) against a real
//! DynamoDB-compatible server (moto, `sdk_support::moto`) and the MicroVMs
//! emulator: create writes the row, an indexed list answers from the
//! table only, kill deletes the row, a missing table fails create with
//! `IndexWrite` (terminating the MicroVM, or keeping it) and a list with
//! `SandboxIndex`. A DynamoDB peer of our own answers what moto cannot:
//! keys left unprocessed (retried, then `SandboxIndex { UnprocessedKeys }`),
//! a refused delete (the kill still succeeds), an AWS message naming the
//! table (never repeated).

use crate::sdk_support;

use std::collections::BTreeMap;

use futures_util::TryStreamExt as _;
use rayito::{AwsOptions, ListQuery, SandboxError, SandboxIndex, SandboxState, SandboxSummary};
use rayito_emulator::{Emulator, MicrovmState};
use sdk_support::moto::{MotoServer, http_post};
use sdk_support::{builder, emulator};

/// How the SDK reaches moto's DynamoDB.
fn moto_aws(moto: &MotoServer) -> AwsOptions {
    AwsOptions::new()
        .endpoint_url(moto.endpoint_url())
        .region("us-east-1")
        .static_credentials("AKIDINDEXTEST", "index-test-secret")
}

/// An index on `table` in moto.
fn index(moto: &MotoServer, table: &str) -> SandboxIndex {
    SandboxIndex::dynamodb(table).aws(moto_aws(moto))
}

/// One DynamoDB JSON call straight to moto (not through the SDK): what the
/// table really holds.
fn dynamodb(moto: &MotoServer, target: &str, body: &serde_json::Value) -> serde_json::Value {
    let (status, answer) = http_post(
        moto.port(),
        "/",
        &[
            (
                "Authorization",
                "AWS4-HMAC-SHA256 Credential=AKIDINDEXTEST/20260101/us-east-1/dynamodb/aws4_request, \
                 SignedHeaders=host, Signature=0",
            ),
            ("Content-Type", "application/x-amz-json-1.0"),
            ("X-Amz-Target", &format!("DynamoDB_20120810.{target}")),
        ],
        body.to_string().as_bytes(),
    )
    .expect("moto's DynamoDB answers");
    assert_eq!(status, 200, "{target}: {answer}");
    serde_json::from_str(&answer).expect("a JSON answer")
}

/// The row of `id` in `table`, if any.
fn row(moto: &MotoServer, table: &str, id: &str) -> Option<serde_json::Value> {
    let answer = dynamodb(
        moto,
        "GetItem",
        &serde_json::json!({"TableName": table, "Key": {"pk": {"S": id}}, "ConsistentRead": true}),
    );
    answer.get("Item").cloned()
}

async fn list(query: ListQuery, emu: &Emulator) -> Vec<SandboxSummary> {
    let mut found: Vec<SandboxSummary> = builder(emu)
        .client()
        .await
        .unwrap()
        .list(query)
        .try_collect()
        .await
        .unwrap();
    found.sort_by(|a, b| a.sandbox_id.cmp(&b.sandbox_id));
    found
}

fn ids(found: &[SandboxSummary]) -> Vec<&str> {
    found.iter().map(|s| s.sandbox_id.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_writes_the_row_an_indexed_list_reads_only_the_table_and_kill_deletes_it() {
    let Some(moto) = MotoServer::start() else {
        return;
    };
    let emu = emulator().await;
    let index = index(&moto, "rayito-sandboxes");
    index.create_table().await.unwrap();

    let indexed = builder(&emu)
        .metadata([("user", "42"), ("team", "a")])
        .index(index.clone())
        .create()
        .await
        .unwrap();
    let other_user = builder(&emu)
        .metadata([("user", "7")])
        .index(index.clone())
        .create()
        .await
        .unwrap();
    // Same metadata, no index: it has no row, so an indexed list never shows it.
    let unindexed = builder(&emu)
        .metadata([("user", "42")])
        .create()
        .await
        .unwrap();

    let item = row(&moto, "rayito-sandboxes", indexed.id()).expect("create wrote the row");
    assert_eq!(item["image_arn"]["S"], emu.image_arn("rayito-base"));
    assert_eq!(item["metadata"]["M"]["user"]["S"], "42");
    assert_eq!(item["metadata"]["M"]["team"]["S"], "a");
    let started_ms: u64 = item["started_at_ms"]["N"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let expires: u64 = item["expires_at"]["N"].as_str().unwrap().parse().unwrap();
    // 1 h timeout (+60 s of the platform's margin at most) + the 1 h TTL margin.
    assert!(expires >= started_ms / 1_000 + 7_200, "{item}");
    assert!(expires <= started_ms / 1_000 + 7_200 + 120, "{item}");
    let text = item.to_string();
    assert!(
        !text.contains(indexed.access_token().expose()),
        "no token in the row"
    );

    let wanted = ListQuery::new()
        .metadata([("user", "42")])
        .index(index.clone());
    let found = list(wanted.clone(), &emu).await;
    assert_eq!(ids(&found), [indexed.id()]);
    assert_eq!(
        found[0].metadata,
        Some(BTreeMap::from([
            ("team".to_owned(), "a".to_owned()),
            ("user".to_owned(), "42".to_owned()),
        ]))
    );
    let mut both = vec![indexed.id(), other_user.id()];
    both.sort_unstable();
    assert_eq!(
        ids(&list(ListQuery::new().index(index.clone()), &emu).await),
        both
    );

    // Suspended sandboxes are filtered by metadata too: nothing is probed.
    assert!(indexed.pause().await.unwrap());
    let suspended = list(wanted.clone().states([SandboxState::Suspended]), &emu).await;
    assert_eq!(ids(&suspended), [indexed.id()]);
    assert_eq!(suspended[0].state, SandboxState::Suspended);

    assert!(indexed.kill().await.unwrap());
    assert_eq!(row(&moto, "rayito-sandboxes", indexed.id()), None);
    assert!(list(wanted, &emu).await.is_empty());

    // kill_by_id on the client of a builder with the index deletes the
    // row too; a sandbox without a row is killed all the same.
    assert!(
        builder(&emu)
            .index(index.clone())
            .client()
            .await
            .unwrap()
            .kill_by_id(other_user.id())
            .await
            .unwrap()
    );
    assert_eq!(row(&moto, "rayito-sandboxes", other_user.id()), None);
    assert!(
        builder(&emu)
            .index(index.clone())
            .client()
            .await
            .unwrap()
            .kill_by_id(unindexed.id())
            .await
            .unwrap()
    );
}

/// The one MicroVM `emu` made, and its state.
fn only_microvm(emu: &Emulator) -> (String, MicrovmState) {
    let ids = emu.microvm_ids();
    assert_eq!(ids.len(), 1, "{ids:?}");
    let state = emu.state(&ids[0]).expect("it exists");
    (ids[0].clone(), state)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_table_fails_create_with_index_write_and_terminates_the_microvm() {
    let Some(moto) = MotoServer::start() else {
        return;
    };
    let emu = emulator().await;
    let err = builder(&emu)
        .metadata([("user", "42")])
        .index(index(&moto, "no-such-table"))
        .create()
        .await
        .unwrap_err();
    let (id, state) = only_microvm(&emu);
    assert!(
        matches!(
            &err,
            SandboxError::IndexWrite { aws_code: Some(code), .. } if code == "ResourceNotFoundException"
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "could not write the index row of sandbox {id}: the table does not exist in this region (ResourceNotFoundException); its MicroVM was terminated, fix the index (docs/sandbox-index.md) and create the sandbox again"
        )
    );
    assert_eq!(err.meta().aws_code(), Some("ResourceNotFoundException"));
    assert_eq!(err.meta().http_status(), Some(400));
    assert!(
        matches!(state, MicrovmState::Terminating | MicrovmState::Terminated),
        "{state:?}"
    );
}

/// Kept by the index's `keep_on_failure`, or by the builder's
/// (`SandboxBuilder::keep_on_failure`): the same error, naming the kept
/// MicroVM in its message and `meta().kept_sandbox_id()`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_on_failure_keeps_the_microvm_of_a_failed_index_write() {
    let Some(moto) = MotoServer::start() else {
        return;
    };
    for by_builder in [false, true] {
        let emu = emulator().await;
        let err = if by_builder {
            builder(&emu)
                .index(index(&moto, "no-such-table"))
                .keep_on_failure(true)
        } else {
            builder(&emu).index(index(&moto, "no-such-table").keep_on_failure(true))
        }
        .create()
        .await
        .unwrap_err();
        let (id, state) = only_microvm(&emu);
        assert!(
            matches!(&err, SandboxError::IndexWrite { aws_code: Some(code), .. } if code == "ResourceNotFoundException"),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "could not write the index row of sandbox {id}: the table does not exist in this region (ResourceNotFoundException); its MicroVM was kept (keep on failure) but indexed lists will not show it, kill it when done"
            )
        );
        assert_eq!(err.meta().kept_sandbox_id(), Some(id.as_str()));
        assert!(
            matches!(state, MicrovmState::Pending | MicrovmState::Running),
            "{state:?}"
        );
        assert!(
            builder(&emu)
                .client()
                .await
                .unwrap()
                .kill_by_id(&id)
                .await
                .unwrap()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_indexed_list_on_a_missing_table_fails_with_sandbox_index() {
    let Some(moto) = MotoServer::start() else {
        return;
    };
    let emu = emulator().await;
    let sandbox = builder(&emu).create().await.unwrap();
    let err = builder(&emu)
        .client()
        .await
        .unwrap()
        .list(ListQuery::new().index(index(&moto, "no-such-table")))
        .try_collect::<Vec<_>>()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SandboxError::SandboxIndex { aws_code: Some(code), .. } if code == "ResourceNotFoundException"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the sandbox index call BatchGetItem failed: the table does not exist in this region (ResourceNotFoundException); create it (SandboxIndex::create_table) or name an existing table"
    );
    assert!(err.is(rayito::ErrorKind::SandboxIndex) && !err.is(rayito::ErrorKind::IndexWrite));

    // A bad table name is refused before any call, naming the argument.
    let err = builder(&emu)
        .client()
        .await
        .unwrap()
        .list(ListQuery::new().index(index(&moto, "a/b")))
        .try_collect::<Vec<_>>()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SandboxError::InvalidArgument { argument: Some(a), .. } if a == "index"),
        "{err:?}"
    );
    // The table exists once created; a second create is refused by DynamoDB.
    let made = index(&moto, "made-here");
    made.create_table().await.unwrap();
    let err = made.create_table().await.unwrap_err();
    assert!(
        matches!(&err, SandboxError::SandboxIndex { aws_code: Some(code), .. } if code == "ResourceInUseException"),
        "{err:?}"
    );
    assert!(sandbox.kill().await.unwrap());
}

/// A DynamoDB peer on 127.0.0.1 for what moto cannot do (keys left
/// unprocessed, a refused delete): every call is answered by `answer`
/// with an HTTP status and a JSON body, over plain HTTP/1.1.
struct FakeDynamo {
    url: String,
    /// The `X-Amz-Target` operation of every call, in order.
    calls: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

type Answer = dyn Fn(&str, &serde_json::Value) -> (u16, serde_json::Value) + Send + Sync;

async fn fake_dynamodb(answer: std::sync::Arc<Answer>) -> FakeDynamo {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let calls = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = calls.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let answer = answer.clone();
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    // One request: headers, then Content-Length bytes of body.
                    let head_end = loop {
                        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break at + 4;
                        }
                        let mut chunk = [0u8; 4096];
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
                    let header = |name: &str| {
                        head.lines()
                            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
                            .map(|v| v.trim().to_owned())
                    };
                    let length: usize = header("content-length")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    let target = header("x-amz-target").unwrap_or_default();
                    while buf.len() < head_end + length {
                        let mut chunk = [0u8; 4096];
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let body: serde_json::Value =
                        serde_json::from_slice(&buf[head_end..head_end + length])
                            .unwrap_or_default();
                    buf.drain(..head_end + length);
                    let operation = target.rsplit('.').next().unwrap_or_default().to_owned();
                    let operation = ["batchgetitem", "putitem", "deleteitem"]
                        .iter()
                        .zip(["BatchGetItem", "PutItem", "DeleteItem"])
                        .find(|(low, _)| **low == operation)
                        .map_or(operation.clone(), |(_, name)| name.to_owned());
                    seen.lock().unwrap().push(operation.clone());
                    let (status, json) = answer(&operation, &body);
                    let text = json.to_string();
                    let response = format!(
                        "HTTP/1.1 {status} X\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: {}\r\n\r\n{text}",
                        text.len()
                    );
                    if stream.write_all(response.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    FakeDynamo { url, calls }
}

fn fake_index(peer: &FakeDynamo) -> SandboxIndex {
    SandboxIndex::dynamodb("fake-table").aws(
        AwsOptions::new()
            .endpoint_url(peer.url.clone())
            .region("us-east-1")
            .static_credentials("AKIDINDEXTEST", "index-test-secret"),
    )
}

/// The keys of a BatchGetItem request, left unprocessed.
fn unprocessed(body: &serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "Responses": {"fake-table": []},
        "UnprocessedKeys": {"fake-table": body["RequestItems"]["fake-table"]},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_left_unprocessed_after_the_retries_fail_the_list_never_shorten_it() {
    let emu = emulator().await;
    let sandbox = builder(&emu).create().await.unwrap();
    let peer = fake_dynamodb(std::sync::Arc::new(|_: &str, body: &serde_json::Value| {
        (200, unprocessed(body))
    }))
    .await;
    let err = builder(&emu)
        .client()
        .await
        .unwrap()
        .list(ListQuery::new().index(fake_index(&peer)))
        .try_collect::<Vec<_>>()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SandboxError::SandboxIndex { aws_code: Some(code), .. } if code == "UnprocessedKeys"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the sandbox index left keys unprocessed after 6 attempts of BatchGetItem, so the list would be incomplete; list again later"
    );
    assert_eq!(*peer.calls.lock().unwrap(), vec!["BatchGetItem"; 6]);
    assert!(sandbox.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_left_unprocessed_once_are_asked_again_and_listed() {
    let emu = emulator().await;
    let sandbox = builder(&emu).create().await.unwrap();
    let info = sandbox.get_info().await.unwrap();
    let started_ms = info
        .started_at
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        .to_string();
    let row = serde_json::json!({
        "pk": {"S": sandbox.id()},
        "image_arn": {"S": info.image_arn},
        "image_version": {"S": info.image_version},
        "started_at_ms": {"N": started_ms},
        "metadata": {"M": {"user": {"S": "42"}}},
        "sdk": {"S": "rs/test"},
        "expires_at": {"N": "99999999999"},
    });
    let asked = std::sync::atomic::AtomicUsize::new(0);
    let peer = fake_dynamodb(std::sync::Arc::new(
        move |_: &str, body: &serde_json::Value| {
            if asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                (200, unprocessed(body))
            } else {
                (
                    200,
                    serde_json::json!({"Responses": {"fake-table": [row.clone()]}}),
                )
            }
        },
    ))
    .await;
    let found = list(
        ListQuery::new()
            .metadata([("user", "42")])
            .index(fake_index(&peer)),
        &emu,
    )
    .await;
    assert_eq!(ids(&found), [sandbox.id()]);
    assert_eq!(peer.calls.lock().unwrap().len(), 2);
    assert!(sandbox.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_that_cannot_be_deleted_does_not_fail_the_kill_and_aws_text_is_never_repeated() {
    let emu = emulator().await;
    let peer = fake_dynamodb(std::sync::Arc::new(|operation: &str, _: &serde_json::Value| {
        match operation {
            "PutItem" => (200, serde_json::json!({})),
            _ => (
                400,
                serde_json::json!({
                    "__type": "com.amazonaws.dynamodb.v20120810#AccessDeniedException",
                    "message": "User arn:aws:iam::123456789012:user/secret-user is not authorized on table secret-table",
                }),
            ),
        }
    }))
    .await;
    let index = fake_index(&peer);
    let sandbox = builder(&emu).index(index.clone()).create().await.unwrap();
    assert!(sandbox.kill().await.unwrap(), "the MicroVM is terminated");
    assert_eq!(*peer.calls.lock().unwrap(), ["PutItem", "DeleteItem"]);
    // A live sandbox, so that the list has a row to read.
    let other = builder(&emu).create().await.unwrap();
    let err = builder(&emu)
        .client()
        .await
        .unwrap()
        .list(ListQuery::new().index(index))
        .try_collect::<Vec<_>>()
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the sandbox index call BatchGetItem failed: the AWS credentials may not use the table (AccessDeniedException); grant the IAM actions of docs/sandbox-index.md on the table"
    );
    let everything = format!("{err:?} {err} {}", err.to_wire());
    assert!(!everything.contains("secret"), "{everything}");
    assert_eq!(err.meta().http_status(), Some(400));
    assert!(other.kill().await.unwrap());
}

/// Every by-id kill is the client's: through a client with the index and
/// a tracer (`ClientBuilder::index`, `tracer_provider`), through the client
/// of a builder with them (`SandboxBuilder::client`), and through the
/// builder's deprecated spelling, the row is deleted and a
/// `rayito.sandbox.kill` span naming the sandbox is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_by_id_through_each_entry_point_deletes_the_row_in_its_span() {
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
    let Some(moto) = MotoServer::start() else {
        return;
    };
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let emu = emulator().await;
    let index = index(&moto, "rayito-by-id");
    index.create_table().await.unwrap();
    let mut ids = Vec::new();
    for _ in 0..3 {
        let sbx = builder(&emu).index(index.clone()).create().await.unwrap();
        assert!(
            row(&moto, "rayito-by-id", sbx.id()).is_some(),
            "create wrote the row"
        );
        ids.push(sbx.id().to_owned());
    }

    let client = rayito::Client::builder()
        .aws(sdk_support::aws(&emu))
        .index(index.clone())
        .tracer_provider(&provider)
        .build()
        .await
        .unwrap();
    assert!(client.kill_by_id(&ids[0]).await.unwrap());
    let of_builder = builder(&emu)
        .index(index.clone())
        .tracer_provider(&provider)
        .client()
        .await
        .unwrap();
    assert!(of_builder.kill_by_id(&ids[1]).await.unwrap());
    #[allow(deprecated)]
    let killed = builder(&emu)
        .index(index.clone())
        .tracer_provider(&provider)
        .kill_by_id(&ids[2])
        .await;
    assert!(killed.unwrap());

    for id in &ids {
        assert_eq!(
            row(&moto, "rayito-by-id", id),
            None,
            "{id}: the row is deleted"
        );
        assert_eq!(emu.state(id).map(|s| s.is_ending()), Some(true), "{id}");
    }
    let spans = exporter.get_finished_spans().expect("spans");
    let killed: Vec<String> = spans
        .iter()
        .filter(|span| span.name == "rayito.sandbox.kill")
        .filter_map(|span| {
            span.attributes
                .iter()
                .find(|kv| kv.key.as_str() == "rayito.sandbox.id")
                .map(|kv| kv.value.as_str().into_owned())
        })
        .collect();
    assert_eq!(
        killed, ids,
        "one kill span per entry point, naming its sandbox"
    );
}
