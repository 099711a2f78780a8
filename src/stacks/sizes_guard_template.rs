//! The `sizes-guard` stack's template: one managed policy,
//! `RayitoRunAllowedSizes`, that allows `lambda:RunMicrovm` on the listed
//! image ARNs and denies it everywhere else (`NotResource`), and denies
//! creating or changing images: a caller with it attached can launch only
//! the sizes the operator chose, whatever else it is granted. IAM only.

use serde_json::{Value, json};

/// The template as a JSON value.
pub(crate) fn template_value() -> Value {
    let images = json!({ "Ref": "ImageArns" });
    json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "Rayito (optional): a cost guard, RunMicrovm only on the listed image ARNs and no image publishing, whatever else the identity is granted. IAM only ($0).",
        "Parameters": {
            "ImageArns": {
                "Type": "CommaDelimitedList",
                "Description": "The image ARN (without a version) of every image allowed, as rayito image list prints it"
            }
        },
        "Resources": {
            "RayitoRunAllowedSizes": {
                "Type": "AWS::IAM::ManagedPolicy",
                "Properties": {
                    "Description": "Rayito sizes guard: RunMicrovm only on the listed images; no image create, update or delete",
                    "PolicyDocument": {
                        "Version": "2012-10-17",
                        "Statement": [
                            { "Sid": "RunAllowedSizeImages", "Effect": "Allow", "Action": ["lambda:RunMicrovm"], "Resource": images },
                            { "Sid": "DenyRunMicrovmOutsideAllowedSizes", "Effect": "Deny", "Action": ["lambda:RunMicrovm"], "NotResource": images },
                            {
                                "Sid": "DenyImagePublishing",
                                "Effect": "Deny",
                                "Action": [
                                    "lambda:CreateMicrovmImage",
                                    "lambda:UpdateMicrovmImage",
                                    "lambda:UpdateMicrovmImageVersion",
                                    "lambda:DeleteMicrovmImageVersion"
                                ],
                                "Resource": "*"
                            }
                        ]
                    }
                }
            }
        },
        "Outputs": {
            "PolicyArn": {
                "Description": "Attach to the identity that creates sandboxes (never to the one that publishes images)",
                "Value": { "Ref": "RayitoRunAllowedSizes" }
            }
        }
    })
}
