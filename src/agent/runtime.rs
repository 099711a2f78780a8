//! Which program runs the agent: a built-in runtime by name
//! (src/agent/builtin/), a [`CustomRuntime`] (your command speaking
//! protocol v1 or plain text) or an [`HttpApp`] (your HTTP server, started,
//! health-checked and invoked by a small driver in the sandbox).

use std::collections::BTreeMap;

use crate::error::SandboxError;

/// The built-in runtimes' names (`AgentRuntime::Builtin`).
pub const BUILTIN_RUNTIMES: [&str; 5] =
    ["opencode", "deepagents", "langgraph", "strands", "hermes"];
/// The default runtime.
pub const DEFAULT_RUNTIME: &str = "opencode";

/// The program that runs the agent.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AgentRuntime {
    /// A built-in runtime by name: `opencode` (the default), `deepagents`,
    /// `langgraph`, `strands`, `hermes`.
    Builtin(String),
    /// Your own command.
    Custom(CustomRuntime),
    /// Your own HTTP app.
    Http(HttpApp),
}

impl Default for AgentRuntime {
    fn default() -> Self {
        Self::Builtin(DEFAULT_RUNTIME.to_owned())
    }
}

impl From<CustomRuntime> for AgentRuntime {
    fn from(runtime: CustomRuntime) -> Self {
        Self::Custom(runtime)
    }
}

impl From<HttpApp> for AgentRuntime {
    fn from(app: HttpApp) -> Self {
        Self::Http(app)
    }
}

impl From<&str> for AgentRuntime {
    fn from(name: &str) -> Self {
        Self::Builtin(name.to_owned())
    }
}

impl AgentRuntime {
    /// The name spans and events use: the built-in's, `custom` or `http-app`.
    pub fn name(&self) -> &str {
        match self {
            Self::Builtin(name) => name,
            Self::Custom(_) => "custom",
            Self::Http(_) => "http-app",
        }
    }

    pub(crate) fn check(&self) -> Result<(), SandboxError> {
        match self {
            Self::Builtin(name) if name == "custom" => {
                Err(SandboxError::invalid_argument("runtime", CUSTOM_BY_NAME))
            }
            Self::Builtin(name) if !BUILTIN_RUNTIMES.contains(&name.as_str()) => {
                Err(SandboxError::invalid_argument(
                    "runtime",
                    UNKNOWN_RUNTIME.replace("{name}", &name.escape_debug().to_string()),
                ))
            }
            Self::Builtin(_) => Ok(()),
            Self::Custom(custom) => custom.validate(),
            Self::Http(app) => app.check(),
        }
    }
}

/// What a [`CustomRuntime`]'s command speaks on stdout.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CustomProtocol {
    /// Protocol v1 JSON lines (docs/agent.md); the run request is one JSON
    /// line on stdin.
    #[default]
    RayitoV1,
    /// Plain text: the prompt arrives as is on stdin (the session id in
    /// `RAYITO_SESSION_ID`, the model in `RAYITO_MODEL`, reasoning in
    /// `RAYITO_REASONING`); everything written to stdout is the answer.
    Text,
}

/// Your own agent program: a command run in the sandbox (`bash -l -c` of
/// the argv, quoted) or a Python function (`entrypoint`). The `install`
/// commands run when its `check` fails, by `prepare()` and by a pool's
/// warm-up ([`agent_pool_warmup`](super::agent_pool_warmup)); a run itself
/// installs nothing (it fails `runtime_missing` when the check fails).
/// The model reaches it through the gateway: `RAYITO_MODEL_BASE_URL`,
/// `RAYITO_MODEL_PROVIDER`, `RAYITO_MODEL_ID`, and `RAYITO_MODEL_API_KEY`
/// holding a placeholder (the real key stays in the gateway).
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct CustomRuntime {
    /// The argv; empty with an entrypoint.
    pub(crate) command: Vec<String>,
    /// `module:function`, run by the SDK's driver (src/agent/entrypoint_driver.py).
    pub(crate) entrypoint: Option<String>,
    /// The interpreter of an entrypoint (`python3`).
    pub(crate) python: Option<String>,
    pub(crate) protocol: CustomProtocol,
    pub(crate) check: Option<String>,
    pub(crate) install: Vec<String>,
    pub(crate) files: Vec<(String, Vec<u8>, u32)>,
    pub(crate) envs: BTreeMap<String, String>,
}

