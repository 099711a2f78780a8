//! The catalog against its templates, and the deploy rules with their
//! exact messages (docs/stacks.md transcribes them; tests/sdk/stacks.rs
//! keeps the doc in step).

use std::collections::BTreeMap;

use super::model::StackStatus;
use super::plan::{self, plan_parameters, reject_unknown, stack_tags, with_artifact_bucket};
use super::service::components;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn deployed(parameters: &[(&str, &str)]) -> StackStatus {
    StackStatus {
        name: "rayito-x".into(),
        state: "CREATE_COMPLETE".into(),
        outputs: BTreeMap::new(),
        reason_code: None,
        parameters: map(parameters),
        tags: BTreeMap::new(),
    }
}

#[test]
fn the_catalog_lists_the_thirteen_and_setups_two_in_order() {
    let names: Vec<&str> = components().iter().map(|c| c.name).collect();
    assert_eq!(
        names,
        [
            "metadata-index",
            "secrets-access",
            "efs-volumes",
            "s3-mounts",
            "sizes-guard",
            "events-webhooks",
            "otlp-export",
            "templates",
            "custom-domain",
            "dashboard",
            "dashboard-cloudwatch",
            "dashboard-read-role",
            "quota-alerts",
            "iam",
            "artifact-bucket",
        ]
    );
    let unsupported: Vec<&str> = components()
        .iter()
        .filter(|c| !c.supported)
        .map(|c| c.name)
        .collect();
    assert_eq!(
        unsupported,
        [
            #[cfg(not(feature = "efs"))]
            "efs-volumes",
            "custom-domain",
            "iam",
            "artifact-bucket"
        ]
    );
    for c in components() {
        assert_eq!(c.default_stack_name(), format!("rayito-{}", c.name));
        assert_eq!(
            c.supported,
            c.template().is_some() || c.renders_from_parameters(),
            "{}",
            c.name
        );
        assert_eq!(c.supported, c.unsupported_reason.is_none(), "{}", c.name);
    }
}

/// Every supported component's parameters are its template's (names,
/// defaults, NoEcho, required = no default), apart from the artifact key
/// the deploy fills; and its template's capabilities match its IAM.
#[test]
fn each_component_matches_its_template() {
    // A template written from the parameters has none of its own: the
    // efs-volumes test below checks it against the volumes' generator.
    for c in components()
        .iter()
        .filter(|c| c.supported && !c.renders_from_parameters())
    {
        let t: serde_json::Value = serde_json::from_str(&c.template().unwrap()).unwrap();
        let empty = serde_json::Map::new();
        let declared = t["Parameters"].as_object().unwrap_or(&empty);
        let artifact_keys: Vec<&str> = c.artifacts.iter().map(|a| a.parameter_key).collect();
        let mut names: Vec<&str> = declared
            .keys()
            .map(String::as_str)
            .filter(|k| !artifact_keys.contains(k))
            .collect();
        names.sort_unstable();
        let mut listed: Vec<&str> = c.parameters.iter().map(|p| p.name).collect();
        listed.sort_unstable();
        assert_eq!(names, listed, "{}", c.name);
        for p in c.parameters {
            let d = &declared[p.name];
            let default = d.get("Default").map(|v| match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            });
            assert_eq!(default.as_deref(), p.default, "{} {}", c.name, p.name);
            assert_eq!(
                p.required,
                p.default.is_none() && d.get("Default").is_none(),
                "{} {}",
                c.name,
                p.name
            );
            assert_eq!(
                d.get("NoEcho").is_some(),
                p.no_echo,
                "{} {}",
                c.name,
                p.name
            );
        }
        let has_iam = t["Resources"]
            .as_object()
            .unwrap()
            .values()
            .any(|r| r["Type"].as_str().unwrap().starts_with("AWS::IAM::"));
        assert_eq!(has_iam, !c.capabilities.is_empty(), "{}", c.name);
    }
}

#[test]
fn an_unknown_component_names_the_known_ones() {
    let err = plan::component("nope").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid component: no component is called 'nope'; pass one of artifact-bucket, custom-domain, dashboard, dashboard-cloudwatch, dashboard-read-role, efs-volumes, events-webhooks, iam, metadata-index, otlp-export, quota-alerts, s3-mounts, secrets-access, sizes-guard, templates"
    );
}

