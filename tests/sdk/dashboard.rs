//! `rayito dashboard` (docs/dashboard.md): its defences over plain HTTP
//! (the start token and its exchange for the session cookie, a foreign
//! Host or Origin, a cross-site fetch, the CSRF header, actions without
//! `--allow-actions`), and its page in a real headless Chromium against
//! the local backend: the fleet shows the sandboxes the test made, a
//! running sandbox's chart is redrawn between polls, a bulk kill shows its
//! plan and, once confirmed, the sandboxes are gone (checked through the
//! SDK). Screenshots of every view go to target/dashboard-screenshots/.

use std::collections::BTreeMap;
use std::time::Duration;

use rayito::{Client, Sandbox};
use rayito_dashboard::{AccessTokens, Dashboard, DashboardOptions, messages};
use rayito_emulator::{Emulator, EmulatorConfig};
use serde_json::Value;

use crate::dashboard_browser::{Browser, screenshot_dir};
use crate::sdk_support;
use crate::sdk_support::plain_http::call;

/// The page's poll in these tests (5 s by default).
const POLL: Duration = Duration::from_millis(500);

struct World {
    emu: Emulator,
    client: Client,
    sandboxes: Vec<Sandbox>,
}

async fn world(sandboxes: usize) -> World {
    let emu = Emulator::start(EmulatorConfig {
        agent_metrics: Some(Duration::from_millis(200)),
        ..EmulatorConfig::default()
    })
    .await
    .expect("the emulator starts");
    let client = Client::builder()
        .aws(sdk_support::aws(&emu))
        .build()
        .await
        .expect("a client");
    let mut made = Vec::new();
    for i in 0..sandboxes {
        let sbx = sdk_support::builder(&emu)
            .metadata([("dashboard-test", i.to_string())])
            .create()
            .await
            .expect("sandbox");
        made.push(sbx);
    }
    World {
        emu,
        client,
        sandboxes: made,
    }
}

impl World {
    async fn dashboard(&self, allow_actions: bool) -> Dashboard {
        let tokens: BTreeMap<String, String> = self
            .sandboxes
            .iter()
            .map(|s| (s.id().to_owned(), s.access_token().expose().to_owned()))
            .collect();
        Dashboard::start(
            self.client.clone(),
            DashboardOptions::new()
                .allow_actions(allow_actions)
                .poll_interval(POLL)
                .access_tokens(AccessTokens::from_map(tokens)),
        )
        .await
        .expect("the dashboard starts")
    }
}

