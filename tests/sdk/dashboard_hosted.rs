//! The hosted dashboard (`rayito-dashboard`, feature `lambda`) as the
//! `dashboard` stack's function runs it: Function URL events through
//! `HostedDashboard::handle`, with real tokens from moto's Cognito (moto
//! signs them with its key and serves the pool's JWKS at
//! `/<pool>/.well-known/jwks.json`), the fleet of the local emulator and
//! the audit table in moto's DynamoDB. A valid access token reads the
//! fleet; no token, a bad, expired, foreign-pool, other-client or ID token
//! get 401; a user outside the actions group gets 403 on an action; an
//! action writes its audit rows first and does not run when it cannot
//! (503); keys that cannot be fetched answer 503.

use std::collections::BTreeSet;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType,
    ScalarAttributeType,
};
use base64::Engine as _;
use rayito::{Client, SandboxState};
use rayito_dashboard::hosted::{HostedDashboard, HostedOptions};
use rayito_dashboard::messages;
use rayito_emulator::{Emulator, EmulatorConfig};
use serde_json::{Value, json};

use crate::sdk_support;
use crate::sdk_support::moto::{MotoServer, http_post};

const CLIENT_NAME: &str = "rayito-dashboard-spa";
const GROUP: &str = "rayito-dashboard-actions";
const AUDIT: &str = "dashboard-audit";
const DOMAIN: &str = "abc123.lambda-url.us-east-1.on.aws";
const PASSWORD: &str = "Correct-horse-1";

/// One Cognito call on moto (awsJson1.1; moto routes it by the scope).
fn cognito(moto: &MotoServer, operation: &str, input: Value) -> Value {
    let target = format!("AWSCognitoIdentityProviderService.{operation}");
    let (status, body) = http_post(
        moto.port(),
        "/",
        &[
            ("Content-Type", "application/x-amz-json-1.1"),
            ("X-Amz-Target", &target),
            (
                "Authorization",
                "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/cognito-idp/aws4_request, SignedHeaders=host, Signature=0",
            ),
        ],
        input.to_string().as_bytes(),
    )
    .expect("moto answers");
    assert_eq!(status, 200, "{operation}: {body}");
    serde_json::from_str(&body).unwrap_or(Value::Null)
}

struct Pool {
    id: String,
    spa: String,
    other: String,
}

