//! The IAM action of every AWS call the SDK can make, per cargo feature.
//!
//! One row per operation a file of the edge calls. The tests below read
//! the edge's files and fail when a call has no row (or a row no call),
//! and check the policies docs/aws.md shows (the same documents `rayito
//! setup` deploys: a test in `crate::setup::templates` pins them equal)
//! against these rows: what a policy grants beyond them is listed in
//! [`WIDER`] with the reason.

/// One AWS call of the edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(test), allow(dead_code))] // `permissions` reads features and actions
pub(crate) struct Call {
    /// The cargo feature that compiles it (`core`: every build).
    pub feature: &'static str,
    /// The edge's file that makes it (relative to `src/aws/`).
    pub file: &'static str,
    /// The AWS SDK's operation (the fluent call, in snake case).
    pub operation: &'static str,
    /// The IAM action it needs (`None`: STS's GetCallerIdentity, which
    /// IAM never denies).
    pub action: Option<&'static str>,
}

const fn call(
    feature: &'static str,
    file: &'static str,
    operation: &'static str,
    action: &'static str,
) -> Call {
    Call {
        feature,
        file,
        operation,
        action: Some(action),
    }
}

/// Every AWS call of the SDK, by feature.
pub(crate) const CALLS: &[Call] = &[
    // The sandboxes themselves: every build.
    call(
        "core",
        "microvms/mod.rs",
        "run_microvm",
        "lambda:RunMicrovm",
    ),
    call(
        "core",
        "microvms/mod.rs",
        "get_microvm",
        "lambda:GetMicrovm",
    ),
    call(
        "core",
        "microvms/mod.rs",
        "list_microvms",
        "lambda:ListMicrovms",
    ),
    call(
        "core",
        "microvms/mod.rs",
        "terminate_microvm",
        "lambda:TerminateMicrovm",
    ),
    call(
        "core",
        "microvms/mod.rs",
        "suspend_microvm",
        "lambda:SuspendMicrovm",
    ),
    call(
        "core",
        "microvms/mod.rs",
        "resume_microvm",
        "lambda:ResumeMicrovm",
    ),
    call(
        "core",
        "microvms/mod.rs",
        "create_microvm_auth_token",
        "lambda:CreateMicrovmAuthToken",
    ),
    call(
        "core",
        "microvms/mod.rs",
        "get_microvm_image",
        "lambda:GetMicrovmImage",
    ),
    // Template builds and image publishing.
    call(
        "templates",
        "microvms/images.rs",
        "get_microvm_image",
        "lambda:GetMicrovmImage",
    ),
    call(
        "templates",
        "microvms/images.rs",
        "get_microvm_image_version",
        "lambda:GetMicrovmImageVersion",
    ),
    call(
        "templates",
        "microvms/images.rs",
        "list_microvm_image_versions",
        "lambda:ListMicrovmImageVersions",
    ),
    call(
        "templates",
        "microvms/images.rs",
        "list_microvm_images",
        "lambda:ListMicrovmImages",
    ),
    call(
        "templates",
        "microvms/images.rs",
        "list_managed_microvm_image_versions",
        "lambda:ListManagedMicrovmImageVersions",
    ),
    call(
        "templates",
        "microvms/images.rs",
        "update_microvm_image_version",
        "lambda:UpdateMicrovmImageVersion",
    ),
    call(
        "templates",
        "microvms/images.rs",
        "delete_microvm_image_version",
        "lambda:DeleteMicrovmImageVersion",
    ),
    call(
        "templates",
        "microvms/images.rs",
        "create_microvm_image",
        "lambda:CreateMicrovmImage",
    ),
    call(
        "templates",
        "microvms/images.rs",
        "update_microvm_image",
        "lambda:UpdateMicrovmImage",
    ),
    call(
        "templates",
        "s3/artifacts.rs",
        "head_object",
        "s3:GetObject",
    ),
    call("templates", "s3/artifacts.rs", "put_object", "s3:PutObject"),
    call("templates", "s3/artifacts.rs", "get_object", "s3:GetObject"),
    call(
        "templates",
        "cloudwatch_logs/build.rs",
        "describe_log_streams",
        "logs:DescribeLogStreams",
    ),
    call(
        "templates",
        "cloudwatch_logs/build.rs",
        "get_log_events",
        "logs:GetLogEvents",
    ),
    Call {
        feature: "templates",
        file: "sts.rs",
        operation: "get_caller_identity",
        action: None,
    },
    // `rayito setup` and `rayito doctor`.
    call("setup", "s3/artifacts.rs", "head_bucket", "s3:ListBucket"),
    call(
        "setup",
        "cloudformation.rs",
        "describe_stacks",
        "cloudformation:DescribeStacks",
    ),
    call(
        "setup",
        "cloudformation.rs",
        "get_template",
        "cloudformation:GetTemplate",
    ),
    call(
        "setup",
        "cloudformation.rs",
        "create_stack",
        "cloudformation:CreateStack",
    ),
    call(
        "setup",
        "cloudformation.rs",
        "update_stack",
        "cloudformation:UpdateStack",
    ),
    call(
        "setup",
        "cloudformation.rs",
        "describe_stack_events",
        "cloudformation:DescribeStackEvents",
    ),
    // `rayito mounts policy destroy` (rayito::stacks).
    call(
        "setup",
        "cloudformation.rs",
        "delete_stack",
        "cloudformation:DeleteStack",
    ),
    // The pool's shared store and the metadata index.
    call("dynamodb", "dynamodb.rs", "put_item", "dynamodb:PutItem"),
    call(
        "dynamodb",
        "dynamodb.rs",
        "update_item",
        "dynamodb:UpdateItem",
    ),
    call(
        "dynamodb",
        "dynamodb.rs",
        "delete_item",
        "dynamodb:DeleteItem",
    ),
    call("dynamodb", "dynamodb.rs", "query", "dynamodb:Query"),
    call(
        "dynamodb",
        "dynamodb.rs",
        "batch_get_item",
        "dynamodb:BatchGetItem",
    ),
    call(
        "dynamodb",
        "dynamodb.rs",
        "create_table",
        "dynamodb:CreateTable",
    ),
    call(
        "dynamodb",
        "dynamodb.rs",
        "describe_table",
        "dynamodb:DescribeTable",
    ),
    call(
        "dynamodb",
        "dynamodb.rs",
        "update_time_to_live",
        "dynamodb:UpdateTimeToLive",
    ),
    // Checkpoint listings and staged transfers, with the caller's
    // credentials (presigned requests are the caller's calls too: the
    // agent sends them signed by the caller).
    call("s3", "s3/objects.rs", "list_objects_v2", "s3:ListBucket"),
    call("s3", "s3/objects.rs", "delete_object", "s3:DeleteObject"),
    call("s3", "s3/objects.rs", "put_object", "s3:PutObject"),
    call("s3", "s3/objects.rs", "get_object", "s3:GetObject"),
    call(
        "s3",
        "s3/objects.rs",
        "create_multipart_upload",
        "s3:PutObject",
    ),
    call("s3", "s3/objects.rs", "upload_part", "s3:PutObject"),
    call(
        "s3",
        "s3/objects.rs",
        "complete_multipart_upload",
        "s3:PutObject",
    ),
    call(
        "s3",
        "s3/objects.rs",
        "abort_multipart_upload",
        "s3:AbortMultipartUpload",
    ),
    call("s3", "s3/presign.rs", "get_object", "s3:GetObject"),
    call("s3", "s3/presign.rs", "put_object", "s3:PutObject"),
    call("s3", "s3/presign.rs", "upload_part", "s3:PutObject"),
    call("s3", "s3/presign.rs", "delete_object", "s3:DeleteObject"),
    // Sandbox logs.
    call(
        "logs",
        "cloudwatch_logs/sandbox.rs",
        "describe_log_streams",
        "logs:DescribeLogStreams",
    ),
    call(
        "logs",
        "cloudwatch_logs/sandbox.rs",
        "get_log_events",
        "logs:GetLogEvents",
    ),
    // The secret store and cache.
    call(
        "secrets",
        "secretsmanager/mod.rs",
        "get_secret_value",
        "secretsmanager:GetSecretValue",
    ),
    call(
        "secrets",
        "secretsmanager/mod.rs",
        "create_secret",
        "secretsmanager:CreateSecret",
    ),
    call(
        "secrets",
        "secretsmanager/mod.rs",
        "put_secret_value",
        "secretsmanager:PutSecretValue",
    ),
    call(
        "secrets",
        "secretsmanager/mod.rs",
        "update_secret",
        "secretsmanager:UpdateSecret",
    ),
    call(
        "secrets",
        "secretsmanager/mod.rs",
        "describe_secret",
        "secretsmanager:DescribeSecret",
    ),
    call(
        "secrets",
        "secretsmanager/mod.rs",
        "list_secrets",
        "secretsmanager:ListSecrets",
    ),
    call(
        "secrets",
        "secretsmanager/mod.rs",
        "delete_secret",
        "secretsmanager:DeleteSecret",
    ),
    // EFS volumes: the mount target a sandbox's volume mounts through.
    call(
        "efs",
        "efs/mount_targets.rs",
        "describe_mount_targets",
        "elasticfilesystem:DescribeMountTargets",
    ),
    // The volume store and EfsVolumes (the stack, its network check and
    // the deletion of its retained file system).
    call(
        "efs",
        "efs/access_points.rs",
        "create_access_point",
        "elasticfilesystem:CreateAccessPoint",
    ),
    call(
        "efs",
        "efs/access_points.rs",
        "describe_access_points",
        "elasticfilesystem:DescribeAccessPoints",
    ),
    call(
        "efs",
        "efs/access_points.rs",
        "delete_access_point",
        "elasticfilesystem:DeleteAccessPoint",
    ),
    call(
        "efs",
        "efs/file_systems.rs",
        "describe_file_systems",
        "elasticfilesystem:DescribeFileSystems",
    ),
    call(
        "efs",
        "efs/file_systems.rs",
        "describe_mount_targets",
        "elasticfilesystem:DescribeMountTargets",
    ),
    call(
        "efs",
        "efs/file_systems.rs",
        "delete_file_system",
        "elasticfilesystem:DeleteFileSystem",
    ),
    call("efs", "ec2/mod.rs", "describe_vpcs", "ec2:DescribeVpcs"),
    call(
        "efs",
        "ec2/mod.rs",
        "describe_vpc_attribute",
        "ec2:DescribeVpcAttribute",
    ),
    call(
        "efs",
        "ec2/mod.rs",
        "describe_subnets",
        "ec2:DescribeSubnets",
    ),
    call(
        "efs",
        "ec2/mod.rs",
        "describe_route_tables",
        "ec2:DescribeRouteTables",
    ),
    call(
        "efs",
        "cloudformation.rs",
        "describe_stacks",
        "cloudformation:DescribeStacks",
    ),
    call(
        "efs",
        "cloudformation.rs",
        "create_stack",
        "cloudformation:CreateStack",
    ),
    call(
        "efs",
        "cloudformation.rs",
        "update_stack",
        "cloudformation:UpdateStack",
    ),
    call(
        "efs",
        "cloudformation.rs",
        "describe_stack_events",
        "cloudformation:DescribeStackEvents",
    ),
    call(
        "efs",
        "cloudformation.rs",
        "delete_stack",
        "cloudformation:DeleteStack",
    ),
    // Quotas: Service Quotas (our awsJson call), the counted sandboxes and
    // their image versions' memory.
    // The fleet: the images and their versions beside the sandboxes.
    call(
        "fleet",
        "microvms/mod.rs",
        "list_microvm_images",
        "lambda:ListMicrovmImages",
    ),
    call(
        "fleet",
        "microvms/mod.rs",
        "list_microvm_image_versions",
        "lambda:ListMicrovmImageVersions",
    ),
    call(
        "quotas",
        "servicequotas.rs",
        "list_service_quotas",
        "servicequotas:ListServiceQuotas",
    ),
    call(
        "quotas",
        "microvms/mod.rs",
        "list_microvms",
        "lambda:ListMicrovms",
    ),
    call(
        "quotas",
        "microvms/images.rs",
        "get_microvm_image_version",
        "lambda:GetMicrovmImageVersion",
    ),
    // Cost: Cost Explorer's bill, and the estimate's sandboxes as quotas.
    call(
        "cost",
        "costexplorer.rs",
        "get_cost_and_usage",
        "ce:GetCostAndUsage",
    ),
    call(
        "cost",
        "microvms/mod.rs",
        "list_microvms",
        "lambda:ListMicrovms",
    ),
    call(
        "cost",
        "microvms/images.rs",
        "get_microvm_image_version",
        "lambda:GetMicrovmImageVersion",
    ),
    // The IAM simulation (`rayito doctor`): the caller, its role's ARN,
    // the simulator.
    Call {
        feature: "permissions",
        file: "sts.rs",
        operation: "get_caller_identity",
        action: None,
    },
    call("permissions", "iam_simulator.rs", "get_role", "iam:GetRole"),
    call(
        "permissions",
        "iam_simulator.rs",
        "simulate_principal_policy",
        "iam:SimulatePrincipalPolicy",
    ),
];

