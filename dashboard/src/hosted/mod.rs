//! The hosted dashboard (feature `lambda`): the `dashboard` stack's
//! function serves the same page and `/api/v1` as `rayito dashboard`,
//! behind a public Lambda Function URL, with Cognito sign-in instead of
//! the loopback token and cookie.
//!
//! Each request, in order (each step answers before the next, and none of
//! the first touches AWS): the page and its files are the only routes
//! without a token, with `/config.json` (the Hosted UI's public facts);
//! an API call is GET or POST (405), a POST's `Origin` is the function's
//! own (403) and its body JSON (415); then the bearer access token is
//! checked whole ([`token`]: 401, or 503 `auth_unavailable`); a POST to
//! `/api/v1/actions/...` needs the stack's actions (`AllowActions`, 403
//! `actions_disabled`) and the caller in the actions group (403
//! `forbidden`); a run writes its audit rows first (503
//! `audit_unavailable`, and the action does not run). There is no cookie,
//! so no CSRF value is needed. The token, the `Authorization` header and
//! bodies are never logged: a refusal logs its closed code only.

mod audit;
mod event;
mod net;
mod plans;
mod token;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, Method, header};
use serde_json::{Value, json};

pub use event::{NotAnEvent, RequestContext, request_from_event, response_to_event};
pub use token::Caller;

pub(crate) use audit::Actor;
use audit::AuditLog;
pub(crate) use plans::{PlanStore, StoredPlan};
use token::{PoolFacts, Refusal, Verifier};

use crate::api::Shared;
use crate::errors::ApiError;

/// The Cognito group whose members may act (`ActionsGroupName`).
pub const DEFAULT_ACTIONS_GROUP: &str = "rayito-dashboard-actions";

/// The environment the stack's template sets on the function.
pub mod env {
    /// The pool's id (`<region>_<id>`).
    pub const USER_POOL_ID: &str = "RAYITO_DASHBOARD_USER_POOL_ID";
    /// The SPA's app client name (its id is found by name: the template
    /// cannot pass it without a cycle through the Function URL).
    pub const CLIENT_NAME: &str = "RAYITO_DASHBOARD_CLIENT_NAME";
    /// The Hosted UI's host (no scheme).
    pub const COGNITO_DOMAIN: &str = "RAYITO_DASHBOARD_COGNITO_DOMAIN";
    /// The audit table.
    pub const AUDIT_TABLE: &str = "RAYITO_DASHBOARD_AUDIT_TABLE";
    /// The actions role's ARN; empty without `AllowActions`.
    pub const ACTIONS_ROLE_ARN: &str = "RAYITO_DASHBOARD_ACTIONS_ROLE_ARN";
    /// The actions group's name.
    pub const ACTIONS_GROUP: &str = "RAYITO_DASHBOARD_ACTIONS_GROUP";
    /// The cache table (bulk-action plans, `PLAN#<id>` items).
    pub const CACHE_TABLE: &str = "RAYITO_DASHBOARD_CACHE_TABLE";
}

/// How the hosted dashboard checks its callers.
#[derive(Debug, Clone)]
#[must_use]
pub struct HostedOptions {
    region: String,
    user_pool_id: String,
    client_name: String,
    cognito_domain: String,
    audit_table: String,
    cache_table: String,
    actions_group: String,
    allow_actions: bool,
    jwks_url: Option<String>,
    cognito_endpoint: Option<String>,
    clock_skew: i64,
}

/// A hosted dashboard that cannot be set up: what is wrong (no secret in
/// it: names of settings only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostedError(pub String);

impl std::fmt::Display for HostedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HostedError {}

fn is_pool_id(id: &str) -> bool {
    let ok = |s: &str, dash: bool| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || (dash && b == b'-'))
    };
    id.split_once('_')
        .is_some_and(|(region, rest)| ok(region, true) && ok(rest, false))
}

