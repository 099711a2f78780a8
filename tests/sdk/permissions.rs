//! `Client::permissions()` (feature `permissions`): the caller from moto's
//! STS (an assumed role of a role with a path), then IAM's
//! SimulatePrincipalPolicy. moto has no policy simulator, so IAM is a peer
//! of this test serving answers shaped as AWS's (GetRole's role, a page
//! truncated with a Marker, then the last page; an AccessDenied), and
//! recording what it was sent.

use crate::sdk_support;

use std::sync::{Arc, Mutex};

use rayito::permissions::{Decision, SimulationOutcome, SimulationQuery};
use rayito::{AwsOptions, Client};
use sdk_support::moto::{MotoServer, http_post, xml_text};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const ACCOUNT: &str = "123456789012";
const ROLE_ARN: &str = "arn:aws:iam::123456789012:role/team/rayito-dev";

/// One request the peer got: its form fields and its Authorization.
#[derive(Clone, Debug)]
struct Seen {
    form: Vec<(String, String)>,
    authorization: String,
}

impl Seen {
    fn get(&self, key: &str) -> Option<&str> {
        self.form
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// `ActionNames.member.N`, in order.
    fn actions(&self) -> Vec<String> {
        (1..)
            .map_while(|i| self.get(&format!("ActionNames.member.{i}")))
            .map(str::to_owned)
            .collect()
    }
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap()
}

/// How the peer decides an action.
fn decision(action: &str) -> (&'static str, Option<bool>) {
    match action {
        "lambda:RunMicrovm" => ("implicitDeny", None),
        "lambda:TerminateMicrovm" => ("explicitDeny", None),
        "lambda:ResumeMicrovm" => ("allowed", Some(false)),
        _ => ("allowed", Some(true)),
    }
}

fn member(action: &str, resource: &str) -> String {
    let (decision, organizations) = decision(action);
    let organizations = organizations.map_or_else(String::new, |allowed| {
        format!(
            "<OrganizationsDecisionDetail><AllowedByOrganizations>{allowed}</AllowedByOrganizations></OrganizationsDecisionDetail>"
        )
    });
    format!(
        "<member><EvalActionName>{action}</EvalActionName><EvalResourceName>{resource}</EvalResourceName>\
         <EvalDecision>{decision}</EvalDecision><MatchedStatements/><MissingContextValues/>{organizations}</member>"
    )
}

/// The peer's answer to one request: (status, XML).
fn answer(seen: &Seen, deny_simulation: bool) -> (u16, String) {
    const NS: &str = "xmlns=\"https://iam.amazonaws.com/doc/2010-05-08/\"";
    match seen.get("Action") {
        Some("GetRole") => (
            200,
            format!(
                "<GetRoleResponse {NS}><GetRoleResult><Role><Path>/team/</Path><RoleName>rayito-dev</RoleName>\
                 <RoleId>AROAEXAMPLE</RoleId><Arn>{ROLE_ARN}</Arn></Role></GetRoleResult>\
                 <ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata></GetRoleResponse>"
            ),
        ),
        Some("SimulatePrincipalPolicy") if deny_simulation => (
            403,
            format!(
                "<ErrorResponse {NS}><Error><Type>Sender</Type><Code>AccessDenied</Code>\
                 <Message>User: {ROLE_ARN} is not authorized to perform: iam:SimulatePrincipalPolicy</Message>\
                 </Error><RequestId>r-2</RequestId></ErrorResponse>"
            ),
        ),
        Some("SimulatePrincipalPolicy") => {
            // The first page holds the first half of the actions and says
            // more follow; the page after the Marker holds the rest.
            let actions = seen.actions();
            let resource = seen.get("ResourceArns.member.1").unwrap_or("*");
            let half = actions.len().div_ceil(2);
            let (page, more) = match seen.get("Marker") {
                None => (&actions[..half], true),
                Some(_) => (&actions[half..], false),
            };
            let members: String = page.iter().map(|a| member(a, resource)).collect();
            let marker = if more {
                "<Marker>page-2-of-2</Marker>"
            } else {
                ""
            };
            (
                200,
                format!(
                    "<SimulatePrincipalPolicyResponse {NS}><SimulatePrincipalPolicyResult>\
                     <IsTruncated>{more}</IsTruncated><EvaluationResults>{members}</EvaluationResults>{marker}\
                     </SimulatePrincipalPolicyResult><ResponseMetadata><RequestId>r-3</RequestId>\
                     </ResponseMetadata></SimulatePrincipalPolicyResponse>"
                ),
            )
        }
        _ => (
            400,
            format!(
                "<ErrorResponse {NS}><Error><Code>InvalidAction</Code></Error></ErrorResponse>"
            ),
        ),
    }
}

/// Serves one connection: request after request, each recorded.
async fn serve<S>(mut socket: S, log: Arc<Mutex<Vec<Seen>>>, deny_simulation: bool)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    loop {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let head_end = loop {
            if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
        let header = |name: &str| {
            head.lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
                })
                .unwrap_or_default()
        };
        let length: usize = header("content-length").parse().unwrap_or(0);
        while buf.len() < head_end + length {
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body = String::from_utf8_lossy(&buf[head_end..head_end + length]);
        let form = body
            .split('&')
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (decode(k), decode(v)))
            .collect();
        let request = Seen {
            form,
            authorization: header("authorization"),
        };
        let (status, xml) = answer(&request, deny_simulation);
        log.lock().unwrap().push(request);
        let reply = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: text/xml\r\nx-amzn-requestid: r\r\ncontent-length: {}\r\n\r\n{xml}",
            xml.len()
        );
        if socket.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
        let _ = socket.flush().await;
    }
}