/// What a documented policy grants beyond the SDK's calls, on purpose:
/// (policy, action, why).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) const WIDER: &[(&str, &str, &str)] = &[
    (
        "RayitoSandboxes",
        "iam:PassRole",
        "RunMicrovm with an execution role: the MicroVMs service checks that the caller may pass it",
    ),
    (
        "SandboxLauncherPolicy",
        "iam:PassRole",
        "RunMicrovm with an execution role: the MicroVMs service checks that the caller may pass it",
    ),
    (
        "ImagePublisherPolicy",
        "iam:PassRole",
        "CreateMicrovmImage and UpdateMicrovmImage name the build role: the service checks PassRole on it",
    ),
    (
        "ImagePublisherPolicy",
        "lambda:PassNetworkConnector",
        "CreateMicrovmImage and UpdateMicrovmImage check it on the managed network connectors, even for an image without one",
    ),
    (
        "ImagePublisherPolicy",
        "lambda:ListMicrovmImageBuilds",
        "the stack's policy is the reference tool's too (an account set up by either tool serves both), and its publisher reads builds",
    ),
    (
        "ImagePublisherPolicy",
        "lambda:GetMicrovmImageBuild",
        "the stack's policy is the reference tool's too (an account set up by either tool serves both), and its publisher reads builds",
    ),
    (
        "ImagePublisherPolicy",
        "lambda:TagResource",
        "the stack's policy is the reference tool's too, whose publisher tags the images it manages",
    ),
    (
        "ImagePublisherPolicy",
        "lambda:ListTags",
        "the stack's policy is the reference tool's too, whose publisher reads the images' tags",
    ),
];

