//! Canary: recognisable secret values fed into every mapper, in the shapes
//! they take in real server text, never appear in an error's Display, Debug,
//! source or wire form.

use std::error::Error as _;
use std::time::Duration;

use rayito::error::{GrpcCode, SandboxError};
use rayito::test_util::{
    AwsError, Call, CommandOutput, EndEvent, TransportFailure, agent_status, aws_no_credentials,
    end_event, proxy_answer, stream_error, transport_failure,
};

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
/// A short value no shape rule catches: only its name gives it away.
const SHORT_SECRET: &str = "q7w8e9shortsecret";

fn secrets() -> [&'static str; 7] {
    [
        SHORT_SECRET,
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
        // Issue 41: an empty value continued on a line that looks like a
        // header kept the secret in every mapper.
        format!("x-access-token: a X-Amz-Security-Token:\n{SHORT_SECRET} : "),
        // The adversarial pass: folding, tabs, CRLF, `=` on the next line,
        // quoted and scheme-prefixed `=` values, CGI names, encoded `=`.
        format!("X-Amz-Security-Token:\r\n\t{SHORT_SECRET}\t:\t"),
        format!("Authorization: Bearer\r\n {SHORT_SECRET}\r\nhost: h"),
        format!("x-access-token =\n{SHORT_SECRET}"),
        format!("authorization=\"Bearer {SHORT_SECRET}\""),
        format!("Authorization=Bearer {SHORT_SECRET}"),
        format!("HTTP_AUTHORIZATION={SHORT_SECRET}"),
        format!("?X-Amz-Security-Token%3D{SHORT_SECRET}"),
        format!("AUTHORIZATION authorization:\nAuthorization:\n{SHORT_SECRET}: z"),
    ]
}

fn source_chain(e: &SandboxError) -> String {
    let mut texts = Vec::new();
    let mut next = e.source();
    while let Some(source) = next {
        texts.push(source.to_string());
        next = source.source();
    }
    texts.join(" | ")
}

fn assert_clean(e: &SandboxError, input: &str) {
    let shown = [
        e.to_string(),
        format!("{e:?}"),
        e.to_wire(),
        // The whole source chain: the summary, then the redacted cause.
        source_chain(e),
        e.classify().to_json(),
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
    let call = Call::new("commands.run");
    for text in leaky_texts() {
        let mut f = AwsError::new("RunMicrovm");
        f = f.code("AccessDeniedException");
        f = f.message(text.clone());
        f = f.request_id(text.clone());
        f = f.quota_code(text.clone());
        assert!(!format!("{f:?}").contains(ACCESS_TOKEN));
        assert_clean(&f.build(), &text);

        let mut f = AwsError::new("GetMicrovm");
        f = f.code("ServiceQuotaExceededException");
        f = f.quota_code(text.clone());
        f = f.message(text.clone());
        assert_clean(&f.build(), &text);

        assert_clean(&aws_no_credentials(&text), &text);
        for code in GrpcCode::ALL {
            assert_clean(&agent_status(*code, &text, call), &text);
            let reset = TransportFailure::Reset { code: *code };
            assert_clean(&transport_failure(reset, &text, call), &text);
        }
        assert_clean(
            &transport_failure(TransportFailure::NotEstablished, &text, call),
            &text,
        );
        assert_clean(&proxy_answer(403, call), &text);
        assert_clean(
            &AwsError::connect_failed("GetMicrovm")
                .cause(text.clone())
                .build(),
            &text,
        );
        for code in ["not_found", "resource_exhausted", "weird", "unimplemented"] {
            assert_clean(&stream_error(code, &text, call), &text);
        }
        let end = EndEvent::new("weird", 1).error("invalid_argument", text.clone());
        let err = end_event(end, CommandOutput::default(), "ls").unwrap_err();
        assert_clean(&err, &text);
        assert_clean(
            &SandboxError::connection_lost("commands.run", Some(&text)),
            &text,
        );
        assert_clean(
            &SandboxError::not_ready(
                Some(rayito::SandboxState::from(text.as_str())),
                Some(&text),
                Duration::from_secs(1),
            ),
            &text,
        );
        assert_clean(&SandboxError::sandbox_not_found(&text), &text);
    }
}

#[test]
fn a_command_line_with_secrets_never_reaches_the_message() {
    let command = format!("TOKEN={ACCESS_TOKEN} curl -H 'x-access-token: {ACCESS_TOKEN}' http://x");
    let end = EndEvent::new("exited", 7);
    let out = CommandOutput::new(ACCESS_TOKEN, ACCESS_TOKEN, false);
    assert!(!format!("{out:?}").contains(ACCESS_TOKEN));
    let err = end_event(end, out, &command).unwrap_err();
    assert_eq!(
        err.to_string(),
        "command curl exited with code 7; its stdout and stderr are in the error"
    );
    // Output is data the caller asked for: kept in the variant (and the
    // wire form), never in Display or Debug.
    assert!(!format!("{err:?}").contains(ACCESS_TOKEN));
    assert!(matches!(&err, SandboxError::CommandExit { stdout, .. } if stdout == ACCESS_TOKEN));
}