impl HostedOptions {
    /// The pool `user_pool_id` in `region`, whose app client named
    /// `client_name` is the one audience taken.
    pub fn new(
        region: impl Into<String>,
        user_pool_id: impl Into<String>,
        client_name: impl Into<String>,
    ) -> Self {
        Self {
            region: region.into(),
            user_pool_id: user_pool_id.into(),
            client_name: client_name.into(),
            cognito_domain: String::new(),
            audit_table: String::new(),
            cache_table: String::new(),
            actions_group: DEFAULT_ACTIONS_GROUP.to_owned(),
            allow_actions: false,
            jwks_url: None,
            cognito_endpoint: None,
            clock_skew: 0,
        }
    }

    /// The options the stack's template sets in the environment
    /// ([`env`], and `AWS_REGION`).
    ///
    /// # Errors
    /// A required variable is unset (named in the error).
    pub fn from_env() -> Result<Self, HostedError> {
        let get = |name: &str| std::env::var(name).unwrap_or_default();
        let need = |name: &str| {
            let value = get(name);
            if value.is_empty() {
                Err(HostedError(format!("{name} is unset")))
            } else {
                Ok(value)
            }
        };
        let role = get(env::ACTIONS_ROLE_ARN);
        let mut options = Self::new(
            need("AWS_REGION")?,
            need(env::USER_POOL_ID)?,
            need(env::CLIENT_NAME)?,
        )
        .cognito_domain(get(env::COGNITO_DOMAIN))
        .audit_table(need(env::AUDIT_TABLE)?)
        .allow_actions(!role.is_empty());
        if !role.is_empty() {
            options = options.cache_table(need(env::CACHE_TABLE)?);
        }
        let group = get(env::ACTIONS_GROUP);
        if !group.is_empty() {
            options = options.actions_group(group);
        }
        Ok(options)
    }

    /// The Hosted UI's host (`<prefix>.auth.<region>.amazoncognito.com`),
    /// published in `/config.json` for the page's sign-in.
    pub fn cognito_domain(mut self, domain: impl Into<String>) -> Self {
        self.cognito_domain = domain.into();
        self
    }

    /// The DynamoDB table the actions are audited in.
    pub fn audit_table(mut self, table: impl Into<String>) -> Self {
        self.audit_table = table.into();
        self
    }

    /// The DynamoDB table bulk-action plans are kept in between their dry
    /// run and their run, so that the run may reach another Lambda
    /// environment than the one that planned it (empty: plans stay in
    /// this instance's memory, as the local dashboard keeps them).
    pub fn cache_table(mut self, table: impl Into<String>) -> Self {
        self.cache_table = table.into();
        self
    }

    /// Whether actions are served (the stack's `AllowActions`); off by
    /// default.
    pub fn allow_actions(mut self, allow: bool) -> Self {
        self.allow_actions = allow;
        self
    }

    /// The group whose members may act (default
    /// [`DEFAULT_ACTIONS_GROUP`]).
    pub fn actions_group(mut self, group: impl Into<String>) -> Self {
        self.actions_group = group.into();
        self
    }

    /// Where the pool's JWKS is read (default: the issuer's
    /// `/.well-known/jwks.json`); a test points it at its server.
    pub fn jwks_url(mut self, url: impl Into<String>) -> Self {
        self.jwks_url = Some(url.into());
        self
    }

    /// Cognito's endpoint for `ListUserPoolClients` (default
    /// `https://cognito-idp.<region>.amazonaws.com/`).
    pub fn cognito_endpoint(mut self, url: impl Into<String>) -> Self {
        self.cognito_endpoint = Some(url.into());
        self
    }

    /// Shifts the clock that `exp` and `nbf` are checked against by
    /// `seconds` (tests: a token seen from the future is expired).
    pub fn clock_skew(mut self, seconds: i64) -> Self {
        self.clock_skew = seconds;
        self
    }

    /// The tokens' `iss`: `https://cognito-idp.<region>.amazonaws.com/<pool>`.
    pub fn issuer(&self) -> String {
        format!(
            "https://cognito-idp.{}.amazonaws.com/{}",
            self.region, self.user_pool_id
        )
    }
}

/// What the hosted guard holds.
#[derive(Debug)]
pub(crate) struct Gate {
    verifier: Verifier,
    audit: AuditLog,
    /// `None`: plans stay in memory (no cache table set).
    pub(crate) plans: Option<plans::PlanStore>,
    cognito_domain: String,
    actions_group: String,
    allow_actions: bool,
}

