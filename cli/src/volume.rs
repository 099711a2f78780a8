//! `rayito volume ...` (the SDK's `VolumeStore`: the volumes, i.e. access
//! points, of an EFS file system) and `rayito volumes ...` (`EfsVolumes`:
//! the efs-volumes stack in an existing VPC, its read-only network check
//! first). docs/volumes.md.

use clap::{Args, Subcommand};
use rayito::volumes::{
    DEFAULT_STACK_NAME, EfsDeployOptions, EfsNetworkReport, EfsStackStatus, EfsVolumes, VolumeInfo,
    VolumeStore,
};
use serde_json::{Value, json};

use crate::commands::{Failure, exit_code};
use crate::{Format, Global, output};

/// The volume subcommands.
#[derive(Debug, Subcommand)]
pub enum VolumeCommand {
    /// Creates a volume (an access point, uid/gid 1000, root directory
    /// /rayito-volumes/NAME); the same name again finds the same one.
    Create {
        #[command(flatten)]
        fs: FileSystemArgs,
        /// The volume's name (1 to 100 of A-Z a-z 0-9 -).
        name: String,
    },
    /// Lists the file system's volumes.
    List {
        #[command(flatten)]
        fs: FileSystemArgs,
    },
    /// Destroys a volume's access point; its files stay on the file system
    /// (exit 0 also when it did not exist: `destroyed: false`).
    Destroy {
        #[command(flatten)]
        fs: FileSystemArgs,
        /// The volume's name.
        name: String,
    },
}

/// The file system of the volumes.
#[derive(Debug, Args)]
pub struct FileSystemArgs {
    /// The EFS file system (fs-...), e.g. the efs-volumes stack's
    /// FileSystemId output.
    #[arg(long, value_name = "FS")]
    file_system_id: String,
}

/// The efs-volumes stack subcommands.
#[derive(Debug, Subcommand)]
pub enum VolumesCommand {
    /// Checks, creating nothing, that a VPC and 1 to 3 subnets can hold the
    /// stack (exit 1 when a finding is FAIL).
    Check(NetworkArgs),
    /// Runs the check and, with no FAIL, deploys the stack.
    Deploy {
        #[command(flatten)]
        network: NetworkArgs,
        /// Grant only ClientMount (read-only volumes).
        #[arg(long)]
        read_only: bool,
        /// Scope the client policy to this access point ARN (repeatable).
        #[arg(long = "access-point-arn", value_name = "ARN")]
        access_point_arns: Vec<String>,
        /// Deny ClientWrite on this access point ARN (repeatable).
        #[arg(long = "read-only-access-point-arn", value_name = "ARN")]
        read_only_access_point_arns: Vec<String>,
        /// The connector's name.
        #[arg(long, default_value = rayito::volumes::DEFAULT_CONNECTOR_NAME)]
        connector_name: String,
        /// Return once CloudFormation accepted the stack, without waiting.
        #[arg(long)]
        no_wait: bool,
    },
    /// The stack's status and outputs.
    Status(StackArgs),
    /// Deletes the stack; the file system is kept unless
    /// --delete-file-system (which deletes its data too).
    Destroy {
        #[command(flatten)]
        stack: StackArgs,
        /// Also delete the retained file system, its access points and all
        /// its data.
        #[arg(long)]
        delete_file_system: bool,
    },
}

/// The stack's name.
#[derive(Debug, Args)]
pub struct StackArgs {
    /// The stack's name.
    #[arg(long, default_value = DEFAULT_STACK_NAME)]
    stack_name: String,
}

/// The VPC and subnets of the check and the deploy.
#[derive(Debug, Args)]
pub struct NetworkArgs {
    #[command(flatten)]
    stack: StackArgs,
    /// The existing VPC (vpc-...).
    #[arg(long)]
    vpc_id: String,
    /// An existing subnet of the VPC (subnet-...; 1 to 3, repeatable or
    /// comma-separated), one per availability zone.
    #[arg(
        long = "subnet-id",
        value_name = "SUBNET",
        value_delimiter = ',',
        required = true
    )]
    subnet_ids: Vec<String>,
}

/// Runs one volume subcommand; returns the exit code.
pub async fn run_volume(global: Global, command: VolumeCommand) -> i32 {
    let format = global.output;
    exit_code(format, volume(&global, command).await)
}

/// Runs one volumes subcommand; returns the exit code.
pub async fn run_volumes(global: Global, command: VolumesCommand) -> i32 {
    let format = global.output;
    exit_code(format, volumes(&global, command).await)
}

/// The profile's AWS configuration, when `--profile` names one.
async fn profile_config(global: &Global) -> Option<aws_config::SdkConfig> {
    let profile = global.profile.as_ref()?;
    let mut loader =
        aws_config::defaults(aws_config::BehaviorVersion::latest()).profile_name(profile);
    if let Some(region) = &global.region {
        loader = loader.region(aws_config::Region::new(region.clone()));
    }
    Some(loader.load().await)
}

async fn store(global: &Global, args: &FileSystemArgs) -> Result<VolumeStore, Failure> {
    let mut store = VolumeStore::new(&args.file_system_id)?;
    if let Some(config) = profile_config(global).await {
        store = store.sdk_config(config);
    }
    if let Some(region) = &global.region {
        store = store.region(region);
    }
    Ok(store)
}

