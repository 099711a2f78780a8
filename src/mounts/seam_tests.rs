//! The S3 mounts through the create pipeline, over the seam tests'
//! injected control plane and an in-memory agent with ConfigureService:
//! the section sent in one Configure, the agent's answers mapped
//! (`Unimplemented`, `Mount`), a failure terminating the sandbox or keeping
//! it, a refused check launching nothing, connect and pools refusing
//! mounts, and the view (one ConfigureStatus per read, recovered on
//! connect).

use std::sync::atomic::Ordering;

use rayito_agent::pb as agent_pb;

use super::{MountState, S3Mount};
use crate::error::{ErrorKind, SandboxError};
use crate::sandbox::SandboxBuilder;
use crate::sandbox::steps::Step;
use crate::seam_tests::{FakeConfigure, FakeControl, FakeHealth, builder, configure_agent, ready};

fn features() -> agent_pb::AgentFeatures {
    agent_pb::AgentFeatures {
        configure: true,
        s3_mounts: true,
        ..Default::default()
    }
}

fn health(features: Option<agent_pb::AgentFeatures>) -> FakeHealth {
    FakeHealth {
        answer: Ok(agent_pb::HealthResponse {
            features,
            ..ready()
        }),
    }
}

fn status(phase: agent_pb::S3MountPhase, class: &str) -> agent_pb::ConfigureStatusResponse {
    agent_pb::ConfigureStatusResponse {
        s3_mounts: Some(agent_pb::S3MountsStatus {
            mounts: vec![agent_pb::S3MountState {
                mount_path: "/mnt/data".into(),
                phase: phase as i32,
                error_class: class.into(),
            }],
        }),
        ..Default::default()
    }
}

fn mounted() -> agent_pb::ConfigureStatusResponse {
    status(agent_pb::S3MountPhase::Mounted, "")
}

fn with_mount(b: SandboxBuilder) -> SandboxBuilder {
    b.mount("/mnt/data", S3Mount::new("data-bucket").prefix("team7/"))
}

