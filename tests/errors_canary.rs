//! Canary: recognisable secret values fed into every mapper, in the shapes
//! they take in real server text, never appear in an error's Display, Debug,
//! source or wire form.

use std::error::Error as _;
use std::time::Duration;

use rayito::error::map::agent::{CommandOutput, EndEventData, from_end_event, from_stream_error};
use rayito::error::map::aws::{AwsFailure, from_aws, no_credentials};
use rayito::error::map::grpc::{CallContext, GrpcFailure, from_grpc};
use rayito::error::{GrpcCode, SandboxError};

/// 32 bytes, base64url without padding: the shape of the access token.
const ACCESS_TOKEN: &str = "cAnArYaCcEsStOkEnQwErTyUiOpAsDfGhJkLzXcVbN";
/// The ciphertext segment of a proxy JWE.
const JWE_CIPHERTEXT: &str = "CaNaRyJwEcIpHeRtExTqWeRtYuIoPaSdFgHjKlZxCvBnM_-0123";
/// An AWS secret access key shape (40 chars).
const SECRET_KEY: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYCANARYKEY1";
/// An AWS session token shape.
const SESSION_TOKEN: &str =
    "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQCanaryCanaryCanary";
const KEY_ID: &str = "ASIACANARY0KEY0ID000";
const SIGNATURE: &str = "c0ffee00deadbeef0123456789abcdef0123456789abcdef0123456789abcdef";

fn secrets() -> [&'static str; 6] {
    [
        ACCESS_TOKEN,
        JWE_CIPHERTEXT,
        SECRET_KEY,
        SESSION_TOKEN,
        KEY_ID,
        SIGNATURE,
    ]
}

/// The secrets as servers and libraries quote them.
fn leaky_texts() -> Vec<String> {
    vec![
        format!("x-access-token: {ACCESS_TOKEN}"),
        format!("token {ACCESS_TOKEN} refused"),
        format!(
            "x-aws-proxy-auth: eyJhbGciOiJkaXIiLCJlbmMiOiJBMjU2R0NNIn0..iv.{JWE_CIPHERTEXT}.tag"
        ),
        format!("bad jwe eyJhbGciOiJkaXIiLCJlbmMiOiJBMjU2R0NNIn0..iv.{JWE_CIPHERTEXT}.tag"),
        format!("aws_secret_access_key={SECRET_KEY}"),
        format!("key {SECRET_KEY} rejected"),
        format!("X-Amz-Security-Token:\n{SESSION_TOKEN}\nhost:x"),
        format!("Credential={KEY_ID}/20250101/us-east-1/lambda-microvms/aws4_request"),
        format!(
            "https://b.s3.amazonaws.com/k?X-Amz-Credential={KEY_ID}%2F20250101&X-Amz-Signature={SIGNATURE}"
        ),
        format!("The String-to-Sign should have been 'AWS4-HMAC-SHA256\n{SIGNATURE}\n{KEY_ID}'"),
        format!("Authorization: AWS4-HMAC-SHA256 Credential={KEY_ID}/x, Signature={SIGNATURE}"),
    ]
}

fn assert_clean(e: &SandboxError, input: &str) {
    let shown = [
        e.to_string(),
        format!("{e:?}"),
        e.to_wire_string(),
        e.source().map(ToString::to_string).unwrap_or_default(),
        e.classify().to_json().to_string(),
    ];
    for text in shown {
        for secret in secrets() {
            assert!(
                !text.contains(secret),
                "{secret} leaked from {input:?} into {text}"
            );
        }
    }
}

#[test]
fn no_mapper_lets_a_secret_through() {
    let call = CallContext::new("commands.run");
    for text in leaky_texts() {
        let mut f = AwsFailure::new("RunMicrovm");
        f.code = Some("AccessDeniedException".into());
        f.message = Some(text.clone());
        f.request_id = Some(text.clone());
        f.quota_code = Some(text.clone());
        assert!(!format!("{f:?}").contains(ACCESS_TOKEN));
        assert_clean(&from_aws(f), &text);

        let mut f = AwsFailure::new("GetMicrovm");
        f.code = Some("ServiceQuotaExceededException".into());
        f.quota_code = Some(text.clone());
        f.message = Some(text.clone());
        assert_clean(&from_aws(f), &text);

        assert_clean(&no_credentials(&text), &text);
        for code in GrpcCode::ALL {
            for has_status in [true, false] {
                let f = GrpcFailure::new(*code, text.clone(), has_status, call);
                for secret in secrets() {
                    assert!(!format!("{f:?}").contains(secret));
                }
                assert_clean(&from_grpc(f), &text);
            }
        }
        for code in ["not_found", "resource_exhausted", "weird", "unimplemented"] {
            assert_clean(&from_stream_error(code, &text, call), &text);
        }
        let end = EndEventData {
            status: "weird".into(),
            exit_code: 1,
            signal: None,
            error: Some(("invalid_argument".into(), text.clone())),
        };
        let err = from_end_event(end, CommandOutput::default(), "ls").unwrap_err();
        assert_clean(&err, &text);
        assert_clean(
            &SandboxError::connection_lost("commands.run", Some(&text)),
            &text,
        );
        assert_clean(
            &SandboxError::not_ready(Some(&text), Some(&text), Duration::from_secs(1)),
            &text,
        );
        assert_clean(&SandboxError::sandbox_not_found(&text), &text);
    }
}

#[test]
fn a_command_line_with_secrets_never_reaches_the_message() {
    let command = format!("TOKEN={ACCESS_TOKEN} curl -H 'x-access-token: {ACCESS_TOKEN}' http://x");
    let end = EndEventData {
        status: "exited".into(),
        exit_code: 7,
        signal: None,
        error: None,
    };
    let out = CommandOutput {
        stdout: ACCESS_TOKEN.into(),
        stderr: ACCESS_TOKEN.into(),
        truncated: false,
    };
    assert!(!format!("{out:?}").contains(ACCESS_TOKEN));
    let err = from_end_event(end, out, &command).unwrap_err();
    assert_eq!(
        err.to_string(),
        "command curl exited with code 7; its stdout and stderr are in the error"
    );
    // Output is data the caller asked for: kept in the variant (and the
    // wire form), never in Display or Debug.
    assert!(!format!("{err:?}").contains(ACCESS_TOKEN));
    assert!(matches!(&err, SandboxError::CommandExit { stdout, .. } if stdout == ACCESS_TOKEN));
}
