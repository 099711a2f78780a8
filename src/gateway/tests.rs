//! Every refusal of a gateway (argument and exact message), the Debug of
//! what holds secret references, and the section built from a gateway.

use super::spec::{SecretGateway, check_all};
use crate::error::SandboxError;
use crate::secrets::SecretRef;

/// A valid gateway.
fn good() -> SecretGateway {
    SecretGateway::new("https://api.example.com")
        .header("authorization", "canary-secret-name")
        .allow("POST", "/v1/chat/completions")
}

fn check(gateways: Vec<(&str, SecretGateway)>) -> Result<(), SandboxError> {
    let list: Vec<(String, SecretGateway)> = gateways
        .into_iter()
        .map(|(n, g)| (n.to_owned(), g))
        .collect();
    check_all(&list, crate::secrets::DEFAULT_PREFIX)
}

/// (argument, message) of the refusal of `gateways`.
fn refusal(gateways: Vec<(&str, SecretGateway)>) -> (String, String) {
    let err = check(gateways).expect_err("refused");
    let argument = match &err {
        SandboxError::InvalidArgument { argument, .. } => argument.as_deref().map(str::to_owned),
        other => panic!("not InvalidArgument: {other:?}"),
    };
    (argument.unwrap_or_default(), err.to_string())
}

#[test]
fn valid_gateways_pass() {
    check(vec![("openai", good())]).unwrap();
    let full = (0..16).fold(
        SecretGateway::new("https://api.example.com:8443"),
        |g, i| g.header(format!("x-key-{i}"), SecretRef::new(format!("k{i}"))),
    );
    let full = (0..32).fold(full, |g, i| g.allow("GET", format!("/v{i}/*")));
    let full = full.rate_per_minute(6_000);
    let eight: Vec<(&str, SecretGateway)> = ["a", "b", "c", "d", "e", "f", "g", "h"]
        .into_iter()
        .map(|n| (n, good()))
        .collect();
    check(eight).unwrap();
    check(vec![
        ("x".repeat(64).leak(), full),
        ("0-9", good().rate_per_minute(1)),
    ])
    .unwrap();
    // No gateway at all is nothing to check.
    check(vec![]).unwrap();
}

