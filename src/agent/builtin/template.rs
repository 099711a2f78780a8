//! `AgentTemplate`: an image with the agent runtimes installed, built
//! through the template pipeline ([`Templates::build`]), with the
//! `rayito.agent-template/1` manifest at `/opt/agents/rayito-agent.json`.
//!
//! Each runtime's install command runs as root in the build, so the
//! runtime lands in `/opt/agents`, root's and read-only to the sandbox's
//! user (who cannot replace the binary an agent run executes).

use crate::error::SandboxError;
use crate::template::{BuildInfo, BuildOptions, Template, Templates};

use super::BuiltinRuntime;

/// The image's name unless told otherwise.
pub const AGENT_TEMPLATE_NAME: &str = "rayito-agent";
/// The base image unless told otherwise: the variant with capabilities,
/// where the agent can deny egress (`allow_internet_access(false)`).
pub const AGENT_TEMPLATE_BASE: &str = "rayito-base-caps";
/// The least memory of an agent image (MiB): OpenCode's measured RSS.
pub const AGENT_MIN_MEMORY_MIB: u32 = 2048;
/// Where the manifest is baked.
pub const AGENT_TEMPLATE_MANIFEST_PATH: &str = "/opt/agents/rayito-agent.json";
/// The manifest's schema.
pub const AGENT_TEMPLATE_MANIFEST_SCHEMA: &str = "rayito.agent-template/1";
/// The protocol the runtimes' adapters speak.
const PROTOCOL_VERSION: u32 = 1;

/// An image with agent runtimes: `AgentTemplate::new()`, the setters, then
/// [`build`](AgentTemplate::build).
///
/// The reference's template also installs `deepagents` by default and can
/// bake a prefetch daemon and the user's app; here the runtimes are the
/// built ones (`opencode`), and a pool's warm-up
/// ([`agent_pool_warmup`](super::agent_pool_warmup)) does the prefetch's
/// job.
///
/// ```no_run
/// use rayito::agent::AgentTemplate;
/// use rayito::template::BuildOptions;
///
/// # async fn f(client: rayito::Client) -> Result<(), rayito::SandboxError> {
/// let info = AgentTemplate::new()
///     .build(&client.templates(), BuildOptions::default())
///     .await?;
/// println!("RAYITO_TEMPLATE={}", info.template_id);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct AgentTemplate {
    name: String,
    base: String,
    base_version: Option<u32>,
    runtimes: Vec<String>,
    memory_mib: u32,
}

impl Default for AgentTemplate {
    fn default() -> Self {
        Self::new()
    }
}

impl AgentTemplate {
    /// `rayito-agent` over `rayito-base-caps` with OpenCode, 2048 MiB.
    pub fn new() -> Self {
        Self {
            name: AGENT_TEMPLATE_NAME.to_owned(),
            base: AGENT_TEMPLATE_BASE.to_owned(),
            base_version: None,
            runtimes: vec![super::opencode::NAME.to_owned()],
            memory_mib: AGENT_MIN_MEMORY_MIB,
        }
    }

    /// The image's name (default `rayito-agent`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The base image (default `rayito-base-caps`).
    pub fn base(mut self, base: impl Into<String>) -> Self {
        self.base = base.into();
        self
    }

    /// The base image's version (default: its newest launchable one).
    pub fn base_version(mut self, version: u32) -> Self {
        self.base_version = Some(version);
        self
    }

    /// The runtimes to install, by name (default `["opencode"]`).
    pub fn runtimes<S: Into<String>>(mut self, runtimes: impl IntoIterator<Item = S>) -> Self {
        self.runtimes = runtimes.into_iter().map(Into::into).collect();
        self
    }

    /// The image's memory in MiB (default and least 2048).
    pub fn memory_mib(mut self, memory_mib: u32) -> Self {
        self.memory_mib = memory_mib;
        self
    }

    /// The image's name.
    pub fn image_name(&self) -> &str {
        &self.name
    }

    /// Checks the template whole, before any call.
    ///
    /// # Errors
    /// `InvalidArgument` for memory below 2048 MiB, no runtime, a repeated
    /// one, a blank name or base, or a name that is no built-in runtime;
    /// `Unimplemented` for a runtime not built in this release.
    pub fn check(&self) -> Result<(), SandboxError> {
        self.installables().map(drop)
    }

