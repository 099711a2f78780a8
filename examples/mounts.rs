//! S3 mounts (docs/mounts.md): a bucket prefix mounted into sandboxes. One
//! sandbox writes a file through a writable mount (an object in the bucket
//! as soon as the file is closed) and is refused a delete; a second one,
//! mounting the same prefix read-only, reads it and is refused a write.
//!
//! ```text
//! cargo run --example mounts
//! ```
//!
//! What it needs: root and /dev/fuse on this host (the local agent serves
//! each mount with FUSE in the sandbox's mount namespace). It runs on the
//! embedded local backend and its bucket (`rayito::LOCAL_BUCKET`). A mount
//! reads and writes with the sandbox's execution role, as on AWS, and only
//! buckets the image allowlists (`RAYITO_ALLOWED_MOUNT_BUCKETS` in its
//! environment): the image is built here with that variable set. On AWS,
//! publish the `rayito-base-caps` variant with `--env
//! RAYITO_ALLOWED_MOUNT_BUCKETS=<bucket>` and attach the s3-mounts policy
//! to the role (docs/aws.md).

use rayito::mounts::S3Mount;
use rayito::template::{BuildOptions, Template};
use rayito::{Client, LOCAL_BUCKET};

/// The role the sandboxes run with (the local backend hands each one a
/// key of its S3 for it).
const ROLE: &str = "arn:aws:iam::000000000000:role/rayito-sandbox";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = Client::local().await?;
    let image = "mounts-example";
    let template = Template::new().set_envs([("RAYITO_ALLOWED_MOUNT_BUCKETS", LOCAL_BUCKET)]);
    client
        .templates()
        .build(&template, image, BuildOptions::default())
        .await?;
    let prefix = format!("mounts-example/{:08x}/", rand_u32());

    // The writer: the prefix at /home/user/shared, writable, no delete.
    let writer = client
        .sandbox()
        .template(image)
        .execution_role_arn(ROLE)
        .mount(
            "/home/user/shared",
            S3Mount::new(LOCAL_BUCKET).prefix(&prefix).read_only(false),
        )
        .create()
        .await?;
    for (path, status) in writer.mounts().statuses().await? {
        println!("writer: {path} is {}", status.state);
    }
    writer
        .commands()
        .run("echo hello from the writer > /home/user/shared/hello.txt")
        .await?;
    let delete = writer
        .commands()
        .run("rm /home/user/shared/hello.txt")
        .await;
    println!(
        "a delete without allow_delete: {}",
        if delete.is_err() {
            "refused"
        } else {
            "allowed (unexpected)"
        }
    );

    // The reader: the same prefix, read-only (the default), under /mnt.
    let reader = client
        .sandbox()
        .template(image)
        .execution_role_arn(ROLE)
        .mount("/mnt/shared", S3Mount::new(LOCAL_BUCKET).prefix(&prefix))
        .create()
        .await?;
    let read = reader.commands().run("cat /mnt/shared/hello.txt").await?;
    println!("the reader read: {}", read.stdout.trim());
    let write = reader.commands().run("touch /mnt/shared/other").await;
    println!(
        "a write through the read-only mount: {}",
        if write.is_err() {
            "refused"
        } else {
            "allowed (unexpected)"
        }
    );

    writer.kill().await?;
    reader.kill().await?;
    Ok(())
}

/// A name part no earlier run used.
fn rand_u32() -> u32 {
    use std::hash::{BuildHasher as _, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now()) as u32
}