/// Gateways, the argument refused and the message.
type Row = (
    Vec<(&'static str, SecretGateway)>,
    &'static str,
    &'static str,
);

#[test]
fn every_refusal_names_its_argument_with_the_exact_message() {
    let nine: Vec<(&str, SecretGateway)> = ["a", "b", "c", "d", "e", "f", "g", "h", "i"]
        .into_iter()
        .map(|n| (n, good()))
        .collect();
    let seventeen = (0..17)
        .fold(SecretGateway::new("https://h"), |g, i| {
            g.header(format!("x-{i}"), "s")
        })
        .allow("GET", "/");
    let thirty_three = (0..33).fold(good(), |g, _| g.allow("GET", "/"));
    let rows: Vec<Row> = vec![
        (
            nine,
            "gateways",
            "invalid gateways: the sandbox has 9 gateways; pass at most 8",
        ),
        (
            vec![("ok", good()), ("Bad", good())],
            "gateways",
            "invalid gateways: gateway 1 has a name that is empty, longer than 64 characters or holds a character outside a-z, 0-9 and '-'; pass a name of 1 to 64 of those",
        ),
        (
            vec![("", good())],
            "gateways",
            "invalid gateways: gateway 0 has a name that is empty, longer than 64 characters or holds a character outside a-z, 0-9 and '-'; pass a name of 1 to 64 of those",
        ),
        (
            vec![("x".repeat(65).leak(), good())],
            "gateways",
            "invalid gateways: gateway 0 has a name that is empty, longer than 64 characters or holds a character outside a-z, 0-9 and '-'; pass a name of 1 to 64 of those",
        ),
        (
            vec![("a_b", good())],
            "gateways",
            "invalid gateways: gateway 0 has a name that is empty, longer than 64 characters or holds a character outside a-z, 0-9 and '-'; pass a name of 1 to 64 of those",
        ),
        (
            vec![(
                "gw",
                SecretGateway::new("http://api.example.com")
                    .header("a", "s")
                    .allow("GET", "/"),
            )],
            "upstream",
            "invalid upstream: the upstream of gateway gw does not start with https://; pass https://host or https://host:port, without a path or a query",
        ),
        (
            vec![(
                "gw",
                SecretGateway::new("HTTPS://api.example.com")
                    .header("a", "s")
                    .allow("GET", "/"),
            )],
            "upstream",
            "invalid upstream: the upstream of gateway gw does not start with https://; pass https://host or https://host:port, without a path or a query",
        ),
        (
            vec![(
                "gw",
                SecretGateway::new("https://")
                    .header("a", "s")
                    .allow("GET", "/"),
            )],
            "upstream",
            "invalid upstream: the upstream of gateway gw has no host, or has a path, a query, userinfo or a fragment; pass only https:// and the host, with an optional :port",
        ),
        (
            vec![(
                "gw",
                SecretGateway::new("https://h/v1")
                    .header("a", "s")
                    .allow("GET", "/"),
            )],
            "upstream",
            "invalid upstream: the upstream of gateway gw has no host, or has a path, a query, userinfo or a fragment; pass only https:// and the host, with an optional :port",
        ),
        (
            vec![(
                "gw",
                SecretGateway::new("https://h?x")
                    .header("a", "s")
                    .allow("GET", "/"),
            )],
            "upstream",
            "invalid upstream: the upstream of gateway gw has no host, or has a path, a query, userinfo or a fragment; pass only https:// and the host, with an optional :port",
        ),
        (
            vec![(
                "gw",
                SecretGateway::new("https://h#x")
                    .header("a", "s")
                    .allow("GET", "/"),
            )],
            "upstream",
            "invalid upstream: the upstream of gateway gw has no host, or has a path, a query, userinfo or a fragment; pass only https:// and the host, with an optional :port",
        ),
        (
            vec![(
                "gw",
                SecretGateway::new("https://u@h")
                    .header("a", "s")
                    .allow("GET", "/"),
            )],
            "upstream",
            "invalid upstream: the upstream of gateway gw has no host, or has a path, a query, userinfo or a fragment; pass only https:// and the host, with an optional :port",
        ),
        (
            vec![("gw", SecretGateway::new("https://h").allow("GET", "/"))],
            "headers",
            "invalid headers: gateway gw has 0 headers; pass 1 to 16",
        ),
        (
            vec![("gw", seventeen)],
            "headers",
            "invalid headers: gateway gw has 17 headers; pass 1 to 16",
        ),
        (
            vec![("gw", good().header("x ok", "s"))],
            "headers",
            "invalid headers: header 1 of gateway gw has a name that is not an HTTP token (RFC 9110: letters, digits and 15 symbols); pass a valid header name",
        ),
        (
            vec![("gw", good().header("", "s"))],
            "headers",
            "invalid headers: header 1 of gateway gw has a name that is not an HTTP token (RFC 9110: letters, digits and 15 symbols); pass a valid header name",
        ),
        (
            vec![("gw", good().header("x-é", "s"))],
            "headers",
            "invalid headers: header 1 of gateway gw has a name that is not an HTTP token (RFC 9110: letters, digits and 15 symbols); pass a valid header name",
        ),
        (
            vec![("gw", good().header("Host", "s"))],
            "headers",
            "invalid headers: gateway gw may not inject the reserved header host (host, content-length, transfer-encoding, connection, keep-alive, proxy-authenticate, proxy-authorization, te, trailers, trailer, upgrade); drop it",
        ),
        (
            vec![(
                "gw",
                good().header("X-Api-Key", "s").header("x-api-key", "t"),
            )],
            "headers",
            "invalid headers: gateway gw has two headers that differ only in case (x-api-key); pass each header once",
        ),
        (
            vec![("gw", SecretGateway::new("https://h").header("a", "s"))],
            "allow",
            "invalid allow: gateway gw has no allow rule, so it would never forward a request; pass 1 to 32 (method, path) rules",
        ),
        (
            vec![("gw", thirty_three)],
            "allow",
            "invalid allow: gateway gw has 34 allow rules; pass at most 32",
        ),
        (
            vec![("gw", good().allow("get", "/"))],
            "allow",
            "invalid allow: allow rule 1 of gateway gw has a method outside DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT; pass one of those, in upper case",
        ),
        (
            vec![("gw", good().allow("TRACE", "/"))],
            "allow",
            "invalid allow: allow rule 1 of gateway gw has a method outside DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT; pass one of those, in upper case",
        ),
        (
            vec![("gw", good().allow("GET", "v1/x"))],
            "allow",
            "invalid allow: allow rule 1 of gateway gw has a path that does not start with '/'; pass an absolute path",
        ),
        (
            vec![("gw", good().allow("GET", "/v1/../admin"))],
            "allow",
            "invalid allow: allow rule 1 of gateway gw has a path the agent would refuse in every request: only RFC 3986 characters but ';', no '.' or '..' segment, no empty one before the last, no malformed escape and no encoded '/', '\\', '%', ';' or control character; pass a plain path (ending with /* for a prefix)",
        ),
        (
            vec![("gw", good().rate_per_minute(6_001))],
            "rate_per_minute",
            "invalid rate_per_minute: the rate_per_minute of gateway gw is 6001; pass 0 (the agent's default, 600 a minute) or 1 to 6,000",
        ),
    ];
    for (gateways, argument, message) in rows {
        let (got_argument, got_message) = refusal(gateways);
        assert_eq!(got_argument, argument, "{message}");
        assert_eq!(got_message, message);
    }
}

#[test]
fn a_bad_secret_reference_is_refused_as_headers_without_quoting_it() {
    for secret in [
        SecretRef::new(""),
        SecretRef::new("canary secret"),
        SecretRef::new("canary")
            .version_id("x")
            .version_stage("AWSCURRENT"),
        SecretRef::new("webhooks/canary"),
    ] {
        let prefix_webhooks = check_all(
            &[("gw".to_owned(), good().header("x-key", secret.clone()))],
            "rayito/",
        );
        let err = prefix_webhooks.expect_err("refused");
        match &err {
            SandboxError::InvalidArgument { argument, .. } => {
                assert_eq!(argument.as_deref(), Some("headers"));
            }
            other => panic!("{other:?}"),
        }
        assert!(!err.to_string().contains("canary"), "{err}");
    }
}

#[test]
fn the_same_header_or_gateway_name_again_replaces_it() {
    let g = good().header("authorization", "other");
    assert_eq!(g.header_names(), ["authorization"]);
    let mut list = Vec::new();
    crate::sandbox::named::put(&mut list, "a".to_owned(), good());
    crate::sandbox::named::put(&mut list, "a".to_owned(), good().rate_per_minute(5));
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].1.rate(), 5);
}