/// The hosted dashboard's router, ready for Function URL events.
#[derive(Debug, Clone)]
pub struct HostedDashboard {
    router: Router,
}

impl HostedDashboard {
    /// The dashboard over `read` (the function's read-only role) and,
    /// for actions, `actions` (the actions role; `read` when `None`),
    /// with `aws`'s credentials and endpoint for Cognito and DynamoDB.
    ///
    /// # Errors
    /// The pool id is not `<region>_<id>`, or the HTTPS client could not
    /// be built.
    pub fn new(
        read: rayito::Client,
        actions: Option<rayito::Client>,
        aws: &aws_types::SdkConfig,
        options: HostedOptions,
    ) -> Result<Self, HostedError> {
        if !is_pool_id(&options.user_pool_id) {
            return Err(HostedError(
                "the user pool id is not of the form <region>_<id>".to_owned(),
            ));
        }
        let net = net::Net::new(aws)
            .map_err(|_| HostedError("no HTTPS client: the system's roots".to_owned()))?;
        let issuer = options.issuer();
        let facts = PoolFacts {
            jwks_url: options
                .jwks_url
                .clone()
                .unwrap_or_else(|| format!("{issuer}/.well-known/jwks.json")),
            cognito_endpoint: options
                .cognito_endpoint
                .clone()
                .or_else(|| {
                    aws.endpoint_url()
                        .map(|u| u.trim_end_matches('/').to_owned() + "/")
                })
                .unwrap_or_else(|| {
                    format!("https://cognito-idp.{}.amazonaws.com/", options.region)
                }),
            issuer,
            region: options.region.clone(),
            user_pool_id: options.user_pool_id.clone(),
            client_name: options.client_name.clone(),
        };
        let gate = Gate {
            verifier: Verifier::new(facts, net, options.clock_skew),
            audit: AuditLog::new(aws_sdk_dynamodb::Client::new(aws), &options.audit_table),
            plans: (!options.cache_table.is_empty()).then(|| {
                plans::PlanStore::new(aws_sdk_dynamodb::Client::new(aws), &options.cache_table)
            }),
            cognito_domain: options.cognito_domain.clone(),
            actions_group: options.actions_group.clone(),
            allow_actions: options.allow_actions,
        };
        let shared = Shared::hosted(read, actions, Arc::new(gate), options.allow_actions);
        Ok(Self {
            router: crate::api::router(Arc::new(shared)),
        })
    }

    /// The router (page, files, `/config.json`, `/api/v1`).
    pub fn router(&self) -> Router {
        self.router.clone()
    }

    /// One Function URL event in, its response out (an event that is not
    /// one answers 400).
    pub async fn handle(&self, event: &Value) -> Value {
        use tower::ServiceExt as _;
        let response = match request_from_event(event) {
            Ok(request) => match self.router.clone().oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            },
            Err(_) => ApiError::invalid_argument("not a Function URL event").into_response(),
        };
        response_to_event(response).await
    }
}

impl Gate {
    /// Whether `caller` may act here.
    pub(crate) fn may_act(&self, caller: &Caller) -> bool {
        self.allow_actions && caller.groups.contains(&self.actions_group)
    }

    /// The `requested` rows of a run (before it).
    pub(crate) async fn audit_requested(
        &self,
        actor: &Actor,
        action: &str,
        ids: &[&str],
    ) -> Result<(), ApiError> {
        self.audit
            .requested(actor, action, ids)
            .await
            .map_err(|_| ApiError::audit_unavailable())
    }

    /// The `outcome` row of a run (after it; best effort).
    pub(crate) async fn audit_outcome(
        &self,
        actor: &Actor,
        action: &str,
        status: u16,
        succeeded: usize,
        failed: usize,
    ) {
        if !self
            .audit
            .outcome(actor, action, status, succeeded, failed)
            .await
        {
            log("audit", "outcome_unwritten");
        }
    }