/// The IAM peer on a loopback port (over TLS with `tls`); what it got.
async fn iam_peer_with(
    deny_simulation: bool,
    tls: Option<tokio_rustls::TlsAcceptor>,
) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let scheme = if tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            let (log, tls) = (log.clone(), tls.clone());
            tokio::spawn(async move {
                match tls {
                    Some(acceptor) => {
                        if let Ok(stream) = acceptor.accept(socket).await {
                            serve(stream, log, deny_simulation).await;
                        }
                    }
                    None => serve(socket, log, deny_simulation).await,
                }
            });
        }
    });
    (url, seen)
}

async fn iam_peer(deny_simulation: bool) -> (String, Arc<Mutex<Vec<Seen>>>) {
    iam_peer_with(deny_simulation, None).await
}

/// A role with a path in moto's IAM, assumed through moto's STS: the
/// credentials of the session (moto's GetCallerIdentity then answers the
/// assumed-role ARN).
fn assumed_role(moto: &MotoServer) -> (String, String) {
    moto.iam(
        "CreateRole",
        &[
            ("RoleName", "rayito-dev"),
            ("Path", "/team/"),
            ("AssumeRolePolicyDocument", "{}"),
        ],
    );
    let body = format!(
        "Action=AssumeRole&Version=2011-06-15&RoleArn={}&RoleSessionName=doctor",
        ROLE_ARN.replace('/', "%2F").replace(':', "%3A")
    );
    let (status, answer) = http_post(
        moto.port(),
        "/",
        &[
            (
                "Authorization",
                "AWS4-HMAC-SHA256 Credential=AKIDMOTOSETUP/20260101/us-east-1/sts/aws4_request, \
                 SignedHeaders=host, Signature=0",
            ),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        body.as_bytes(),
    )
    .unwrap();
    assert_eq!(status, 200, "{answer}");
    (
        xml_text(&answer, "AccessKeyId").unwrap().to_owned(),
        xml_text(&answer, "SecretAccessKey").unwrap().to_owned(),
    )
}

fn options(moto: &MotoServer, key: &str, secret: &str) -> AwsOptions {
    AwsOptions::new()
        .endpoint_url(moto.endpoint_url())
        .region("us-east-1")
        .static_credentials(key, secret.to_owned())
}

async fn client(moto: &MotoServer, key: &str, secret: &str) -> Client {
    Client::builder()
        .aws(options(moto, key, secret))
        .build()
        .await
        .expect("a client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assumed_role_is_simulated_as_its_role_over_every_page() {
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .unwrap()
    else {
        return;
    };
    let (key, secret) = tokio::task::block_in_place(|| assumed_role(&moto));
    let client = client(&moto, &key, &secret).await;
    let (iam, seen) = iam_peer(false).await;
    let simulation = client
        .permissions()
        .simulate(&SimulationQuery::new().iam_endpoint_url(&iam))
        .await
        .expect("simulated");
    assert_eq!(
        simulation.caller_arn,
        format!("arn:aws:sts::{ACCOUNT}:assumed-role/rayito-dev/doctor")
    );
    assert_eq!(simulation.features, ["core"]);
    let SimulationOutcome::Simulated {
        policy_source_arn,
        results,
        skipped,
        complete,
    } = simulation.outcome
    else {
        panic!("not simulated: {:?}", simulation.outcome);
    };
    // The role's ARN with its path, from GetRole.
    assert_eq!(policy_source_arn, ROLE_ARN);
    assert!(complete);
    assert!(skipped.is_empty());
    let seen = seen.lock().unwrap().clone();
    let actions: Vec<_> = seen.iter().map(|s| s.get("Action").unwrap()).collect();
    // GetRole, then two pages on `*`, then two on the image (the peer
    // truncates every first page).
    assert_eq!(
        actions,
        [
            "GetRole",
            "SimulatePrincipalPolicy",
            "SimulatePrincipalPolicy",
            "SimulatePrincipalPolicy",
            "SimulatePrincipalPolicy"
        ]
    );
    assert_eq!(seen[1].get("ResourceArns.member.1"), None);
    assert_eq!(
        seen[3].get("ResourceArns.member.1"),
        Some("arn:aws:lambda:us-east-1:123456789012:microvm-image:rayito-base")
    );
    assert_eq!(seen[3].actions(), ["lambda:GetMicrovmImage"]);
    assert_eq!(seen[0].get("RoleName"), Some("rayito-dev"));
    // Signed as IAM in us-east-1, whatever the client's region.
    assert!(
        seen[1]
            .authorization
            .contains("/us-east-1/iam/aws4_request"),
        "{:?}",
        seen[1].authorization
    );
    assert_eq!(seen[1].get("PolicySourceArn"), Some(ROLE_ARN));
    assert_eq!(seen[1].get("Marker"), None);
    assert_eq!(seen[2].get("Marker"), Some("page-2-of-2"));
    let core = [
        "lambda:CreateMicrovmAuthToken",
        "lambda:GetMicrovm",
        "lambda:GetMicrovmImage",
        "lambda:ListMicrovms",
        "lambda:ResumeMicrovm",
        "lambda:RunMicrovm",
        "lambda:SuspendMicrovm",
        "lambda:TerminateMicrovm",
    ];
    // GetMicrovmImage acts on the image: its own call.
    let mut asked: Vec<String> = seen[1].actions();
    asked.sort();
    assert_eq!(
        asked,
        core.iter()
            .filter(|a| **a != "lambda:GetMicrovmImage")
            .map(|a| (*a).to_owned())
            .collect::<Vec<_>>()
    );
    // Both pages read: every action has its decision.
    let got: Vec<_> = results
        .iter()
        .map(|r| (r.action.as_str(), r.decision, r.denied_by_organizations))
        .collect();
    assert_eq!(got.len(), core.len(), "{got:?}");
    assert!(got.contains(&("lambda:RunMicrovm", Decision::ImplicitDeny, false)));
    assert!(got.contains(&("lambda:TerminateMicrovm", Decision::ExplicitDeny, false)));
    assert!(got.contains(&("lambda:ResumeMicrovm", Decision::Allowed, true)));
    assert!(got.contains(&("lambda:ListMicrovms", Decision::Allowed, false)));
    let run = results
        .iter()
        .find(|r| r.action == "lambda:RunMicrovm")
        .unwrap();
    assert_eq!(run.granted_by, ["SandboxLauncherPolicy"]);
    assert_eq!(run.resource, "*");
    assert_eq!(run.feature, "core");
    let list = results
        .iter()
        .find(|r| r.action == "lambda:ListMicrovms")
        .unwrap();
    assert_eq!(list.granted_by, ["SandboxLauncherPolicy", "CallerPolicy"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_features_resources_and_a_refused_simulation() {
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .unwrap()
    else {
        return;
    };
    // moto's own user: simulated as itself, no GetRole.
    let client = client(&moto, "AKIDMOTOUSER", "testing").await;
    let (iam, seen) = iam_peer(false).await;
    let image = format!("arn:aws:lambda:us-east-1:{ACCOUNT}:microvm-image:team-image");
    let simulation = client
        .permissions()
        .simulate(
            &SimulationQuery::new()
                .feature("templates")
                .image(&image)
                .iam_endpoint_url(&iam),
        )
        .await
        .expect("simulated");
    assert_eq!(simulation.features, ["core", "templates"]);
    let SimulationOutcome::Simulated {
        policy_source_arn,
        results,
        skipped,
        ..
    } = simulation.outcome
    else {
        panic!("not simulated");
    };
    assert_eq!(policy_source_arn, simulation.caller_arn);
    // No bucket: the S3 actions wait for one.
    assert_eq!(skipped, ["s3:GetObject", "s3:PutObject"]);
    let seen = seen.lock().unwrap().clone();
    assert!(seen.iter().all(|s| s.get("Action") != Some("GetRole")));
    let on_image: Vec<_> = seen
        .iter()
        .filter(|s| s.get("ResourceArns.member.1") == Some(image.as_str()))
        .flat_map(Seen::actions)
        .collect();
    assert!(on_image.contains(&"lambda:CreateMicrovmImage".to_owned()));
    let create = results
        .iter()
        .find(|r| r.action == "lambda:CreateMicrovmImage")
        .unwrap();
    assert_eq!(create.resource, image);
    assert_eq!(create.feature, "templates");
    assert_eq!(create.granted_by, ["ImagePublisherPolicy"]);
    let logs = results
        .iter()
        .find(|r| r.action == "logs:GetLogEvents")
        .unwrap();
    assert_eq!(
        logs.resource,
        format!("arn:aws:logs:us-east-1:{ACCOUNT}:log-group:/rayito/*")
    );

    // An unknown feature is refused before any call.
    let err = client
        .permissions()
        .simulate(&SimulationQuery::new().feature("nope"))
        .await
        .unwrap_err();
    assert!(
        err.to_string().starts_with(
            "invalid permissions: unknown cargo feature \"nope\" (known: core, templates, setup"
        ),
        "{err}"
    );

    // iam:SimulatePrincipalPolicy refused: an answer, not an error.
    let (iam, _) = iam_peer(true).await;
    let simulation = client
        .permissions()
        .simulate(&SimulationQuery::new().iam_endpoint_url(&iam))
        .await
        .expect("an answer");
    assert_eq!(simulation.outcome, SimulationOutcome::Denied);
}

/// IAM over TLS with a private CA: the simulation trusts the client's own
/// roots (`AwsOptions::add_root_certificate_pem`, the TLS local backend's
/// CA) beside the system's, as every other call of the backend does;
/// without that root the certificate is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iam_over_tls_is_reached_with_the_backends_roots() {
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .unwrap()
    else {
        return;
    };
    let (acceptor, ca_pem) = crate::sdk_support::tls_forward::tls_for_loopback();
    let (iam, seen) = iam_peer_with(false, Some(acceptor)).await;
    assert!(iam.starts_with("https://127.0.0.1:"));
    let query = SimulationQuery::new().iam_endpoint_url(&iam);

    let untrusting = client(&moto, "AKIDMOTOUSER", "testing").await;
    let err = untrusting
        .permissions()
        .simulate(&query)
        .await
        .expect_err("the peer's CA is not trusted");
    assert!(seen.lock().unwrap().is_empty(), "{err}");

    let trusting = Client::builder()
        .aws(options(&moto, "AKIDMOTOUSER", "testing").add_root_certificate_pem(ca_pem))
        .build()
        .await
        .expect("a client");
    let simulation = trusting
        .permissions()
        .simulate(&query)
        .await
        .expect("simulated over TLS");
    assert!(
        matches!(simulation.outcome, SimulationOutcome::Simulated { .. }),
        "{:?}",
        simulation.outcome
    );
    assert!(!seen.lock().unwrap().is_empty());
}
