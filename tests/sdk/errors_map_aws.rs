//! The AWS control-plane table (docs/errors.md, "AWS control plane, by error
//! code, never by HTTP status"): every code it names, no
//! response, and an unknown code, each with variant, fields and the exact
//! message.

use std::time::Duration;

use rayito::test_util::{AwsError, aws_no_credentials};

fn build(f: AwsError) -> SandboxError {
    f.build()
}
use rayito::error::{ErrorKind, SandboxCode, SandboxError, TimeoutScope};

fn failure(operation: &'static str, code: &str, status: u16) -> AwsError {
    let mut f = AwsError::new(operation);
    f = f.code(code);
    f = f.http_status(status);
    f = f.message("server says no".to_owned());
    f = f.request_id("req-123".to_owned());
    f
}

fn assert_meta(e: &SandboxError, code: &str, status: u16) {
    let m = e.meta();
    assert_eq!(m.aws_code(), Some(code));
    assert_eq!(m.http_status(), Some(status));
    assert_eq!(m.request_id(), Some("req-123"));
    assert_eq!(m.server_message(), Some("server says no"));
    assert_eq!(m.attempts(), 1);
    assert_eq!(m.grpc_code(), None);
}

#[test]
fn resource_not_found_is_sandbox_not_found_and_mentions_the_image_on_run() {
    let e = build(failure("GetMicrovm", "ResourceNotFoundException", 404));
    assert!(matches!(e, SandboxError::SandboxNotFound { .. }));
    assert_eq!(
        e.to_string(),
        "control plane call GetMicrovm found no such sandbox: server says no; it has terminated or never existed, create a new sandbox"
    );
    assert_meta(&e, "ResourceNotFoundException", 404);
    assert!(e.is_not_found() && e.is_sandbox_error() && !e.is_retryable());

    let e = build(failure("GetMicrovmImage", "ResourceNotFoundException", 404));
    assert!(matches!(e, SandboxError::SandboxNotFound { .. }));
    assert_eq!(
        e.to_string(),
        "control plane call GetMicrovmImage found no such resource: server says no; the image is probably missing, check the image ARN or publish the image"
    );
    assert_meta(&e, "ResourceNotFoundException", 404);

    // Every image operation misses an image, not a sandbox.
    let e = build(failure(
        "ListMicrovmImageVersions",
        "ResourceNotFoundException",
        404,
    ));
    assert_eq!(
        e.to_string(),
        "control plane call ListMicrovmImageVersions found no such resource: server says no; the image is probably missing, check the image ARN or publish the image"
    );

    let e = build(failure("RunMicrovm", "ResourceNotFoundException", 404));
    assert!(matches!(e, SandboxError::SandboxNotFound { .. }));
    assert_eq!(
        e.to_string(),
        "control plane call RunMicrovm found no such resource: server says no; the image is probably missing, check the image ARN or publish the image"
    );
}

#[test]
fn validation_codes_are_invalid_argument() {
    for code in ["ValidationException", "InvalidParameterValueException"] {
        let e = build(failure("RunMicrovm", code, 400));
        assert!(
            matches!(e, SandboxError::InvalidArgument { argument: None, .. }),
            "{code}"
        );
        assert_eq!(
            e.to_string(),
            "control plane call RunMicrovm refused an argument: server says no; fix the value before retrying"
        );
        assert_meta(&e, code, 400);
    }
}

#[test]
fn every_credential_code_is_authentication() {
    // Every credential and signature code, spelled with and without the
    // `Exception` suffix (AWS services use both).
    let bases = [
        "AccessDenied",
        "AuthFailure",
        "ExpiredToken",
        "IDPRejectedClaim",
        "IncompleteSignature",
        "InvalidAccessKeyId",
        "InvalidClientTokenId",
        "InvalidIdentityToken",
        "InvalidSignature",
        "InvalidToken",
        "MissingAuthenticationToken",
        "NotAuthorized",
        "OptInRequired",
        "RequestExpired",
        "SignatureDoesNotMatch",
        "TokenRefreshRequired",
        "UnauthorizedOperation",
        "Unauthorized",
        "UnrecognizedClient",
    ];
    let codes: Vec<String> = bases
        .iter()
        .flat_map(|b| [(*b).to_owned(), format!("{b}Exception")])
        .collect();
    for code in codes.iter().map(String::as_str) {
        let e = build(failure("RunMicrovm", code, 403));
        assert!(
            matches!(
                e,
                SandboxError::Authentication {
                    proxy_rejected: false,
                    ..
                }
            ),
            "{code}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "control plane call RunMicrovm refused the AWS credentials ({code}): server says no; check the credentials, their expiry and their IAM permissions"
            )
        );
        assert_meta(&e, code, 403);
        assert!(!e.is_sandbox_error());
    }
}

