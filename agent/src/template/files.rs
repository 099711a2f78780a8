//! Reading and checking the image's two template files: `template.json`
//! (`rayito.template/1`: the start command, its ready check, user, working
//! directory and envs) and `template-env.json` (`rayito.template-env/1`: the
//! image's environment).
//!
//! The files come from the image, so they are trusted to say what to run,
//! but not to be well formed: each is bounded in size, parsed without
//! panicking, and refused with a message that names the file and the field
//! but never echoes a value (env values may be secrets).

use std::collections::BTreeMap;
use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;
use std::time::Duration;

use serde_json::{Map, Value};

/// Where a real image keeps its template files (the paths the builder's
/// Dockerfile layer copies them to).
pub const IMAGE_TEMPLATE_DIR: &str = "/etc/rayito";
/// The start specification's file name.
pub const TEMPLATE_FILE: &str = "template.json";
/// The image environment's file name.
pub const TEMPLATE_ENV_FILE: &str = "template-env.json";
/// The largest template file the agent reads (either file); a larger one
/// is refused. The builder's files are a few KiB: 100 envs of 4 KiB values
/// fit many times over.
pub const MAX_TEMPLATE_FILE_BYTES: u64 = 1024 * 1024;

/// `template.json`'s `version`.
const TEMPLATE_VERSION: &str = "rayito.template/1";
/// `template-env.json`'s `version`.
const TEMPLATE_ENV_VERSION: &str = "rayito.template-env/1";
/// The ready check's cadence when `ready_poll` is null (the builder's default).
const DEFAULT_INTERVAL: Duration = Duration::from_millis(500);
/// The ready check's deadline when `ready_poll` is null (the builder's default).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest `ready_poll.timeout_seconds` (and interval): the build-time
/// hook's own longest timeout (3,600 s); waiting longer cannot help a build.
const MAX_POLL_SECONDS: f64 = 3600.0;
/// The shortest `ready_poll.interval_seconds`: below it the check would
/// spin rather than poll.
const MIN_INTERVAL_SECONDS: f64 = 0.01;

/// How often and how long the ready command is tried.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ReadyPoll {
    pub interval: Duration,
    pub timeout: Duration,
}

impl Default for ReadyPoll {
    fn default() -> Self {
        Self {
            interval: DEFAULT_INTERVAL,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// `template.json`, checked. The user is not kept: the only one accepted
/// is the sandbox's.
#[derive(Clone, Default)]
pub(crate) struct StartSpec {
    /// Run with `/bin/sh -c`.
    pub start_cmd: String,
    /// Run with `/bin/sh -c` until it exits 0; `None`: ready once started.
    pub ready_cmd: Option<String>,
    /// Guest working directory of both commands; `None` is the default one.
    pub workdir: Option<String>,
    /// Envs of both commands, over the image's.
    pub envs: BTreeMap<String, String>,
    pub poll: ReadyPoll,
}

// Commands and env values may hold secrets: Debug shows their shape only.
impl std::fmt::Debug for StartSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartSpec")
            .field("has_ready_cmd", &self.ready_cmd.is_some())
            .field("workdir", &self.workdir)
            .field("env_names", &self.envs.keys().collect::<Vec<_>>())
            .field("poll", &self.poll)
            .finish_non_exhaustive()
    }
}

/// What the template directory holds.
#[derive(Clone, Debug, Default)]
pub(crate) struct TemplateFiles {
    /// `template.json`, if the image has one.
    pub start: Option<StartSpec>,
    /// `template-env.json`'s envs (empty without the file).
    pub envs: BTreeMap<String, String>,
}

/// Reads both files from `dir`. A missing file is no template (or no
/// envs); anything else that is wrong with either refuses the whole
/// template, with the reason.
pub(crate) fn load(dir: &Path) -> Result<TemplateFiles, String> {
    let envs = match read_bounded(&dir.join(TEMPLATE_ENV_FILE), TEMPLATE_ENV_FILE)? {
        None => BTreeMap::new(),
        Some(bytes) => parse_template_env(&bytes)?,
    };
    let start = match read_bounded(&dir.join(TEMPLATE_FILE), TEMPLATE_FILE)? {
        None => None,
        Some(bytes) => Some(parse_template(&bytes)?),
    };
    Ok(TemplateFiles { start, envs })
}

/// The file's bytes, `None` when it does not exist. Opened non-blocking so
/// that a FIFO in its place cannot hang the agent's start, and without
/// following a final symbolic link; refused when it is not a regular file or is over [`MAX_TEMPLATE_FILE_BYTES`] (counted
/// while reading, not trusted from its size).
fn read_bounded(path: &Path, name: &str) -> Result<Option<Vec<u8>>, String> {
    // Never through a symbolic link: a build step could point one at a
    // file of the host, which the agent (root) would then read.
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(format!(
                "{name} is a symbolic link; a template's files are regular files"
            ));
        }
        Err(e) => return Err(format!("{name} cannot be read ({})", e.kind())),
    };
    let is_file = file
        .metadata()
        .map_err(|e| format!("{name} cannot be read ({})", e.kind()))?
        .is_file();
    if !is_file {
        return Err(format!("{name} is not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_TEMPLATE_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{name} cannot be read ({})", e.kind()))?;
    if bytes.len() as u64 > MAX_TEMPLATE_FILE_BYTES {
        return Err(format!(
            "{name} is larger than {} MiB",
            MAX_TEMPLATE_FILE_BYTES >> 20
        ));
    }
    Ok(Some(bytes))
}

