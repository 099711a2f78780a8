//! Handles made with the same AWS settings share one control-plane client
//! (issue 13, goal 5: an idle handle no longer carries an AWS client, its
//! HTTPS connector and its connection pool of its own). Observed from
//! outside: the emulator is reached through a TCP forwarder that counts
//! the connections the SDK opens to it. A second handle from a builder with
//! the same settings makes its control-plane calls on the pooled connection
//! of the first; a handle with other credentials has a client, and so a
//! connection, of its own.

mod sdk_support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rayito::{AwsOptions, Sandbox};
use rayito_agent::emulator::{AccessKey, Emulator, EmulatorConfig};
use tokio::net::{TcpListener, TcpStream};

/// Forwards every connection to `target`; counts them.
async fn counting_forwarder(target: SocketAddr) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                if let Ok(mut outbound) = TcpStream::connect(target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    (url, accepted)
}

fn options(endpoint: &str, key_id: &str) -> AwsOptions {
    AwsOptions::new()
        .endpoint_url(endpoint)
        .region("us-east-1")
        .static_credentials(key_id, "test-secret")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handles_with_the_same_settings_share_one_control_plane_client() {
    let emulator = Emulator::start(EmulatorConfig {
        access_keys: ["AKIDSHAREDCLIENT", "AKIDOTHERCLIENT0"]
            .map(|id| AccessKey::new(id, "test-secret"))
            .to_vec(),
        ..EmulatorConfig::default()
    })
    .await
    .expect("the emulator starts");
    let (endpoint, connections) = counting_forwarder(emulator.addr()).await;
    let create = |key_id: &'static str| {
        Sandbox::builder()
            .aws(options(&endpoint, key_id))
            .template(emulator.image_arn("rayito-base"))
            .create()
    };

    let first = create("AKIDSHAREDCLIENT").await.unwrap();
    let after_first = connections.load(Ordering::SeqCst);
    assert!(
        after_first >= 1,
        "the first create dialled the control plane"
    );

    // Another builder, the same settings: the first handle's client, and
    // its pooled connection.
    let second = create("AKIDSHAREDCLIENT").await.unwrap();
    assert_eq!(
        connections.load(Ordering::SeqCst),
        after_first,
        "the second handle opened a control-plane connection of its own"
    );
    second.get_info().await.unwrap();
    first.get_info().await.unwrap();
    assert_eq!(connections.load(Ordering::SeqCst), after_first);

    // Other credentials: another client, another connection.
    let other = create("AKIDOTHERCLIENT0").await.unwrap();
    assert!(connections.load(Ordering::SeqCst) > after_first);

    for sandbox in [first, second, other] {
        sandbox.kill().await.unwrap();
    }
}
