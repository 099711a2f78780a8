//! The efs-volumes stack's template, generated here (as `rayito setup`'s
//! are) so that the code, the deployed stack and docs/volumes.md say the
//! same thing. The reference's template takes parameters and picks its
//! mount targets with conditions over a joined list; this one is written
//! for the deploy's own values (one `MountTargetN` per subnet, the client
//! policy's condition built here), so it has no parameter and no
//! condition to get wrong. Only new resources, inside the given VPC: the
//! VPC, its subnets, route tables, NACLs and existing security groups are
//! never touched.

use serde_json::{Map, Value, json};

/// The tag every file system of the stack carries (`delete_file_system`
/// deletes only one that has it).
pub const FILE_SYSTEM_TAG: (&str, &str) = ("rayito", "efs-volumes");
/// NFS.
const NFS_PORT: u16 = 2049;

/// The outputs of the stack, in the reference's names.
pub const OUTPUTS: [&str; 8] = [
    "FileSystemId",
    "FileSystemArn",
    "ConnectorArn",
    "ConnectorState",
    "MountTargetSecurityGroupId",
    "ClientSecurityGroupId",
    "CallerPolicyArn",
    "CallerPolicyStatement",
];

/// What the template is written for (checked by the caller).
#[derive(Clone, Debug)]
pub(crate) struct StackValues<'a> {
    pub vpc_id: &'a str,
    pub subnet_ids: &'a [String],
    pub connector_name: &'a str,
    pub allow_write: bool,
    pub access_point_arns: &'a [String],
    pub read_only_access_point_arns: &'a [String],
}

fn get_att(resource: &str, attribute: &str) -> Value {
    json!({ "Fn::GetAtt": [resource, attribute] })
}

fn reference(resource: &str) -> Value {
    json!({ "Ref": resource })
}

/// The client policy: `ClientMount` (and `ClientWrite` unless read-only)
/// on this file system, through an access point of this account and region
/// (or exactly the given ones); an explicit deny of `ClientWrite` on the
/// read-only access points; never `ClientRootAccess`.
fn client_policy(values: &StackValues<'_>) -> Value {
    let mut actions = vec!["elasticfilesystem:ClientMount"];
    if values.allow_write {
        actions.push("elasticfilesystem:ClientWrite");
    }
    let condition = if values.access_point_arns.is_empty() {
        json!({ "ArnLike": { "elasticfilesystem:AccessPointArn": { "Fn::Sub":
            "arn:${AWS::Partition}:elasticfilesystem:${AWS::Region}:${AWS::AccountId}:access-point/fsap-*" } } })
    } else {
        let mut arns: Vec<&String> = values.access_point_arns.iter().collect();
        arns.extend(values.read_only_access_point_arns.iter());
        json!({ "ArnEquals": { "elasticfilesystem:AccessPointArn": arns } })
    };
    let mut statements = vec![json!({
        "Sid": "MountAccessPoints",
        "Effect": "Allow",
        "Action": actions,
        "Resource": get_att("FileSystem", "Arn"),
        "Condition": condition,
    })];
    if !values.read_only_access_point_arns.is_empty() {
        statements.push(json!({
            "Sid": "DenyWriteOnReadOnlyAccessPoints",
            "Effect": "Deny",
            "Action": "elasticfilesystem:ClientWrite",
            "Resource": get_att("FileSystem", "Arn"),
            "Condition": { "ArnEquals": {
                "elasticfilesystem:AccessPointArn": values.read_only_access_point_arns } },
        }));
    }
    json!({ "Version": "2012-10-17", "Statement": statements })
}

/// The file system's own policy: deny plain-text NFS, a client without an
/// access point, and any path but a mount target. No Allow: an IAM
/// principal needs the client policy's.
fn file_system_policy() -> Value {
    let client = [
        "elasticfilesystem:ClientMount",
        "elasticfilesystem:ClientWrite",
    ];
    json!({
        "Version": "2012-10-17",
        "Statement": [
            { "Sid": "DenyNonTls", "Effect": "Deny", "Principal": "*",
              "Action": "elasticfilesystem:*", "Resource": "*",
              "Condition": { "Bool": { "aws:SecureTransport": "false" } } },
            { "Sid": "DenyWithoutAccessPoint", "Effect": "Deny", "Principal": "*",
              "Action": client, "Resource": "*",
              "Condition": { "Null": { "elasticfilesystem:AccessPointArn": "true" } } },
            { "Sid": "DenyWithoutMountTarget", "Effect": "Deny", "Principal": "*",
              "Action": client, "Resource": "*",
              "Condition": { "Bool": { "elasticfilesystem:AccessedViaMountTarget": "false" } } }
        ]
    })
}