/// The top-level object of a file (its syntax error names the line and
/// column only: serde's messages for data can quote values).
fn parse_object(bytes: &[u8], name: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(format!("{name} is not a JSON object")),
        Err(e) => Err(format!(
            "{name} is not valid JSON (line {}, column {})",
            e.line(),
            e.column()
        )),
    }
}

fn check_version(map: &Map<String, Value>, name: &str, expected: &str) -> Result<(), String> {
    match map.get("version") {
        Some(Value::String(v)) if v == expected => Ok(()),
        _ => Err(format!("{name}: version must be \"{expected}\"")),
    }
}

/// A string field; `None` when absent or null.
fn optional_string<'a>(
    map: &'a Map<String, Value>,
    name: &str,
    key: &str,
) -> Result<Option<&'a str>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("{name}: {key} must be a string or null")),
    }
}

/// A command: non-empty, no NUL (it could not be passed to `sh -c`).
fn command(value: &str, name: &str, key: &str) -> Result<String, String> {
    if value.trim().is_empty() || value.contains('\0') {
        return Err(format!(
            "{name}: {key} must be a non-empty command without NUL bytes"
        ));
    }
    Ok(value.to_owned())
}

/// An `envs` object: names non-empty without `=` or NUL, values strings
/// without NUL (what an environment can carry).
fn envs(map: &Map<String, Value>, name: &str) -> Result<BTreeMap<String, String>, String> {
    let refused = || {
        format!(
            "{name}: envs must map names (non-empty, without '=' or NUL bytes) \
             to strings without NUL bytes"
        )
    };
    let object = match map.get("envs") {
        None | Some(Value::Null) => return Ok(BTreeMap::new()),
        Some(Value::Object(object)) => object,
        Some(_) => return Err(refused()),
    };
    let mut out = BTreeMap::new();
    for (key, value) in object {
        let Value::String(value) = value else {
            return Err(refused());
        };
        if key.is_empty() || key.contains(['=', '\0']) || value.contains('\0') {
            return Err(refused());
        }
        out.insert(key.clone(), value.clone());
    }
    Ok(out)
}