fn pool(moto: &MotoServer, name: &str) -> Pool {
    let id = cognito(moto, "CreateUserPool", json!({ "PoolName": name }))["UserPool"]["Id"]
        .as_str()
        .unwrap()
        .to_owned();
    let client = |client_name: &str| {
        cognito(
            moto,
            "CreateUserPoolClient",
            json!({ "UserPoolId": id, "ClientName": client_name }),
        )["UserPoolClient"]["ClientId"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let spa = client(CLIENT_NAME);
    let other = client("rayito-cli");
    cognito(
        moto,
        "CreateGroup",
        json!({ "UserPoolId": id, "GroupName": GROUP }),
    );
    Pool { id, spa, other }
}

/// The user `name` in `pool` (in the actions group when `acts`).
fn user(moto: &MotoServer, pool: &Pool, name: &str, acts: bool) {
    cognito(
        moto,
        "AdminCreateUser",
        json!({ "UserPoolId": pool.id, "Username": name, "TemporaryPassword": "Temp-pass-123" }),
    );
    cognito(
        moto,
        "AdminSetUserPassword",
        json!({ "UserPoolId": pool.id, "Username": name, "Password": PASSWORD, "Permanent": true }),
    );
    if acts {
        cognito(
            moto,
            "AdminAddUserToGroup",
            json!({ "UserPoolId": pool.id, "Username": name, "GroupName": GROUP }),
        );
    }
}

/// `(access, id)` tokens of `name` signed in through `client`.
fn tokens(moto: &MotoServer, pool: &Pool, client: &str, name: &str) -> (String, String) {
    let r = cognito(
        moto,
        "AdminInitiateAuth",
        json!({
            "UserPoolId": pool.id,
            "ClientId": client,
            "AuthFlow": "ADMIN_USER_PASSWORD_AUTH",
            "AuthParameters": { "USERNAME": name, "PASSWORD": PASSWORD }
        }),
    );
    let result = &r["AuthenticationResult"];
    (
        result["AccessToken"].as_str().unwrap().to_owned(),
        result["IdToken"].as_str().unwrap().to_owned(),
    )
}

/// A Function URL event (payload 2.0).
fn event(
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
    origin: &str,
) -> Value {
    let mut headers = json!({ "host": DOMAIN, "origin": origin });
    if let Some(token) = token {
        headers["authorization"] = json!(format!("Bearer {token}"));
    }
    let mut event = json!({
        "version": "2.0",
        "rawPath": path,
        "rawQueryString": "",
        "headers": headers,
        "requestContext": {
            "domainName": DOMAIN,
            "requestId": format!("req-{method}-{path}"),
            "http": { "method": method, "path": path, "sourceIp": "203.0.113.7" }
        },
        "isBase64Encoded": false,
    });
    if let Some(body) = body {
        headers_json(&mut event);
        // A base64 body, as a Function URL may send it.
        event["body"] = json!(base64::engine::general_purpose::STANDARD.encode(body.to_string()));
        event["isBase64Encoded"] = json!(true);
    }
    event
}

fn headers_json(event: &mut Value) {
    event["headers"]["content-type"] = json!("application/json");
}

const OWN_ORIGIN: &str = "https://abc123.lambda-url.us-east-1.on.aws";

/// The answer's status and JSON body.
async fn call(d: &HostedDashboard, event: Value) -> (u16, Value) {
    let answer = d.handle(&event).await;
    let status = answer["statusCode"].as_u64().unwrap() as u16;
    let body = answer["body"].as_str().unwrap_or_default();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn error(body: &Value) -> (&str, &str) {
    (
        body["error"]["code"].as_str().unwrap_or_default(),
        body["error"]["message"].as_str().unwrap_or_default(),
    )
}

async fn audit_table(config: &aws_types::SdkConfig) -> aws_sdk_dynamodb::Client {
    let db = aws_sdk_dynamodb::Client::new(config);
    let attr = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .unwrap()
    };
    let key = |name: &str, kind: KeyType| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
            .unwrap()
    };
    db.create_table()
        .table_name(AUDIT)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attr("pk"))
        .attribute_definitions(attr("sk"))
        .key_schema(key("pk", KeyType::Hash))
        .key_schema(key("sk", KeyType::Range))
        .send()
        .await
        .expect("the audit table");
    db
}

