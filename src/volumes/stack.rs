//! [`EfsVolumes`]: the efs-volumes stack in a VPC that already exists
//! (docs/volumes.md, "EfsVolumes"): the read-only network check, the
//! deploy (which runs the check first and creates nothing on a `FAIL`),
//! the status, the store of its file system, and the deletion (the stack,
//! and the retained file system only when asked). Building one calls
//! nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use super::network::{EfsNetworkReport, assess, check_inputs};
use super::store::VolumeStore;
use super::store_errors::{FILE_SYSTEM_NOT_FOUND, from_efs};
use super::template::{FILE_SYSTEM_TAG, StackValues, template_value};
use crate::aws::cloudformation::{IamCapability, StackInput, Stacks, UpdateStarted};
use crate::aws::ec2::Ec2;
use crate::aws::efs::{Access, Efs};
use crate::error::SandboxError;
use crate::error::map::aws::from_aws;
use crate::error::messages as m;

/// The stack's default name (the reference's).
pub const DEFAULT_STACK_NAME: &str = "rayito-efs-volumes";
/// The connector's default name.
pub const DEFAULT_CONNECTOR_NAME: &str = "rayito-efs";
/// How long `deploy` and `destroy` wait for the stack by default (a mount
/// target and a connector take minutes).
pub const DEFAULT_STACK_TIMEOUT: Duration = Duration::from_secs(1_800);
/// How often the stack's status is read while waiting, by default.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(5);
/// How long `delete_file_system` waits for the mount targets to go:
/// DescribeMountTargets may list them for a while after the stack deleted
/// them.
pub const MOUNT_TARGET_DRAIN_BUDGET: Duration = Duration::from_secs(120);
/// How often the mount targets are counted during that wait.
pub const MOUNT_TARGET_DRAIN_POLL: Duration = Duration::from_secs(5);

/// What `deploy` puts in the stack besides the network.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EfsDeployOptions {
    /// Grant `ClientWrite` as well as `ClientMount` (default `true`).
    pub allow_write: bool,
    /// Scope the client policy to these access points (ARNs); empty (the
    /// default): any access point of the account and region on this file
    /// system.
    pub access_point_arns: Vec<String>,
    /// Access points (ARNs) that stay read-only even with `allow_write`:
    /// the client policy denies them `ClientWrite` (the `ro` mount option
    /// alone does not stop writes through the TLS tunnel).
    pub read_only_access_point_arns: Vec<String>,
    /// The connector's name (default `rayito-efs`; 1 to 64 of `A-Z a-z 0-9
    /// _ -`, unique in the account and region).
    pub connector_name: String,
    /// Wait for the stack to finish (default `true`).
    pub wait: bool,
}

impl Default for EfsDeployOptions {
    fn default() -> Self {
        Self {
            allow_write: true,
            access_point_arns: Vec::new(),
            read_only_access_point_arns: Vec::new(),
            connector_name: DEFAULT_CONNECTOR_NAME.to_owned(),
            wait: true,
        }
    }
}

/// The stack as CloudFormation shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EfsStackStatus {
    /// The stack's name.
    pub stack_name: String,
    /// `CREATE_COMPLETE`, `UPDATE_IN_PROGRESS`, ...
    pub status: String,
    /// Its outputs (`FileSystemId`, `ConnectorArn`, `CallerPolicyArn`, ...).
    pub outputs: BTreeMap<String, String>,
}