#[test]
fn debug_never_shows_a_secret_name() {
    let g = good().header(
        "x-org",
        SecretRef::new("canary-org").version_stage("canary-stage"),
    );
    let shown = format!("{g:?}");
    assert!(!shown.contains("canary"), "{shown}");
    assert!(shown.contains("api.example.com"), "{shown}");
    assert!(shown.contains("x-org"), "{shown}");
    let handle = super::view::HandleGateways::default();
    handle.set_applied(vec![("gw".to_owned(), g)], Default::default());
    let shown = format!("{handle:?}");
    assert!(!shown.contains("canary"), "{shown}");
}

#[test]
fn statuses_read_ports_and_filter_error_classes() {
    let status = crate::pb::ConfigureStatusResponse {
        secret_gateway: Some(crate::pb::SecretGatewayStatus {
            routes: vec![
                crate::pb::SecretGatewayRouteStatus {
                    name: "a".into(),
                    port: 41_000,
                    state: crate::pb::SecretGatewayRouteState::Listening as i32,
                    last_error_class: String::new(),
                },
                crate::pb::SecretGatewayRouteStatus {
                    name: "b".into(),
                    port: 41_001,
                    state: crate::pb::SecretGatewayRouteState::Listening as i32,
                    last_error_class: "rate_limited".into(),
                },
                crate::pb::SecretGatewayRouteStatus {
                    name: "c".into(),
                    port: 70_000,
                    state: crate::pb::SecretGatewayRouteState::Listening as i32,
                    last_error_class: "free text with a secret-value".into(),
                },
            ],
        }),
        ..Default::default()
    };
    let s = super::section::statuses(&status);
    assert_eq!(s["a"].port(), 41_000);
    assert_eq!(s["a"].url(), "http://127.0.0.1:41000");
    assert_eq!(s["a"].last_error_class(), None);
    assert_eq!(s["b"].last_error_class(), Some("rate_limited"));
    assert_eq!(s["c"].port(), 0);
    assert_eq!(s["c"].last_error_class(), Some("unrecognized_error_class"));
    assert!(super::section::statuses(&Default::default()).is_empty());
}