#[test]
fn throttling_is_rate_limit_with_retry_after() {
    for code in ["ThrottlingException", "TooManyRequestsException"] {
        let mut f = failure("RunMicrovm", code, 429);
        f = f.retry_after(Duration::from_secs(2));
        let e = build(f);
        assert!(matches!(
            e,
            SandboxError::RateLimit { retry_after: Some(d), .. } if d == Duration::from_secs(2)
        ));
        assert_eq!(e.retry_after(), Some(Duration::from_secs(2)));
        assert_eq!(
            e.to_string(),
            "control plane call RunMicrovm was throttled: server says no; retry after 2 s"
        );
        assert_meta(&e, code, 429);
        assert!(e.is_retryable());
    }
    let e = build(failure("ListMicrovms", "ThrottlingException", 429));
    assert!(matches!(
        e,
        SandboxError::RateLimit {
            retry_after: None,
            ..
        }
    ));
    assert_eq!(
        e.to_string(),
        "control plane call ListMicrovms was throttled: server says no; retry later with backoff"
    );
}

#[test]
fn every_code_of_the_aws_sdks_throttling_list_is_rate_limit() {
    // The AWS SDK's own list, not a copy: a code it adds is covered.
    let list = aws_runtime::retries::classifiers::THROTTLING_ERRORS;
    assert!(list.len() >= 14, "{list:?}");
    for code in list {
        let e = build(failure("RunMicrovm", code, 400));
        assert!(
            matches!(
                e,
                SandboxError::RateLimit {
                    retry_after: None,
                    ..
                }
            ),
            "{code}: {e:?}"
        );
        assert_eq!(
            e.to_string(),
            "control plane call RunMicrovm was throttled: server says no; retry later with backoff"
        );
        assert!(e.is_retryable());
    }
}

#[test]
fn the_aws_sdks_transient_codes_are_service_errors_whatever_the_status() {
    let list = aws_runtime::retries::classifiers::TRANSIENT_ERRORS;
    assert!(!list.is_empty());
    for code in list {
        let e = build(failure("GetMicrovm", code, 408));
        assert_eq!(e.sandbox_code(), Some(&SandboxCode::ServiceError), "{code}");
        assert_eq!(
            e.to_string(),
            format!(
                "control plane call GetMicrovm failed on the service side ({code}): server says no; retry later"
            )
        );
        assert!(e.is_retryable());
    }
}

#[test]
fn conflicts_are_sandbox_state() {
    for code in ["ConflictException", "ResourceConflictException"] {
        let e = build(failure("SuspendMicrovm", code, 409));
        assert!(matches!(e, SandboxError::SandboxState { .. }), "{code}");
        assert_eq!(
            e.to_string(),
            "control plane call SuspendMicrovm conflicts with the sandbox's current state: server says no; wait until it settles, then retry"
        );
        assert_meta(&e, code, 409);
    }
}

#[test]
fn service_quota_is_quota_exceeded_with_its_code_by_name_not_status() {
    let mut f = failure("RunMicrovm", "ServiceQuotaExceededException", 402);
    f = f.quota_code("L-1234ABCD".to_owned());
    let e = build(f);
    assert!(matches!(
        &e,
        SandboxError::QuotaExceeded { quota_code: Some(q), .. } if q == "L-1234ABCD"
    ));
    assert_eq!(
        e.to_string(),
        "control plane call RunMicrovm hit an account quota: server says no; free resources or ask AWS for a higher quota"
    );
    assert_meta(&e, "ServiceQuotaExceededException", 402);
    let info = e.classify();
    assert!(!info.retryable && info.retry_with_larger_limits);
}

#[test]
fn insufficient_capacity_is_capacity_even_though_it_is_a_500() {
    let e = build(failure("RunMicrovm", "InsufficientCapacityException", 500));
    assert!(matches!(e, SandboxError::Capacity { code: None, .. }));
    assert_eq!(
        e.to_string(),
        "control plane call RunMicrovm found no capacity: server says no; retry later or use another region"
    );
    assert_meta(&e, "InsufficientCapacityException", 500);
    assert!(e.is_retryable() && !e.is_sandbox_error());
}

