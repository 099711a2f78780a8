//! `SandboxBuilder::ingress` / `egress`: the network connectors of
//! RunMicrovm. Refusals come before any call; the values given reach
//! RunMicrovm (the emulator records the request and GetMicrovm echoes it,
//! read back through `get_info`), and nothing is sent when none is given
//! (the emulator then reports its default ingress connector).

use crate::sdk_support;

use rayito::{NetworkConnector, SandboxError};
use rayito_emulator::Operation;
use sdk_support::{builder, emulator};

const OWN: &str = "arn:aws:lambda:us-east-1:123456789012:network-connector:vpc-own";

fn managed(name: &str) -> String {
    format!("arn:aws:lambda:us-east-1:aws:network-connector:aws-network-connector:{name}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connectors_are_checked_before_any_call() {
    let emu = emulator().await;
    let eleven = vec![OWN; 11];
    let cases = [
        (
            builder(&emu).ingress(eleven.clone()),
            "invalid ingress: at most 10 connectors, got 11; pass fewer",
        ),
        (
            builder(&emu).egress(eleven),
            "invalid egress: at most 10 connectors, got 11; pass fewer",
        ),
        (
            builder(&emu).ingress(["ALL_INGRESS", "all_ingress"]),
            "invalid ingress: \"all_ingress\" is neither an ARN (arn:...) nor a managed connector (ALL_INGRESS, NO_INGRESS, SHELL_INGRESS, INTERNET_EGRESS)",
        ),
        (
            builder(&emu).egress([NetworkConnector::arn("vpc-own")]),
            "invalid egress: \"vpc-own\" is neither an ARN (arn:...) nor a managed connector (ALL_INGRESS, NO_INGRESS, SHELL_INGRESS, INTERNET_EGRESS)",
        ),
        (
            builder(&emu).egress(["arn:with a space"]),
            "invalid egress: \"arn:with a space\" is neither an ARN (arn:...) nor a managed connector (ALL_INGRESS, NO_INGRESS, SHELL_INGRESS, INTERNET_EGRESS)",
        ),
    ];
    for (builder, message) in cases {
        let err = builder.create().await.expect_err(message);
        assert!(
            matches!(&err, SandboxError::InvalidArgument { .. }),
            "{err:?}"
        );
        assert_eq!(err.to_string(), message);
    }
    let doc = include_str!("../../docs/network.md");
    for transcribed in [
        "invalid ingress: at most 10 connectors, got 11; pass fewer",
        "invalid egress: \"vpc-own\" is neither an ARN (arn:...) nor a managed connector (ALL_INGRESS, NO_INGRESS, SHELL_INGRESS, INTERNET_EGRESS)",
    ] {
        assert!(
            doc.contains(transcribed),
            "docs/network.md transcribes {transcribed}"
        );
    }
    assert_eq!(emu.calls(Operation::RunMicrovm), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connectors_reach_run_microvm_and_come_back_in_the_info() {
    let emu = emulator().await;
    let sbx = builder(&emu)
        .ingress([NetworkConnector::NoIngress, NetworkConnector::arn(OWN)])
        .egress(["INTERNET_EGRESS"])
        .create()
        .await
        .unwrap();
    let info = sbx.get_info().await.unwrap();
    assert_eq!(info.ingress, vec![managed("NO_INGRESS"), OWN.to_owned()]);
    assert_eq!(info.egress, vec![managed("INTERNET_EGRESS")]);
    assert!(sbx.kill().await.unwrap());

    // None given, or an empty list: nothing is sent, and the emulator's
    // default ingress (what RunMicrovm does without the field) shows.
    for empty in [builder(&emu), builder(&emu).ingress(Vec::<String>::new())] {
        let sbx = empty.create().await.unwrap();
        let info = sbx.get_info().await.unwrap();
        assert_eq!(info.ingress, vec![managed("HTTP_INGRESS")]);
        assert_eq!(info.egress, Vec::<String>::new());
        assert!(sbx.kill().await.unwrap());
    }
}
