//! The `dashboard` stack's template (spec: extras §6, §7): the hosted
//! dashboard in the caller's account. One function (crate
//! `rayito-dashboard`, feature `lambda`: one `bootstrap` binary on
//! `provided.al2023`) behind a public Function URL serves the page and
//! `/api/v1`, and checks every API call's Cognito access token itself.
//! Generated here, like the other stacks', so that what is deployed, what
//! cfn-lint checks and what the tests pin are one text.
//!
//! Resources: the Cognito user pool (administrators create users), its
//! Hosted UI domain and SPA client (code flow, one-hour tokens), the
//! actions group and the first user (both optional); the audit table
//! (append-only: the role may put, never update or delete) and the cost
//! cache table; the function's read-only role and, with
//! `AllowActions=true`, the actions role only it can assume (terminate,
//! suspend, resume on images named `ImageNamePrefix*`); the function, its
//! log group, its URL and the URL's two permissions; the theme's SSM
//! parameter when `ThemeJson` is given.
//!
//! Parameters and outputs keep the reference's names, so that either SDK
//! reads and updates a stack the other deployed. `AuthMode=aws-iam` (an
//! identity pool and a second function) is not built here: deploy refuses
//! it before any AWS call ([`AWS_IAM_REFUSED`]).

use serde_json::{Value, json};

/// The stack's default name.
pub const DASHBOARD_STACK: &str = "rayito-dashboard";
/// The Cognito group whose members may act (the function's default).
pub const ACTIONS_GROUP: &str = "rayito-dashboard-actions";
/// The largest `ThemeJson`, in bytes (a Standard SSM parameter's 4 KB).
pub const THEME_JSON_MAX_BYTES: usize = 4096;
/// The function's timeout, in seconds (a bulk action runs inside one
/// request).
pub const FUNCTION_TIMEOUT_SECONDS: u32 = 300;
/// The function's memory, in MiB.
pub const FUNCTION_MEMORY_MIB: u32 = 256;

/// Deploy's refusal of `AuthMode=aws-iam`.
pub const AWS_IAM_REFUSED: &str = "dashboard: AuthMode=aws-iam (an identity pool and a SigV4-signed API URL) is not built in this SDK yet; deploy with AuthMode=cognito-jwt, the default";

/// Deploy's refusal of a `ThemeJson` over [`THEME_JSON_MAX_BYTES`].
pub const THEME_JSON_TOO_LONG: &str = "dashboard: ThemeJson is at most 4,096 bytes; keep a larger theme in an SSM parameter of yours and pass its name as ThemeParameterName";

/// The stack's outputs, in the order the template lists them.
pub const DASHBOARD_OUTPUTS: [&str; 5] = [
    "DashboardUrl",
    "UserPoolId",
    "ActionsGroupName",
    "AuditTableName",
    "ActionsRoleArn",
];

fn get_att(resource: &str, attribute: &str) -> Value {
    json!({ "Fn::GetAtt": [resource, attribute] })
}

fn reference(name: &str) -> Value {
    json!({ "Ref": name })
}

fn sub(text: &str) -> Value {
    json!({ "Fn::Sub": text })
}

fn when(condition: &str, then: Value) -> Value {
    json!({ "Fn::If": [condition, then, { "Ref": "AWS::NoValue" }] })
}

fn allow(sid: &str, actions: &[&str], resource: Value) -> Value {
    json!({ "Sid": sid, "Effect": "Allow", "Action": actions, "Resource": resource })
}

fn choice(values: &[&str], default: &str, description: &str) -> Value {
    json!({ "Type": "String", "Default": default, "AllowedValues": values, "Description": description })
}

fn optional(pattern: &str, description: &str) -> Value {
    json!({ "Type": "String", "Default": "", "AllowedPattern": pattern, "Description": description })
}

