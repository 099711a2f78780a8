//! `rayito mounts policy`: the `s3-mounts` stack, the managed policy the
//! execution role of sandboxes that mount an S3 bucket needs (`deploy`,
//! `status`, `destroy`). One stack per bucket (docs/aws.md).

use clap::Subcommand;
use rayito::stacks::{S3_MOUNTS_STACK, S3MountsPolicy, S3MountsStack, StackOptions};
use serde_json::json;

use crate::commands::{Backend, Failure};
use crate::output;
use crate::{Format, Global};

/// `rayito mounts ...`.
#[derive(Debug, Subcommand)]
pub enum MountsCommand {
    /// The IAM policy for S3 mounts (the s3-mounts stack), to attach to
    /// the sandboxes' execution role.
    #[command(subcommand)]
    Policy(PolicyCommand),
}

/// `rayito mounts policy ...`.
#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Deploys (or updates) the stack granting one bucket's prefixes and
    /// waits; prints the policy's ARN.
    Deploy {
        /// The bucket (one stack per bucket).
        #[arg(long)]
        bucket: String,
        /// A key prefix to grant (repeatable, at most 4; `*` appended when
        /// missing); none: the whole bucket.
        #[arg(long = "prefix", value_name = "PREFIX")]
        prefixes: Vec<String>,
        /// Grant writes and deletes too (default: reads only).
        #[arg(long)]
        writable: bool,
        /// The stack's name (another bucket needs another name).
        #[arg(long, default_value = S3_MOUNTS_STACK)]
        stack_name: String,
        /// Seconds to wait for the stack.
        #[arg(long, default_value_t = 900)]
        timeout_seconds: u64,
    },
    /// The stack: its bucket, prefixes, access and policy ARN (exit 1
    /// when it does not exist).
    Status {
        /// The stack's name.
        #[arg(long, default_value = S3_MOUNTS_STACK)]
        stack_name: String,
    },
    /// Deletes the stack (its policy only; detach it from roles first).
    Destroy {
        /// The stack's name.
        #[arg(long, default_value = S3_MOUNTS_STACK)]
        stack_name: String,
        /// Seconds to wait for the deletion.
        #[arg(long, default_value_t = 900)]
        timeout_seconds: u64,
    },
}

/// Runs one `mounts` subcommand; returns the exit code.
pub async fn run(global: Global, command: MountsCommand) -> i32 {
    let format = global.output;
    let backend = match crate::commands::backend_or_exit(&global) {
        Ok(backend) => backend,
        Err(code) => return code,
    };
    let MountsCommand::Policy(command) = command;
    crate::commands::exit_code(format, policy(&backend, format, command).await)
}

fn stack_json(stack: &S3MountsStack) -> serde_json::Value {
    json!({
        "stackName": stack.stack_name,
        "status": stack.status,
        "bucket": stack.bucket,
        "prefixes": stack.prefixes,
        "readOnly": stack.read_only,
        "policyArn": stack.policy_arn,
    })
}

fn print_stack(stack: &S3MountsStack) {
    outln!("stack {} {}", stack.stack_name, stack.status);
    outln!("bucket: {}", stack.bucket.as_deref().unwrap_or("-"));
    outln!("prefixes: {}", stack.prefixes.join(","));
    outln!(
        "access: {}",
        match stack.read_only {
            Some(false) => "read and write",
            Some(true) => "read only",
            None => "-",
        }
    );
    outln!(
        "policy: {} (attach it to the execution role)",
        stack.policy_arn.as_deref().unwrap_or("-")
    );
}

async fn policy(backend: &Backend, format: Format, command: PolicyCommand) -> Result<i32, Failure> {
    let client = backend.client().await?;
    let mut options = StackOptions::default();
    match command {
        PolicyCommand::Deploy {
            bucket,
            prefixes,
            writable,
            stack_name,
            timeout_seconds,
        } => {
            options.timeout = std::time::Duration::from_secs(timeout_seconds);
            let mut policy = S3MountsPolicy::new(bucket)
                .read_only(!writable)
                .stack_name(stack_name);
            policy.prefixes = prefixes;
            let done = client.s3_mounts_policies(options).deploy(&policy).await?;
            match format {
                Format::Json => {
                    let mut doc = stack_json(&done.stack);
                    if let Some(obj) = doc.as_object_mut() {
                        obj.insert("action".into(), json!(done.action.as_str()));
                    }
                    output::json(&doc);
                }
                Format::Text => {
                    outln!("{} stack {}", done.action.as_str(), done.stack.stack_name);
                    print_stack(&done.stack);
                }
            }
            Ok(0)
        }
        PolicyCommand::Status { stack_name } => {
            let stack = client
                .s3_mounts_policies(options)
                .status(&stack_name)
                .await?;
            match (format, &stack) {
                (Format::Json, Some(stack)) => output::json(&stack_json(stack)),
                (Format::Json, None) => {
                    output::json(&json!({ "stackName": stack_name, "status": null }))
                }
                (Format::Text, Some(stack)) => print_stack(stack),
                (Format::Text, None) => outln!(
                    "stack {stack_name} does not exist; deploy it with rayito mounts policy deploy --bucket BUCKET"
                ),
            }
            Ok(if stack.is_some() {
                0
            } else {
                output::EXIT_FAILURE
            })
        }
        PolicyCommand::Destroy {
            stack_name,
            timeout_seconds,
        } => {
            options.timeout = std::time::Duration::from_secs(timeout_seconds);
            let deleted = client
                .s3_mounts_policies(options)
                .destroy(&stack_name)
                .await?;
            match format {
                Format::Json => {
                    output::json(&json!({ "stackName": stack_name, "deleted": deleted }))
                }
                Format::Text if deleted => outln!("deleted stack {stack_name}"),
                Format::Text => outln!("stack {stack_name} does not exist: nothing to delete"),
            }
            Ok(0)
        }
    }
}