fn text(item: &std::collections::HashMap<String, AttributeValue>, name: &str) -> String {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .cloned()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosted_dashboard_checks_cognito_tokens_groups_and_audits_actions() {
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .unwrap()
    else {
        return;
    };
    let config = sdk_support::moto_config::sdk_config(&moto.endpoint_url(), "AKIDDASHBOARD");
    let home = pool(&moto, "dashboard");
    let foreign = pool(&moto, "elsewhere");
    user(&moto, &home, "ana", true);
    user(&moto, &home, "bob", false);
    user(&moto, &foreign, "carl", true);
    let (ana, ana_id_token) = tokens(&moto, &home, &home.spa, "ana");
    let (bob, _) = tokens(&moto, &home, &home.spa, "bob");
    let (ana_cli, _) = tokens(&moto, &home, &home.other, "ana");
    let (carl, _) = tokens(&moto, &foreign, &foreign.spa, "carl");
    let db = audit_table(&config).await;

    let emu = Emulator::start(EmulatorConfig::default())
        .await
        .expect("the emulator starts");
    let client = Client::builder()
        .aws(sdk_support::aws(&emu))
        .build()
        .await
        .expect("a client");
    let doomed = sdk_support::builder(&emu).create().await.expect("sandbox");
    let kept = sdk_support::builder(&emu).create().await.expect("sandbox");
    let options = || {
        HostedOptions::new("us-east-1", &home.id, CLIENT_NAME)
            .cognito_domain("dash.auth.us-east-1.amazoncognito.com")
            .audit_table(AUDIT)
            .allow_actions(true)
            .jwks_url(format!(
                "{}/{}/.well-known/jwks.json",
                moto.endpoint_url(),
                home.id
            ))
    };
    let hosted = |o: HostedOptions| HostedDashboard::new(client.clone(), None, &config, o).unwrap();
    let d = hosted(options());

    // The page and /config.json need no token; every answer is hardened.
    let page = d.handle(&event("GET", "/", None, None, OWN_ORIGIN)).await;
    assert_eq!(page["statusCode"], 200);
    assert_eq!(
        page["headers"]["strict-transport-security"],
        "max-age=63072000; includeSubDomains"
    );
    let csp = page["headers"]["content-security-policy"].as_str().unwrap();
    assert!(
        csp.contains("connect-src 'self' https://dash.auth.us-east-1.amazoncognito.com"),
        "{csp}"
    );
    let (status, config_doc) = call(&d, event("GET", "/config.json", None, None, OWN_ORIGIN)).await;
    assert_eq!(status, 200);
    assert_eq!(config_doc["auth"]["clientId"], home.spa.as_str());
    assert_eq!(
        config_doc["auth"]["domain"],
        "https://dash.auth.us-east-1.amazoncognito.com"
    );

    // A valid access token reads the fleet.
    let (status, fleet) = call(
        &d,
        event("GET", "/api/v1/sandboxes", Some(&ana), None, OWN_ORIGIN),
    )
    .await;
    assert_eq!(status, 200, "{fleet}");
    let ids: BTreeSet<&str> = fleet
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["sandbox_id"].as_str())
        .collect();
    assert!(
        ids.contains(doomed.id()) && ids.contains(kept.id()),
        "{fleet}"
    );
    let (_, meta) = call(
        &d,
        event("GET", "/api/v1/meta", Some(&ana), None, OWN_ORIGIN),
    )
    .await;
    assert_eq!(meta["deployment"], "stack");
    assert_eq!(meta["allow_actions"], true);
    let (_, meta) = call(
        &d,
        event("GET", "/api/v1/meta", Some(&bob), None, OWN_ORIGIN),
    )
    .await;
    assert_eq!(meta["allow_actions"], false);

    // No token, and every kind of bad one: 401.
    let (status, body) = call(
        &d,
        event("GET", "/api/v1/sandboxes", None, None, OWN_ORIGIN),
    )
    .await;
    assert_eq!(
        (status, error(&body)),
        (401, ("unauthorized", messages::NO_TOKEN))
    );
    let mut tampered: Vec<&str> = ana.split('.').collect();
    let (_, bob_payload) = bob.split_once('.').unwrap();
    let bob_payload = bob_payload.split('.').next().unwrap();
    tampered[1] = bob_payload;
    let tampered = tampered.join(".");
    for (what, token) in [
        ("garbage", "not.a.token"),
        ("foreign pool", carl.as_str()),
        ("other client", ana_cli.as_str()),
        ("id token", ana_id_token.as_str()),
        (
            "another user's claims under ana's signature",
            tampered.as_str(),
        ),
    ] {
        let (status, body) = call(
            &d,
            event("GET", "/api/v1/sandboxes", Some(token), None, OWN_ORIGIN),
        )
        .await;
        assert_eq!(
            (status, error(&body)),
            (401, ("unauthorized", messages::BAD_TOKEN)),
            "{what}"
        );
    }
    let later = hosted(options().clock_skew(2 * 3600));
    let (status, body) = call(
        &later,
        event("GET", "/api/v1/sandboxes", Some(&ana), None, OWN_ORIGIN),
    )
    .await;
    assert_eq!(
        (status, error(&body)),
        (401, ("unauthorized", messages::BAD_TOKEN)),
        "expired"
    );

    // Actions: the group, the origin, the stack's AllowActions.
    let plan = json!({ "action": "kill", "ids": [doomed.id()] });
    let (status, body) = call(
        &d,
        event(
            "POST",
            "/api/v1/actions/plan",
            Some(&bob),
            Some(&plan),
            OWN_ORIGIN,
        ),
    )
    .await;
    assert_eq!(
        (status, error(&body)),
        (403, ("forbidden", messages::NOT_IN_GROUP))
    );
    let (status, body) = call(
        &d,
        event(
            "POST",
            "/api/v1/actions/plan",
            Some(&ana),
            Some(&plan),
            "https://evil.example",
        ),
    )
    .await;
    assert_eq!(
        (status, error(&body)),
        (403, ("forbidden", messages::CROSS_ORIGIN))
    );
    let read_only = hosted(options().allow_actions(false));
    let (status, body) = call(
        &read_only,
        event(
            "POST",
            "/api/v1/actions/plan",
            Some(&ana),
            Some(&plan),
            OWN_ORIGIN,
        ),
    )
    .await;
    assert_eq!(
        (status, error(&body)),
        (403, ("actions_disabled", messages::STACK_ACTIONS_DISABLED))
    );

    // Ana's kill: planned, run, audited.
    let (status, planned) = call(
        &d,
        event(
            "POST",
            "/api/v1/actions/plan",
            Some(&ana),
            Some(&plan),
            OWN_ORIGIN,
        ),
    )
    .await;
    assert_eq!(status, 200, "{planned}");
    let run = json!({ "plan_id": planned["plan_id"], "confirmation": planned["confirmation"] });
    let (status, outcome) = call(
        &d,
        event(
            "POST",
            "/api/v1/actions/run",
            Some(&ana),
            Some(&run),
            OWN_ORIGIN,
        ),
    )
    .await;
    assert_eq!(status, 200, "{outcome}");
    let rows = db
        .scan()
        .table_name(AUDIT)
        .send()
        .await
        .unwrap()
        .items
        .unwrap_or_default();
    let requested: Vec<_> = rows
        .iter()
        .filter(|r| text(r, "kind") == "requested")
        .collect();
    let outcomes: Vec<_> = rows
        .iter()
        .filter(|r| text(r, "kind") == "outcome")
        .collect();
    assert_eq!((requested.len(), outcomes.len()), (1, 1), "{rows:?}");
    let row = requested[0];
    assert_eq!(text(row, "pk"), "AUDIT");
    assert_eq!(text(row, "action"), "kill");
    assert_eq!(text(row, "resource"), doomed.id());
    assert_eq!(text(row, "username"), "ana");
    assert!(!text(row, "subject").is_empty());
    assert_eq!(text(row, "request_id"), "req-POST-/api/v1/actions/run");
    assert_eq!(text(row, "source_ip"), "203.0.113.7");
    assert_eq!(
        outcomes[0]
            .get("succeeded")
            .and_then(|v| v.as_n().ok())
            .map(String::as_str),
        Some("1")
    );
    let gone = client.get_info_by_id(doomed.id()).await.map_or(true, |i| {
        matches!(
            i.state,
            SandboxState::Terminating | SandboxState::Terminated
        )
    });
    assert!(gone, "the killed sandbox is still there");

    // No audit table: the action is refused and does not run.
    let unaudited = hosted(options().audit_table("no-such-table"));
    let plan = json!({ "action": "kill", "ids": [kept.id()] });
    let (_, planned) = call(
        &unaudited,
        event(
            "POST",
            "/api/v1/actions/plan",
            Some(&ana),
            Some(&plan),
            OWN_ORIGIN,
        ),
    )
    .await;
    let run = json!({ "plan_id": planned["plan_id"], "confirmation": planned["confirmation"] });
    let (status, body) = call(
        &unaudited,
        event(
            "POST",
            "/api/v1/actions/run",
            Some(&ana),
            Some(&run),
            OWN_ORIGIN,
        ),
    )
    .await;
    assert_eq!(
        (status, error(&body)),
        (503, ("audit_unavailable", messages::AUDIT_UNAVAILABLE))
    );
    let info = client.get_info_by_id(kept.id()).await.unwrap();
    assert_eq!(info.state, SandboxState::Running);

    // Keys that cannot be had: 503, not 401.
    let blind = hosted(options().jwks_url("http://127.0.0.1:9/jwks.json"));
    let (status, body) = call(
        &blind,
        event("GET", "/api/v1/sandboxes", Some(&ana), None, OWN_ORIGIN),
    )
    .await;
    assert_eq!(
        (status, error(&body)),
        (503, ("auth_unavailable", messages::AUTH_UNAVAILABLE))
    );
}

