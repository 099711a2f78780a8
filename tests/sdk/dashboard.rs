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
        v["error"]["message"].as_str().unwrap_or_default().to_owned(),
    )
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
    for url in [format!("{origin}/"), format!("{origin}/?token=00ff"), format!("{origin}/api/v1/meta")] {
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
                ("misdirected_request".to_owned(), messages::MISDIRECTED.to_owned())
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
        &with(&[("origin", origin.clone()), ("sec-fetch-site", "same-origin".to_owned())]),
        Vec::new(),
    )
    .await;
    assert_eq!(status, 200);

    // POSTs: JSON only, with the CSRF header; then actions are refused
    // on a dashboard started without --allow-actions.
    let plan = format!("{origin}/api/v1/actions/plan");
    let body = br#"{"action":"kill","ids":["x"]}"#.to_vec();
    let (status, _, got) = call("POST", &plan, &with(&[("content-type", "text/plain".to_owned())]), body.clone()).await;
    assert_eq!(status, 415);
    assert_eq!(error_of(&got).1, messages::NOT_JSON);
    let json_ct = ("content-type", "application/json".to_owned());
    let (status, _, got) = call("POST", &plan, &with(&[json_ct.clone()]), body.clone()).await;
    assert_eq!(status, 403);
    assert_eq!(
        error_of(&got),
        ("csrf_failed".to_owned(), messages::CSRF_FAILED.to_owned())
    );
    let (_, _, session) = call("GET", &format!("{origin}/api/v1/session"), &with(&[]), Vec::new()).await;
    let csrf = serde_json::from_slice::<Value>(&session).expect("session")["csrf_token"]
        .as_str()
        .expect("csrf_token")
        .to_owned();
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
            ("actions_disabled".to_owned(), messages::ACTIONS_DISABLED.to_owned())
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
    browser
        .client
        .goto(&format!("{}/#/sandbox/{id}", d.origin()))
        .await
        .expect("goto");
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

    browser.close().await;
    drop(d);
    drop(w.emu);
}