/// The template for `values`, as a JSON value.
pub(crate) fn template_value(values: &StackValues<'_>) -> Value {
    let tag = |value: &str| json!([{ "Key": "rayito", "Value": value }]);
    let mut resources = Map::new();
    resources.insert("ConnectorSecurityGroup".into(), json!({
        "Type": "AWS::EC2::SecurityGroup",
        "Properties": {
            "GroupDescription": format!("Rayito EFS client (connector) egress for {}", values.connector_name),
            "VpcId": values.vpc_id,
            // One explicit rule removes EC2's implicit allow-all egress;
            // the one real rule is ConnectorEgressToMountTargets.
            "SecurityGroupEgress": [{ "IpProtocol": "-1", "CidrIp": "127.0.0.1/32",
                "Description": "placeholder that removes the implicit allow-all egress rule" }],
            "Tags": tag("efs-volumes-connector"),
        }
    }));
    resources.insert("MountTargetSecurityGroup".into(), json!({
        "Type": "AWS::EC2::SecurityGroup",
        "Properties": {
            "GroupDescription": format!("Rayito EFS mount targets for {}", values.connector_name),
            "VpcId": values.vpc_id,
            "SecurityGroupIngress": [{ "IpProtocol": "tcp", "FromPort": NFS_PORT, "ToPort": NFS_PORT,
                "SourceSecurityGroupId": reference("ConnectorSecurityGroup"),
                "Description": "NFS from the Rayito EFS connector only" }],
            "Tags": tag("efs-volumes-mount-target"),
        }
    }));
    // A resource of its own, so that neither group names the other at
    // creation (a cycle CloudFormation would refuse).
    resources.insert(
        "ConnectorEgressToMountTargets".into(),
        json!({
            "Type": "AWS::EC2::SecurityGroupEgress",
            "Properties": {
                "GroupId": reference("ConnectorSecurityGroup"),
                "IpProtocol": "tcp", "FromPort": NFS_PORT, "ToPort": NFS_PORT,
                "DestinationSecurityGroupId": reference("MountTargetSecurityGroup"),
                "Description": "NFS to the Rayito EFS mount targets only",
            }
        }),
    );
    // Retained always, as literals: deleting the data is the explicit
    // EfsVolumes::delete_file_system, never a stack operation.
    resources.insert(
        "FileSystem".into(),
        json!({
            "Type": "AWS::EFS::FileSystem",
            "DeletionPolicy": "Retain",
            "UpdateReplacePolicy": "Retain",
            "Properties": {
                "Encrypted": true,
                "PerformanceMode": "generalPurpose",
                "ThroughputMode": "elastic",
                "LifecyclePolicies": [{ "TransitionToIA": "AFTER_30_DAYS" }],
                "FileSystemTags": [{ "Key": FILE_SYSTEM_TAG.0, "Value": FILE_SYSTEM_TAG.1 }],
                "FileSystemPolicy": file_system_policy(),
            }
        }),
    );
    for (i, subnet) in values.subnet_ids.iter().enumerate() {
        resources.insert(
            format!("MountTarget{}", i + 1),
            json!({
                "Type": "AWS::EFS::MountTarget",
                "Properties": {
                    "FileSystemId": reference("FileSystem"),
                    "SubnetId": subnet,
                    "SecurityGroups": [reference("MountTargetSecurityGroup")],
                }
            }),
        );
    }
    resources.insert("OperatorRole".into(), json!({
        "Type": "AWS::IAM::Role",
        "Properties": {
            "AssumeRolePolicyDocument": {
                "Version": "2012-10-17",
                "Statement": [{ "Effect": "Allow", "Principal": { "Service": "lambda.amazonaws.com" },
                    "Action": ["sts:AssumeRole", "sts:TagSession"] }]
            },
            "Policies": [{
                "PolicyName": "manage-connector-enis",
                "PolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [{ "Effect": "Allow", "Resource": "*", "Action": [
                        "ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces",
                        "ec2:DeleteNetworkInterface", "ec2:DescribeSubnets",
                        "ec2:DescribeSecurityGroups", "ec2:DescribeVpcs",
                        "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"
                    ] }]
                }
            }]
        }
    }));
    // No ManagedPolicyName: CloudFormation names it (CAPABILITY_IAM is enough).
    resources.insert("EfsVolumeClientPolicy".into(), json!({
        "Type": "AWS::IAM::ManagedPolicy",
        "Properties": {
            "Description": "Attach to the execution role that mounts volumes of this file system: elasticfilesystem:ClientMount (plus ClientWrite unless read-only, never on the read-only access points) through an access point, never ClientRootAccess",
            "PolicyDocument": client_policy(values),
        }
    }));
    resources.insert(
        "Connector".into(),
        json!({
            "Type": "AWS::Lambda::NetworkConnector",
            "Properties": {
                "Name": values.connector_name,
                "OperatorRole": get_att("OperatorRole", "Arn"),
                "Configuration": { "VpcEgressConfiguration": {
                    "AssociatedComputeResourceTypes": ["MicroVm"],
                    "NetworkProtocol": "IPv4",
                    "SecurityGroupIds": [reference("ConnectorSecurityGroup")],
                    "SubnetIds": values.subnet_ids,
                } }
            }
        }),
    );
    json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "Rayito efs-volumes (experimental): an encrypted, elastic-throughput EFS file system in an existing VPC, reachable only through a Lambda network connector of its own, its two security groups and least-privilege IAM. Creates only new resources; the file system is retained when the stack is deleted.",
        "Resources": resources,
        "Outputs": {
            "FileSystemId": { "Description": "Pass it to VolumeStore::new.", "Value": reference("FileSystem") },
            "FileSystemArn": { "Value": get_att("FileSystem", "Arn") },
            "ConnectorArn": { "Description": "Pass it as the sandbox's only egress connector.", "Value": get_att("Connector", "Arn") },
            "ConnectorState": { "Value": get_att("Connector", "State") },
            "MountTargetSecurityGroupId": { "Value": reference("MountTargetSecurityGroup") },
            "ClientSecurityGroupId": { "Description": "The connector's own security group: the only source the mount targets accept NFS from.", "Value": reference("ConnectorSecurityGroup") },
            "CallerPolicyArn": { "Description": "Attach to the sandboxes' execution role (RayitoEfsVolumeClient).", "Value": reference("EfsVolumeClientPolicy") },
            "CallerPolicyStatement": { "Description": "The lambda:PassNetworkConnector statement the SDK's caller needs to launch with this connector.",
                "Value": { "Fn::Sub": "{\"Effect\":\"Allow\",\"Action\":\"lambda:PassNetworkConnector\",\"Resource\":\"${Connector.Arn}\"}" } },
        }
    })
}