fn header(h: &http::HeaderMap, name: &str) -> String {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

fn error_of(body: &[u8]) -> (String, String) {
    let v: Value = serde_json::from_slice(body).expect("a JSON error body");
    (
        v["error"]["code"].as_str().unwrap_or_default().to_owned(),
        v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

/// Opens the page's view `route` (`images`, `sandbox/<id>`, ...).
async fn show(browser: &Browser, d: &Dashboard, route: &str) {
    browser
        .client
        .goto(&format!("{}/#/{route}", d.origin()))
        .await
        .expect("goto");
}

/// The session's CSRF token, read with `headers` (the session cookie's).
async fn csrf_token(origin: &str, headers: &[(String, String)]) -> String {
    let (_, _, session) = call(
        "GET",
        &format!("{origin}/api/v1/session"),
        headers,
        Vec::new(),
    )
    .await;
    serde_json::from_slice::<Value>(&session).expect("session")["csrf_token"]
        .as_str()
        .expect("csrf_token")
        .to_owned()
}

/// Logs in with the start URL: the session cookie (`name=value`).
async fn session_cookie(d: &Dashboard) -> String {
    let (status, headers, _) = call("GET", d.start_url(), &[], Vec::new()).await;
    assert_eq!(status, 303);
    assert_eq!(header(&headers, "location"), "/");
    let set = header(&headers, "set-cookie");
    assert!(set.contains("HttpOnly"), "{set}");
    assert!(set.contains("SameSite=Strict"), "{set}");
    assert!(set.contains("Path=/"), "{set}");
    set.split(';').next().expect("name=value").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_defences_over_plain_http() {
    let w = world(0).await;
    let d = w.dashboard(false).await;
    let origin = d.origin();
    let port = d.addr().port();

    // No token, a wrong one: 401 with the pinned message, and the headers
    // every answer carries.
    for url in [
        format!("{origin}/"),
        format!("{origin}/?token=00ff"),
        format!("{origin}/api/v1/meta"),
    ] {
        let (status, headers, body) = call("GET", &url, &[], Vec::new()).await;
        assert_eq!(status, 401, "{url}");
        assert_eq!(
            error_of(&body),
            ("unauthorized".to_owned(), messages::UNAUTHORIZED.to_owned())
        );
        let csp = header(&headers, "content-security-policy");
        assert!(csp.contains("default-src 'self'"), "{csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        assert_eq!(header(&headers, "x-frame-options"), "DENY");
        assert_eq!(header(&headers, "x-content-type-options"), "nosniff");
        assert_eq!(header(&headers, "cache-control"), "no-store");
        assert_eq!(header(&headers, "referrer-policy"), "no-referrer");
    }

    // The start token is exchanged for the cookie, which opens the page
    // and the API (under either loopback name).
    let cookie = session_cookie(&d).await;
    let with = |extra: &[(&str, String)]| {
        let mut h = vec![("cookie".to_owned(), cookie.clone())];
        h.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
        h
    };
    let (status, headers, body) = call("GET", &format!("{origin}/"), &with(&[]), Vec::new()).await;
    assert_eq!(status, 200);
    assert!(header(&headers, "content-type").starts_with("text/html"));
    assert!(String::from_utf8_lossy(&body).contains("/static/app.js"));
    for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
        let (status, _, body) = call(
            "GET",
            &format!("{origin}/api/v1/meta"),
            &with(&[("host", host.clone())]),
            Vec::new(),
        )
        .await;
        assert_eq!(status, 200, "{host}");
        let meta: Value = serde_json::from_slice(&body).expect("meta");
        assert_eq!(meta["allow_actions"], false);
        assert_eq!(meta["backend"], "aws");
    }

    // A foreign Host (DNS rebinding), even with the cookie or the token:
    // 421.
    for url in [format!("{origin}/api/v1/meta"), d.start_url().to_owned()] {
        for host in [
            format!("evil.example:{port}"),
            "127.0.0.1".to_owned(),
            format!("127.0.0.1:{}", port.wrapping_add(1)),
        ] {
            let (status, _, body) =
                call("GET", &url, &with(&[("host", host.clone())]), Vec::new()).await;
            assert_eq!(status, 421, "{host}");
            assert_eq!(
                error_of(&body),
                (
                    "misdirected_request".to_owned(),
                    messages::MISDIRECTED.to_owned()
                )
            );
        }
    }

    // A foreign or null Origin, a cross-site fetch: 403.
    for (name, value) in [
        ("origin", "http://evil.example".to_owned()),
        ("origin", "null".to_owned()),
        ("origin", format!("https://127.0.0.1:{port}")),
        ("sec-fetch-site", "cross-site".to_owned()),
        ("sec-fetch-site", "same-site".to_owned()),
    ] {
        let (status, _, body) = call(
            "GET",
            &format!("{origin}/api/v1/meta"),
            &with(&[(name, value.clone())]),
            Vec::new(),
        )
        .await;
        assert_eq!(status, 403, "{name}: {value}");
        assert_eq!(
            error_of(&body),
            ("forbidden".to_owned(), messages::CROSS_ORIGIN.to_owned())
        );
    }
    // The page's own Origin is fine.
    let (status, _, _) = call(
        "GET",
        &format!("{origin}/api/v1/meta"),
        &with(&[
            ("origin", origin.clone()),
            ("sec-fetch-site", "same-origin".to_owned()),
        ]),
        Vec::new(),
    )
    .await;
    assert_eq!(status, 200);

    // POSTs: JSON only, with the CSRF header; then actions are refused
    // on a dashboard started without --allow-actions.
    let plan = format!("{origin}/api/v1/actions/plan");
    let body = br#"{"action":"kill","ids":["x"]}"#.to_vec();
    let (status, _, got) = call(
        "POST",
        &plan,
        &with(&[("content-type", "text/plain".to_owned())]),
        body.clone(),
    )
    .await;
    assert_eq!(status, 415);
    assert_eq!(error_of(&got).1, messages::NOT_JSON);
    let json_ct = ("content-type", "application/json".to_owned());
    let (status, _, got) = call(
        "POST",
        &plan,
        &with(std::slice::from_ref(&json_ct)),
        body.clone(),
    )
    .await;
    assert_eq!(status, 403);
    assert_eq!(
        error_of(&got),
        ("csrf_failed".to_owned(), messages::CSRF_FAILED.to_owned())
    );
    let csrf = csrf_token(&origin, &with(&[])).await;
    let (status, _, got) = call(
        "POST",
        &plan,
        &with(&[json_ct.clone(), ("x-rayito-csrf", "0".repeat(64))]),
        body.clone(),
    )
    .await;
    assert_eq!((status, error_of(&got).0.as_str()), (403, "csrf_failed"));
    for path in ["actions/plan", "actions/run"] {
        let (status, _, got) = call(
            "POST",
            &format!("{origin}/api/v1/{path}"),
            &with(&[json_ct.clone(), ("x-rayito-csrf", csrf.clone())]),
            body.clone(),
        )
        .await;
        assert_eq!(status, 403, "{path}");
        assert_eq!(
            error_of(&got),
            (
                "actions_disabled".to_owned(),
                messages::ACTIONS_DISABLED.to_owned()
            )
        );
    }
    drop(w.emu);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_in_chromium() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let w = world(3).await;
    // Something running, so the metrics move.
    let _bg = w.sandboxes[0]
        .commands()
        .spawn("sh -c 'while :; do :; done'", rayito::CommandOptions::new())
        .await
        .expect("background");
    let d = w.dashboard(true).await;
    let shots = screenshot_dir();

    // The start URL logs in and leaves the address bar without its token.
    browser.client.goto(d.start_url()).await.expect("goto");
    browser.element("#fleet-rows tr").await;
    let url = browser.client.current_url().await.expect("url");
    assert_eq!(url.as_str(), format!("{}/#/fleet", d.origin()));
    assert!(!url.as_str().contains("token"), "{url}");

    // The fleet shows the test's sandboxes, running.
    for sbx in &w.sandboxes {
        let row = browser
            .element(&format!("tr[data-sandbox-id=\"{}\"]", sbx.id()))
            .await;
        assert_eq!(
            row.attr("data-state").await.expect("attr").as_deref(),
            Some("RUNNING")
        );
    }
    browser.screenshot(&shots, "fleet").await;

    // A running sandbox's charts are redrawn as samples arrive.
    let id = w.sandboxes[0].id();
    show(&browser, &d, &format!("sandbox/{id}")).await;
    browser.element("#chart-cpu polyline").await;
    let first = browser.outer_html("#chart-cpu").await.expect("a chart");
    let mut changed = None;
    for _ in 0..60 {
        tokio::time::sleep(POLL).await;
        let now = browser.outer_html("#chart-cpu").await;
        if now.as_deref().is_some_and(|n| n != first) {
            changed = now;
            break;
        }
    }
    let changed = changed.expect("the CPU chart changed between polls");
    assert!(changed.contains("<polyline"), "{changed}");
    browser.screenshot(&shots, "sandbox").await;

    // Images with their versions, quotas with their gauge, cost.
    show(&browser, &d, "images").await;
    browser.element("#images section[data-image]").await;
    browser.screenshot(&shots, "images").await;
    show(&browser, &d, "quotas").await;
    let gauge = browser.element("#gauge-memory").await;
    let level = gauge.attr("data-level").await.expect("attr");
    assert!(
        matches!(level.as_deref(), Some("ok" | "warning" | "critical")),
        "{level:?}"
    );
    browser.element("#quota-table tr[data-quota]").await;
    browser.screenshot(&shots, "quotas").await;
    show(&browser, &d, "cost").await;
    browser.element("#cost-total").await;
    browser.screenshot(&shots, "cost").await;

    // A bulk kill of two sandboxes: the plan lists them, the confirmation
    // must be typed back, then they are gone (through the SDK).
    show(&browser, &d, "fleet").await;
    let doomed = [w.sandboxes[1].id(), w.sandboxes[2].id()];
    for id in doomed {
        browser
            .element(&format!("input[data-select=\"{id}\"]"))
            .await
            .click()
            .await
            .expect("select");
    }
    browser.element("#plan").await.click().await.expect("plan");
    browser.element("#plan-view").await;
    for id in doomed {
        let target = browser
            .element(&format!("tr[data-plan-target=\"{id}\"]"))
            .await;
        assert_eq!(
            target.attr("class").await.expect("attr").as_deref(),
            Some("will-act")
        );
    }
    let confirm = browser.element("#confirm").await;
    assert!(
        confirm.attr("disabled").await.expect("attr").is_some(),
        "Confirm is enabled before the confirmation is typed"
    );
    let confirmation = browser
        .element("#confirmation-text")
        .await
        .text()
        .await
        .expect("text");
    assert!(confirmation.starts_with("kill-2-"), "{confirmation}");
    browser.screenshot(&shots, "plan").await;
    // Nothing happened yet.
    for id in doomed {
        let info = w.client.get_info_by_id(id).await.expect("info");
        assert_eq!(info.state, rayito::SandboxState::Running);
    }
    browser
        .element("#confirmation")
        .await
        .send_keys(&confirmation)
        .await
        .expect("typed");
    confirm.click().await.expect("confirm");
    for id in doomed {
        browser
            .element(&format!("#outcome tr[data-result=\"{id}\"]"))
            .await;
        assert!(gone(&w.client, id).await, "{id} still runs");
    }
    browser.screenshot(&shots, "outcome").await;
    // The survivor was not touched.
    let info = w
        .client
        .get_info_by_id(w.sandboxes[0].id())
        .await
        .expect("info");
    assert_eq!(info.state, rayito::SandboxState::Running);

    // A dashboard without --allow-actions offers none.
    let read_only = w.dashboard(false).await;
    browser
        .client
        .goto(read_only.start_url())
        .await
        .expect("goto");
    browser.element("#actions-disabled").await;
    assert!(
        browser.outer_html("#plan").await.is_none(),
        "a Plan button without --allow-actions"
    );

    browser.close().await;
    drop(d);
    drop(w.emu);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_runs_once_with_its_confirmation() {
    let w = world(1).await;
    let id = w.sandboxes[0].id().to_owned();
    let d = w.dashboard(true).await;
    let origin = d.origin();
    let cookie = session_cookie(&d).await;
    let csrf = csrf_token(&origin, &[("cookie".to_owned(), cookie.clone())]).await;
    let headers = vec![
        ("cookie".to_owned(), cookie),
        ("content-type".to_owned(), "application/json".to_owned()),
        ("x-rayito-csrf".to_owned(), csrf),
    ];
    let post = |path: &'static str, body: Value| {
        let headers = headers.clone();
        let url = format!("{origin}/api/v1/{path}");
        async move {
            let (status, _, got) =
                call("POST", &url, &headers, body.to_string().into_bytes()).await;
            (status, serde_json::from_slice::<Value>(&got).expect("JSON"))
        }
    };

    let (status, plan) = post(
        "actions/plan",
        serde_json::json!({"action": "kill", "ids": [id]}),
    )
    .await;
    assert_eq!(status, 200, "{plan}");
    assert_eq!(plan["action"], "kill");
    assert_eq!(plan["targets"][0]["sandbox_id"], id.as_str());
    assert_eq!(plan["targets"][0]["will"], "act");
    let plan_id = plan["plan_id"].as_str().expect("plan_id").to_owned();
    let confirmation = plan["confirmation"]
        .as_str()
        .expect("confirmation")
        .to_owned();

    // A wrong confirmation runs nothing and keeps the plan.
    let (status, got) = post(
        "actions/run",
        serde_json::json!({"plan_id": plan_id, "confirmation": "kill-1-00000000"}),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(got["error"]["code"], "confirmation_required");
    assert_eq!(got["error"]["message"], messages::CONFIRMATION);
    let info = w.client.get_info_by_id(&id).await.expect("info");
    assert_eq!(info.state, rayito::SandboxState::Running);

    // The plan's own confirmation runs it, once.
    let run = serde_json::json!({"plan_id": plan_id, "confirmation": confirmation});
    let (status, outcome) = post("actions/run", run.clone()).await;
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(outcome["results"][0]["sandbox_id"], id.as_str());
    assert_eq!(outcome["results"][0]["ok"], true);
    assert!(gone(&w.client, &id).await, "{id} still runs");
    let (status, got) = post("actions/run", run).await;
    assert_eq!(status, 404);
    assert_eq!(got["error"]["message"], messages::PLAN_NOT_FOUND);

    // A body that is not the endpoint's JSON.
    let (status, got) = post("actions/plan", serde_json::json!({"action": "explode"})).await;
    assert_eq!(status, 400);
    assert_eq!(got["error"]["code"], "invalid_argument");
    let (status, got) = post("actions/plan", serde_json::json!({"verb": "kill"})).await;
    assert_eq!(status, 400);
    assert_eq!(got["error"]["message"], messages::INVALID_JSON);
    drop(w.emu);
}

/// Whether `id` ended (terminating, terminated or no longer known), within
/// 30 s.
async fn gone(client: &Client, id: &str) -> bool {
    for _ in 0..60 {
        match client.get_info_by_id(id).await {
            Ok(info)
                if matches!(
                    info.state,
                    rayito::SandboxState::Terminated | rayito::SandboxState::Terminating
                ) =>
            {
                return true;
            }
            Err(_) => return true,
            Ok(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
    false
}

/// docs/dashboard.md transcribes every refusal's message.
#[test]
fn the_docs_transcribe_every_message() {
    let doc = std::fs::read_to_string(sdk_support::repo_root().join("docs/dashboard.md"))
        .expect("docs/dashboard.md");
    for message in [
        messages::UNAUTHORIZED,
        messages::MISDIRECTED,
        messages::CROSS_ORIGIN,
        messages::CSRF_FAILED,
        messages::ACTIONS_DISABLED,
        messages::NOT_JSON,
        messages::TOO_LARGE,
        messages::INVALID_JSON,
        messages::CONFIRMATION,
        messages::PLAN_NOT_FOUND,
        messages::NOT_FOUND,
    ] {
        let written = message.replace('<', "&lt;").replace('>', "&gt;");
        assert!(doc.contains(&written), "docs/dashboard.md lacks: {written}");
    }
}