fn parameters() -> Value {
    json!({
        "ArtifactBucket": {
            "Type": "String", "MinLength": 3,
            "Description": "The bucket OptionalStacks::deploy uploaded the function's zip to"
        },
        "ArtifactS3Key": {
            "Type": "String", "MinLength": 1,
            "Description": "rayito/stacks/dashboard/<sha256>.zip (filled by deploy)"
        },
        "AuthMode": choice(&["cognito-jwt", "aws-iam"], "cognito-jwt",
            "How /api/v1 is protected: cognito-jwt, the function checks each call's Cognito access token (aws-iam is refused by this SDK's deploy)"),
        "AllowActions": choice(&["false", "true"], "false",
            "true creates the actions role, the Cognito group allowed to use it and the audit writes"),
        "EnableCostExplorer": choice(&["false", "true"], "false",
            "true lets the function call ce:GetCostAndUsage ($0.01 a request)"),
        "ImageNamePrefix": {
            "Type": "String", "Default": "rayito-",
            "Description": "The actions role acts only on sandboxes of images named with this prefix (empty: every image)"
        },
        "InitialUserEmail": optional("^$|^[^@\\s]+@[^@\\s]+$",
            "Optional: creates this Cognito user (emailed a temporary password) and, with AllowActions=true, adds it to the actions group"),
        "DomainPrefix": optional("^$|^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$",
            "Optional: the Hosted UI domain's prefix (unique in the region); empty derives one from the stack"),
        "ThemeJson": {
            "Type": "String", "Default": "", "MaxLength": 4096,
            "Description": "Optional: a colour theme as JSON, at most 4096 bytes, kept in an SSM parameter"
        },
        "ThemeParameterName": optional("^$|^/[A-Za-z0-9_.\\-/]{1,1010}$",
            "Optional: an SSM parameter of yours holding the theme (wins over ThemeJson)"),
        "LogoParameterName": optional("^$|^/[A-Za-z0-9_.\\-/]{1,1010}$",
            "Optional: an SSM parameter holding an SVG logo"),
        "ReservedConcurrency": optional("^$|^[0-9]+$",
            "Optional: the function's reserved concurrency (caps what unauthenticated requests can cost)"),
        "LogRetentionDays": {
            "Type": "Number", "Default": 30,
            "AllowedValues": [1, 3, 5, 7, 14, 30, 60, 90, 180, 365],
            "Description": "Days the function's logs are kept (they never hold a token)"
        },
    })
}

fn conditions() -> Value {
    let not_empty = |name: &str| json!({ "Fn::Not": [{ "Fn::Equals": [reference(name), ""] }] });
    json!({
        "ActionsEnabled": { "Fn::Equals": [reference("AllowActions"), "true"] },
        "CostExplorerEnabled": { "Fn::Equals": [reference("EnableCostExplorer"), "true"] },
        "HasDomainPrefix": not_empty("DomainPrefix"),
        "HasInitialUser": not_empty("InitialUserEmail"),
        "InitialUserActs": { "Fn::And": [{ "Condition": "HasInitialUser" }, { "Condition": "ActionsEnabled" }] },
        "HasThemeParameterName": not_empty("ThemeParameterName"),
        "CreateThemeParameter": { "Fn::And": [
            not_empty("ThemeJson"),
            { "Fn::Equals": [reference("ThemeParameterName"), ""] }
        ] },
        "HasTheme": { "Fn::Or": [{ "Condition": "HasThemeParameterName" }, { "Condition": "CreateThemeParameter" }] },
        "HasLogo": not_empty("LogoParameterName"),
        "HasReservedConcurrency": not_empty("ReservedConcurrency"),
    })
}