    /// `/config.json`: what the page needs to sign in.
    async fn config(&self) -> Result<Response, ApiError> {
        let ids = self.verifier.client_ids().await.map_err(|_| {
            log("auth", "clients");
            ApiError::auth_unavailable()
        })?;
        let mut ids = ids.into_iter();
        let (Some(client_id), None) = (ids.next(), ids.next()) else {
            log("auth", "clients");
            return Err(ApiError::auth_unavailable());
        };
        Ok(axum::Json(json!({
            "auth": {
                "type": "cognito",
                "domain": format!("https://{}", self.cognito_domain),
                "clientId": client_id,
                "scope": "openid",
            }
        }))
        .into_response())
    }

    /// The checks in the module's order: `Ok(Some)` answers at once,
    /// `Ok(None)` goes on to the router.
    async fn check(&self, req: &mut Request) -> Result<Option<Response>, ApiError> {
        let path = req.uri().path().to_owned();
        let api = path == "/api/v1" || path.starts_with("/api/v1/");
        if !api {
            if req.method() != Method::GET {
                return Err(ApiError::method_not_allowed());
            }
            if path == "/config.json" {
                return self.config().await.map(Some);
            }
            return Ok(None);
        }
        if req.method() != Method::GET && req.method() != Method::POST {
            return Err(ApiError::method_not_allowed());
        }
        let context = req
            .extensions()
            .get::<RequestContext>()
            .cloned()
            .unwrap_or_default();
        if req.method() == Method::POST {
            let host = if context.domain.is_empty() {
                req.headers()
                    .get(header::HOST)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned()
            } else {
                context.domain.clone()
            };
            let origin = req
                .headers()
                .get(header::ORIGIN)
                .and_then(|v| v.to_str().ok());
            if host.is_empty() || origin != Some(format!("https://{host}").as_str()) {
                return Err(ApiError::cross_origin());
            }
            crate::guard::require_json(req.headers())?;
        }
        let token = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
            .filter(|t| !t.is_empty());
        let Some(token) = token else {
            return Err(ApiError::no_token());
        };
        let caller = match self.verifier.verify(token).await {
            Ok(caller) => caller,
            Err(Refusal::Invalid(code)) => {
                log("token_refused", code);
                return Err(ApiError::bad_token());
            }
            Err(Refusal::Unavailable(what)) => {
                log("auth", what);
                return Err(ApiError::auth_unavailable());
            }
        };
        if req.method() == Method::POST && path.starts_with("/api/v1/actions/") {
            if !self.allow_actions {
                return Err(ApiError::stack_actions_disabled());
            }
            if !caller.groups.contains(&self.actions_group) {
                return Err(ApiError::not_in_group());
            }
        }
        req.extensions_mut().insert(crate::actions::ActorExt(Actor {
            caller,
            request_id: context.request_id,
            source_ip: context.source_ip,
        }));
        Ok(None)
    }
}

/// One log line of a refusal or an unavailable dependency: its closed
/// code only (never a token, header or body).
fn log(what: &str, code: &str) {
    println!("{}", json!({ "dashboard": what, "code": code }));
}

/// The hosted guard (instead of [`crate::guard::defend`]).
pub(crate) async fn defend(
    State(shared): State<Arc<Shared>>,
    mut req: Request,
    next: Next,
) -> Response {
    let Some(gate) = shared.hosted.clone() else {
        return ApiError::auth_unavailable().into_response();
    };
    let mut answer = match gate.check(&mut req).await {
        Err(refusal) => refusal.into_response(),
        Ok(Some(answer)) => answer,
        Ok(None) => next.run(req).await,
    };
    let headers = answer.headers_mut();
    crate::guard::harden(headers);
    let csp = format!(
        "{}; connect-src 'self' https://{}",
        crate::guard::CSP.replace("; connect-src 'self'", ""),
        gate.cognito_domain
    );
    if let Ok(csp) = HeaderValue::from_str(&csp) {
        headers.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    headers.insert(
        header::STRICT_TRANSPORT_SECURITY,
        HeaderValue::from_static("max-age=63072000; includeSubDomains"),
    );
    answer
}

#[cfg(test)]
mod tests {
    #[test]
    fn pool_ids() {
        assert!(super::is_pool_id("us-east-1_AbC123"));
        assert!(!super::is_pool_id("us-east-1_"));
        assert!(!super::is_pool_id("us-east-1_a/b"));
        assert!(!super::is_pool_id("noscore"));
    }
}