/// EFS volumes in your own VPC: check, deploy, read and delete the
/// efs-volumes stack. Cheap to clone; building one calls nothing.
///
/// ```no_run
/// # async fn demo() -> Result<(), rayito::SandboxError> {
/// use rayito::volumes::{EfsDeployOptions, EfsVolumes};
/// let efs = EfsVolumes::new().region("us-east-1");
/// let subnets = ["subnet-0123456789abcdef0".to_owned()];
/// let report = efs.check("vpc-0123456789abcdef0", &subnets).await?;
/// for finding in &report.findings {
///     println!("{} {} {}", finding.level.as_str(), finding.code, finding.message);
/// }
/// efs.deploy("vpc-0123456789abcdef0", &subnets, EfsDeployOptions::default()).await?;
/// let store = efs.volume_store().await?;
/// store.create("agent-data").await?;
/// efs.destroy(true, true).await?; // the stack, then the file system and its data
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct EfsVolumes {
    stack_name: String,
    access: Access,
    timeout: Duration,
    poll: Duration,
    drain_budget: Duration,
    drain_poll: Duration,
}

impl Default for EfsVolumes {
    fn default() -> Self {
        Self::new()
    }
}

impl EfsVolumes {
    /// The stack `rayito-efs-volumes`, in the environment's region with its
    /// credentials.
    pub fn new() -> Self {
        Self {
            stack_name: DEFAULT_STACK_NAME.to_owned(),
            access: Access::default(),
            timeout: DEFAULT_STACK_TIMEOUT,
            poll: DEFAULT_POLL_INTERVAL,
            drain_budget: MOUNT_TARGET_DRAIN_BUDGET,
            drain_poll: MOUNT_TARGET_DRAIN_POLL,
        }
    }

    /// Another stack name.
    #[must_use]
    pub fn stack_name(mut self, name: impl Into<String>) -> Self {
        self.stack_name = name.into();
        self
    }