    fn installables(&self) -> Result<Vec<BuiltinRuntime>, SandboxError> {
        if self.memory_mib < AGENT_MIN_MEMORY_MIB {
            return Err(SandboxError::invalid_argument(
                "memory_mib",
                format!(
                    "an agent image needs at least {AGENT_MIN_MEMORY_MIB} MiB, got {}",
                    self.memory_mib
                ),
            ));
        }
        if self.name.trim().is_empty() || self.base.trim().is_empty() {
            return Err(SandboxError::invalid_argument(
                "name",
                "the template's name and base must not be blank",
            ));
        }
        if self.runtimes.is_empty() {
            return Err(SandboxError::invalid_argument(
                "runtimes",
                "an agent template needs at least one runtime",
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        let mut runtimes = Vec::new();
        for name in &self.runtimes {
            if !seen.insert(name.as_str()) {
                return Err(SandboxError::invalid_argument(
                    "runtimes",
                    format!("runtime {name} is listed twice"),
                ));
            }
            runtimes.push(super::resolve(name)?);
        }
        Ok(runtimes)
    }

    /// The `rayito.agent-template/1` manifest baked at
    /// `/opt/agents/rayito-agent.json`: schema, protocol, and each
    /// runtime's version, source and paths.
    ///
    /// # Errors
    /// As [`check`](AgentTemplate::check).
    pub fn manifest(&self) -> Result<serde_json::Value, SandboxError> {
        let runtimes = self.installables()?;
        let entries: serde_json::Map<String, serde_json::Value> = runtimes
            .iter()
            .map(|r| (r.name.clone(), super::manifest_entry(r)))
            .collect();
        Ok(serde_json::json!({
            "schema": AGENT_TEMPLATE_MANIFEST_SCHEMA,
            "protocol": PROTOCOL_VERSION,
            "runtimes": entries,
        }))
    }

    /// The equivalent [`Template`] (pure: reads and writes nothing).
    ///
    /// # Errors
    /// As [`check`](AgentTemplate::check).
    pub fn to_template(&self) -> Result<Template, SandboxError> {
        let runtimes = self.installables()?;
        let mut template = Template::from_base_image(&self.base);
        if let Some(version) = self.base_version {
            template = template.base_image_version(version);
        }
        template = template.set_user("root");
        for runtime in &runtimes {
            for command in &runtime.install {
                template = template.run_cmd(command.clone());
            }
        }
        // The manifest as a printf of its JSON: no build context needed.
        // serde_json escapes no single quote, so the text is checked.
        let manifest = serde_json::to_string(&self.manifest()?).unwrap_or_default();
        if manifest.contains('\'') {
            return Err(SandboxError::invalid_argument(
                "runtimes",
                "a runtime's manifest entry contains a single quote",
            ));
        }
        template = template.run_cmd(format!(
            "mkdir -p /opt/agents && printf '%s\\n' '{manifest}' > {AGENT_TEMPLATE_MANIFEST_PATH} \
             && chown -R root:root /opt/agents && chmod -R a+rX,go-w /opt/agents"
        ));
        Ok(template)
    }

    /// Builds the image with [`Templates::build`] (`options.memory_mib`
    /// is the template's own); waits until it is launchable.
    ///
    /// # Errors
    /// As [`check`](AgentTemplate::check), then as
    /// [`Templates::build`].
    pub async fn build(
        &self,
        templates: &Templates,
        options: BuildOptions,
    ) -> Result<BuildInfo, SandboxError> {
        let template = self.to_template()?;
        let options = BuildOptions {
            memory_mib: self.memory_mib,
            ..options
        };
        templates.build(&template, &self.name, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_template_installs_opencode_and_bakes_the_manifest() {
        let template = AgentTemplate::new();
        let manifest = template.manifest().unwrap();
        assert_eq!(manifest["schema"], "rayito.agent-template/1");
        assert_eq!(manifest["protocol"], 1);
        assert_eq!(manifest["runtimes"]["opencode"]["version"], "1.18.33");
        let dockerfile = template.to_template().unwrap().to_dockerfile().unwrap();
        assert!(dockerfile.contains("opencode-ai@1.18.33"), "{dockerfile}");
        assert!(
            dockerfile.contains("> /opt/agents/rayito-agent.json"),
            "{dockerfile}"
        );
    }

    #[test]
    fn what_a_template_is_given_is_checked_before_any_call() {
        for (template, text) in [
            (
                AgentTemplate::new().memory_mib(1024),
                "invalid memory_mib: an agent image needs at least 2048 MiB, got 1024",
            ),
            (
                AgentTemplate::new().runtimes(Vec::<String>::new()),
                "invalid runtimes: an agent template needs at least one runtime",
            ),
            (
                AgentTemplate::new().runtimes(["opencode", "opencode"]),
                "invalid runtimes: runtime opencode is listed twice",
            ),
            (
                AgentTemplate::new().name(" "),
                "invalid name: the template's name and base must not be blank",
            ),
        ] {
            assert_eq!(template.check().unwrap_err().to_string(), text);
        }
        let err = AgentTemplate::new()
            .runtimes(["strands"])
            .check()
            .unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::Unimplemented);
    }
}
