//! Canary: recognisable access tokens never appear in any error's Display,
//! Debug or wire form, nor in anything logged through `tracing` (every
//! target, every level) while those errors are produced for real.
//!
//! The proxy token is minted by the emulator, so its canary lives in the
//! crate's transport tests, which can plant one.

use crate::sdk_support;

use sdk_support::captured::Captured;

use std::sync::OnceLock;
use std::time::Duration;

use rayito::{CommandOptions, SandboxError};
use sdk_support::{builder, emulator};

/// 32 bytes whose base64url form reads as a canary (canonical: 43 chars).
const ACCESS_CANARY: &str = "CANARYaccessTOKENcanaryACCESStokenCANARY0Ak";
/// Another canonical token, used where a wrong token is needed.
const WRONG_CANARY: &str = "CANARYwrongTOKENcanaryWRONGtokenCANARYwr0Ak";

fn capture_tracing() -> Captured {
    static CAPTURED: OnceLock<Captured> = OnceLock::new();
    CAPTURED
        .get_or_init(|| {
            let captured = Captured::default();
            let writer = captured.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_max_level(tracing::Level::TRACE)
                .with_ansi(false)
                .with_writer(move || writer.clone())
                .finish();
            tracing::subscriber::set_global_default(subscriber).expect("one subscriber");
            captured
        })
        .clone()
}

fn assert_clean(what: &str, text: &str) {
    for canary in [ACCESS_CANARY, WRONG_CANARY, "CANARY"] {
        assert!(!text.contains(canary), "{what} contains a canary: {text}");
    }
}

fn check(err: &SandboxError, errors_seen: &mut usize) {
    assert_clean("Display", &err.to_string());
    assert_clean("Debug", &format!("{err:?}"));
    assert_clean("wire form", &err.to_wire());
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        assert_clean("source", &format!("{s} {s:?}"));
        source = s.source();
    }
    *errors_seen += 1;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_never_leak_into_errors_or_logs() {
    let logs = capture_tracing();
    let emu = emulator().await;
    let sbx = builder(&emu)
        .access_token(ACCESS_CANARY)
        .create()
        .await
        .expect("a canonical token is accepted");
    assert_eq!(sbx.access_token().expose(), ACCESS_CANARY);
    assert_clean("Sandbox Debug", &format!("{sbx:?}"));
    let mut seen = 0;

    check(
        &sbx.files().read("/home/user/none").await.unwrap_err(),
        &mut seen,
    );
    check(&sbx.commands().run("exit 7").await.unwrap_err(), &mut seen);
    check(
        &sbx.commands()
            .run_with(
                "sleep 20",
                CommandOptions::new().timeout(Duration::from_secs(1)),
            )
            .await
            .unwrap_err(),
        &mut seen,
    );
    emu.faults().proxy_status(2, 403);
    check(&sbx.commands().run("true").await.unwrap_err(), &mut seen);
    check(
        &builder(&emu)
            .connect(sbx.id(), WRONG_CANARY)
            .await
            .unwrap_err(),
        &mut seen,
    );
    emu.faults().set_disk_reserve(sbx.id(), u64::MAX);
    check(
        &sbx.files().write("/home/user/x", "data").await.unwrap_err(),
        &mut seen,
    );
    emu.faults().expire_deadline(sbx.id());
    check(&sbx.run_code("1").await.unwrap_err(), &mut seen);
    assert!(sbx.kill().await.unwrap());
    check(&sbx.commands().run("true").await.unwrap_err(), &mut seen);
    check(
        &builder(&emu)
            .connect(sbx.id(), ACCESS_CANARY)
            .await
            .unwrap_err(),
        &mut seen,
    );
    assert_eq!(seen, 9);

    let logged = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    // The capture works (the retry events of the 403s are in it) ...
    assert!(logged.contains("rayito::retry"), "nothing captured");
    // ... and holds no token.
    assert_clean("tracing output", &logged);
}