/// `template.json`.
fn parse_template(bytes: &[u8]) -> Result<StartSpec, String> {
    let name = TEMPLATE_FILE;
    let map = parse_object(bytes, name)?;
    check_version(&map, name, TEMPLATE_VERSION)?;
    let start_cmd = match optional_string(&map, name, "start_cmd")? {
        Some(cmd) => command(cmd, name, "start_cmd")?,
        None => return Err(format!("{name}: start_cmd is missing")),
    };
    let ready_cmd = optional_string(&map, name, "ready_cmd")?
        .map(|cmd| command(cmd, name, "ready_cmd"))
        .transpose()?;
    check_user(optional_string(&map, name, "user")?)?;
    let workdir = match optional_string(&map, name, "workdir")? {
        Some(w) if !w.starts_with('/') || w.contains('\0') => {
            return Err(format!(
                "{name}: workdir must be an absolute path without NUL bytes"
            ));
        }
        other => other.map(str::to_owned),
    };
    Ok(StartSpec {
        start_cmd,
        ready_cmd,
        workdir,
        envs: envs(&map, name)?,
        poll: ready_poll(&map)?,
    })
}

/// The local agent runs every process as the sandbox's user (uid 1000),
/// so that is the only user a start command may name; the builder writes
/// `"1000"` unless told otherwise. Root is refused rather than silently
/// demoted: a start command that needs root would fail later, less clearly.
fn check_user(user: Option<&str>) -> Result<(), String> {
    match user {
        None | Some("1000" | "user") => Ok(()),
        Some("root" | "0") => Err(format!(
            "{TEMPLATE_FILE}: the start command cannot run as root: the local agent runs \
             every process as the sandbox user; use user 1000"
        )),
        Some(_) => Err(format!(
            "{TEMPLATE_FILE}: unknown user; the local agent has only the sandbox user (1000)"
        )),
    }
}

/// `ready_poll`: null for the defaults, else both numbers of seconds.
fn ready_poll(map: &Map<String, Value>) -> Result<ReadyPoll, String> {
    let object = match map.get("ready_poll") {
        None | Some(Value::Null) => return Ok(ReadyPoll::default()),
        Some(Value::Object(object)) => object,
        Some(_) => {
            return Err(format!(
                "{TEMPLATE_FILE}: ready_poll must be an object or null"
            ));
        }
    };
    let number = |key: &str| {
        object
            .get(key)
            .and_then(Value::as_f64)
            .filter(|s| s.is_finite())
    };
    let interval = number("interval_seconds")
        .filter(|s| (MIN_INTERVAL_SECONDS..=MAX_POLL_SECONDS).contains(s))
        .ok_or_else(|| {
            format!(
                "{TEMPLATE_FILE}: ready_poll.interval_seconds must be a number of seconds \
                 from {MIN_INTERVAL_SECONDS} to {MAX_POLL_SECONDS}"
            )
        })?;
    let timeout = number("timeout_seconds")
        .filter(|s| *s > 0.0 && *s <= MAX_POLL_SECONDS)
        .ok_or_else(|| {
            format!(
                "{TEMPLATE_FILE}: ready_poll.timeout_seconds must be a number of seconds \
                 above 0 and at most {MAX_POLL_SECONDS}"
            )
        })?;
    Ok(ReadyPoll {
        interval: Duration::from_secs_f64(interval),
        timeout: Duration::from_secs_f64(timeout),
    })
}