#[test]
fn an_unsupported_component_says_why() {
    let c = plan::component("custom-domain").unwrap();
    let err = plan::require_supported(c, "deploy").unwrap_err();
    assert_eq!(
        err.to_string(),
        "feature rayito stack deploy custom-domain is not available: the routing function at the distribution's edge (custom domains, domain=) is not built in this SDK yet; see docs/stacks.md"
    );
    let c = plan::component("iam").unwrap();
    assert_eq!(
        plan::require_supported(c, "destroy")
            .unwrap_err()
            .to_string(),
        "feature rayito stack destroy iam is not available: rayito setup deploys it (stack rayito-m0-iam) with its plan and apply; see docs/stacks.md"
    );
}

#[test]
fn unknown_and_missing_parameters_are_refused_sorted() {
    let c = plan::component("sizes-guard").unwrap();
    let err = reject_unknown(c, &map(&[("Zed", "1"), ("Alpha", "2")])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid parameters: sizes-guard has no parameter 'Alpha', 'Zed'; pass only its parameters (rayito stack list shows them)"
    );
    let c = plan::component("templates").unwrap();
    let err = plan_parameters(c, &BTreeMap::new(), None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid parameters: templates needs ArtifactBucketArn, BuildRoleArn; pass each with --param KEY=VALUE"
    );
}

#[test]
fn defaults_apply_on_create_and_an_update_keeps_what_was_left_out() {
    let c = plan::component("metadata-index").unwrap();
    let created = plan_parameters(c, &map(&[("TableName", "t1")]), None).unwrap();
    assert_eq!(
        created.values,
        map(&[
            ("DeletionProtection", "false"),
            ("PointInTimeRecovery", "false"),
            ("TableName", "t1")
        ])
    );
    assert!(created.keep_previous.is_empty());

    let current = deployed(&[("TableName", "t1"), ("PointInTimeRecovery", "true")]);
    let updated =
        plan_parameters(c, &map(&[("DeletionProtection", "true")]), Some(&current)).unwrap();
    // TableName and PointInTimeRecovery keep their values; nothing is
    // reset to a default.
    assert_eq!(updated.values, map(&[("DeletionProtection", "true")]));
    assert_eq!(updated.keep_previous, ["PointInTimeRecovery", "TableName"]);
    let changes = updated.changes(Some(&current));
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].name, "DeletionProtection");
    assert_eq!(changes[0].before, None);
    assert_eq!(changes[0].after, "true");
}

