//! Ready-made [`SecretGateway`]s for an agent's model: each has the
//! provider's upstream, the header that carries the key and the allow rules
//! of the calls a runtime makes (all `POST`, the agent's default rate). Only
//! Bedrock and Gemini carry the model in the path, so only their gateways
//! limit the models; for the OpenAI-style APIs the model travels in the
//! body, which the gateway forwards unread: there the spend cap is the
//! provider's (a project budget, a key's credit limit). Building one makes
//! no call; the secret is read when the sandbox is created.
//!
//! The secret holds the whole header value: `Bearer <key>` for the
//! `authorization` presets, the bare key for `x-api-key`, `api-key` and
//! `x-goog-api-key`.

use crate::SecretGateway;
use crate::error::SandboxError;
use crate::secrets::SecretRef;

use super::spec::{check_base_path, is_region};

/// Bedrock's runtime endpoint (`{region}` replaced).
pub const BEDROCK_UPSTREAM: &str = "https://bedrock-runtime.{region}.amazonaws.com";
/// The two Bedrock operations runtimes call, per model.
pub const BEDROCK_OPERATIONS: [&str; 2] = ["converse-stream", "converse"];
/// Anthropic's API.
pub const ANTHROPIC_UPSTREAM: &str = "https://api.anthropic.com";
/// OpenAI's API.
pub const OPENAI_UPSTREAM: &str = "https://api.openai.com";
/// xAI's API.
pub const XAI_UPSTREAM: &str = "https://api.x.ai";
/// Google's Gemini API.
pub const GEMINI_UPSTREAM: &str = "https://generativelanguage.googleapis.com";
/// The two Gemini operations, per model.
pub const GEMINI_OPERATIONS: [&str; 2] = ["streamGenerateContent", "generateContent"];
/// Azure OpenAI (`{resource}` replaced).
pub const AZURE_OPENAI_UPSTREAM: &str = "https://{resource}.openai.azure.com";
/// OpenRouter's API.
pub const OPENROUTER_UPSTREAM: &str = "https://openrouter.ai";
/// Groq's API.
pub const GROQ_UPSTREAM: &str = "https://api.groq.com";
/// Mistral's API.
pub const MISTRAL_UPSTREAM: &str = "https://api.mistral.ai";
/// DeepSeek's API.
pub const DEEPSEEK_UPSTREAM: &str = "https://api.deepseek.com";
/// LiteLLM's default base path.
pub const LITELLM_BASE_PATH: &str = "/v1";

const POST: &str = "POST";

/// Bedrock (`Converse`, `ConverseStream`) in `region` for `models` (model
/// or inference profile ids, such as
/// `us.anthropic.claude-haiku-4-5-20251001-v1:0`; no ARNs). `secret` holds
/// `Bearer <Bedrock API key>`.
///
/// # Errors
/// `InvalidArgument` for a bad region, an empty model list, a bad model id
/// or an ARN.
pub fn bedrock(
    secret: impl Into<SecretRef>,
    region: &str,
    models: &[&str],
) -> Result<SecretGateway, SandboxError> {
    if !is_region(region) {
        return Err(refuse("region", BEDROCK_REGION));
    }
    let models = model_list(models, "bedrock")?;
    if models.iter().any(|m| m.contains('/')) {
        return Err(refuse("models", BEDROCK_ARN));
    }
    let mut gateway = SecretGateway::new(BEDROCK_UPSTREAM.replace("{region}", region))
        .header("authorization", secret);
    for model in &models {
        for operation in BEDROCK_OPERATIONS {
            gateway = gateway.allow(POST, format!("/model/{}/{operation}", encode(model)));
        }
    }
    Ok(gateway)
}

/// Anthropic's Messages API (`POST /v1/messages`); `secret` holds the key
/// (`x-api-key`).
pub fn anthropic(secret: impl Into<SecretRef>) -> SecretGateway {
    SecretGateway::new(ANTHROPIC_UPSTREAM)
        .header("x-api-key", secret)
        .allow(POST, "/v1/messages")
}

/// OpenAI (`POST /v1/responses`, `POST /v1/chat/completions`); `secret`
/// holds `Bearer <key>`.
pub fn openai(secret: impl Into<SecretRef>) -> SecretGateway {
    openai_style(
        SecretGateway::new(OPENAI_UPSTREAM),
        secret,
        "authorization",
        "/v1",
    )
}