fn cognito() -> Value {
    json!({
        "UserPool": {
            "Type": "AWS::Cognito::UserPool",
            "Properties": {
                "UserPoolName": sub("${AWS::StackName}-users"),
                "AdminCreateUserConfig": { "AllowAdminCreateUserOnly": true },
                "UsernameAttributes": ["email"],
                "AutoVerifiedAttributes": ["email"],
                "MfaConfiguration": "OPTIONAL",
                "EnabledMfas": ["SOFTWARE_TOKEN_MFA"],
                "Policies": { "PasswordPolicy": {
                    "MinimumLength": 12, "RequireLowercase": true, "RequireUppercase": true,
                    "RequireNumbers": true, "RequireSymbols": false
                } },
                "AccountRecoverySetting": { "RecoveryMechanisms": [{ "Name": "verified_email", "Priority": 1 }] },
                "DeletionProtection": "INACTIVE"
            }
        },
        "UserPoolDomain": {
            "Type": "AWS::Cognito::UserPoolDomain",
            "Properties": {
                "UserPoolId": reference("UserPool"),
                "Domain": { "Fn::If": ["HasDomainPrefix", reference("DomainPrefix"), { "Fn::Join": ["-", [
                    reference("AWS::StackName"),
                    { "Fn::Select": [0, { "Fn::Split": ["-", { "Fn::Select": [2, { "Fn::Split": ["/", reference("AWS::StackId")] }] }] }] }
                ]] }] }
            }
        },
        // The client needs the URL (its callback) and the function the
        // client's id: the function finds the client by this name at run
        // time (ListUserPoolClients), which breaks the cycle.
        "UserPoolClient": {
            "Type": "AWS::Cognito::UserPoolClient",
            "Properties": {
                "UserPoolId": reference("UserPool"),
                "ClientName": sub("${AWS::StackName}-spa"),
                "GenerateSecret": false,
                "AllowedOAuthFlowsUserPoolClient": true,
                "AllowedOAuthFlows": ["code"],
                "AllowedOAuthScopes": ["openid"],
                "SupportedIdentityProviders": ["COGNITO"],
                "CallbackURLs": [get_att("FunctionUrl", "FunctionUrl")],
                "LogoutURLs": [get_att("FunctionUrl", "FunctionUrl")],
                "ExplicitAuthFlows": ["ALLOW_REFRESH_TOKEN_AUTH"],
                "PreventUserExistenceErrors": "ENABLED",
                "EnableTokenRevocation": true,
                "TokenValidityUnits": { "AccessToken": "hours", "IdToken": "hours", "RefreshToken": "hours" },
                "AccessTokenValidity": 1,
                "IdTokenValidity": 1,
                "RefreshTokenValidity": 1
            }
        },
        "ActionsGroup": {
            "Type": "AWS::Cognito::UserPoolGroup",
            "Condition": "ActionsEnabled",
            "Properties": {
                "UserPoolId": reference("UserPool"),
                "GroupName": ACTIONS_GROUP,
                "Description": "May terminate, suspend and resume sandboxes from the dashboard"
            }
        },
        "InitialUser": {
            "Type": "AWS::Cognito::UserPoolUser",
            "Condition": "HasInitialUser",
            "Properties": {
                "UserPoolId": reference("UserPool"),
                "Username": reference("InitialUserEmail"),
                "DesiredDeliveryMediums": ["EMAIL"],
                "UserAttributes": [
                    { "Name": "email", "Value": reference("InitialUserEmail") },
                    { "Name": "email_verified", "Value": "true" }
                ]
            }
        },
        "InitialUserInActionsGroup": {
            "Type": "AWS::Cognito::UserPoolUserToGroupAttachment",
            "Condition": "InitialUserActs",
            "Properties": {
                "UserPoolId": reference("UserPool"),
                "GroupName": reference("ActionsGroup"),
                "Username": reference("InitialUser")
            }
        },
    })
}

fn storage() -> Value {
    json!({
        "ThemeParameter": {
            "Type": "AWS::SSM::Parameter",
            "Condition": "CreateThemeParameter",
            "Properties": {
                "Type": "String",
                "Name": sub("/rayito/dashboard/${AWS::StackName}/theme"),
                "Description": "The dashboard's colour theme",
                "Value": reference("ThemeJson")
            }
        },
        "CacheTable": {
            "Type": "AWS::DynamoDB::Table",
            "DeletionPolicy": "Delete",
            "UpdateReplacePolicy": "Delete",
            "Properties": {
                "BillingMode": "PAY_PER_REQUEST",
                "AttributeDefinitions": [{ "AttributeName": "pk", "AttributeType": "S" }],
                "KeySchema": [{ "AttributeName": "pk", "KeyType": "HASH" }],
                "TimeToLiveSpecification": { "AttributeName": "expires_at", "Enabled": true }
            }
        },
        "AuditTable": {
            "Type": "AWS::DynamoDB::Table",
            "DeletionPolicy": "Delete",
            "UpdateReplacePolicy": "Delete",
            "Properties": {
                "BillingMode": "PAY_PER_REQUEST",
                "AttributeDefinitions": [
                    { "AttributeName": "pk", "AttributeType": "S" },
                    { "AttributeName": "sk", "AttributeType": "S" }
                ],
                "KeySchema": [
                    { "AttributeName": "pk", "KeyType": "HASH" },
                    { "AttributeName": "sk", "KeyType": "RANGE" }
                ]
            }
        },
        "FunctionLogGroup": {
            "Type": "AWS::Logs::LogGroup",
            "DeletionPolicy": "Delete",
            "UpdateReplacePolicy": "Delete",
            "Properties": { "RetentionInDays": reference("LogRetentionDays") }
        },
    })
}

