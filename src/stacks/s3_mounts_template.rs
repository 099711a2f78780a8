//! The `s3-mounts` stack's template (spec: extras §2, last bullet): one
//! IAM managed policy, `RayitoS3MountAccess`, for the execution role of
//! sandboxes that mount one bucket, scoped to at most four key prefixes;
//! nothing else (IAM only, no cost). Generated here so that the deployed
//! stack, cfn-lint's check and docs/aws.md (which a test compares) agree.
//!
//! Parameters as the reference's stack takes them, so that a stack either
//! tool deployed is read by both: `BucketName`, `Prefixes` (a comma list,
//! default `*`) and `ReadOnly` (`true`). The policy is unnamed (CloudFormation
//! names it): one stack per bucket, each needing only `CAPABILITY_IAM`.

use serde_json::{Value, json};

/// The stack's default name (one per bucket: another bucket is another
/// stack name).
pub const S3_MOUNTS_STACK: &str = "rayito-s3-mounts";
/// The output carrying the policy's ARN.
pub const S3_MOUNTS_OUTPUT: &str = "PolicyArn";
/// The most prefixes one stack grants (the template's slots).
pub const MAX_PREFIXES: usize = 4;
/// The bucket names the template takes (as S3 names them, without
/// uppercase or underscores).
pub(crate) const BUCKET_PATTERN: &str = "^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$";

fn sub(text: &str) -> Value {
    json!({ "Fn::Sub": text })
}

/// The object ARN of prefix slot `i`: the `Prefixes` list padded with its
/// own first entry to [`MAX_PREFIXES`] slots, so that a shorter list only
/// repeats a resource (CloudFormation has no per-element map without a
/// transform).
fn object_arn(i: usize) -> Value {
    let first = json!({ "Fn::Select": [0, { "Ref": "Prefixes" }] });
    let mut padded = vec![json!({ "Fn::Join": [",", { "Ref": "Prefixes" }] })];
    padded.extend(std::iter::repeat_n(first, MAX_PREFIXES - 1));
    json!({
        "Fn::Sub": [
            "arn:${AWS::Partition}:s3:::${BucketName}/${Prefix}",
            { "Prefix": { "Fn::Select": [i, { "Fn::Split": [",", { "Fn::Join": [",", padded] }] }] } }
        ]
    })
}

/// The policy document of `RayitoS3MountAccess` as the stack carries it:
/// listing under the prefixes (an `s3:prefix` condition), reading their
/// objects, and with `ReadOnly=false` writing and deleting them (and
/// aborting a failed upload's parts, which would otherwise keep billing).
pub(crate) fn policy_value() -> Value {
    let objects: Vec<Value> = (0..MAX_PREFIXES).map(object_arn).collect();
    let list = json!({
        "Sid": "ListBucketUnderPrefixes",
        "Effect": "Allow",
        "Action": "s3:ListBucket",
        "Resource": sub("arn:${AWS::Partition}:s3:::${BucketName}"),
        "Condition": { "StringLike": { "s3:prefix": { "Ref": "Prefixes" } } }
    });
    let read = json!({
        "Sid": "ReadObjects",
        "Effect": "Allow",
        "Action": "s3:GetObject",
        "Resource": objects
    });
    let write = json!({
        "Sid": "WriteObjects",
        "Effect": "Allow",
        "Action": ["s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
        "Resource": objects
    });
    // The whole list chosen by the condition (not one statement replaced
    // by AWS::NoValue, which moto's CloudFormation leaves as a null).
    json!({
        "Version": "2012-10-17",
        "Statement": {
            "Fn::If": ["AllowWrites", [list.clone(), read.clone(), write], [list, read]]
        }
    })
}

/// The stack's template.
pub(crate) fn template_value() -> Value {
    json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "rayito s3-mounts: the managed policy RayitoS3MountAccess, for the execution role of sandboxes that mount BucketName (mounts=), scoped to up to four key prefixes; IAM only",
        "Parameters": {
            "BucketName": {
                "Type": "String",
                "MinLength": 3,
                "MaxLength": 63,
                "AllowedPattern": BUCKET_PATTERN,
                "Description": "The one bucket the policy grants (one stack per bucket)"
            },
            "Prefixes": {
                "Type": "CommaDelimitedList",
                "Default": "*",
                "Description": "Up to four key prefixes, IAM wildcards (team7/*,runs/*); * is the whole bucket; objects only ever cover the first four"
            },
            "ReadOnly": {
                "Type": "String",
                "AllowedValues": ["true", "false"],
                "Default": "true",
                "Description": "true grants reads only; false also PutObject, DeleteObject and AbortMultipartUpload"
            }
        },
        "Conditions": {
            "AllowWrites": { "Fn::Equals": [{ "Ref": "ReadOnly" }, "false"] }
        },
        "Resources": {
            "RayitoS3MountAccess": {
                "Type": "AWS::IAM::ManagedPolicy",
                "Properties": {
                    "Description": "rayito s3-mounts: execution-role access for mount-s3 to BucketName, read-only unless ReadOnly=false",
                    "PolicyDocument": policy_value()
                }
            }
        },
        "Outputs": {
            S3_MOUNTS_OUTPUT: {
                "Description": "The ARN of RayitoS3MountAccess, to attach to the sandboxes' execution role",
                "Value": { "Ref": "RayitoS3MountAccess" }
            }
        }
    })
}

