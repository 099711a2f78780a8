//! The volumes through the create pipeline, over the seam tests' injected
//! control plane and an in-memory agent with ConfigureService: the section
//! sent, the agent's answers mapped (`Unimplemented`, `VolumeMount`), a
//! failure terminating the sandbox or keeping it, the lookup refused
//! before anything launches, connect and pools refusing volumes, and the
//! view (one ConfigureStatus per read, recovered on connect).

use std::net::Ipv4Addr;
use std::sync::atomic::Ordering;

use rayito_agent::pb as agent_pb;

use super::EfsVolume;
use crate::error::{ErrorKind, SandboxError};
use crate::sandbox::steps::Step;
use crate::sandbox::{NetworkConnector, SandboxBuilder};
use crate::seam_tests::{FakeConfigure, FakeControl, FakeHealth, builder, configure_agent, ready};

const FS: &str = "fs-0123456789abcdef0";
const AP: &str = "fsap-0123456789abcdef0";
const CONNECTOR: &str = "arn:aws:lambda:us-east-1:123456789012:network-connector:efs";

fn features() -> agent_pb::AgentFeatures {
    agent_pb::AgentFeatures {
        configure: true,
        efs_volumes: true,
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

fn mounted(paths: &[&str]) -> agent_pb::ConfigureStatusResponse {
    agent_pb::ConfigureStatusResponse {
        efs_volumes: Some(agent_pb::EfsVolumesStatus {
            volumes: paths
                .iter()
                .map(|p| agent_pb::EfsVolumeStatus {
                    mount_path: (*p).into(),
                    state: agent_pb::EfsVolumeState::Mounted as i32,
                    last_error_class: String::new(),
                })
                .collect(),
        }),
        ..Default::default()
    }
}

fn volume() -> EfsVolume {
    EfsVolume::new(FS, AP).mount_target_ip(Ipv4Addr::new(10, 0, 3, 7))
}

/// A create with the volume at `/mnt/data`, its egress and role set.
fn with_volume(b: SandboxBuilder) -> SandboxBuilder {
    b.egress([NetworkConnector::arn(CONNECTOR)])
        .execution_role_arn("arn:aws:iam::123456789012:role/sandbox")
        .volume("/mnt/data", volume())
}

#[tokio::test]
async fn create_sends_the_section_in_one_configure_and_the_view_reads_each_time() {
    let control = FakeControl::throttled(0);
    let configure = FakeConfigure::applying(mounted(&["/mnt/data"]));
    let agent = configure_agent(health(Some(features())), configure.clone());
    let sandbox = with_volume(builder(control.clone(), Some(agent)))
        .create()
        .await
        .unwrap();

    let sent = configure.received();
    assert_eq!(sent.len(), 1, "one Configure");
    assert_eq!(sent[0].request_id.len(), 32);
    assert!(sent[0].s3_mounts.is_none() && sent[0].secret_gateway.is_none());
    let mounts = &sent[0].efs_volumes.as_ref().expect("the section").mounts;
    assert_eq!(
        mounts,
        &[agent_pb::EfsVolumeMount {
            mount_path: "/mnt/data".into(),
            file_system_id: FS.into(),
            access_point_id: AP.into(),
            read_only: false,
            mount_target_ip: "10.0.3.7".into(),
        }]
    );
    // APPLIED: no status read during create.
    assert_eq!(configure.status_reads.load(Ordering::SeqCst), 0);

    let statuses = sandbox.volumes().statuses().await.unwrap();
    assert_eq!(statuses["/mnt/data"].state.as_str(), "mounted");
    assert_eq!(statuses["/mnt/data"].last_error_class, None);
    let one = sandbox.volumes().get("/mnt/data").await.unwrap().unwrap();
    assert_eq!(one.state, super::VolumeState::Mounted);
    assert!(sandbox.volumes().get("/mnt/none").await.unwrap().is_none());
    assert_eq!(
        configure.status_reads.load(Ordering::SeqCst),
        3,
        "one read each"
    );
    assert_eq!(control.terminations.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_pending_answer_waits_for_mounted_and_a_failed_volume_names_its_path() {
    let control = FakeControl::throttled(0);
    let configure = FakeConfigure::applying(mounted(&["/mnt/data"]));
    configure.answer_with(agent_pb::SectionCode::Pending, "");
    let agent = configure_agent(health(Some(features())), configure.clone());
    with_volume(builder(control.clone(), Some(agent)))
        .create()
        .await
        .unwrap();
    assert_eq!(configure.status_reads.load(Ordering::SeqCst), 1);

    let control = FakeControl::throttled(0);
    let mut failed = mounted(&["/mnt/data"]);
    failed.efs_volumes.as_mut().unwrap().volumes[0].state = agent_pb::EfsVolumeState::Failed as i32;
    failed.efs_volumes.as_mut().unwrap().volumes[0].last_error_class = "tls".into();
    let configure = FakeConfigure::applying(failed);
    configure.answer_with(agent_pb::SectionCode::Pending, "");
    let agent = configure_agent(health(Some(features())), configure.clone());
    let err = with_volume(builder(control.clone(), Some(agent)))
        .create()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::VolumeMount);
    assert_eq!(
        err.to_string(),
        "volumes: /mnt/data could not be mounted (tls); see docs/volumes.md for what the code means"
    );
    assert_eq!(control.terminations.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_refused_or_failed_section_terminates_the_sandbox_unless_kept() {
    for (code, class, want) in [
        (
            agent_pb::SectionCode::Invalid,
            "invalid_path",
            "invalid_path",
        ),
        (agent_pb::SectionCode::Failed, "not_found", "not_found"),
        (
            agent_pb::SectionCode::Failed,
            "efs-proxy said no",
            "unknown",
        ),
    ] {
        for keep in [false, true] {
            let control = FakeControl::throttled(0);
            let configure = FakeConfigure::applying(mounted(&[]));
            configure.answer_with(code, class);
            let agent = configure_agent(health(Some(features())), configure.clone());
            let err = with_volume(builder(control.clone(), Some(agent)))
                .keep_on_failure(keep)
                .create()
                .await
                .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::VolumeMount);
            assert!(
                err.to_string().starts_with(&format!(
                    "volumes: the volumes could not be mounted ({want}); see docs/volumes.md for what the code means"
                )),
                "{err}"
            );
            let terminated = control.terminations.load(Ordering::SeqCst);
            if keep {
                assert_eq!(err.meta().kept_sandbox_id(), Some("microvm-1"));
                assert_eq!(terminated, 0);
            } else {
                assert_eq!(err.meta().kept_sandbox_id(), None);
                assert_eq!(terminated, 1);
            }
            assert_eq!(configure.status_reads.load(Ordering::SeqCst), 0);
        }
    }
}

const IMAGE_REASON: &str = "feature volumes is not available: this image has no amazon-efs-utils (or does not run with additionalOsCapabilities ALL); publish the optional image rayito-base-caps-efs with `rayito image publish --with-efs --os-capabilities ALL` and create the sandbox from it; see docs/volumes.md";

#[tokio::test]
async fn an_agent_without_the_feature_is_unimplemented_and_terminated() {
    // The flag off: nothing is sent. The flag on, but UNSUPPORTED: sent.
    let flag_off = agent_pb::AgentFeatures {
        configure: true,
        ..Default::default()
    };
    for (offered, answer, sends) in [
        (flag_off, agent_pb::SectionCode::Applied, 0),
        (features(), agent_pb::SectionCode::Unsupported, 1),
    ] {
        let control = FakeControl::throttled(0);
        let configure = FakeConfigure::applying(mounted(&[]));
        configure.answer_with(answer, "");
        let agent = configure_agent(health(Some(offered)), configure.clone());
        let err = with_volume(builder(control.clone(), Some(agent)))
            .create()
            .await
            .unwrap_err();
        match &err {
            SandboxError::Unimplemented { feature, .. } => assert_eq!(&**feature, "volumes"),
            other => panic!("{other:?}"),
        }
        assert_eq!(err.to_string(), IMAGE_REASON);
        assert_eq!(configure.received().len(), sends);
        assert_eq!(control.terminations.load(Ordering::SeqCst), 1);
    }
}

#[tokio::test]
async fn without_an_aws_configuration_the_lookup_launches_nothing() {
    let control = FakeControl::throttled(0);
    let configure = FakeConfigure::applying(mounted(&["/mnt/data"]));
    let agent = configure_agent(health(Some(features())), configure.clone());
    let err = with_volume(builder(control.clone(), Some(agent)))
        .volume("/mnt/data", EfsVolume::new(FS, AP))
        .create()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Volume);
    assert_eq!(
        err.to_string(),
        "volumes: this client has no AWS configuration to look up a mount target with; pass each volume's mount_target_ip, or use a client with an AWS configuration"
    );
    assert_eq!(control.runs.load(Ordering::SeqCst), 0);
    assert!(configure.received().is_empty());
}

#[tokio::test]
async fn a_refused_check_launches_nothing() {
    let control = FakeControl::throttled(0);
    let err = builder(control.clone(), None)
        .volume("/mnt/data", volume())
        .create()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(
        err.to_string()
            .starts_with("invalid volumes: volumes need egress"),
        "{err}"
    );
    assert_eq!(control.runs.load(Ordering::SeqCst), 0);
}

#[test]
fn connect_and_a_pools_builder_refuse_volumes() {
    let b = with_volume(crate::Sandbox::builder());
    let err = super::Steps.check_connect(&b).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid volumes: connect mounts no volume (it reads the sandbox's own from its agent); drop volume() from the builder, or create a new sandbox"
    );
    let err = super::Steps.check_pooled(&b).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid volumes: a pool's warm sandboxes never carry volumes; drop volume() from the pool's builder and create a sandbox with volumes with Sandbox::builder()"
    );
    let plain = crate::Sandbox::builder();
    super::Steps.check_connect(&plain).unwrap();
    super::Steps.check_pooled(&plain).unwrap();
}

#[tokio::test]
async fn the_view_is_empty_without_volumes_and_recovered_when_the_agent_offers_them() {
    let control = FakeControl::throttled(0);
    let configure = FakeConfigure::applying(mounted(&["/mnt/shared"]));
    let agent = configure_agent(health(Some(features())), configure.clone());
    let sandbox = builder(control, Some(agent)).create().await.unwrap();
    assert!(sandbox.volumes().statuses().await.unwrap().is_empty());
    assert_eq!(configure.status_reads.load(Ordering::SeqCst), 0);

    let part = sandbox
        .parts()
        .get::<super::view::HandleVolumes>()
        .expect("the part")
        .clone();
    for off in [None, Some(agent_pb::AgentFeatures::default())] {
        part.recover(off.as_ref());
        assert!(sandbox.volumes().statuses().await.unwrap().is_empty());
    }
    assert_eq!(configure.status_reads.load(Ordering::SeqCst), 0);
    part.recover(Some(&features()));
    let statuses = sandbox.volumes().statuses().await.unwrap();
    assert_eq!(statuses.keys().collect::<Vec<_>>(), ["/mnt/shared"]);
    assert_eq!(configure.status_reads.load(Ordering::SeqCst), 1);
}