#[test]
fn service_faults_and_any_5xx_are_service_error() {
    for (code, status) in [
        ("InternalServerException", 500),
        ("ServiceException", 500),
        ("InternalFailure", 500),
        ("InternalError", 500),
        ("ServiceUnavailable", 503),
        ("ServiceUnavailableException", 400),
        ("SomethingNewException", 503),
    ] {
        let e = build(failure("GetMicrovm", code, status));
        assert_eq!(e.sandbox_code(), Some(&SandboxCode::ServiceError), "{code}");
        assert_eq!(
            e.to_string(),
            format!(
                "control plane call GetMicrovm failed on the service side ({code}): server says no; retry later"
            )
        );
        assert_meta(&e, code, status);
        assert_eq!(e.classify().kind, "service_error");
        assert!(e.is_retryable());
    }
    let mut f = AwsError::new("GetMicrovm");
    f = f.http_status(502);
    let e = build(f);
    assert_eq!(e.sandbox_code(), Some(&SandboxCode::ServiceError));
    assert_eq!(
        e.to_string(),
        "control plane call GetMicrovm failed on the service side (http 502); retry later"
    );
}

#[test]
fn no_response_is_connection_lost_or_a_request_timeout() {
    let f = AwsError::timed_out("RunMicrovm");
    let e = build(f);
    assert!(matches!(
        e,
        SandboxError::Timeout {
            scope: TimeoutScope::Request,
            ..
        }
    ));
    assert_eq!(
        e.to_string(),
        "control plane call RunMicrovm got no response before its deadline; retry it, or raise AwsOptions::read_timeout or connect_timeout"
    );
    assert_eq!(e.meta().http_status(), None);

    let f = AwsError::connect_failed("RunMicrovm");
    let e = build(f);
    assert_eq!(e.sandbox_code(), Some(&SandboxCode::ConnectionLost));
    assert_eq!(
        e.to_string(),
        "control plane call RunMicrovm could not connect to the service; check the network, the region and the endpoint, then retry"
    );
    assert!(e.is_retryable());

    let f = AwsError::no_response("GetMicrovm");
    let e = build(f);
    assert_eq!(e.sandbox_code(), Some(&SandboxCode::ConnectionLost));
    assert_eq!(
        e.to_string(),
        "control plane call GetMicrovm got no response from the service; retry it"
    );
}

#[test]
fn an_unknown_code_keeps_its_metadata() {
    let e = build(failure("GetMicrovm", "BrandNewException", 418));
    assert!(matches!(e, SandboxError::Sandbox { code: None, .. }));
    assert_eq!(
        e.to_string(),
        "control plane call GetMicrovm failed (BrandNewException): server says no; the SDK does not retry this failure"
    );
    assert_meta(&e, "BrandNewException", 418);
    assert_eq!(e.kind(), ErrorKind::Sandbox);
    assert!(!e.is_retryable());

    let e = build(AwsError::new("GetMicrovm"));
    assert_eq!(
        e.to_string(),
        "control plane call GetMicrovm failed (no error code); the SDK does not retry this failure"
    );
}

#[test]
fn codes_are_sanitized_as_the_aws_json_protocol_says() {
    let e = build(
        AwsError::new("GetMicrovm").code("aws.foo#ConflictException:http://internal.amazon.com/"),
    );
    assert_eq!(e.meta().aws_code(), Some("ConflictException"));
    let e = build(failure(
        "ResumeMicrovm",
        "com.amazon#ConflictException:http://x",
        409,
    ));
    assert!(matches!(e, SandboxError::SandboxState { .. }));
    assert_eq!(e.meta().aws_code(), Some("ConflictException"));
}

#[test]
fn no_credentials_says_how_to_configure_aws_or_go_local() {
    let e = aws_no_credentials("no providers in chain provided credentials");
    assert!(matches!(
        e,
        SandboxError::Authentication {
            proxy_rejected: false,
            ..
        }
    ));
    assert_eq!(
        e.to_string(),
        "no AWS credentials or region found: no providers in chain provided credentials; configure AWS (environment variables, a profile or an instance role) or choose the local backend with RAYITO_BACKEND=local or Sandbox::builder().local()"
    );
    assert_eq!(
        aws_no_credentials("").to_string(),
        "no AWS credentials or region found; configure AWS (environment variables, a profile or an instance role) or choose the local backend with RAYITO_BACKEND=local or Sandbox::builder().local()"
    );
}

#[test]
fn aws_secrets_never_reach_display_debug_or_wire() {
    let secret_sig = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    let key_id = "AKIAIOSFODNN7EXAMPLE";
    let token = "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQDcanary";
    let mut f = failure("RunMicrovm", "SignatureDoesNotMatch", 403);
    f = f.message(format!(
        "Signature={secret_sig} Credential={key_id}/20250101 x-amz-security-token:\n{token}\n\
         The Canonical String for this request should have been 'POST\n/x\nhost:y'"
    ));
    let debug_of_failure = format!("{f:?}");
    let e = build(f);
    for shown in [
        e.to_string(),
        format!("{e:?}"),
        e.to_wire(),
        debug_of_failure,
    ] {
        for secret in [secret_sig, key_id, token, "host:y"] {
            assert!(!shown.contains(secret), "{secret} leaked into {shown}");
        }
    }
}