#[cfg(test)]
mod tests {
    use super::{OUTPUTS, StackValues, template_value};

    fn values<'a>(subnets: &'a [String], arns: &'a [String], ro: &'a [String]) -> StackValues<'a> {
        StackValues {
            vpc_id: "vpc-12345678",
            subnet_ids: subnets,
            connector_name: "rayito-efs",
            allow_write: true,
            access_point_arns: arns,
            read_only_access_point_arns: ro,
        }
    }

    #[test]
    fn one_mount_target_per_subnet_and_the_reference_outputs() {
        let subnets = vec!["subnet-aaaaaaaa".to_owned(), "subnet-bbbbbbbb".to_owned()];
        let t = template_value(&values(&subnets, &[], &[]));
        let resources = t["Resources"].as_object().unwrap();
        assert!(resources.contains_key("MountTarget2"));
        assert!(!resources.contains_key("MountTarget3"));
        assert_eq!(t["Resources"]["FileSystem"]["DeletionPolicy"], "Retain");
        let outputs: Vec<&String> = t["Outputs"].as_object().unwrap().keys().collect();
        let mut expected = OUTPUTS.to_vec();
        expected.sort_unstable();
        assert_eq!(outputs, expected);
        let text = t.to_string();
        assert!(!text.contains("\"elasticfilesystem:ClientRootAccess\""));
    }

    #[test]
    fn read_only_access_points_are_denied_writes() {
        let subnets = vec!["subnet-aaaaaaaa".to_owned()];
        let ro = vec![
            "arn:aws:elasticfilesystem:us-east-1:123456789012:access-point/fsap-12345678"
                .to_owned(),
        ];
        let t = template_value(&values(&subnets, &[], &ro));
        let statements =
            &t["Resources"]["EfsVolumeClientPolicy"]["Properties"]["PolicyDocument"]["Statement"];
        assert_eq!(statements[1]["Effect"], "Deny");
        assert_eq!(statements[1]["Action"], "elasticfilesystem:ClientWrite");
    }
}
