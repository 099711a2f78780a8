//! `Client::template_info`: GetMicrovmImage through the real AWS
//! client against the local emulator, before any sandbox exists.

use rayito::{Sandbox, SandboxError};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_template_exists_and_a_missing_one_says_so() {
    let client = Sandbox::builder().local().client().await.unwrap();
    let info = client
        .template_info(None)
        .await
        .expect("the local backend's default image");
    assert_eq!(info.name, "rayito-base");
    assert!(
        info.arn.ends_with(":microvm-image:rayito-base"),
        "{}",
        info.arn
    );
    assert_eq!(info.state, "CREATED");
    assert_eq!(info.latest_active_version.as_deref(), Some("1"));

    let err = client
        .template_info(Some("no-such-image"))
        .await
        .expect_err("an image the emulator does not have");
    assert!(
        matches!(err, SandboxError::SandboxNotFound { .. }),
        "{err:?}"
    );
    assert!(!err.is_retryable());
    assert_eq!(err.meta().aws_code(), Some("ResourceNotFoundException"));
    assert!(
        err.to_string()
            .starts_with("control plane call GetMicrovmImage found no such resource")
            && err.to_string().ends_with(
                "the image is probably missing, check the image ARN or publish the image"
            ),
        "{err}"
    );

    let bad = client
        .template_info(Some("not a name!"))
        .await
        .expect_err("refused before any call");
    assert!(
        matches!(&bad, SandboxError::InvalidArgument { argument: Some(a), .. } if a == "template"),
        "{bad:?}"
    );
}