fn roles() -> Value {
    let image_arn =
        sub("arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:microvm-image:*");
    let parameter_arn = |name: Value| {
        json!({ "Fn::Sub": [
            "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter${Name}",
            { "Name": name }
        ] })
    };
    let statements = json!([
        allow("WriteOwnLogs", &["logs:CreateLogStream", "logs:PutLogEvents"],
            sub("${FunctionLogGroup.Arn}:*")),
        allow("ListMicrovms", &["lambda:ListMicrovms", "lambda:ListMicrovmImages", "lambda:GetMicrovm"], json!("*")),
        allow("ReadImageVersions", &["lambda:ListMicrovmImageVersions", "lambda:GetMicrovmImageVersion"], image_arn),
        allow("ReadQuotas", &["servicequotas:ListServiceQuotas"], json!("*")),
        allow("FindOwnClientId", &["cognito-idp:ListUserPoolClients"], get_att("UserPool", "Arn")),
        when("HasTheme", allow("ReadThemeParameter", &["ssm:GetParameter"], parameter_arn(json!({
            "Fn::If": ["HasThemeParameterName", reference("ThemeParameterName"), reference("ThemeParameter")]
        })))),
        when("HasLogo", allow("ReadLogoParameter", &["ssm:GetParameter"], parameter_arn(reference("LogoParameterName")))),
        when("CostExplorerEnabled", allow("ReadBilledCost", &["ce:GetCostAndUsage"], json!("*"))),
        when("CostExplorerEnabled", allow("CacheBilledCost",
            &["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"], get_att("CacheTable", "Arn"))),
        when("ActionsEnabled", allow("AppendAuditRows", &["dynamodb:PutItem"], get_att("AuditTable", "Arn"))),
        when("ActionsEnabled", allow("KeepBulkPlans",
            &["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem"], get_att("CacheTable", "Arn"))),
        {
            "Sid": "NeverChangeAuditRows",
            "Effect": "Deny",
            "Action": ["dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"],
            "Resource": get_att("AuditTable", "Arn")
        }
    ]);
    json!({
        "ReadRole": {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "AssumeRolePolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [{
                        "Effect": "Allow",
                        "Principal": { "Service": "lambda.amazonaws.com" },
                        "Action": "sts:AssumeRole"
                    }]
                },
                "Policies": [{
                    "PolicyName": "dashboard-read",
                    "PolicyDocument": { "Version": "2012-10-17", "Statement": statements }
                }]
            }
        },
        "AssumeActionsRolePolicy": {
            "Type": "AWS::IAM::Policy",
            "Condition": "ActionsEnabled",
            "Properties": {
                "PolicyName": "dashboard-assume-actions",
                "Roles": [reference("ReadRole")],
                "PolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [allow("AssumeActionsRole", &["sts:AssumeRole"], get_att("ActionsRole", "Arn"))]
                }
            }
        },
        "ActionsRole": {
            "Type": "AWS::IAM::Role",
            "Condition": "ActionsEnabled",
            "Properties": {
                "AssumeRolePolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [{
                        "Effect": "Allow",
                        "Principal": { "AWS": get_att("ReadRole", "Arn") },
                        "Action": "sts:AssumeRole"
                    }]
                },
                "Policies": [{
                    "PolicyName": "dashboard-actions",
                    "PolicyDocument": {
                        "Version": "2012-10-17",
                        "Statement": [
                            allow("ListToPlan", &["lambda:ListMicrovms", "lambda:GetMicrovm"], json!("*")),
                            allow("ActOnSandboxes",
                                &["lambda:TerminateMicrovm", "lambda:SuspendMicrovm", "lambda:ResumeMicrovm"],
                                sub("arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:microvm-image:${ImageNamePrefix}*"))
                        ]
                    }
                }]
            }
        },
    })
}