/// Where the entrypoint driver is written in the sandbox.
pub(crate) const ENTRYPOINT_DRIVER_PATH: &str = "/home/user/.rayito/agent/entrypoint_driver.py";
/// The entrypoint driver (src/agent/entrypoint_driver.py).
pub(crate) const ENTRYPOINT_DRIVER: &[u8] = include_bytes!("entrypoint_driver.py");
/// The interpreter of an entrypoint without `python()`.
pub(crate) const DEFAULT_PYTHON: &str = "python3";

impl CustomRuntime {
    /// Runs `command` (an argv: non-empty strings, no NUL).
    pub fn command<I, S>(command: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            command: command.into_iter().map(Into::into).collect(),
            entrypoint: None,
            python: None,
            protocol: CustomProtocol::default(),
            check: None,
            install: Vec::new(),
            files: Vec::new(),
            envs: BTreeMap::new(),
        }
    }

    /// Runs the Python function `entrypoint` (`"package.module:function"`,
    /// imported from the run's workdir, then `RAYITO_AGENT_APP_DIR` when
    /// set) through the SDK's driver, which speaks protocol v1 for it. The
    /// function gets one dict, `{"prompt", "session_id", "model",
    /// "reasoning"}` (`model` the model's id or `None`), and returns the
    /// answer's text, an iterable (or async iterable) of text pieces (each
    /// a `text_delta` event as it comes), or a dict with `text` and
    /// optionally `usage` (`input`, `output`, `reasoning`, `cache_read`,
    /// `cache_write`); it may be `async`. Its prints go to stderr. An
    /// exception ends the run `runtime_error` (`model_error` when raised by
    /// `openai`, `anthropic`, `httpx`, `google`, `boto3` or `botocore`),
    /// the exception's class name as `detail_code`, never its message.
    /// Without a [`check`](Self::check), the check is that the interpreter
    /// exists.
    pub fn entrypoint(entrypoint: impl Into<String>) -> Self {
        Self {
            entrypoint: Some(entrypoint.into()),
            ..Self::command(Vec::<String>::new())
        }
    }

    /// The Python interpreter of an [`entrypoint`](Self::entrypoint)
    /// (`python3`; a venv's `python`, say).
    pub fn python(mut self, interpreter: impl Into<String>) -> Self {
        self.python = Some(interpreter.into());
        self
    }

    /// What the command speaks (protocol v1 by default; an entrypoint's
    /// driver always speaks protocol v1).
    pub fn protocol(mut self, protocol: CustomProtocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// A shell command that exits 0 iff the runtime is installed; when it
    /// fails, the `install` commands run (by `prepare()` and by a pool's
    /// warm-up) and, without them, the run fails `runtime_missing`.
    pub fn check(mut self, shell: impl Into<String>) -> Self {
        self.check = Some(shell.into());
        self
    }

    /// A shell command that installs the runtime (in order, each must exit 0).
    pub fn install(mut self, shell: impl Into<String>) -> Self {
        self.install.push(shell.into());
        self
    }

    /// A file written into the sandbox before the first run when it is
    /// missing or different (`path` absolute, `mode` such as 0o755).
    pub fn file(mut self, path: impl Into<String>, content: impl Into<Vec<u8>>, mode: u32) -> Self {
        self.files.push((path.into(), content.into(), mode));
        self
    }

    /// An environment variable of the command (never a secret).
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.envs.insert(name.into(), value.into());
        self
    }

    fn validate(&self) -> Result<(), SandboxError> {
        let refuse = |m: &str| Err(SandboxError::invalid_argument("runtime", m));
        if let Some(entrypoint) = &self.entrypoint {
            if !is_entrypoint(entrypoint) {
                return refuse(CUSTOM_ENTRYPOINT);
            }
            if self.protocol != CustomProtocol::RayitoV1 {
                return refuse(CUSTOM_ENTRYPOINT_PROTOCOL);
            }
            if self
                .python
                .as_ref()
                .is_some_and(|p| p.is_empty() || p.contains('\0'))
            {
                return refuse(CUSTOM_PYTHON);
            }
        } else if self.command.is_empty()
            || self
                .command
                .iter()
                .any(|p| p.is_empty() || p.contains('\0'))
        {
            return refuse(CUSTOM_COMMAND);
        } else if self.python.is_some() {
            return refuse(CUSTOM_PYTHON_COMMAND);
        }
        check_files(&self.files)?;
        if self.envs.keys().any(|k| !super::spec::is_env_name(k))
            || self.envs.values().any(|v| v.contains('\0'))
        {
            return refuse(CUSTOM_ENVS);
        }
        Ok(())
    }

    /// The check, the launch and the files of this runtime's run.
    pub(crate) fn parts(&self) -> (Option<String>, String, Vec<RuntimeFile>) {
        let Some(entrypoint) = &self.entrypoint else {
            return (
                self.check.clone(),
                super::plan::quote_argv(&self.command),
                self.files.clone(),
            );
        };
        let python = self.python.as_deref().unwrap_or(DEFAULT_PYTHON);
        let quoted = super::plan::quote_argv(&[python.to_owned()]);
        let check = self
            .check
            .clone()
            .unwrap_or_else(|| format!("command -v {quoted}"));
        let launch = super::plan::quote_argv(&[
            python.to_owned(),
            ENTRYPOINT_DRIVER_PATH.to_owned(),
            entrypoint.clone(),
        ]);
        let mut files = self.files.clone();
        files.push((
            ENTRYPOINT_DRIVER_PATH.to_owned(),
            ENTRYPOINT_DRIVER.to_vec(),
            0o644,
        ));
        (Some(check), launch, files)
    }
}