/// The IAM actions of `feature`, sorted, without duplicates.
pub(crate) fn actions(feature: &str) -> Vec<&'static str> {
    let mut actions: Vec<_> = CALLS
        .iter()
        .filter(|c| c.feature == feature)
        .filter_map(|c| c.action)
        .collect();
    actions.sort_unstable();
    actions.dedup();
    actions
}

/// The features, in the order of [`CALLS`].
pub(crate) fn features() -> Vec<&'static str> {
    let mut features: Vec<&'static str> = Vec::new();
    for c in CALLS {
        if !features.contains(&c.feature) {
            features.push(c.feature);
        }
    }
    features
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// Every source file of the edge (but this one and the mock tests),
    /// by path under `src/aws/`, with its text.
    fn files() -> Vec<(String, String)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/aws");
        let mut stack = vec![root.clone()];
        let mut files = Vec::new();
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                let name = path
                    .strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                if name.ends_with(".rs")
                    && !["iam.rs", "secretsmanager/mock_tests.rs"].contains(&name.as_str())
                {
                    files.push((name, std::fs::read_to_string(&path).unwrap()));
                }
            }
        }
        files.sort();
        files
    }

    /// Methods of an AWS client that are not operations.
    const NOT_OPERATIONS: &[&str] = &["config", "clone"];

    /// The operations `source` calls on an AWS client: every
    /// `client.<name>()` and `sdk().<name>()` (line breaks and spaces
    /// between them allowed), the code of its tests left out.
    fn operations(source: &str) -> BTreeSet<String> {
        let code = [
            "\n#[cfg(test)]\nmod tests {",
            "\n#[cfg(test)]\npub(crate) mod test_calls {",
        ]
        .iter()
        .filter_map(|marker| source.find(marker))
        .min()
        .map_or(source, |end| &source[..end]);
        let mut found = BTreeSet::new();
        for receiver in ["client", "sdk()"] {
            let mut rest = code;
            while let Some(at) = rest.find(receiver) {
                let before = rest[..at].chars().next_back();
                rest = &rest[at + receiver.len()..];
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let after = rest.trim_start();
                let Some(call) = after.strip_prefix('.') else {
                    continue;
                };
                let name: String = call
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                if !name.is_empty()
                    && call[name.len()..].starts_with("()")
                    && !NOT_OPERATIONS.contains(&name.as_str())
                {
                    found.insert(name);
                }
            }
        }
        found
    }

    #[test]
    fn every_aws_call_of_the_edge_has_its_iam_row_and_every_row_its_call() {
        let files = files();
        let mut missing = Vec::new();
        for (file, source) in &files {
            let called = operations(source);
            let listed: BTreeSet<String> = CALLS
                .iter()
                .filter(|c| c.file == *file)
                .map(|c| c.operation.to_owned())
                .collect();
            for op in called.difference(&listed) {
                missing.push(format!("{file} calls {op} without a row in CALLS"));
            }
            for op in listed.difference(&called) {
                missing.push(format!(
                    "CALLS lists {op} of {file}, which does not call it"
                ));
            }
        }
        for c in CALLS {
            assert!(
                files.iter().any(|(file, _)| file == c.file),
                "{} is not scanned",
                c.file
            );
        }
        assert!(missing.is_empty(), "{}", missing.join("\n"));
    }

    /// The snake-case operation names match their IAM action where the
    /// service names them alike (S3 and STS are the exceptions).
    #[test]
    fn iam_actions_spell_the_operations() {
        for c in CALLS {
            let Some(action) = c.action else { continue };
            let (service, name) = action.split_once(':').unwrap();
            if service == "s3" {
                continue;
            }
            let pascal: String = c
                .operation
                .split('_')
                .map(|w| {
                    let mut chars = w.chars();
                    chars.next().map_or_else(String::new, |f| {
                        f.to_ascii_uppercase().to_string() + chars.as_str()
                    })
                })
                .collect();
            assert_eq!(pascal, name, "{c:?}");
        }
    }

    fn page() -> String {
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/aws.md"))
            .expect("docs/aws.md")
    }

    /// The table of docs/aws.md between `<!-- iam-actions -->` and
    /// `<!-- /iam-actions -->`, as the rows make it.
    fn table() -> String {
        let mut out = String::from("| cargo feature | IAM actions the SDK needs |\n|---|---|\n");
        for feature in features() {
            let actions: Vec<String> = actions(feature).iter().map(|a| format!("`{a}`")).collect();
            out.push_str(&format!("| `{feature}` | {} |\n", actions.join(", ")));
        }
        out
    }

    #[test]
    fn docs_aws_md_lists_exactly_the_actions_of_each_feature() {
        let page = page();
        let (start, end) = ("<!-- iam-actions -->\n", "<!-- /iam-actions -->");
        let shown = page
            .find(start)
            .and_then(|a| {
                let from = a + start.len();
                page[from..].find(end).map(|b| &page[from..from + b])
            })
            .unwrap_or_default();
        assert_eq!(
            shown,
            table(),
            "docs/aws.md's table should read:\n{start}{}{end}",
            table()
        );
    }

    /// The `Allow` actions of the statements of a JSON policy block: the
    /// one after `<!-- setup-json: NAME -->`, or the one holding a
    /// statement with Sid `NAME`.
    fn allowed(page: &str, name: &str) -> BTreeSet<String> {
        let marker = format!("<!-- setup-json: {name} -->");
        let sid = format!("\"Sid\": \"{name}\"");
        let at = page
            .find(&marker)
            .or_else(|| page.find(&sid).and_then(|at| page[..at].rfind("```json\n")))
            .unwrap_or_else(|| panic!("docs/aws.md has no policy {name}"));
        let after = &page[at..];
        let start = after.find("```json\n").unwrap() + "```json\n".len();
        let end = after[start..].find("```").unwrap() + start;
        let doc: serde_json::Value = serde_json::from_str(&after[start..end]).unwrap();
        let mut actions = BTreeSet::new();
        for statement in doc["Statement"].as_array().unwrap() {
            if statement["Effect"] != "Allow" {
                continue;
            }
            match &statement["Action"] {
                serde_json::Value::String(a) => {
                    actions.insert(a.clone());
                }
                serde_json::Value::Array(list) => {
                    actions.extend(list.iter().filter_map(|a| a.as_str().map(str::to_owned)));
                }
                _ => {}
            }
        }
        actions
    }

    /// `policy` grants exactly `wanted` and its [`WIDER`] rows.
    fn grants_exactly(page: &str, policy: &str, wanted: &[&str]) {
        let granted = allowed(page, policy);
        let mut expected: BTreeSet<String> = wanted.iter().map(|a| (*a).to_owned()).collect();
        expected.extend(
            WIDER
                .iter()
                .filter(|(p, _, _)| *p == policy)
                .map(|(_, a, _)| (*a).to_owned()),
        );
        let missing: Vec<_> = expected.difference(&granted).collect();
        let extra: Vec<_> = granted.difference(&expected).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "docs/aws.md's {policy} lacks {missing:?} and grants {extra:?} beyond the SDK's calls (list a deliberate one in WIDER)"
        );
    }

    #[test]
    fn the_documented_and_deployed_policies_grant_exactly_the_sdks_calls() {
        let page = page();
        let core = actions("core");
        // The policy of the page's start and the stack's launcher policy:
        // the sandboxes' calls.
        grants_exactly(&page, "RayitoSandboxes", &core);
        grants_exactly(&page, "SandboxLauncherPolicy", &core);
        // The publisher: template builds and publishing, and the doctor's
        // bucket check (HeadBucket, feature `setup`).
        let mut publishing = actions("templates");
        publishing.push("s3:ListBucket");
        grants_exactly(&page, "ImagePublisherPolicy", &publishing);
        // The caller policy (what `rayito doctor` reads): only calls the
        // SDK makes.
        let all: BTreeSet<&str> = CALLS.iter().filter_map(|c| c.action).collect();
        for action in allowed(&page, "CallerPolicy") {
            assert!(
                all.contains(action.as_str()),
                "CallerPolicy grants {action}, which the SDK never calls"
            );
        }
        // Every WIDER row names a policy of the page and an action it grants.
        for (policy, action, why) in WIDER {
            assert!(!why.is_empty());
            assert!(
                allowed(&page, policy).contains(*action),
                "WIDER lists {action} of {policy}, which no longer grants it"
            );
        }
    }
}
