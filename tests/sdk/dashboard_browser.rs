//! A headless Chromium driven through chromedriver (WebDriver, with
//! fantoccini), for the dashboard's browser tests: started per test with a
//! fresh profile, on loopback, with the flags of a closed network.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

use crate::sdk_support;

/// A browser session and the chromedriver serving it (killed on drop).
pub struct Browser {
    pub client: Client,
    _driver: Child,
    _profile: tempfile::TempDir,
}

/// The Chromium binary and chromedriver, when both are installed.
fn programs() -> Option<(PathBuf, PathBuf)> {
    let find = |name: &str| {
        std::env::var_os("PATH")
            .into_iter()
            .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    };
    Some((find("chromium")?, find("chromedriver")?))
}

impl Browser {
    /// A fresh headless browser; `None` (with a SKIPPED line, or a failure
    /// under `RAYITO_TEST_STRICT=1`) when chromium or chromedriver is
    /// missing.
    pub async fn start() -> Option<Browser> {
        let Some((chromium, chromedriver)) = programs() else {
            let reason = "chromium and chromedriver are not both installed (.ci/install-test-deps installs them)";
            sdk_support::skip::skip(reason);
            return None;
        };
        let port = free_port();
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("chromedriver starts");
        let profile = tempfile::tempdir().expect("a profile directory");
        let caps = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--no-first-run",
                    "--window-size=1280,900",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            },
        });
        let Value::Object(caps) = caps else {
            unreachable!()
        };
        let url = format!("http://127.0.0.1:{port}");
        // chromedriver takes a moment to listen; a session before that is
        // refused at connect.
        let mut last = None;
        for _ in 0..100 {
            match ClientBuilder::new(HttpConnector::new())
                .capabilities(caps.clone())
                .connect(&url)
                .await
            {
                Ok(client) => {
                    return Some(Browser {
                        client,
                        _driver: driver,
                        _profile: profile,
                    });
                }
                Err(e) => last = Some(e),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("no WebDriver session: {last:?}");
    }

    /// Waits (up to 30 s) for an element matching `css`.
    pub async fn element(&self, css: &str) -> fantoccini::elements::Element {
        self.client
            .wait()
            .at_most(Duration::from_secs(30))
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no element {css}: {e}"))
    }

    /// The outer HTML of the first element matching `css` (`null` when none).
    pub async fn outer_html(&self, css: &str) -> Option<String> {
        let got = self
            .client
            .execute(
                "const el = document.querySelector(arguments[0]); return el ? el.outerHTML : null;",
                vec![json!(css)],
            )
            .await
            .expect("script runs");
        got.as_str().map(str::to_owned)
    }

    /// A PNG of the window, saved as `name`.png under `dir`.
    pub async fn screenshot(&self, dir: &Path, name: &str) {
        let png = self.client.screenshot().await.expect("screenshot");
        std::fs::create_dir_all(dir).expect("screenshot dir");
        std::fs::write(dir.join(format!("{name}.png")), png).expect("screenshot written");
    }

    /// Ends the session (chromedriver goes with the drop).
    pub async fn close(self) {
        let _ = self.client.close().await;
    }
}

/// Where screenshots go: target/dashboard-screenshots/.
pub fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| sdk_support::repo_root().join("target"));
    target.join("dashboard-screenshots")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}