/// `package.module:function` (Python identifiers; dots in the module).
fn is_entrypoint(entrypoint: &str) -> bool {
    let ident = |s: &str, dots: bool| {
        let mut bytes = s.bytes();
        bytes
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || (dots && b == b'.'))
    };
    entrypoint
        .split_once(':')
        .is_some_and(|(module, function)| ident(module, true) && ident(function, false))
}

/// A runtime's file: path, content, mode.
pub(crate) type RuntimeFile = (String, Vec<u8>, u32);

pub(crate) fn check_files(files: &[(String, Vec<u8>, u32)]) -> Result<(), SandboxError> {
    if files
        .iter()
        .any(|(path, _, mode)| !path.starts_with('/') || path.contains('\0') || *mode > 0o7777)
    {
        return Err(SandboxError::invalid_argument("runtime", CUSTOM_FILES));
    }
    Ok(())
}

/// How an [`HttpApp`] is invoked and answers.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HttpProtocol {
    /// The AgentCore contract: POST `{"prompt": ...}`; the answer's text in
    /// `response` (or the first of the JSON fields below), or the body.
    #[default]
    Agentcore,
    /// Your own JSON: the prompt in `request_field` (`prompt`), the text in
    /// `response_field`, else the first text field of `answer`, `output`,
    /// `text`, `response`, `result` or `content`.
    Json,
    /// OpenAI chat completions: POST `{"messages": [...], "stream": true}`;
    /// the deltas become `text_delta` events and the usage is reported.
    OpenaiChat,
    /// The body as the answer's text.
    Raw,
    /// The LangGraph Platform API: not in this version (`Unimplemented`).
    LanggraphApi,
}

impl HttpProtocol {
    /// The stable string (`openai-chat`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Agentcore => "agentcore",
            Self::Json => "json",
            Self::OpenaiChat => "openai-chat",
            Self::Raw => "raw",
            Self::LanggraphApi => "langgraph-api",
        }
    }
}

