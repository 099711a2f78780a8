//! EFS volumes (docs/volumes.md): a file system's access point mounted
//! into sandboxes. One sandbox writes a file, a second one (mounting the
//! same access point read-only) reads it and cannot write, and a third one,
//! made after both are gone, still finds it: the volume outlives them.
//!
//! ```text
//! cargo run --example volumes --features efs
//! ```
//!
//! What it needs: root on this host (the local agent mounts each volume as
//! an idmapped bind in the sandbox's mount namespace). It runs on the local
//! emulator, which serves an EFS of its own (file systems, access points
//! and one available mount target each), reached here through the AWS
//! path, the way a MicroVMs endpoint is; the file system is made with
//! EFS's API. On AWS the file system, its mount targets and the VPC
//! connector come from the efs-volumes stack, and you pass the stack's
//! `ConnectorArn` to `egress` and a role with its `CallerPolicyArn` to
//! `execution_role_arn` (the emulator records both and enforces neither).

use aws_sdk_efs as efs;
use efs::config::{BehaviorVersion, Credentials, Region};
use efs::types::{CreationInfo, PosixUser, RootDirectory};
use rayito::volumes::EfsVolume;
use rayito::{AwsOptions, Sandbox, SandboxBuilder};
use rayito_emulator::{Emulator, EmulatorConfig};

/// Stand-ins for the efs-volumes stack's outputs (recorded, not enforced,
/// by the emulator).
const CONNECTOR: &str = "arn:aws:lambda:us-east-1:123456789012:network-connector:efs-volumes";
const ROLE: &str = "arn:aws:iam::123456789012:role/rayito-sandbox";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let emu = Emulator::start(EmulatorConfig::default()).await?;
    let key = emu.access_key();
    let aws = AwsOptions::new()
        .endpoint_url(emu.endpoint_url())
        .region("us-east-1")
        .static_credentials(key.id.clone(), key.secret.clone());
    let image = emu.image_arn("rayito-base");
    let builder = move || -> SandboxBuilder {
        Sandbox::builder()
            .aws(aws.clone())
            .template(image.clone())
            .egress([CONNECTOR])
            .execution_role_arn(ROLE)
    };

    // A file system and an access point (uid/gid 1000, root directory
    // /rayito-volumes/notes), as the efs-volumes stack and VolumeStore
    // make them on AWS.
    let volume = access_point(&emu, "notes").await?;

    // The writer: the volume at /mnt/notes, writable. `create` looks the
    // file system's mount target up before it launches anything.
    let writer = builder()
        .volume("/mnt/notes", volume.clone())
        .create()
        .await?;
    writer
        .commands()
        .run("echo hello from the writer > /mnt/notes/hello.txt")
        .await?;
    for (path, status) in writer.volumes().statuses().await? {
        println!("writer: {path} is {}", status.state);
    }

    // The reader: the same access point, read-only, at another path.
    let reader = builder()
        .volume("/home/user/notes", volume.clone().read_only(true))
        .create()
        .await?;
    let read = reader
        .commands()
        .run("cat /home/user/notes/hello.txt")
        .await?;
    println!("the reader read: {}", read.stdout.trim());
    let write = reader.commands().run("touch /home/user/notes/other").await;
    match write {
        Ok(_) => println!("a write through the read-only volume: allowed (unexpected)"),
        Err(err) => println!(
            "a write through the read-only volume: refused ({})",
            err.kind()
        ),
    }

    writer.kill().await?;
    reader.kill().await?;

    // A third sandbox, after both: the file is still there.
    let later = builder().volume("/mnt/notes", volume).create().await?;
    let kept = later.commands().run("cat /mnt/notes/hello.txt").await?;
    println!("after both sandboxes: {}", kept.stdout.trim());
    later.kill().await?;
    Ok(())
}

/// A new file system on `emu` and an access point `name` of it, through
/// EFS's API.
async fn access_point(emu: &Emulator, name: &str) -> Result<EfsVolume, Box<dyn std::error::Error>> {
    let key = emu.access_key();
    let efs = efs::Client::from_conf(
        efs::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new(
                &key.id,
                &key.secret,
                None,
                None,
                "example",
            ))
            .endpoint_url(emu.endpoint_url())
            .build(),
    );
    let fs = efs
        .create_file_system()
        .creation_token("rayito-example-volumes")
        .send()
        .await?
        .file_system_id()
        .to_owned();
    let ap = efs
        .create_access_point()
        .client_token(format!("rayito-example-{name}"))
        .file_system_id(&fs)
        .posix_user(PosixUser::builder().uid(1000).gid(1000).build()?)
        .root_directory(
            RootDirectory::builder()
                .path(format!("/rayito-volumes/{name}"))
                .creation_info(
                    CreationInfo::builder()
                        .owner_uid(1000)
                        .owner_gid(1000)
                        .permissions("0750")
                        .build()?,
                )
                .build(),
        )
        .send()
        .await?
        .access_point_id()
        .unwrap_or_default()
        .to_owned();
    Ok(EfsVolume::new(fs, ap).name(name))
}