#[test]
fn the_artifact_bucket_is_required_and_fills_its_parameter() {
    let c = plan::component("events-webhooks").unwrap();
    let err = with_artifact_bucket(c, BTreeMap::new(), None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid artifact_bucket: events-webhooks uploads its Lambda code to an artifact bucket and none was given; pass the artifact bucket (rayito setup's)"
    );
    let filled = with_artifact_bucket(c, BTreeMap::new(), Some("arts")).unwrap();
    assert_eq!(filled, map(&[("ArtifactBucket", "arts")]));
    let err =
        with_artifact_bucket(c, map(&[("ArtifactBucket", "other")]), Some("arts")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid parameters: events-webhooks: ArtifactBucket must be the artifact bucket (the code is uploaded there); leave ArtifactBucket out"
    );
    // The same bucket given twice is fine.
    assert!(with_artifact_bucket(c, map(&[("ArtifactBucket", "arts")]), Some("arts")).is_ok());
    // A component without artifacts ignores the bucket.
    let plain = plan::component("otlp-export").unwrap();
    assert_eq!(
        with_artifact_bucket(plain, BTreeMap::new(), None).unwrap(),
        BTreeMap::new()
    );
}

#[test]
fn cross_parameter_checks_run_on_the_effective_values() {
    let c = plan::component("events-webhooks").unwrap();
    let given = map(&[
        ("LogGroupName", "/rayito/x"),
        ("ArtifactBucket", "b"),
        ("ReconcilerIntervalMinutes", "1"),
    ]);
    assert_eq!(
        plan_parameters(c, &given, None).unwrap_err().to_string(),
        "invalid parameters: events-webhooks: ReconcilerIntervalMinutes is a whole number of minutes from 2 to 60; pass such a number"
    );
    // A kept value is checked too.
    let current = deployed(&[
        ("LogGroupName", "/rayito/x"),
        ("ArtifactBucket", "b"),
        ("ReconcilerIntervalMinutes", "5"),
    ]);
    assert!(plan_parameters(c, &BTreeMap::new(), Some(&current)).is_ok());
    let c = plan::component("dashboard-read-role").unwrap();
    let given = map(&[
        ("TrustedPrincipalArn", "arn:aws:iam::123456789012:role/d"),
        ("MaxSessionSeconds", "60"),
    ]);
    assert_eq!(
        plan_parameters(c, &given, None).unwrap_err().to_string(),
        "invalid parameters: dashboard-read-role: MaxSessionSeconds is a whole number of seconds from 3,600 to 43,200 (IAM's 1 to 12 hours); pass such a number"
    );
}

/// quota-alerts: the critical threshold above the warning one, on the
/// effective values (a default, a kept value).
#[test]
fn quota_alerts_wants_critical_above_warning() {
    let c = plan::component("quota-alerts").unwrap();
    let refused = "invalid parameters: quota-alerts: CriticalPercent must be greater than WarningPercent; pass a critical threshold above the warning one";
    let given = map(&[("ArtifactBucket", "b"), ("CriticalPercent", "80")]);
    assert_eq!(
        plan_parameters(c, &given, None).unwrap_err().to_string(),
        refused,
        "against the default warning (80)"
    );
    let given = map(&[
        ("ArtifactBucket", "b"),
        ("WarningPercent", "60"),
        ("CriticalPercent", "70"),
    ]);
    assert!(plan_parameters(c, &given, None).is_ok());
    let current = deployed(&[
        ("ArtifactBucket", "b"),
        ("ArtifactS3Key", "k"),
        ("WarningPercent", "90"),
        ("CriticalPercent", "99"),
    ]);
    let given = map(&[("CriticalPercent", "85")]);
    assert_eq!(
        plan_parameters(c, &given, Some(&current))
            .unwrap_err()
            .to_string(),
        refused,
        "against the kept warning (90)"
    );
}

#[test]
fn the_fixed_tags_win_over_the_callers() {
    let c = plan::component("otlp-export").unwrap();
    let tags = stack_tags(
        c,
        &map(&[
            ("team", "a"),
            ("rayito:component", "forged"),
            ("rayito:managed-by", "me"),
        ]),
    );
    let tags: BTreeMap<String, String> = tags.into_iter().collect();
    assert_eq!(tags["team"], "a");
    assert_eq!(tags["rayito:component"], "otlp-export");
    assert_eq!(tags["rayito:managed-by"], "rayito-sdk");
    assert_eq!(tags["rayito:sdk-version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(tags.len(), 4);
}

#[test]
fn the_artifact_key_is_by_component_and_digest() {
    assert_eq!(
        plan::artifact_key("events-webhooks", "ab12"),
        "rayito/stacks/events-webhooks/ab12.zip"
    );
}

/// efs-volumes through `OptionalStacks` and through `EfsVolumes` make the
/// same stack: the same template for the same values in every shape (one
/// to three subnets, scoped access points, read-only ones, no writes, a
/// connector's name), the same tags, no CloudFormation parameter; and a
/// value the volumes refuse is refused the same way.
#[cfg(feature = "efs")]
#[test]
fn efs_volumes_renders_the_volumes_template_with_the_same_tags() {
    use crate::volumes::{EfsDeployOptions, EfsVolumes};
    let c = plan::component("efs-volumes").unwrap();
    assert!(c.supported && c.renders_from_parameters());
    assert_eq!(c.template(), None);
    let arn = |id: &str| {
        format!("arn:aws:elasticfilesystem:us-east-1:123456789012:access-point/fsap-{id}")
    };
    let subnets = ["subnet-0a1b2c3d", "subnet-1a2b3c4d", "subnet-2a3b4c5d"];
    let mut shapes: Vec<(BTreeMap<String, String>, usize, EfsDeployOptions)> = Vec::new();
    for n in 1..=3 {
        shapes.push((
            map(&[
                ("VpcId", "vpc-12345678"),
                ("SubnetIds", subnets[..n].join(",").as_str()),
            ]),
            n,
            EfsDeployOptions::default(),
        ));
    }
    let (scoped, read_only) = (arn("0123456789abcdef0"), arn("1123456789abcdef0"));
    let options = EfsDeployOptions {
        access_point_arns: vec![scoped.clone()],
        read_only_access_point_arns: vec![read_only.clone()],
        allow_write: false,
        connector_name: "team-efs".to_owned(),
        ..EfsDeployOptions::default()
    };
    shapes.push((
        map(&[
            ("VpcId", "vpc-12345678"),
            ("SubnetIds", "subnet-0a1b2c3d, subnet-1a2b3c4d"),
            ("AccessPointArns", scoped.as_str()),
            ("ReadOnlyAccessPointArns", read_only.as_str()),
            ("AllowWrite", "false"),
            ("ConnectorName", "team-efs"),
        ]),
        2,
        options,
    ));
    for (given, n, options) in shapes {
        // The defaults a create fills in, as a deploy plans them.
        let planned = plan_parameters(c, &given, None).unwrap().values;
        let subnet_ids: Vec<String> = subnets[..n].iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(
            c.template_for(&planned).unwrap().unwrap(),
            EfsVolumes::template("vpc-12345678", &subnet_ids, &options).unwrap(),
            "{given:?}"
        );
    }
    assert_eq!(
        stack_tags(c, &BTreeMap::new()),
        crate::volumes::stack::stack_tags()
    );
    let bad = map(&[("VpcId", "vpc-1"), ("SubnetIds", "subnet-0a1b2c3d")]);
    assert_eq!(
        c.template_for(&bad).unwrap_err().to_string(),
        EfsVolumes::template(
            "vpc-1",
            &["subnet-0a1b2c3d".to_owned()],
            &EfsDeployOptions::default()
        )
        .unwrap_err()
        .to_string()
    );
    let err = c
        .template_for(&map(&[
            ("VpcId", "vpc-12345678"),
            ("SubnetIds", "subnet-0a1b2c3d"),
            ("AllowWrite", "yes"),
        ]))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid parameters: efs-volumes: AllowWrite is true or false"
    );
}

#[test]
fn the_dashboard_refuses_a_long_theme_and_aws_iam_before_any_call() {
    let c = plan::component("dashboard").unwrap();
    let validate = c.validate.expect("the dashboard validates its parameters");
    let theme = "x".repeat(4097);
    assert_eq!(
        validate(&map(&[("ThemeJson", &theme)]))
            .unwrap_err()
            .to_string(),
        "invalid parameters: dashboard: ThemeJson is at most 4,096 bytes; keep a larger theme in an SSM parameter of yours and pass its name as ThemeParameterName"
    );
    assert!(validate(&map(&[("ThemeJson", &theme[..4096])])).is_ok());
    assert_eq!(
        validate(&map(&[("AuthMode", "aws-iam")]))
            .unwrap_err()
            .to_string(),
        "invalid parameters: dashboard: AuthMode=aws-iam (an identity pool and a SigV4-signed API URL) is not built in this SDK yet; deploy with AuthMode=cognito-jwt, the default"
    );
    assert!(validate(&map(&[("AuthMode", "cognito-jwt")])).is_ok());
    assert_eq!(c.artifacts.len(), 1);
    assert_eq!(c.artifacts[0].parameter_key, "ArtifactS3Key");
    let t: serde_json::Value = serde_json::from_str(&c.template().unwrap()).unwrap();
    let outputs: Vec<&String> = t["Outputs"].as_object().unwrap().keys().collect();
    let mut pinned = super::dashboard_template::DASHBOARD_OUTPUTS.to_vec();
    pinned.sort_unstable();
    assert_eq!(outputs, pinned);
    assert_eq!(t["Parameters"]["ThemeJson"]["MaxLength"], 4096);
}