/// Your own HTTP agent: `command` starts it (a background command of the
/// run, killed with it), it listens on `port` inside the sandbox, answers
/// 200 on `health_path` when ready, and takes the prompt on `invoke_path`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct HttpApp {
    pub(crate) command: Vec<String>,
    pub(crate) port: u16,
    pub(crate) health_path: String,
    pub(crate) invoke_path: String,
    pub(crate) protocol: HttpProtocol,
    pub(crate) request_field: Option<String>,
    pub(crate) response_field: Option<String>,
    pub(crate) port_env: Option<String>,
    pub(crate) files: Vec<(String, Vec<u8>, u32)>,
}

impl HttpApp {
    /// The app started by `command` (an argv), listening on `port`.
    pub fn new<I, S>(command: I, port: u16) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            command: command.into_iter().map(Into::into).collect(),
            port,
            health_path: "/ping".to_owned(),
            invoke_path: "/invocations".to_owned(),
            protocol: HttpProtocol::default(),
            request_field: None,
            response_field: None,
            port_env: None,
            files: Vec::new(),
        }
    }

    /// The readiness path (`/ping`).
    pub fn health_path(mut self, path: impl Into<String>) -> Self {
        self.health_path = path.into();
        self
    }

    /// The invocation path (`/invocations`).
    pub fn invoke_path(mut self, path: impl Into<String>) -> Self {
        self.invoke_path = path.into();
        self
    }

    /// The protocol (AgentCore's by default).
    pub fn protocol(mut self, protocol: HttpProtocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// With [`HttpProtocol::Json`]: the request's field for the prompt.
    pub fn request_field(mut self, field: impl Into<String>) -> Self {
        self.request_field = Some(field.into());
        self
    }

    /// With [`HttpProtocol::Json`]: the answer's field with the text.
    pub fn response_field(mut self, field: impl Into<String>) -> Self {
        self.response_field = Some(field.into());
        self
    }

    /// The environment variable that tells the app its port (`PORT`).
    pub fn port_env(mut self, name: impl Into<String>) -> Self {
        self.port_env = Some(name.into());
        self
    }

    /// A file written into the sandbox before the first run (the app's code).
    pub fn file(mut self, path: impl Into<String>, content: impl Into<Vec<u8>>, mode: u32) -> Self {
        self.files.push((path.into(), content.into(), mode));
        self
    }

    fn check(&self) -> Result<(), SandboxError> {
        let refuse = |m: &str| Err(SandboxError::invalid_argument("runtime", m));
        if self.command.is_empty()
            || self
                .command
                .iter()
                .any(|p| p.is_empty() || p.contains('\0'))
        {
            return refuse(HTTP_COMMAND);
        }
        if self.port == 0 {
            return refuse(HTTP_PORT);
        }
        for path in [&self.health_path, &self.invoke_path] {
            if !path.starts_with('/')
                || !path
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._~!$&'()*+,;=:@%/-".contains(&b))
            {
                return refuse(HTTP_PATH);
            }
        }
        for field in [&self.request_field, &self.response_field]
            .into_iter()
            .flatten()
        {
            let mut bytes = field.bytes();
            let ok = bytes
                .next()
                .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
                && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
            if !ok {
                return refuse(HTTP_FIELD);
            }
        }
        if (self.request_field.is_some() || self.response_field.is_some())
            && self.protocol != HttpProtocol::Json
        {
            return refuse(HTTP_FIELD_PROTOCOL);
        }
        if let Some(env) = &self.port_env
            && !super::spec::is_env_name(env)
        {
            return refuse(HTTP_PORT_ENV);
        }
        check_files(&self.files)
    }
}

pub(crate) const CUSTOM_BY_NAME: &str = "the runtime \"custom\" is not a name: pass AgentRuntime::Custom(CustomRuntime::command([...]))";
pub(crate) const UNKNOWN_RUNTIME: &str = "unknown runtime \"{name}\"; pass one of opencode, deepagents, langgraph, strands, hermes, or a CustomRuntime or HttpApp";
pub(crate) const CUSTOM_COMMAND: &str =
    "CustomRuntime's command must be a non-empty list of non-empty strings without NUL";
pub(crate) const CUSTOM_ENTRYPOINT: &str =
    "CustomRuntime's entrypoint must have the form \"package.module:function\"";