async fn stack(global: &Global, args: &StackArgs) -> EfsVolumes {
    let mut efs = EfsVolumes::new().stack_name(&args.stack_name);
    if let Some(config) = profile_config(global).await {
        efs = efs.sdk_config(config);
    }
    if let Some(region) = &global.region {
        efs = efs.region(region);
    }
    efs
}

/// The efs-volumes stack of the default name, as `volumes check` makes it
/// (the doctor's network check).
pub(crate) async fn efs_volumes(global: &Global) -> EfsVolumes {
    let args = StackArgs {
        stack_name: DEFAULT_STACK_NAME.to_owned(),
    };
    stack(global, &args).await
}

fn info_json(info: &VolumeInfo) -> Value {
    json!({
        "name": info.name,
        "file_system_id": info.file_system_id,
        "access_point_id": info.access_point_id,
        "access_point_arn": info.access_point_arn,
        "root_directory": info.root_directory,
        "state": info.state,
        "region": info.region,
    })
}

async fn volume(global: &Global, command: VolumeCommand) -> Result<i32, Failure> {
    let format = global.output;
    match command {
        VolumeCommand::Create { fs, name } => {
            let info = store(global, &fs).await?.create(&name).await?;
            match format {
                Format::Json => output::json(&info_json(&info)),
                Format::Text => outln!("created {} ({})", info.name, info.access_point_id),
            }
        }
        VolumeCommand::List { fs } => {
            let volumes = store(global, &fs).await?.list().await?;
            match format {
                Format::Json => output::json(&json!({
                    "volumes": volumes.iter().map(info_json).collect::<Vec<_>>(),
                })),
                Format::Text => {
                    for info in &volumes {
                        outln!("{}\t{}", info.name, info.access_point_id);
                    }
                }
            }
        }
        VolumeCommand::Destroy { fs, name } => {
            let destroyed = store(global, &fs).await?.destroy(&name).await?;
            match format {
                Format::Json => output::json(&json!({ "name": name, "destroyed": destroyed })),
                Format::Text if destroyed => outln!("destroyed {name} (its files are kept)"),
                Format::Text => outln!("{name} did not exist"),
            }
        }
    }
    Ok(0)
}

fn report_json(report: &EfsNetworkReport) -> Value {
    json!({
        "vpc_id": report.vpc_id,
        "subnet_ids": report.subnet_ids,
        "availability_zones": report.availability_zones,
        "ok": report.ok(),
        "status": report.status().as_str(),
        "findings": report.findings.iter().map(|f| json!({
            "level": f.level.as_str(),
            "code": f.code,
            "message": f.message,
        })).collect::<Vec<_>>(),
        "cost": report.cost,
    })
}

fn print_report(format: Format, report: &EfsNetworkReport) {
    match format {
        Format::Json => output::json(&report_json(report)),
        Format::Text => {
            for f in &report.findings {
                outln!("{}\t{}\t{}", f.level.as_str(), f.code, f.message);
            }
            outln!("status: {}", report.status().as_str());
        }
    }
}

fn print_status(format: Format, status: Option<&EfsStackStatus>, name: &str) {
    match (format, status) {
        (Format::Json, Some(s)) => output::json(&json!({
            "stack_name": s.stack_name,
            "exists": true,
            "status": s.status,
            "outputs": s.outputs,
        })),
        (Format::Json, None) => output::json(&json!({ "stack_name": name, "exists": false })),
        (Format::Text, Some(s)) => {
            outln!("{}: {}", s.stack_name, s.status);
            for (key, value) in &s.outputs {
                outln!("{key}: {value}");
            }
        }
        (Format::Text, None) => outln!("{name}: not deployed"),
    }
}

async fn volumes(global: &Global, command: VolumesCommand) -> Result<i32, Failure> {
    let format = global.output;
    match command {
        VolumesCommand::Check(network) => {
            let efs = stack(global, &network.stack).await;
            let report = efs.check(&network.vpc_id, &network.subnet_ids).await?;
            print_report(format, &report);
            return Ok(if report.ok() { 0 } else { 1 });
        }
        VolumesCommand::Deploy {
            network,
            read_only,
            access_point_arns,
            read_only_access_point_arns,
            connector_name,
            no_wait,
        } => {
            let efs = stack(global, &network.stack).await;
            let mut options = EfsDeployOptions::default();
            options.allow_write = !read_only;
            options.access_point_arns = access_point_arns;
            options.read_only_access_point_arns = read_only_access_point_arns;
            options.connector_name = connector_name;
            options.wait = !no_wait;
            let status = efs
                .deploy(&network.vpc_id, &network.subnet_ids, options)
                .await?;
            print_status(format, Some(&status), efs.name());
        }
        VolumesCommand::Status(args) => {
            let efs = stack(global, &args).await;
            let status = efs.status().await?;
            print_status(format, status.as_ref(), efs.name());
        }
        VolumesCommand::Destroy {
            stack: args,
            delete_file_system,
        } => {
            let efs = stack(global, &args).await;
            efs.destroy(delete_file_system, true).await?;
            match format {
                Format::Json => output::json(&json!({
                    "stack_name": efs.name(),
                    "destroyed": true,
                    "file_system_deleted": delete_file_system,
                })),
                Format::Text if delete_file_system => {
                    outln!("destroyed {} and its file system", efs.name());
                }
                Format::Text => outln!("destroyed {} (its file system is kept)", efs.name()),
            }
        }
    }
    Ok(0)
}