const CACHE: &str = "dashboard-cache";

/// A plan made in one Lambda environment runs in another: two
/// `HostedDashboard`s share only moto's cache table. The run takes the
/// plan out (a second run is 404), and an expired plan still in the table
/// (TTL deletes late) is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosted_plans_run_in_another_environment_once_and_expire() {
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .unwrap()
    else {
        return;
    };
    let config = sdk_support::moto_config::sdk_config(&moto.endpoint_url(), "AKIDDASHPLANS");
    let home = pool(&moto, "dashboard");
    user(&moto, &home, "ana", true);
    let (ana, _) = tokens(&moto, &home, &home.spa, "ana");
    let db = audit_table(&config).await;
    db.create_table()
        .table_name(CACHE)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("pk")
                .attribute_type(ScalarAttributeType::S)
                .build()
                .unwrap(),
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name("pk")
                .key_type(KeyType::Hash)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .expect("the cache table");

    let emu = Emulator::start(EmulatorConfig::default())
        .await
        .expect("the emulator starts");
    let client = Client::builder()
        .aws(sdk_support::aws(&emu))
        .build()
        .await
        .expect("a client");
    let doomed = sdk_support::builder(&emu).create().await.expect("sandbox");
    let kept = sdk_support::builder(&emu).create().await.expect("sandbox");
    let environment = || {
        let options = HostedOptions::new("us-east-1", &home.id, CLIENT_NAME)
            .audit_table(AUDIT)
            .cache_table(CACHE)
            .allow_actions(true)
            .jwks_url(format!(
                "{}/{}/.well-known/jwks.json",
                moto.endpoint_url(),
                home.id
            ));
        HostedDashboard::new(client.clone(), None, &config, options).unwrap()
    };
    let (one, two) = (environment(), environment());
    let post = |path: &str, body: &Value| event("POST", path, Some(&ana), Some(body), OWN_ORIGIN);
    let plan_on = |d, ids: &[&str]| {
        let body = json!({ "action": "kill", "ids": ids });
        async move {
            let (status, planned) = call(d, post("/api/v1/actions/plan", &body)).await;
            assert_eq!(status, 200, "{planned}");
            planned
        }
    };
    let item = |id: &str| {
        let db = db.clone();
        let key = format!("PLAN#{id}");
        async move {
            db.get_item()
                .table_name(CACHE)
                .key("pk", AttributeValue::S(key))
                .send()
                .await
                .unwrap()
                .item
        }
    };

    // Planned in one environment: the item is in the table, with its expiry.
    let planned = plan_on(&one, &[doomed.id()]).await;
    let plan_id = planned["plan_id"].as_str().unwrap().to_owned();
    let stored = item(&plan_id).await.expect("the plan's item");
    assert_eq!(text(&stored, "action"), "kill");
    assert_eq!(text(&stored, "acting"), doomed.id());
    let expires_at: u64 = stored["expires_at"].as_n().unwrap().parse().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(
        (now + 590..=now + 610).contains(&expires_at),
        "{expires_at} vs {now}"
    );

    // A wrong confirmation leaves it in place; the right one runs it in the other.
    let wrong = json!({ "plan_id": plan_id, "confirmation": "kill-1-00000000" });
    let (status, body) = call(&two, post("/api/v1/actions/run", &wrong)).await;
    assert_eq!(
        (status, error(&body)),
        (400, ("confirmation_required", messages::CONFIRMATION))
    );
    let run = json!({ "plan_id": plan_id, "confirmation": planned["confirmation"] });
    let (status, outcome) = call(&two, post("/api/v1/actions/run", &run)).await;
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(
        outcome["results"].as_array().map(Vec::len),
        Some(1),
        "{outcome}"
    );
    assert_eq!(outcome["results"][0]["ok"], true, "{outcome}");
    assert!(item(&plan_id).await.is_none(), "the run took the plan out");

    // A plan runs once, wherever the second run lands.
    for d in [&one, &two] {
        let (status, body) = call(d, post("/api/v1/actions/run", &run)).await;
        assert_eq!(
            (status, error(&body)),
            (404, ("plan_not_found", messages::PLAN_NOT_FOUND))
        );
    }

    // Expired (TTL has not deleted it yet): refused, and nothing runs.
    let planned = plan_on(&one, &[kept.id()]).await;
    let plan_id = planned["plan_id"].as_str().unwrap().to_owned();
    db.update_item()
        .table_name(CACHE)
        .key("pk", AttributeValue::S(format!("PLAN#{plan_id}")))
        .update_expression("SET expires_at = :past")
        .expression_attribute_values(":past", AttributeValue::N((now - 1).to_string()))
        .send()
        .await
        .unwrap();
    let run = json!({ "plan_id": plan_id, "confirmation": planned["confirmation"] });
    let (status, body) = call(&two, post("/api/v1/actions/run", &run)).await;
    assert_eq!(
        (status, error(&body)),
        (404, ("plan_not_found", messages::PLAN_NOT_FOUND))
    );
    let info = client.get_info_by_id(kept.id()).await.unwrap();
    assert_eq!(info.state, SandboxState::Running);

    // Unreachable table: 503, no plan handed out.
    let lost = HostedDashboard::new(
        client.clone(),
        None,
        &config,
        HostedOptions::new("us-east-1", &home.id, CLIENT_NAME)
            .audit_table(AUDIT)
            .cache_table("no-such-table")
            .allow_actions(true)
            .jwks_url(format!(
                "{}/{}/.well-known/jwks.json",
                moto.endpoint_url(),
                home.id
            )),
    )
    .unwrap();
    let body = json!({ "action": "kill", "ids": [kept.id()] });
    let (status, body) = call(&lost, post("/api/v1/actions/plan", &body)).await;
    assert_eq!(
        (status, error(&body)),
        (503, ("plans_unavailable", messages::PLANS_UNAVAILABLE))
    );
}