    /// The region (for example `us-east-1`) instead of the environment's.
    #[must_use]
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.access.region = Some(region.into());
        self
    }

    /// A loaded AWS configuration to build the clients from.
    #[must_use]
    pub fn sdk_config(mut self, config: aws_types::SdkConfig) -> Self {
        self.access.sdk_config = Some(config);
        self
    }

    /// Another endpoint for EFS, EC2 and CloudFormation (for example a moto
    /// server).
    #[must_use]
    pub fn endpoint_url(mut self, url: impl Into<String>) -> Self {
        self.access.endpoint_url = Some(url.into());
        self
    }

    /// How long to wait for the stack (default 30 minutes) and how often to
    /// read its status meanwhile (default 5 s).
    #[must_use]
    pub fn wait_timing(mut self, timeout: Duration, poll: Duration) -> Self {
        self.timeout = timeout;
        self.poll = poll;
        self
    }

    /// How long `delete_file_system` waits for the mount targets to go
    /// (default 120 s) and how often it counts them (default 5 s).
    #[must_use]
    pub fn drain_timing(mut self, budget: Duration, poll: Duration) -> Self {
        self.drain_budget = budget;
        self.drain_poll = poll;
        self
    }

    /// The stack's name.
    pub fn name(&self) -> &str {
        &self.stack_name
    }

    /// The template `deploy` would send for these values, as JSON (what a
    /// reviewer or `cfn-lint` reads; nothing is called).
    ///
    /// # Errors
    /// `InvalidArgument` as [`deploy`](Self::deploy)'s checks.
    pub fn template(
        vpc_id: &str,
        subnet_ids: &[String],
        options: &EfsDeployOptions,
    ) -> Result<String, SandboxError> {
        check_inputs(vpc_id, subnet_ids)?;
        check_options(options)?;
        Ok(body(vpc_id, subnet_ids, options))
    }

    /// Checks, creating nothing, that the VPC and subnets can hold the
    /// stack: they exist, the subnets are the VPC's, in distinct zones,
    /// with free addresses, and whether the VPC resolves DNS; warns of a
    /// single zone and says how a sandbox would reach the internet.
    /// Calls only `ec2:DescribeVpcs`, `DescribeVpcAttribute`,
    /// `DescribeSubnets`, `DescribeRouteTables`.
    ///
    /// # Errors
    /// `InvalidArgument` (`vpc_id`, `subnet_ids`) before any call; the AWS
    /// mapping when EC2 refuses or does not answer.
    pub async fn check(
        &self,
        vpc_id: &str,
        subnet_ids: &[String],
    ) -> Result<EfsNetworkReport, SandboxError> {
        check_inputs(vpc_id, subnet_ids)?;
        let (config, region) = self.access.load().await?;
        let ec2 = Ec2::new(&config, &region, config.endpoint_url())?;
        let vpc = ec2.vpc(vpc_id).await.map_err(from_aws)?;
        let (subnets, tables) = if vpc.is_some() {
            (
                ec2.subnets(subnet_ids).await.map_err(from_aws)?,
                ec2.route_tables(vpc_id).await.map_err(from_aws)?,
            )
        } else {
            (Vec::new(), Vec::new())
        };
        Ok(assess(vpc_id, subnet_ids, vpc.as_ref(), &subnets, &tables))
    }

    /// Runs [`check`](Self::check) and, only when no finding is `FAIL`,
    /// creates (or updates) the stack in the VPC: the file system, a mount
    /// target per subnet, two security groups, the connector, its operator
    /// role and the client policy. Waits for it unless `options.wait` is
    /// false.
    ///
    /// # Errors
    /// `InvalidArgument` for bad inputs or ARNs, and (`vpc_id`) when the
    /// check fails, naming each failure; nothing is created then. `Stack`
    /// when CloudFormation refuses or the stack fails (its first failed
    /// resource).
    pub async fn deploy(
        &self,
        vpc_id: &str,
        subnet_ids: &[String],
        options: EfsDeployOptions,
    ) -> Result<EfsStackStatus, SandboxError> {
        check_inputs(vpc_id, subnet_ids)?;
        check_options(&options)?;
        let report = self.check(vpc_id, subnet_ids).await?;
        if !report.ok() {
            let reasons: Vec<&str> = report
                .failures()
                .iter()
                .map(|f| f.message.as_str())
                .collect();
            return Err(SandboxError::invalid_argument(
                "vpc_id",
                m::VOLUME_NETWORK_FAILED.render(&[("reasons", &reasons.join("; "))]),
            ));
        }
        let body = body(vpc_id, subnet_ids, &options);
        let stacks = self.stacks().await?;
        let tags = stack_tags();
        let input = StackInput {
            parameters: &[],
            capability: IamCapability::Iam,
            tags: &tags,
        };
        match stacks.describe(&self.stack_name).await? {
            None => stacks.create_with(&self.stack_name, &body, &input).await?,
            Some(state) if state.status.ends_with("_IN_PROGRESS") => {
                return Err(SandboxError::stack_in_progress(
                    &self.stack_name,
                    &state.status,
                ));
            }
            Some(state) if is_blocked(&state.status) => {
                return Err(SandboxError::stack_blocked(&self.stack_name, &state.status));
            }
            Some(_) => {
                if stacks.update_with(&self.stack_name, &body, &input).await?
                    == UpdateStarted::NothingToDo
                {
                    return self.required_status(&stacks).await;
                }
            }
        }
        if options.wait {
            self.wait(&stacks, false).await?;
        }
        self.required_status(&stacks).await
    }

    /// The stack, `None` when it does not exist.
    ///
    /// # Errors
    /// The AWS mapping when DescribeStacks fails.
    pub async fn status(&self) -> Result<Option<EfsStackStatus>, SandboxError> {
        let stacks = self.stacks().await?;
        self.read_status(&stacks).await
    }

    /// A [`VolumeStore`] on the deployed stack's file system (its
    /// `FileSystemId` output), with these credentials and region.
    ///
    /// # Errors
    /// `Volume` when the stack does not exist or has no `FileSystemId`.
    pub async fn volume_store(&self) -> Result<VolumeStore, SandboxError> {
        let file_system_id = self.file_system_id().await?.ok_or_else(|| {
            SandboxError::volume(m::VOLUME_STACK_MISSING.render(&[("stack", &self.stack_name)]))
        })?;
        VolumeStore::with_access(&file_system_id, self.access.clone())
    }

    /// Deletes the stack (connector, groups, mount targets, role, policy).
    /// The file system is retained with its data unless
    /// `delete_file_system`, which then deletes its access points and the
    /// file system itself (everything `deploy` created); that needs `wait`.
    ///
    /// # Errors
    /// `InvalidArgument` (`wait`) for `delete_file_system` without `wait`;
    /// `Stack` when the deletion fails; as
    /// [`delete_file_system`](Self::delete_file_system).
    pub async fn destroy(&self, delete_file_system: bool, wait: bool) -> Result<(), SandboxError> {
        if delete_file_system && !wait {
            return Err(SandboxError::invalid_argument(
                "wait",
                m::VOLUME_STACK_DESTROY_NO_WAIT.render(&[]),
            ));
        }
        let file_system_id = if delete_file_system {
            self.file_system_id().await?
        } else {
            None
        };
        let stacks = self.stacks().await?;
        stacks.delete(&self.stack_name).await?;
        if wait {
            self.wait(&stacks, true).await?;
        }
        if let Some(id) = file_system_id {
            self.delete_file_system(&id).await?;
        }
        Ok(())
    }

    /// Deletes a file system this stack created and retained (after
    /// `destroy(false, ..)`, or a stack deleted by hand): waits until it has
    /// no mount target, deletes its access points, then the file system
    /// with all its data. Refuses one without the tag `rayito=efs-volumes`;
    /// one that no longer exists is a no-op.
    ///
    /// # Errors
    /// `InvalidArgument` (`file_system_id`); `Volume` for a file system
    /// without the tag or with mount targets left after 120 s; as
    /// [`VolumeStore`] for EFS's refusals.
    pub async fn delete_file_system(&self, file_system_id: &str) -> Result<(), SandboxError> {
        let store = VolumeStore::with_access(file_system_id, self.access.clone())?;
        let (config, region) = self.access.load().await?;
        let efs = Efs::new(&config, (!region.is_empty()).then_some(region.as_str()));
        let gone = |f: &crate::error::map::aws::AwsFailure| {
            f.code.as_deref() == Some(FILE_SYSTEM_NOT_FOUND)
        };
        let tags = match efs.file_system_tags(file_system_id).await {
            Ok(Some(tags)) => tags,
            Ok(None) => return Ok(()),
            Err(f) if gone(&f) => return Ok(()),
            Err(f) => return Err(from_efs(f)),
        };
        let tagged = tags
            .iter()
            .any(|(k, v)| k == FILE_SYSTEM_TAG.0 && v == FILE_SYSTEM_TAG.1);
        if !tagged {
            return Err(SandboxError::volume(m::VOLUME_STACK_FOREIGN.render(&[])));
        }
        let by = Instant::now() + self.drain_budget;
        loop {
            match efs.mount_target_count(file_system_id).await {
                Ok(0) => break,
                Ok(_) if Instant::now() < by => tokio::time::sleep(self.drain_poll).await,
                Ok(_) => return Err(SandboxError::volume(m::VOLUME_STACK_DRAIN.render(&[]))),
                Err(f) if gone(&f) => return Ok(()),
                Err(f) => return Err(from_efs(f)),
            }
        }
        match store.delete_every_access_point(&efs).await {
            Err(e) if e.kind() == crate::error::ErrorKind::VolumeNotFound => return Ok(()),
            other => other?,
        }
        match efs.delete_file_system(file_system_id).await {
            Err(f) if gone(&f) => Ok(()),
            other => other.map_err(from_efs),
        }
    }

    async fn stacks(&self) -> Result<Stacks, SandboxError> {
        let (config, region) = self.access.load().await?;
        let config = if region.is_empty() {
            config
        } else {
            config
                .to_builder()
                .region(aws_types::region::Region::new(region))
                .build()
        };
        Ok(Stacks::new(&config, None))
    }

    async fn read_status(&self, stacks: &Stacks) -> Result<Option<EfsStackStatus>, SandboxError> {
        Ok(stacks
            .describe(&self.stack_name)
            .await?
            .map(|state| EfsStackStatus {
                stack_name: self.stack_name.clone(),
                status: state.status,
                outputs: state.outputs,
            }))
    }

    async fn required_status(&self, stacks: &Stacks) -> Result<EfsStackStatus, SandboxError> {
        self.read_status(stacks)
            .await?
            .ok_or_else(|| SandboxError::stack_not_found(&self.stack_name))
    }

    async fn file_system_id(&self) -> Result<Option<String>, SandboxError> {
        Ok(self
            .status()
            .await?
            .and_then(|s| s.outputs.get("FileSystemId").cloned()))
    }

    /// Waits until the stack settles: created or updated, or (`deleting`)
    /// gone.
    async fn wait(&self, stacks: &Stacks, deleting: bool) -> Result<(), SandboxError> {
        let by = Instant::now() + self.timeout;
        loop {
            let Some(state) = stacks.describe(&self.stack_name).await? else {
                return if deleting {
                    Ok(())
                } else {
                    Err(SandboxError::stack_not_found(&self.stack_name))
                };
            };
            match state.status.as_str() {
                "DELETE_COMPLETE" if deleting => return Ok(()),
                "CREATE_COMPLETE" | "UPDATE_COMPLETE" if !deleting => return Ok(()),
                status if status.ends_with("_IN_PROGRESS") => {
                    if Instant::now() >= by {
                        return Err(SandboxError::stack_in_progress(&self.stack_name, status));
                    }
                }
                status => {
                    return Err(match stacks.first_failure(&self.stack_name).await {
                        Ok(Some((resource, status))) => {
                            SandboxError::stack_failed(&self.stack_name, &resource, &status)
                        }
                        _ => SandboxError::stack_blocked(&self.stack_name, status),
                    });
                }
            }
            tokio::time::sleep(self.poll).await;
        }
    }
}

