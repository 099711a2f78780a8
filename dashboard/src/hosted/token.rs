//! Cognito's access token, checked whole before any route or AWS read:
//! its size, `alg` RS256 and `kid`, the signature against the pool's JWKS,
//! then the issuer (the pool), `token_use` `access`, `exp` and `nbf` (30 s
//! of leeway), a `sub`, and `client_id` one of the pool's clients named as
//! the stack's SPA client. Every refusal answers the same 401; the reason
//! is a closed code that is only logged. A JWKS or a client list that
//! cannot be had is not the token's fault: 503 `auth_unavailable`.
//!
//! Both lists are cached an hour. An unknown `kid` (Cognito rotates keys)
//! reloads the JWKS at most once a minute, so tokens with made-up `kid`s
//! cannot turn the function into an HTTP client at their pace.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use tokio::sync::Mutex;

use super::net::{JWKS_MAX_BYTES, Net, Unreachable};

/// The largest token looked at (Cognito's are about 1 KiB; groups add).
pub(crate) const TOKEN_MAX_BYTES: usize = 8 * 1024;
/// How long the JWKS and the client ids are kept.
pub(crate) const CACHE_TTL: Duration = Duration::from_secs(3600);
/// An unknown `kid` reloads the JWKS at most this often.
pub(crate) const JWKS_REFRESH_MIN: Duration = Duration::from_secs(60);
/// Clock skew allowed on `exp` and `nbf`.
pub(crate) const LEEWAY_SECONDS: i64 = 30;
/// The most keys kept from one JWKS.
const JWKS_MAX_KEYS: usize = 16;

/// Who calls: the pool's stable `sub` (what the audit records), the
/// readable user name, and the pool groups the token names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The `sub` claim.
    pub subject: String,
    /// The `username` claim (the `sub` when absent).
    pub username: String,
    /// The `cognito:groups` claim.
    pub groups: BTreeSet<String>,
}

/// Why a token was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The token is not valid: the code says which check (logged only).
    Invalid(&'static str),
    /// The JWKS or the client list could not be had (what, logged only).
    Unavailable(&'static str),
}

#[derive(Debug, Deserialize)]
struct Claims {
    token_use: Option<String>,
    exp: Option<f64>,
    nbf: Option<f64>,
    sub: Option<String>,
    client_id: Option<String>,
    username: Option<String>,
    #[serde(rename = "cognito:groups", default)]
    groups: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct Jwks {
    keys: Vec<Jwk>,
}

#[derive(Debug, Deserialize)]
struct Jwk {
    kid: Option<String>,
    kty: Option<String>,
    n: Option<String>,
    e: Option<String>,
}

struct Loaded<T> {
    value: T,
    at: Instant,
}

/// Where the pool is and what it accepts.
#[derive(Debug, Clone)]
pub(crate) struct PoolFacts {
    pub(crate) issuer: String,
    pub(crate) jwks_url: String,
    pub(crate) cognito_endpoint: String,
    pub(crate) region: String,
    pub(crate) user_pool_id: String,
    pub(crate) client_name: String,
}

pub(crate) struct Verifier {
    facts: PoolFacts,
    net: Net,
    keys: Mutex<Option<Loaded<BTreeMap<String, DecodingKey>>>>,
    clients: Mutex<Option<Loaded<BTreeSet<String>>>>,
    clock_offset: i64,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("issuer", &self.facts.issuer)
            .finish_non_exhaustive()
    }
}

fn now_s(offset: i64) -> f64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    now + offset as f64
}

impl Verifier {
    pub(crate) fn new(facts: PoolFacts, net: Net, clock_offset: i64) -> Self {
        Self {
            facts,
            net,
            keys: Mutex::new(None),
            clients: Mutex::new(None),
            clock_offset,
        }
    }