#[tokio::test]
async fn create_sends_the_section_in_one_configure_and_the_view_reads_each_time() {
    let control = FakeControl::throttled(0);
    let configure = FakeConfigure::applying(mounted());
    configure.answer_with(agent_pb::SectionCode::Pending, "");
    let agent = configure_agent(health(Some(features())), configure.clone());
    let sandbox = with_mount(builder(control.clone(), Some(agent)))
        .create()
        .await
        .unwrap();

    let sent = configure.received();
    assert_eq!(sent.len(), 1, "one Configure");
    assert_eq!(sent[0].request_id.len(), 32);
    assert!(sent[0].efs_volumes.is_none() && sent[0].secret_gateway.is_none());
    assert_eq!(
        sent[0].s3_mounts.as_ref().expect("the section").mounts,
        [agent_pb::S3Mount {
            mount_path: "/mnt/data".into(),
            bucket: "data-bucket".into(),
            prefix: "team7/".into(),
            read_only: true,
            allow_overwrite: false,
            allow_delete: false,
        }]
    );
    // PENDING: polled until mounted (the first read shows it).
    assert_eq!(configure.status_reads.load(Ordering::SeqCst), 1);

    let statuses = sandbox.mounts().statuses().await.unwrap();
    assert_eq!(statuses["/mnt/data"].state, MountState::Mounted);
    assert_eq!(statuses["/mnt/data"].last_error_class, None);
    let one = sandbox.mounts().get("/mnt/data").await.unwrap().unwrap();
    assert_eq!(one.state.as_str(), "mounted");
    assert!(sandbox.mounts().get("/mnt/none").await.unwrap().is_none());
    assert_eq!(
        configure.status_reads.load(Ordering::SeqCst),
        4,
        "one read each"
    );
    assert_eq!(control.terminations.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_failed_mount_names_its_path_and_terminates_the_sandbox_unless_kept() {
    for keep in [false, true] {
        let control = FakeControl::throttled(0);
        let configure =
            FakeConfigure::applying(status(agent_pb::S3MountPhase::Failed, "iam_denied"));
        configure.answer_with(agent_pb::SectionCode::Pending, "");
        let agent = configure_agent(health(Some(features())), configure.clone());
        let err = with_mount(builder(control.clone(), Some(agent)))
            .keep_on_failure(keep)
            .create()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Mount);
        assert_eq!(err.mount_code().map(|c| c.as_str()), Some("iam_denied"));
        assert!(
            err.to_string().starts_with(
                "mounts: /mnt/data could not be mounted (iam_denied); give the sandbox an execution role"
            ),
            "{err}"
        );
        assert!(!format!("{err} {err:?}").contains("data-bucket"));
        let terminated = control.terminations.load(Ordering::SeqCst);
        if keep {
            assert_eq!(err.meta().kept_sandbox_id(), Some("microvm-1"));
            assert_eq!(terminated, 0);
        } else {
            assert_eq!(err.meta().kept_sandbox_id(), None);
            assert_eq!(terminated, 1);
        }
    }
}

#[tokio::test]
async fn a_refused_section_is_a_mount_error_and_terminates_the_sandbox() {
    for (code, class, status, shown) in [
        (
            agent_pb::SectionCode::Invalid,
            "not_allowed",
            "INVALID",
            "not_allowed",
        ),
        (
            agent_pb::SectionCode::Failed,
            "helper_missing",
            "FAILED",
            "helper_missing",
        ),
        (
            agent_pb::SectionCode::Failed,
            "brand_new",
            "FAILED",
            "unknown",
        ),
    ] {
        let control = FakeControl::throttled(0);
        let configure = FakeConfigure::applying(mounted());
        configure.answer_with(code, class);
        let agent = configure_agent(health(Some(features())), configure.clone());
        let err = with_mount(builder(control.clone(), Some(agent)))
            .create()
            .await
            .unwrap_err();
        assert_eq!(err.mount_code().map(|c| c.as_str()), Some(class));
        assert!(
            err.to_string().starts_with(&format!(
                "mounts: the agent refused the s3_mounts section ({status}, {shown}); "
            )),
            "{err}"
        );
        assert_eq!(control.terminations.load(Ordering::SeqCst), 1);
        assert_eq!(configure.status_reads.load(Ordering::SeqCst), 0);
    }
}

#[tokio::test(start_paused = true)]
async fn a_mount_still_pending_after_15_s_is_a_timeout() {
    let control = FakeControl::throttled(0);
    let configure = FakeConfigure::applying(status(agent_pb::S3MountPhase::Pending, ""));
    configure.answer_with(agent_pb::SectionCode::Pending, "");
    let agent = configure_agent(health(Some(features())), configure.clone());
    let err = with_mount(builder(control.clone(), Some(agent)))
        .create()
        .await
        .unwrap_err();
    assert_eq!(err.mount_code().map(|c| c.as_str()), Some("timeout"));
    assert!(
        err.to_string()
            .starts_with("mounts: /mnt/data was still not mounted after 15 s (timeout); "),
        "{err}"
    );
    // Every 0.25 s for 15 s, the last poll at the bound.
    assert_eq!(configure.status_reads.load(Ordering::SeqCst), 60);
    assert_eq!(control.terminations.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_agent_without_the_feature_is_unimplemented_and_terminated() {
    // The flag off: nothing is sent. The flag on, but UNSUPPORTED: sent.
    let flag_off = agent_pb::AgentFeatures {
        configure: true,
        ..Default::default()
    };
    for (offered, answer, sends, reason) in [
        (
            flag_off,
            agent_pb::SectionCode::Applied,
            0,
            "the agent in this sandbox does not offer S3 mounts",
        ),
        (
            features(),
            agent_pb::SectionCode::Unsupported,
            1,
            "the agent in this sandbox answered that it cannot mount S3 (UNSUPPORTED)",
        ),
    ] {
        let control = FakeControl::throttled(0);
        let configure = FakeConfigure::applying(mounted());
        configure.answer_with(answer, "");
        let agent = configure_agent(health(Some(offered)), configure.clone());
        let err = with_mount(builder(control.clone(), Some(agent)))
            .create()
            .await
            .unwrap_err();
        match &err {
            SandboxError::Unimplemented { feature, .. } => assert_eq!(&**feature, "mounts"),
            other => panic!("{other:?}"),
        }
        assert!(
            err.to_string()
                .starts_with(&format!("feature mounts is not available: {reason}")),
            "{err}"
        );
        assert_eq!(configure.received().len(), sends);
        assert_eq!(control.terminations.load(Ordering::SeqCst), 1);
    }
}

#[tokio::test]
async fn a_refused_check_launches_nothing() {
    type Setup = fn(SandboxBuilder) -> SandboxBuilder;
    let cases: [(Setup, ErrorKind); 3] = [
        (
            |b| b.mount("/mnt/data/", S3Mount::new("data")),
            ErrorKind::InvalidArgument,
        ),
        (
            |b| b.mount("/mnt/data", S3Mount::new("")),
            ErrorKind::InvalidArgument,
        ),
        (
            |b| {
                b.template("rayito-base")
                    .mount("/mnt/data", S3Mount::new("data"))
            },
            ErrorKind::Unimplemented,
        ),
    ];
    for (setup, kind) in cases {
        let control = FakeControl::throttled(0);
        let err = setup(builder(control.clone(), None))
            .create()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), kind, "{err}");
        assert_eq!(control.runs.load(Ordering::SeqCst), 0);
    }
}

#[test]
fn connect_and_a_pools_builder_refuse_mounts() {
    let b = with_mount(crate::Sandbox::builder());
    let err = super::Steps.check_connect(&b).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid mounts: connect mounts nothing (it reads the sandbox's own mounts from its agent); drop mount() from the builder, or create a new sandbox"
    );
    let err = super::Steps.check_pooled(&b).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid mounts: a pool's warm sandboxes never carry S3 mounts; drop them from the pool's builder and create the sandbox with them instead"
    );
    let plain = crate::Sandbox::builder();
    super::Steps.check_connect(&plain).unwrap();
    super::Steps.check_pooled(&plain).unwrap();
}

#[tokio::test]
async fn the_view_is_empty_without_mounts_and_recovered_when_the_agent_offers_them() {
    let control = FakeControl::throttled(0);
    let mut shared = mounted();
    shared.s3_mounts.as_mut().unwrap().mounts[0].phase = 77;
    let configure = FakeConfigure::applying(shared);
    let agent = configure_agent(health(Some(features())), configure.clone());
    let sandbox = builder(control, Some(agent)).create().await.unwrap();
    assert!(sandbox.mounts().statuses().await.unwrap().is_empty());
    assert_eq!(configure.status_reads.load(Ordering::SeqCst), 0);

    let part = sandbox
        .parts()
        .get::<super::view::HandleMounts>()
        .expect("the part")
        .clone();
    for off in [None, Some(agent_pb::AgentFeatures::default())] {
        part.recover(off.as_ref());
        assert!(sandbox.mounts().statuses().await.unwrap().is_empty());
    }
    assert_eq!(configure.status_reads.load(Ordering::SeqCst), 0);
    part.recover(Some(&features()));
    let statuses = sandbox.mounts().statuses().await.unwrap();
    // A phase this SDK does not know reads pending.
    assert_eq!(statuses["/mnt/data"].state, MountState::Pending);
    assert_eq!(configure.status_reads.load(Ordering::SeqCst), 1);
}