impl VolumeStore {
    /// Deletes every access point of the file system (tagged or not: the
    /// file system itself is going).
    pub(crate) async fn delete_every_access_point(&self, efs: &Efs) -> Result<(), SandboxError> {
        let mut token = None;
        loop {
            let (points, next) = efs
                .access_points_page(self.file_system_id(), "", token.take())
                .await
                .map_err(from_efs)?;
            for point in points {
                match efs.delete_access_point(&point.id).await {
                    Ok(()) => {}
                    Err(f) if f.code.as_deref() == Some("AccessPointNotFound") => {}
                    Err(f) => return Err(from_efs(f)),
                }
            }
            match next {
                Some(next) => token = Some(next),
                None => return Ok(()),
            }
        }
    }
}

/// A stack in one of these states cannot be updated: delete it first.
/// The stack's tags: the ones `OptionalStacks` puts on its efs-volumes
/// stack (component, managed-by, SDK version), so that `rayito volumes
/// deploy` and `rayito stack deploy efs-volumes` make the same stack (a
/// test of `crate::stacks` keeps them equal).
pub(crate) fn stack_tags() -> Vec<(String, String)> {
    vec![
        ("rayito:component".to_owned(), "efs-volumes".to_owned()),
        ("rayito:managed-by".to_owned(), "rayito-sdk".to_owned()),
        (
            "rayito:sdk-version".to_owned(),
            env!("CARGO_PKG_VERSION").to_owned(),
        ),
    ]
}