/// docs/dashboard.md transcribes every refusal of the hosted form and
/// both deploy refusals.
#[test]
fn the_docs_transcribe_the_hosted_messages() {
    let doc = std::fs::read_to_string(sdk_support::repo_root().join("docs/dashboard.md"))
        .expect("docs/dashboard.md");
    for message in [
        messages::METHOD_NOT_ALLOWED,
        messages::NO_TOKEN,
        messages::BAD_TOKEN,
        messages::CROSS_ORIGIN,
        messages::STACK_ACTIONS_DISABLED,
        messages::NOT_IN_GROUP,
        messages::AUTH_UNAVAILABLE,
        messages::AUDIT_UNAVAILABLE,
        messages::PLANS_UNAVAILABLE,
        rayito::stacks::dashboard_template::THEME_JSON_TOO_LONG,
        rayito::stacks::dashboard_template::AWS_IAM_REFUSED,
    ] {
        assert!(doc.contains(message), "docs/dashboard.md lacks: {message}");
    }
}

/// The template hands the function the cache table under the name
/// `from_env` reads, and grants the function's role exactly the plan
/// store's calls on it, with actions only.
#[test]
fn the_template_gives_the_plan_store_its_table_and_calls() {
    use rayito_dashboard::hosted::env;
    let t = rayito::stacks::dashboard_template::template_value();
    let vars = &t["Resources"]["DashboardFunction"]["Properties"]["Environment"]["Variables"];
    assert_eq!(vars[env::CACHE_TABLE], json!({ "Ref": "CacheTable" }));
    let statements =
        t["Resources"]["ReadRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
            .as_array()
            .unwrap();
    let keep = statements
        .iter()
        .find_map(|s| {
            let s = &s["Fn::If"];
            (s[0] == "ActionsEnabled" && s[1]["Sid"] == "KeepBulkPlans").then(|| &s[1])
        })
        .expect("the KeepBulkPlans statement, with actions only");
    assert_eq!(
        keep["Action"],
        json!([
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:DeleteItem"
        ])
    );
    assert_eq!(
        keep["Resource"],
        json!({ "Fn::GetAtt": ["CacheTable", "Arn"] })
    );
}