fn function() -> Value {
    json!({
        "DashboardFunction": {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "Description": "Rayito dashboard: the page and /api/v1 behind Cognito sign-in",
                "Runtime": "provided.al2023",
                "Handler": "bootstrap",
                "Architectures": ["x86_64"],
                "Role": get_att("ReadRole", "Arn"),
                "Timeout": FUNCTION_TIMEOUT_SECONDS,
                "MemorySize": FUNCTION_MEMORY_MIB,
                "ReservedConcurrentExecutions": { "Fn::If": [
                    "HasReservedConcurrency", reference("ReservedConcurrency"), reference("AWS::NoValue")
                ] },
                "LoggingConfig": { "LogGroup": reference("FunctionLogGroup") },
                "Code": { "S3Bucket": reference("ArtifactBucket"), "S3Key": reference("ArtifactS3Key") },
                "Environment": { "Variables": {
                    "RAYITO_DASHBOARD_USER_POOL_ID": reference("UserPool"),
                    "RAYITO_DASHBOARD_CLIENT_NAME": sub("${AWS::StackName}-spa"),
                    "RAYITO_DASHBOARD_COGNITO_DOMAIN": sub("${UserPoolDomain}.auth.${AWS::Region}.amazoncognito.com"),
                    "RAYITO_DASHBOARD_AUDIT_TABLE": reference("AuditTable"),
                    "RAYITO_DASHBOARD_CACHE_TABLE": reference("CacheTable"),
                    "RAYITO_DASHBOARD_ACTIONS_ROLE_ARN": { "Fn::If": ["ActionsEnabled", get_att("ActionsRole", "Arn"), ""] },
                    "RAYITO_DASHBOARD_ACTIONS_GROUP": ACTIONS_GROUP,
                    "RAYITO_DASHBOARD_COST_EXPLORER": reference("EnableCostExplorer"),
                    "RAYITO_DASHBOARD_THEME_PARAMETER": { "Fn::If": [
                        "HasThemeParameterName", reference("ThemeParameterName"),
                        { "Fn::If": ["CreateThemeParameter", reference("ThemeParameter"), ""] }
                    ] },
                    "RAYITO_DASHBOARD_LOGO_PARAMETER": reference("LogoParameterName")
                } }
            }
        },
        "FunctionUrl": {
            "Type": "AWS::Lambda::Url",
            "Properties": {
                "AuthType": "NONE",
                "InvokeMode": "BUFFERED",
                "TargetFunctionArn": get_att("DashboardFunction", "Arn")
            }
        },
        "UrlInvokePermission": {
            "Type": "AWS::Lambda::Permission",
            "Properties": {
                "Action": "lambda:InvokeFunctionUrl",
                "FunctionName": reference("DashboardFunction"),
                "FunctionUrlAuthType": "NONE",
                "Principal": "*"
            }
        },
        "UrlInvokeFunctionPermission": {
            "Type": "AWS::Lambda::Permission",
            "Properties": {
                "Action": "lambda:InvokeFunction",
                "FunctionName": reference("DashboardFunction"),
                "InvokedViaFunctionUrl": true,
                "Principal": "*"
            }
        },
    })
}

fn outputs() -> Value {
    json!({
        "DashboardUrl": {
            "Description": "The dashboard's address (sign in with a user of the pool)",
            "Value": get_att("FunctionUrl", "FunctionUrl")
        },
        "UserPoolId": {
            "Description": "The Cognito user pool: create users here",
            "Value": reference("UserPool")
        },
        "ActionsGroupName": {
            "Condition": "ActionsEnabled",
            "Description": "Add a user to this group to let them run actions",
            "Value": reference("ActionsGroup")
        },
        "AuditTableName": {
            "Description": "Append-only audit rows (partition AUDIT, sorted by time)",
            "Value": reference("AuditTable")
        },
        "ActionsRoleArn": {
            "Condition": "ActionsEnabled",
            "Description": "The role actions run with, after the group check and the audit",
            "Value": get_att("ActionsRole", "Arn")
        },
    })
}

fn merge(parts: &[Value]) -> Value {
    let mut all = serde_json::Map::new();
    for part in parts {
        if let Value::Object(map) = part {
            all.extend(map.clone());
        }
    }
    Value::Object(all)
}

/// The template as JSON.
pub fn template_value() -> Value {
    json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "Rayito hosted dashboard: a Lambda function behind a Function URL serving the page and /api/v1 with Cognito sign-in, a read-only role, an actions role (AllowActions=true), an append-only audit table and a cost cache table",
        "Parameters": parameters(),
        "Conditions": conditions(),
        // CloudFormation refuses aws-iam too, whoever deploys.
        "Rules": { "CognitoJwtOnly": { "Assertions": [{
            "Assert": { "Fn::Equals": [reference("AuthMode"), "cognito-jwt"] },
            "AssertDescription": AWS_IAM_REFUSED
        }] } },
        "Resources": merge(&[cognito(), storage(), roles(), function()]),
        "Outputs": outputs(),
    })
}

/// The template's text.
pub fn dashboard_template() -> String {
    serde_json::to_string_pretty(&template_value()).unwrap_or_default()
}