fn is_blocked(status: &str) -> bool {
    matches!(
        status,
        "CREATE_FAILED"
            | "ROLLBACK_COMPLETE"
            | "ROLLBACK_FAILED"
            | "DELETE_FAILED"
            | "UPDATE_ROLLBACK_FAILED"
            | "IMPORT_ROLLBACK_FAILED"
    )
}

/// `arn:<partition>:elasticfilesystem:<region>:<12 digits>:access-point/fsap-<8..40 hex>`.
fn access_point_arn_ok(arn: &str) -> bool {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let [scheme, partition, service, region, account, resource] = parts[..] else {
        return false;
    };
    scheme == "arn"
        && partition.starts_with("aws")
        && partition
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b == b'-')
        && service == "elasticfilesystem"
        && !region.is_empty()
        && region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && account.len() == 12
        && account.bytes().all(|b| b.is_ascii_digit())
        && resource
            .strip_prefix("access-point/")
            .is_some_and(|id| super::spec::id_ok(id, "fsap-"))
}

fn check_options(options: &EfsDeployOptions) -> Result<(), SandboxError> {
    for (argument, arns) in [
        ("access_point_arns", &options.access_point_arns),
        (
            "read_only_access_point_arns",
            &options.read_only_access_point_arns,
        ),
    ] {
        if let Some(i) = arns.iter().position(|a| !access_point_arn_ok(a)) {
            return Err(SandboxError::invalid_argument(
                argument,
                m::VOLUME_STACK_ARN.render(&[("index", &(i + 1).to_string())]),
            ));
        }
    }
    let name = &options.connector_name;
    if !(1..=64).contains(&name.len())
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(SandboxError::invalid_argument(
            "connector_name",
            m::VOLUME_STACK_CONNECTOR_NAME.render(&[]),
        ));
    }
    Ok(())
}

