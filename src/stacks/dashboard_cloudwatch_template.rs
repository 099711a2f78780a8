//! The `dashboard-cloudwatch` stack's template: one CloudWatch dashboard
//! whose body is the one `rayito dashboard cloudwatch` prints
//! ([`CloudWatchBoard`](super::CloudWatchBoard)), with the region, the
//! log-group prefix and the optional widgets left to the stack's
//! parameters. No function, no role.

use serde_json::{Value, json};

use super::cloudwatch_board::{DEFAULT_LOG_GROUP_PREFIX, template_parts};

/// The template as a JSON value.
pub(crate) fn template_value() -> Value {
    let (base, otlp, quota) = template_parts();
    let optional = |condition: &str, fragment: String| json!({ "Fn::If": [condition, { "Fn::Sub": fragment }, ""] });
    json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "Rayito (optional): a CloudWatch dashboard of the sandboxes' logs (Logs Insights) and, when asked, their OTLP metrics and the memory quota's use. The same body rayito dashboard cloudwatch prints. One resource.",
        "Parameters": {
            "DashboardName": {
                "Type": "String",
                "Default": "",
                "AllowedPattern": "^$|^[A-Za-z0-9_-]{1,255}$",
                "Description": "Name of the dashboard; empty: the stack's name"
            },
            "LogGroupPrefix": {
                "Type": "String",
                "Default": DEFAULT_LOG_GROUP_PREFIX,
                "AllowedPattern": "^/[A-Za-z0-9_./#-]*$",
                "Description": "Prefix of the log groups the widgets query (keep the trailing slash)"
            },
            "IncludeOtlp": {
                "Type": "String",
                "Default": "false",
                "AllowedValues": ["false", "true"],
                "Description": "true adds CPU, memory and disk charts of the sandboxes' OTLP metrics"
            },
            "IncludeQuota": {
                "Type": "String",
                "Default": "false",
                "AllowedValues": ["false", "true"],
                "Description": "true adds the memory quota chart (the quota-alerts stack's metric)"
            }
        },
        "Conditions": {
            "NamedDashboard": { "Fn::Not": [{ "Fn::Equals": [{ "Ref": "DashboardName" }, ""] }] },
            "OtlpWidgets": { "Fn::Equals": [{ "Ref": "IncludeOtlp" }, "true"] },
            "QuotaWidgets": { "Fn::Equals": [{ "Ref": "IncludeQuota" }, "true"] }
        },
        "Resources": {
            "Dashboard": {
                "Type": "AWS::CloudWatch::Dashboard",
                "Properties": {
                    "DashboardName": { "Fn::If": ["NamedDashboard", { "Ref": "DashboardName" }, { "Ref": "AWS::StackName" }] },
                    "DashboardBody": { "Fn::Sub": [base, {
                        "OtlpWidgets": optional("OtlpWidgets", otlp),
                        "QuotaWidgets": optional("QuotaWidgets", quota)
                    }] }
                }
            }
        },
        "Outputs": {
            "DashboardName": {
                "Description": "Open it in the CloudWatch console under Dashboards",
                "Value": { "Ref": "Dashboard" }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::cloudwatch_board::CloudWatchBoard;
    use super::*;

    /// The template's body with CloudFormation's substitutions done by
    /// hand equals the CLI's body, with and without the optional widgets.
    #[test]
    fn the_templates_body_is_the_clis_board() {
        let t = template_value();
        let sub = &t["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"];
        let base = sub[0].as_str().unwrap();
        let fragment = |key: &str| {
            sub[1][key]["Fn::If"][1]["Fn::Sub"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        let (otlp_widgets, quota_widgets) = (fragment("OtlpWidgets"), fragment("QuotaWidgets"));
        for (otlp, quota) in [(false, false), (true, false), (false, true), (true, true)] {
            let text = base
                .replace("${OtlpWidgets}", if otlp { &otlp_widgets } else { "" })
                .replace("${QuotaWidgets}", if quota { &quota_widgets } else { "" })
                .replace("${AWS::Region}", "eu-west-1")
                .replace("${LogGroupPrefix}", "/team/");
            let got: Value = serde_json::from_str(&text).unwrap();
            let mut board = CloudWatchBoard::new("eu-west-1");
            board.log_group_prefix = "/team/".into();
            board.include_otlp = otlp;
            board.include_quota = quota;
            assert_eq!(got, board.body().unwrap(), "otlp {otlp} quota {quota}");
        }
    }
}