/// `template-env.json`.
fn parse_template_env(bytes: &[u8]) -> Result<BTreeMap<String, String>, String> {
    let name = TEMPLATE_ENV_FILE;
    let map = parse_object(bytes, name)?;
    check_version(&map, name, TEMPLATE_ENV_VERSION)?;
    envs(&map, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(extra: &str) -> String {
        format!(r#"{{"version":"rayito.template/1","start_cmd":"python3 app.py"{extra}}}"#)
    }

    #[test]
    fn the_builders_file_is_read_with_its_defaults() {
        let spec = parse_template(
            br#"{"envs":{"A":"1"},"ready_cmd":null,"ready_poll":null,"start_cmd":"run",
                "user":"1000","version":"rayito.template/1","workdir":null}"#,
        )
        .expect("valid");
        assert_eq!(spec.start_cmd, "run");
        assert_eq!(spec.ready_cmd, None);
        assert_eq!(spec.poll, ReadyPoll::default());
        assert_eq!(spec.envs.get("A").map(String::as_str), Some("1"));
        let spec = parse_template(
            template(
                r#","ready_poll":{"interval_seconds":0.5,"timeout_seconds":1},"workdir":"/app""#,
            )
            .as_bytes(),
        )
        .expect("valid");
        assert_eq!(spec.poll.timeout, Duration::from_secs(1));
        assert_eq!(spec.workdir.as_deref(), Some("/app"));
    }

    #[test]
    fn each_refusal_names_the_file_and_field_and_never_a_value() {
        let cases: &[(&str, &str)] = &[
            (
                "{\"version\":",
                "template.json is not valid JSON (line 1, column 11)",
            ),
            ("[]", "template.json is not a JSON object"),
            (
                r#"{"version":"rayito.template/2","start_cmd":"x"}"#,
                "template.json: version must be \"rayito.template/1\"",
            ),
            (
                r#"{"version":"rayito.template/1"}"#,
                "template.json: start_cmd is missing",
            ),
            (
                &template(r#","user":"root""#),
                "template.json: the start command cannot run as root: the local agent runs \
                 every process as the sandbox user; use user 1000",
            ),
            (
                &template(r#","user":"secret-name""#),
                "template.json: unknown user; the local agent has only the sandbox user (1000)",
            ),
            (
                &template(r#","workdir":"relative""#),
                "template.json: workdir must be an absolute path without NUL bytes",
            ),
            (
                &template(r#","envs":{"K":"secret\u0000value"}"#),
                "template.json: envs must map names (non-empty, without '=' or NUL bytes) \
                 to strings without NUL bytes",
            ),
            (
                &template(r#","ready_poll":{"interval_seconds":0.5,"timeout_seconds":0}"#),
                "template.json: ready_poll.timeout_seconds must be a number of seconds \
                 above 0 and at most 3600",
            ),
            (
                &template(r#","ready_poll":{"interval_seconds":0,"timeout_seconds":1}"#),
                "template.json: ready_poll.interval_seconds must be a number of seconds \
                 from 0.01 to 3600",
            ),
            (
                &template(r#","ready_cmd":"  ""#),
                "template.json: ready_cmd must be a non-empty command without NUL bytes",
            ),
        ];
        for (text, expected) in cases {
            let refused = parse_template(text.as_bytes()).expect_err(text);
            assert_eq!(&refused, expected);
            assert!(!refused.contains("secret"), "{refused}");
        }
        assert_eq!(
            parse_template_env(br#"{"envs":{}}"#).unwrap_err(),
            "template-env.json: version must be \"rayito.template-env/1\""
        );
    }

    #[test]
    fn files_are_bounded_and_must_be_regular() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(load(dir.path()).expect("no files").start.is_none());
        let big = vec![b' '; MAX_TEMPLATE_FILE_BYTES as usize + 1];
        std::fs::write(dir.path().join(TEMPLATE_FILE), big).unwrap();
        assert_eq!(
            load(dir.path()).unwrap_err(),
            "template.json is larger than 1 MiB"
        );
        std::fs::remove_file(dir.path().join(TEMPLATE_FILE)).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(dir.path().join(TEMPLATE_ENV_FILE))
            .status()
            .expect("mkfifo runs");
        assert!(made.success());
        // Opened non-blocking: a FIFO nobody writes to does not hang the read.
        assert_eq!(
            load(dir.path()).unwrap_err(),
            "template-env.json is not a regular file"
        );
    }
}