/// The template's body as sent: pretty JSON.
fn body(vpc_id: &str, subnet_ids: &[String], options: &EfsDeployOptions) -> String {
    let values = StackValues {
        vpc_id,
        subnet_ids,
        connector_name: &options.connector_name,
        allow_write: options.allow_write,
        access_point_arns: &options.access_point_arns,
        read_only_access_point_arns: &options.read_only_access_point_arns,
    };
    serde_json::to_string_pretty(&template_value(&values)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::{EfsDeployOptions, EfsVolumes, access_point_arn_ok};

    #[test]
    fn access_point_arns_follow_efs_format() {
        assert!(access_point_arn_ok(
            "arn:aws:elasticfilesystem:us-east-1:123456789012:access-point/fsap-0123456789abcdef0"
        ));
        for bad in [
            "arn:aws:s3:us-east-1:123456789012:access-point/fsap-0123456789abcdef0",
            "arn:aws:elasticfilesystem:us-east-1:1234:access-point/fsap-0123456789abcdef0",
            "arn:aws:elasticfilesystem:us-east-1:123456789012:file-system/fs-01234567",
            "fsap-0123456789abcdef0",
        ] {
            assert!(!access_point_arn_ok(bad), "{bad}");
        }
    }

    #[test]
    fn option_refusals_are_pinned() {
        let subnets = ["subnet-12345678".to_owned()];
        let options = EfsDeployOptions {
            read_only_access_point_arns: vec!["nope".into()],
            ..EfsDeployOptions::default()
        };
        assert_eq!(
            EfsVolumes::template("vpc-12345678", &subnets, &options)
                .unwrap_err()
                .to_string(),
            "invalid read_only_access_point_arns: value 1 is not the ARN of an EFS access point (arn:aws:elasticfilesystem:<region>:<account>:access-point/fsap-...); pass such ARNs"
        );
        let options = EfsDeployOptions {
            connector_name: "a b".into(),
            ..EfsDeployOptions::default()
        };
        assert_eq!(
            EfsVolumes::template("vpc-12345678", &subnets, &options)
                .unwrap_err()
                .to_string(),
            "invalid connector_name: a connector name is 1 to 64 of A-Z, a-z, 0-9, '_' and '-'; pass such a name"
        );
    }

    #[tokio::test]
    async fn deleting_the_file_system_needs_the_wait() {
        let err = EfsVolumes::new().destroy(true, false).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid wait: deleting the file system needs the wait: it can go only once the stack has deleted its mount targets; pass wait = true"
        );
    }
}
