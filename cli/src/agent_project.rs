//! The project file of `rayito agent run --file` (`rayito-agent.toml` or
//! `.json`): which image, which runtime, which model behind which gateway.
//!
//! ```toml
//! template = "rayito-agent"        # the image (default rayito-agent)
//! runtime = "opencode"             # a built-in runtime (default opencode)
//! instructions = "Answer briefly." # optional: the agent's AGENTS.md
//!
//! [model]
//! provider = "openai-compatible"   # bedrock, anthropic, openai-compatible, openai, google, azure
//! id = "gpt-4o-mini"
//! base_path = "/v1"                # openai-compatible only
//! region = "us-east-1"             # bedrock only
//!
//! [gateway]                        # the model's secret gateway, as a preset
//! secret = "my-model-key"          # the Secrets Manager secret holding the key
//! upstream = "https://llm.example.com"  # openai-compatible and litellm only
//! ```
//!
//! Never a key here: the gateway's secret is a name; its value stays in
//! Secrets Manager and in the sandbox's gateway, never in the sandbox.

use std::path::Path;

use rayito::SecretGateway;
use rayito::agent::{AgentModel, AgentSpec, ModelProvider, gateways};
use serde::Deserialize;

/// The gateway's name in the sandbox.
pub(crate) const GATEWAY_NAME: &str = "model";
/// The default project file.
pub(crate) const DEFAULT_FILE: &str = "rayito-agent.toml";

/// A project file, as read.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Project {
    #[serde(default)]
    pub(crate) template: Option<String>,
    #[serde(default)]
    runtime: Option<String>,
    #[serde(default)]
    instructions: Option<String>,
    model: Model,
    gateway: Gateway,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Model {
    provider: String,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    base_path: Option<String>,
    #[serde(default)]
    region: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Gateway {
    secret: String,
    #[serde(default)]
    upstream: Option<String>,
    #[serde(default)]
    resource: Option<String>,
}

/// Reads the project at `path` (TOML unless it ends in `.json`).
pub(crate) fn read(path: &Path) -> Result<Project, String> {
    let text = std::fs::read_to_string(path).map_err(|err| {
        format!(
            "cannot read the agent project {}: {} (pass --file, or write {DEFAULT_FILE}; docs/agent.md)",
            path.display(),
            err.kind()
        )
    })?;
    if path.extension().is_some_and(|e| e == "json") {
        serde_json::from_str(&text)
            .map_err(|err| format!("invalid agent project {}: {err}", path.display()))
    } else {
        // Values are never echoed: a misplaced key must not reach a log.
        toml::from_str(&text).map_err(|err| {
            let (line, what) = crate::template::toml_position(&text, &err);
            format!("invalid agent project {}{line}: {what}", path.display())
        })
    }
}

fn provider(name: &str) -> Result<ModelProvider, String> {
    Ok(match name {
        "bedrock" => ModelProvider::Bedrock,
        "anthropic" => ModelProvider::Anthropic,
        "openai-compatible" => ModelProvider::OpenaiCompatible,
        "openai" => ModelProvider::Openai,
        "google" => ModelProvider::Google,
        "azure" => ModelProvider::Azure,
        other => {
            return Err(format!(
                "invalid model.provider {other:?}: one of bedrock, anthropic, openai-compatible, openai, google, azure"
            ));
        }
    })
}

impl Project {
    /// The run's spec (`model` overrides the file's model id).
    pub(crate) fn spec(&self, model_id: Option<&str>) -> Result<AgentSpec, String> {
        let mut model = AgentModel::new(provider(&self.model.provider)?, GATEWAY_NAME);
        if let Some(id) = model_id.or(self.model.id.as_deref()) {
            model = model.id(id);
        }
        if let Some(base_path) = &self.model.base_path {
            model = model.base_path(base_path);
        }
        if let Some(region) = &self.model.region {
            model = model.region(region);
        }
        let mut spec = AgentSpec::new(model);
        if let Some(runtime) = &self.runtime {
            spec = spec.runtime(rayito::agent::AgentRuntime::Builtin(runtime.clone()));
        }
        if let Some(instructions) = &self.instructions {
            spec = spec.instructions(instructions);
        }
        Ok(spec)
    }

    /// The model's gateway: the provider's preset.
    pub(crate) fn gateway(&self) -> Result<SecretGateway, String> {
        let secret = self.gateway.secret.as_str();
        let need = |field: &Option<String>, name: &str| {
            field.clone().ok_or_else(|| {
                format!(
                    "gateway.{name} is required with model.provider {}",
                    self.model.provider
                )
            })
        };
        let gateway = match provider(&self.model.provider)? {
            ModelProvider::Bedrock => {
                let region = need(&self.model.region, "region (model.region)")?;
                let models: Vec<&str> = self.model.id.iter().map(String::as_str).collect();
                gateways::bedrock(secret, &region, &models)
            }
            ModelProvider::Anthropic => Ok(gateways::anthropic(secret)),
            ModelProvider::Openai => Ok(gateways::openai(secret)),
            ModelProvider::Google => {
                let models: Vec<&str> = self.model.id.iter().map(String::as_str).collect();
                gateways::gemini(secret, &models)
            }
            ModelProvider::Azure => {
                let resource = need(&self.gateway.resource, "resource")?;
                gateways::azure_openai(secret, &resource)
            }
            _ => {
                let upstream = need(&self.gateway.upstream, "upstream")?;
                gateways::openai_compatible(
                    secret,
                    &upstream,
                    self.model.base_path.as_deref().unwrap_or(""),
                )
            }
        };
        gateway.map_err(|err| err.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(text: &str) -> Result<Project, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rayito-agent.toml");
        std::fs::write(&path, text).unwrap();
        read(&path)
    }

    /// The module's documented file is read whole.
    #[test]
    fn the_documented_project_file_is_read() {
        let doc = include_str!("agent_project.rs");
        let block: String = doc
            .lines()
            .skip_while(|l| *l != "//! ```toml")
            .skip(1)
            .take_while(|l| *l != "//! ```")
            .map(|l| format!("{}\n", l.trim_start_matches("//!").trim_start()))
            .collect();
        let project = project(&block).expect("the documented file");
        assert_eq!(project.template.as_deref(), Some("rayito-agent"));
        let _ = project.spec(None).expect("a spec");
        let _ = project.gateway().expect("a gateway");
    }

    #[test]
    fn a_bad_file_is_refused_by_line_without_its_values() {
        let err = project("[model]\nprovider = \"sk-secret-value\"\n[gateway]\nsecret = \"k\"\n")
            .unwrap()
            .spec(None)
            .unwrap_err();
        assert!(err.starts_with("invalid model.provider"), "{err}");
        let err = project("[model]\nprovider = 1\n").unwrap_err();
        assert!(err.contains("line 2"), "{err}");
        let err = project("[model]\nprovider = \"openai-compatible\"\n[gateway]\nsecret = \"k\"\n")
            .unwrap()
            .gateway()
            .unwrap_err();
        assert_eq!(
            err,
            "gateway.upstream is required with model.provider openai-compatible"
        );
    }
}