pub(crate) const CUSTOM_ENTRYPOINT_PROTOCOL: &str =
    "CustomRuntime's protocol is only for a command: an entrypoint's driver speaks protocol v1";
pub(crate) const CUSTOM_PYTHON: &str =
    "CustomRuntime's python must be a non-empty interpreter without NUL";
pub(crate) const CUSTOM_PYTHON_COMMAND: &str =
    "CustomRuntime's python is only for an entrypoint: a command names its own interpreter";
pub(crate) const CUSTOM_ENVS: &str = "CustomRuntime's environment needs variable names ([A-Za-z_][A-Za-z0-9_]*) and values without NUL";
pub(crate) const CUSTOM_FILES: &str =
    "a runtime's file needs an absolute path without NUL and a mode up to 0o7777";
pub(crate) const HTTP_COMMAND: &str =
    "HttpApp's command must be a non-empty list of non-empty strings without NUL";
pub(crate) const HTTP_PORT: &str = "HttpApp's port must be between 1 and 65535";
pub(crate) const HTTP_PATH: &str =
    "HttpApp's health_path and invoke_path must be absolute URL paths (RFC 3986 characters)";
pub(crate) const HTTP_FIELD: &str =
    "HttpApp's request_field and response_field must be field names ([A-Za-z_][A-Za-z0-9_.]*)";
pub(crate) const HTTP_FIELD_PROTOCOL: &str =
    "HttpApp's request_field and response_field are only for the json protocol";
pub(crate) const HTTP_PORT_ENV: &str =
    "HttpApp's port_env must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*)";

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(runtime: CustomRuntime) -> String {
        AgentRuntime::Custom(runtime)
            .check()
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn an_entrypoint_is_module_colon_function_with_the_v1_protocol() {
        for good in ["agent:answer", "pkg.sub_mod:run_2", "_a:_b"] {
            AgentRuntime::Custom(CustomRuntime::entrypoint(good))
                .check()
                .unwrap_or_else(|e| panic!("{good}: {e}"));
        }
        for bad in [
            "agent", "agent:", ":f", "a.b:c.d", "1a:f", "a-b:f", "a:f g", "a/b:f",
        ] {
            assert_eq!(
                refusal(CustomRuntime::entrypoint(bad)),
                format!("invalid runtime: {CUSTOM_ENTRYPOINT}"),
                "{bad}"
            );
        }
        assert!(
            refusal(CustomRuntime::entrypoint("a:f").protocol(CustomProtocol::Text))
                .ends_with(CUSTOM_ENTRYPOINT_PROTOCOL)
        );
        assert!(refusal(CustomRuntime::entrypoint("a:f").python("")).ends_with(CUSTOM_PYTHON));
        assert!(
            refusal(CustomRuntime::command(["x"]).python("python3"))
                .ends_with(CUSTOM_PYTHON_COMMAND)
        );
    }

    #[test]
    fn docs_agent_md_transcribes_the_entrypoint_refusals() {
        let doc = include_str!("../../docs/agent.md");
        for message in [
            CUSTOM_ENTRYPOINT,
            CUSTOM_ENTRYPOINT_PROTOCOL,
            CUSTOM_PYTHON,
            CUSTOM_PYTHON_COMMAND,
        ] {
            assert!(doc.contains(&format!("| `{message}` |")), "{message}");
        }
    }

    #[test]
    fn an_entrypoint_runs_the_driver_with_its_interpreter() {
        let (check, launch, files) = CustomRuntime::entrypoint("agent:answer")
            .python("/opt/venv/bin/python")
            .parts();
        assert_eq!(check.as_deref(), Some("command -v '/opt/venv/bin/python'"));
        assert_eq!(
            launch,
            "'/opt/venv/bin/python' '/home/user/.rayito/agent/entrypoint_driver.py' 'agent:answer'"
        );
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].0, ENTRYPOINT_DRIVER_PATH);
        let (check, launch, files) = CustomRuntime::command(["my-agent", "--v1"]).parts();
        assert_eq!((check, launch.as_str()), (None, "'my-agent' '--v1'"));
        assert!(files.is_empty());
    }
}