/// xAI, spoken to as OpenAI (`POST /v1/responses`, `/v1/chat/completions`);
/// `secret` holds `Bearer <key>`.
pub fn xai(secret: impl Into<SecretRef>) -> SecretGateway {
    openai_style(
        SecretGateway::new(XAI_UPSTREAM),
        secret,
        "authorization",
        "/v1",
    )
}

/// Gemini (AI Studio) for `models` (`gemini-2.5-flash`, without `models/`);
/// `secret` holds the key (`x-goog-api-key`).
///
/// # Errors
/// `InvalidArgument` for an empty list, a bad id, or a `/` in an id.
pub fn gemini(
    secret: impl Into<SecretRef>,
    models: &[&str],
) -> Result<SecretGateway, SandboxError> {
    let models = model_list(models, "gemini")?;
    if models.iter().any(|m| m.contains('/')) {
        return Err(refuse("models", GEMINI_SLASH));
    }
    let mut gateway = SecretGateway::new(GEMINI_UPSTREAM).header("x-goog-api-key", secret);
    for model in &models {
        for operation in GEMINI_OPERATIONS {
            gateway = gateway.allow(POST, format!("/v1beta/models/{model}:{operation}"));
        }
    }
    Ok(gateway)
}

/// Azure OpenAI v1 of `resource` (`https://<resource>.openai.azure.com`,
/// `POST /openai/v1/responses` and `/openai/v1/chat/completions`); `secret`
/// holds the resource's key (`api-key`, no `Bearer`).
///
/// # Errors
/// `InvalidArgument` when `resource` is not a DNS label.
pub fn azure_openai(
    secret: impl Into<SecretRef>,
    resource: &str,
) -> Result<SecretGateway, SandboxError> {
    let b = resource.as_bytes();
    let label = (1..=63).contains(&b.len())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-';
    if !label {
        return Err(refuse("resource", AZURE_RESOURCE));
    }
    Ok(openai_style(
        SecretGateway::new(AZURE_OPENAI_UPSTREAM.replace("{resource}", resource)),
        secret,
        "api-key",
        "/openai/v1",
    ))
}

/// OpenRouter (`POST /api/v1/chat/completions`); `secret` holds `Bearer <key>`.
pub fn openrouter(secret: impl Into<SecretRef>) -> SecretGateway {
    chat(OPENROUTER_UPSTREAM, secret, "/api/v1")
}

/// Groq (`POST /openai/v1/chat/completions`); `secret` holds `Bearer <key>`.
pub fn groq(secret: impl Into<SecretRef>) -> SecretGateway {
    chat(GROQ_UPSTREAM, secret, "/openai/v1")
}

/// Mistral (`POST /v1/chat/completions`); `secret` holds `Bearer <key>`.
pub fn mistral(secret: impl Into<SecretRef>) -> SecretGateway {
    chat(MISTRAL_UPSTREAM, secret, "/v1")
}

/// DeepSeek (`POST /chat/completions`); `secret` holds `Bearer <key>`.
pub fn deepseek(secret: impl Into<SecretRef>) -> SecretGateway {
    chat(DEEPSEEK_UPSTREAM, secret, "")
}

/// Any OpenAI-compatible API at `upstream` (`https://host`), `POST
/// <base_path>/chat/completions`; `base_path` is `AgentModel::base_path`'s.
///
/// # Errors
/// `InvalidArgument` for a bad base path (the upstream is checked with the
/// sandbox's gateways).
pub fn openai_compatible(
    secret: impl Into<SecretRef>,
    upstream: &str,
    base_path: &str,
) -> Result<SecretGateway, SandboxError> {
    check_base_path(base_path, "openai_compatible(base_path)")?;
    Ok(chat(upstream, secret, base_path))
}

/// Your LiteLLM proxy at `upstream` (`https://host[:port]`, never loopback,
/// link-local or `0.x`), `POST <base_path>/responses` and
/// `<base_path>/chat/completions` (`base_path` [`LITELLM_BASE_PATH`] by
/// default); `secret` holds `Bearer <virtual key>`.
///
/// # Errors
/// `InvalidArgument` for a bad upstream or base path.
pub fn litellm(
    secret: impl Into<SecretRef>,
    upstream: &str,
    base_path: Option<&str>,
) -> Result<SecretGateway, SandboxError> {
    let base_path = base_path.unwrap_or(LITELLM_BASE_PATH);
    check_base_path(base_path, "litellm(base_path)")?;
    check_proxy_upstream(upstream)?;
    Ok(openai_style(
        SecretGateway::new(upstream),
        secret,
        "authorization",
        base_path,
    ))
}