/// The `s3-mounts` stack's template, as JSON text.
pub fn s3_mounts_template() -> String {
    serde_json::to_string_pretty(&template_value()).unwrap_or_default()
}

/// The policy `RayitoS3MountAccess` grants for `bucket`, `prefixes` (at
/// most [`MAX_PREFIXES`], as the stack's `Prefixes` takes them) and
/// `read_only`, resolved as CloudFormation resolves the template in the
/// `aws` partition: the document an execution role gets, as JSON text
/// (docs/aws.md shows one).
pub fn s3_mounts_policy(bucket: &str, prefixes: &[&str], read_only: bool) -> String {
    let first = prefixes.first().copied().unwrap_or("*");
    let object = |i: usize| {
        let prefix = prefixes.get(i).copied().unwrap_or(first);
        json!(format!("arn:aws:s3:::{bucket}/{prefix}"))
    };
    let objects: Vec<Value> = (0..MAX_PREFIXES).map(object).collect();
    let listed: Vec<&str> = if prefixes.is_empty() {
        vec!["*"]
    } else {
        prefixes.to_vec()
    };
    let mut statements = vec![
        json!({
            "Sid": "ListBucketUnderPrefixes",
            "Effect": "Allow",
            "Action": "s3:ListBucket",
            "Resource": format!("arn:aws:s3:::{bucket}"),
            "Condition": { "StringLike": { "s3:prefix": listed } }
        }),
        json!({ "Sid": "ReadObjects", "Effect": "Allow", "Action": "s3:GetObject", "Resource": objects }),
    ];
    if !read_only {
        statements.push(json!({
            "Sid": "WriteObjects",
            "Effect": "Allow",
            "Action": ["s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
            "Resource": objects
        }));
    }
    serde_json::to_string_pretty(&json!({ "Version": "2012-10-17", "Statement": statements }))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_pads_the_prefixes_to_four_object_slots_and_writes_only_on_read_only_false() {
        let t = template_value();
        let policy = &t["Resources"]["RayitoS3MountAccess"];
        assert_eq!(policy["Type"], "AWS::IAM::ManagedPolicy");
        assert!(policy["Properties"].get("ManagedPolicyName").is_none());
        let choice = &policy["Properties"]["PolicyDocument"]["Statement"]["Fn::If"];
        assert_eq!(choice[0], "AllowWrites");
        let (writable, read_only) = (choice[1].as_array().unwrap(), choice[2].as_array().unwrap());
        assert_eq!(read_only.len(), 2);
        assert_eq!(writable[..2], read_only[..]);
        assert_eq!(writable[2]["Sid"], "WriteObjects");
        assert_eq!(read_only[1]["Resource"].as_array().unwrap().len(), 4);
        assert_eq!(
            t["Conditions"]["AllowWrites"],
            json!({ "Fn::Equals": [{ "Ref": "ReadOnly" }, "false"] })
        );
        assert_eq!(
            t["Outputs"]["PolicyArn"]["Value"]["Ref"],
            "RayitoS3MountAccess"
        );
        assert_eq!(t["Parameters"]["Prefixes"]["Default"], "*");
        assert_eq!(t["Parameters"]["ReadOnly"]["Default"], "true");
    }

    #[test]
    fn the_resolved_policy_repeats_the_first_prefix_in_empty_slots() {
        let doc: Value =
            serde_json::from_str(&s3_mounts_policy("data", &["team7/*", "runs/*"], true)).unwrap();
        assert_eq!(
            doc["Statement"][1]["Resource"],
            json!([
                "arn:aws:s3:::data/team7/*",
                "arn:aws:s3:::data/runs/*",
                "arn:aws:s3:::data/team7/*",
                "arn:aws:s3:::data/team7/*"
            ])
        );
        assert_eq!(doc["Statement"].as_array().unwrap().len(), 2);
        let writable: Value = serde_json::from_str(&s3_mounts_policy("data", &[], false)).unwrap();
        assert_eq!(
            writable["Statement"][2]["Action"],
            json!(["s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"])
        );
        assert_eq!(
            writable["Statement"][0]["Condition"]["StringLike"]["s3:prefix"],
            json!(["*"])
        );
    }

    #[test]
    fn docs_aws_md_shows_the_policy_a_writable_stack_grants() {
        let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/aws.md"))
            .expect("docs/aws.md");
        let marker = "<!-- s3-mounts-json: my-datasets runs/* writable -->\n```json\n";
        let start = page.find(marker).expect("the marker") + marker.len();
        let end = page[start..].find("```").unwrap() + start;
        let shown: Value = serde_json::from_str(&page[start..end]).expect("JSON");
        let made: Value =
            serde_json::from_str(&s3_mounts_policy("my-datasets", &["runs/*"], false)).unwrap();
        assert_eq!(shown, made, "docs/aws.md should show:\n{made:#}");
    }
}