    pub(crate) async fn verify(&self, token: &str) -> Result<Caller, Refusal> {
        if token.len() > TOKEN_MAX_BYTES {
            return Err(Refusal::Invalid("too_large"));
        }
        let header =
            jsonwebtoken::decode_header(token).map_err(|_| Refusal::Invalid("malformed"))?;
        if header.alg != Algorithm::RS256 {
            return Err(Refusal::Invalid("algorithm"));
        }
        let kid = header.kid.ok_or(Refusal::Invalid("malformed"))?;
        let key = self
            .key(&kid)
            .await?
            .ok_or(Refusal::Invalid("unknown_key"))?;
        let mut validation = Validation::new(Algorithm::RS256);
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        validation.set_issuer(&[self.facts.issuer.as_str()]);
        let claims = match jsonwebtoken::decode::<Claims>(token, &key, &validation) {
            Ok(data) => data.claims,
            Err(e) => {
                use jsonwebtoken::errors::ErrorKind as K;
                return Err(Refusal::Invalid(match e.kind() {
                    K::InvalidSignature => "signature",
                    K::InvalidIssuer | K::MissingRequiredClaim(_) => "issuer",
                    _ => "malformed",
                }));
            }
        };
        if claims.token_use.as_deref() != Some("access") {
            return Err(Refusal::Invalid("token_use"));
        }
        let now = now_s(self.clock_offset);
        let leeway = LEEWAY_SECONDS as f64;
        match claims.exp {
            Some(exp) if exp > now - leeway => {}
            Some(_) => return Err(Refusal::Invalid("expired")),
            None => return Err(Refusal::Invalid("malformed")),
        }
        if claims.nbf.is_some_and(|nbf| nbf > now + leeway) {
            return Err(Refusal::Invalid("not_yet_valid"));
        }
        let subject = claims
            .sub
            .filter(|s| !s.is_empty())
            .ok_or(Refusal::Invalid("subject"))?;
        let client_id = claims.client_id.ok_or(Refusal::Invalid("audience"))?;
        if !self.client_ids().await?.contains(&client_id) {
            return Err(Refusal::Invalid("audience"));
        }
        Ok(Caller {
            username: claims.username.unwrap_or_else(|| subject.clone()),
            subject,
            groups: claims.groups.into_iter().collect(),
        })
    }

    /// The key `kid`: from the cache while fresh; an unknown one reloads
    /// at most once a [`JWKS_REFRESH_MIN`].
    async fn key(&self, kid: &str) -> Result<Option<DecodingKey>, Refusal> {
        let mut keys = self.keys.lock().await;
        let stale = keys.as_ref().is_none_or(|k| k.at.elapsed() >= CACHE_TTL);
        if stale {
            *keys = Some(self.load_keys().await?);
        }
        let found = keys.as_ref().and_then(|k| k.value.get(kid).cloned());
        if found.is_none()
            && keys
                .as_ref()
                .is_some_and(|k| k.at.elapsed() >= JWKS_REFRESH_MIN)
        {
            *keys = Some(self.load_keys().await?);
            return Ok(keys.as_ref().and_then(|k| k.value.get(kid).cloned()));
        }
        Ok(found)
    }

    async fn load_keys(&self) -> Result<Loaded<BTreeMap<String, DecodingKey>>, Refusal> {
        let unavailable = |_| Refusal::Unavailable("jwks");
        let body = self
            .net
            .get(&self.facts.jwks_url, JWKS_MAX_BYTES)
            .await
            .map_err(unavailable)?;
        let jwks: Jwks = serde_json::from_slice(&body).map_err(|_| Refusal::Unavailable("jwks"))?;
        let value: BTreeMap<String, DecodingKey> = jwks
            .keys
            .into_iter()
            .filter(|k| k.kty.as_deref() == Some("RSA"))
            .filter_map(|k| {
                let key =
                    DecodingKey::from_rsa_components(k.n.as_deref()?, k.e.as_deref()?).ok()?;
                Some((k.kid?, key))
            })
            .take(JWKS_MAX_KEYS)
            .collect();
        Ok(Loaded {
            value,
            at: Instant::now(),
        })
    }

    /// The ids of the SPA's client (cached [`CACHE_TTL`]).
    pub(crate) async fn client_ids(&self) -> Result<BTreeSet<String>, Refusal> {
        let mut clients = self.clients.lock().await;
        if let Some(loaded) = clients.as_ref()
            && loaded.at.elapsed() < CACHE_TTL
        {
            return Ok(loaded.value.clone());
        }
        let f = &self.facts;
        let value = self
            .net
            .client_ids(
                &f.cognito_endpoint,
                &f.region,
                &f.user_pool_id,
                &f.client_name,
            )
            .await
            .map_err(|Unreachable(_)| Refusal::Unavailable("clients"))?;
        *clients = Some(Loaded {
            value: value.clone(),
            at: Instant::now(),
        });
        Ok(value)
    }
}
