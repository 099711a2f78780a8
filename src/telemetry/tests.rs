//! The checks of `create`, each refusal with its exact message.

use std::time::Duration;

use super::spec::check;
use super::*;
use crate::error::SandboxError;

fn message(err: &SandboxError) -> String {
    err.to_string()
}

#[test]
fn the_defaults_are_the_references() {
    let t = TelemetryExport::new();
    assert_eq!(t.interval, Duration::from_secs(60));
    assert_eq!(t.service_name, "rayito");
    assert_eq!(t.names, TelemetryNames::Rayito);
    assert_eq!(t.auth, OtlpAuth::execution_role());
    assert!(check(&t, None).is_ok());
    assert!(check(&t, Some("rayito-base-caps-2gb")).is_ok());
}

#[test]
fn each_refusal_is_pinned() {
    let interval = |d| check(&TelemetryExport::new().interval(d), None).unwrap_err();
    for d in [
        Duration::from_secs(14),
        Duration::from_secs(301),
        Duration::from_millis(15_500),
    ] {
        let e = interval(d);
        assert!(matches!(e, SandboxError::InvalidArgument { .. }), "{e:?}");
        assert!(
            message(&e).contains(&format!(
                "the telemetry export's interval is {d:?}; pass 15 to 300 whole seconds"
            )),
            "{e}"
        );
    }
    for ok in [15, 300] {
        assert!(
            check(
                &TelemetryExport::new().interval(Duration::from_secs(ok)),
                None
            )
            .is_ok()
        );
    }
    let e = check(&TelemetryExport::new().service_name("  "), None).unwrap_err();
    assert!(message(&e).contains(
        "the telemetry export's service_name is empty or longer than 1,024 bytes; pass a name (the default is rayito)"
    ));
    for bad in [
        "ftp://collector/v1/metrics",
        "http://collector.example.com/v1/metrics",
        "https://user:pw@collector.example.com/v1/metrics",
        "https:///v1/metrics",
        "https://collector.example.com/#x",
        "collector.example.com",
    ] {
        let e = check(&TelemetryExport::new().endpoint(bad), None).unwrap_err();
        assert!(
            message(&e).contains("the telemetry export's endpoint is not an https:// URL with a host (http:// only to a loopback host), or it has userinfo or a fragment; pass the collector's OTLP/HTTP metrics URL, such as https://collector.example.com:4318/v1/metrics"),
            "{bad}: {e}"
        );
    }
    for good in [
        "https://collector.example.com:4318/v1/metrics",
        "http://127.0.0.1:4318/v1/metrics",
        "http://[::1]:4318/v1/metrics",
        "http://localhost:4318/v1/metrics",
    ] {
        assert!(
            check(&TelemetryExport::new().endpoint(good), None).is_ok(),
            "{good}"
        );
    }
    let e = check(&TelemetryExport::new(), Some("rayito-base")).unwrap_err();
    match &e {
        SandboxError::Unimplemented { feature, .. } => assert_eq!(&**feature, "telemetry"),
        other => panic!("{other:?}"),
    }
    assert!(message(&e).contains("the execution role's SigV4 (OtlpAuth::execution_role) needs an image of the base-caps variant (rayito-base-caps or rayito-base-caps-efs, or a sized form); the image asked for is of the variant base; use OtlpAuth::bearer on other images"), "{e}");
    let e = "x2b".parse::<TelemetryNames>().unwrap_err();
    assert!(
        message(&e)
            .contains("the telemetry export's names \"x2b\" is not recognized; use rayito or e2b")
    );
    assert_eq!(
        "e2b".parse::<TelemetryNames>().unwrap(),
        TelemetryNames::E2b
    );
}

#[cfg(feature = "secrets")]
#[test]
fn a_bearer_needs_a_secret_name_and_never_shows_it() {
    let e = check(&TelemetryExport::new().auth(OtlpAuth::bearer("")), None).unwrap_err();
    assert!(message(&e).contains(
        "the secret name of OtlpAuth::bearer is empty; pass the name of the secret that holds the token"
    ));
    // A bearer works on any image.
    let t = TelemetryExport::new()
        .auth(OtlpAuth::bearer("otlp-key"))
        .endpoint("https://collector.example.com/v1/metrics?key=k");
    assert!(check(&t, Some("rayito-base")).is_ok());
    let shown = format!("{t:?}");
    assert!(
        !shown.contains("otlp-key") && !shown.contains("key=k"),
        "{shown}"
    );
}

#[test]
fn the_status_reads_zero_without_an_export() {
    assert_eq!(TelemetryHealth::from_wire(None), TelemetryHealth::default());
    let h = TelemetryHealth::from_wire(Some(&crate::pb::TelemetryExportStatus {
        exported: 14,
        dropped: 7,
        last_error_class: "rejected".into(),
    }));
    assert_eq!(
        (h.exported, h.dropped, h.last_error_class.as_deref()),
        (14, 7, Some("rejected"))
    );
}