fn openai_style(
    gateway: SecretGateway,
    secret: impl Into<SecretRef>,
    header: &str,
    base_path: &str,
) -> SecretGateway {
    gateway
        .header(header, secret)
        .allow(POST, format!("{base_path}/responses"))
        .allow(POST, format!("{base_path}/chat/completions"))
}

fn chat(upstream: &str, secret: impl Into<SecretRef>, base_path: &str) -> SecretGateway {
    SecretGateway::new(upstream)
        .header("authorization", secret)
        .allow(POST, format!("{base_path}/chat/completions"))
}

fn refuse(argument: &'static str, message: &str) -> SandboxError {
    SandboxError::invalid_argument(argument, message)
}

fn model_list(models: &[&str], preset: &str) -> Result<Vec<String>, SandboxError> {
    if models.is_empty() {
        return Err(refuse("models", &MODELS_EMPTY.replace("{preset}", preset)));
    }
    let mut out: Vec<String> = Vec::new();
    for model in models {
        let mut chars = model.chars();
        let ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
            && model.len() <= super::spec::MAX_MODEL_ID_CHARS
            && chars.all(|c| c.is_ascii_alphanumeric() || "._:/@+-".contains(c));
        if !ok {
            return Err(refuse("models", &MODEL_ID.replace("{preset}", preset)));
        }
        if !out.iter().any(|m| m == model) {
            out.push((*model).to_owned());
        }
    }
    Ok(out)
}

/// Percent-encodes everything but unreserved characters (`:` becomes
/// `%3A`), as Bedrock's clients send the model id.
fn encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn check_proxy_upstream(upstream: &str) -> Result<(), SandboxError> {
    let Some(rest) = upstream.strip_prefix("https://") else {
        return Err(refuse("upstream", LITELLM_UPSTREAM));
    };
    let (host, port) = match rest.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (rest, None),
    };
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        (1..=63).contains(&b.len())
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
            && b[0] != b'-'
            && b[b.len() - 1] != b'-'
    };
    if host.is_empty() || !host.split('.').all(label_ok) {
        return Err(refuse("upstream", LITELLM_UPSTREAM));
    }
    let port_ok = port.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 5
            && p.bytes().all(|b| b.is_ascii_digit())
            && p.parse::<u32>().is_ok_and(|n| (1..=65_535).contains(&n))
    });
    if port.is_some_and(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit())) {
        return Err(refuse("upstream", LITELLM_UPSTREAM));
    }
    let lower = host.to_ascii_lowercase();
    let reserved_ip = lower.parse::<std::net::Ipv4Addr>().is_ok_and(|ip| {
        let o = ip.octets();
        o[0] == 0 || o[0] == 127 || (o[0] == 169 && o[1] == 254)
    });
    let all_digits = lower
        .split('.')
        .all(|l| l.bytes().all(|b| b.is_ascii_digit()));
    let bad_ip = all_digits && lower.parse::<std::net::Ipv4Addr>().is_err();
    if lower == "localhost" || lower.ends_with(".localhost") || reserved_ip || bad_ip || !port_ok {
        return Err(refuse("upstream", LITELLM_LOOPBACK));
    }
    Ok(())
}

pub(crate) const BEDROCK_REGION: &str =
    "gateways::bedrock: region must be an AWS region such as us-east-1";
pub(crate) const BEDROCK_ARN: &str = "gateways::bedrock: models may not be ARNs (the gateway refuses an encoded '/' in a path); pass the model or inference profile id";
pub(crate) const GEMINI_SLASH: &str = "gateways::gemini: a model id may not contain '/'; pass the id (gemini-2.5-flash) without the models/ prefix";
pub(crate) const AZURE_RESOURCE: &str = "gateways::azure_openai: resource must be a DNS label of 1 to 63 characters [a-z0-9-], no '-' at either end";
pub(crate) const MODELS_EMPTY: &str =
    "gateways::{preset}: models must be a non-empty list of model ids";
pub(crate) const MODEL_ID: &str = "gateways::{preset}: a model id is 1 to 256 characters [A-Za-z0-9._:/@+-], starting with a letter or digit";
pub(crate) const LITELLM_UPSTREAM: &str =
    "gateways::litellm: upstream must be https://host[:port] with a DNS name or an IPv4 address";
pub(crate) const LITELLM_LOOPBACK: &str = "gateways::litellm: upstream may not point at loopback, link-local or 0.0.0.0/8, nor a port outside 1 to 65535";
