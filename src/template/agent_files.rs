//! The two files the agent reads at start: `template.json` (the start
//! command, its ready check, user, working directory and environment) and
//! `template-env.json` (the environment injected into commands,
//! terminals and code kernels). Both are written as the reference writes
//! them: keys sorted, two-space indent, final newline.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::builder::{Spec, Template};
use super::json_text;
use super::ready::READY_POLL_INTERVAL;
use crate::SandboxError;

/// The `version` of `template.json`.
pub const TEMPLATE_JSON_VERSION: &str = "rayito.template/1";
/// The `version` of `template-env.json`.
pub const TEMPLATE_ENV_JSON_VERSION: &str = "rayito.template-env/1";

/// Seconds as JSON: a whole number as an integer (`60`), anything else
/// as a decimal (`0.5`), as Python writes an `int` and a `float`.
pub(crate) fn seconds(d: Duration) -> Value {
    if d.subsec_nanos() == 0 {
        Value::from(d.as_secs())
    } else {
        serde_json::Number::from_f64(d.as_secs_f64()).map_or(Value::Null, Value::Number)
    }
}

fn string_map(envs: &BTreeMap<String, String>) -> Value {
    Value::Object(
        envs.iter()
            .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
            .collect::<Map<String, Value>>(),
    )
}

/// `template.json` of a checked spec with a start command.
pub(crate) fn template_json(spec: &Spec) -> Option<String> {
    let start = spec.start.as_ref()?;
    let (ready_cmd, ready_poll) = match &start.ready {
        Some(ready) => (
            Value::from(ready.cmd.as_str()),
            json!({
                "interval_seconds": seconds(READY_POLL_INTERVAL),
                "timeout_seconds": seconds(ready.timeout),
            }),
        ),
        None => (Value::Null, Value::Null),
    };
    let doc = json!({
        "envs": string_map(&start.envs),
        "ready_cmd": ready_cmd,
        "ready_poll": ready_poll,
        "start_cmd": start.cmd,
        "user": start.user,
        "version": TEMPLATE_JSON_VERSION,
        "workdir": start.workdir,
    });
    Some(json_text::document(&doc))
}

/// `template-env.json` of a checked spec that sets environment variables.
pub(crate) fn template_env_json(spec: &Spec) -> Option<String> {
    let envs = spec.merged_envs();
    if envs.is_empty() {
        return None;
    }
    let doc = json!({
        "envs": string_map(&envs),
        "version": TEMPLATE_ENV_JSON_VERSION,
    });
    Some(json_text::document(&doc))
}

impl Template {
    /// The agent's `template.json`, when the template has a start command.
    ///
    /// # Errors
    ///
    /// The first refusal of a builder call (see [`Template::check`]).
    pub fn template_json(&self) -> Result<Option<String>, SandboxError> {
        Ok(template_json(self.spec()?))
    }

    /// The agent's `template-env.json`, when the template sets environment
    /// variables (every `set_envs` merged, a later value winning).
    ///
    /// # Errors
    ///
    /// The first refusal of a builder call (see [`Template::check`]).
    pub fn template_env_json(&self) -> Result<Option<String>, SandboxError> {
        Ok(template_env_json(self.spec()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::{ReadyCmd, StartCmd};

    #[test]
    fn template_json_is_exact() {
        let t = Template::new().set_start_cmd(
            StartCmd::new("python3 -m http.server 8000")
                .ready(ReadyCmd::port(8000).timeout(Duration::from_millis(2_500)))
                .user("user")
                .workdir("/home/user")
                .envs([("PORT", "8000"), ("MODE", "dév")]),
        );
        assert_eq!(
            t.template_json().unwrap().unwrap(),
            r#"{
  "envs": {
    "MODE": "d\u00e9v",
    "PORT": "8000"
  },
  "ready_cmd": "cat < /dev/null > /dev/tcp/127.0.0.1/8000",
  "ready_poll": {
    "interval_seconds": 0.5,
    "timeout_seconds": 2.5
  },
  "start_cmd": "python3 -m http.server 8000",
  "user": "user",
  "version": "rayito.template/1",
  "workdir": "/home/user"
}
"#
        );
        // Defaults: user 1000, no workdir, no ready check, no envs.
        let t = Template::new().set_start_cmd("sleep infinity");
        assert_eq!(
            t.template_json().unwrap().unwrap(),
            r#"{
  "envs": {},
  "ready_cmd": null,
  "ready_poll": null,
  "start_cmd": "sleep infinity",
  "user": "1000",
  "version": "rayito.template/1",
  "workdir": null
}
"#
        );
        let t = Template::new().set_start_cmd(StartCmd::new("x").ready(ReadyCmd::file("/ok")));
        assert!(
            t.template_json()
                .unwrap()
                .unwrap()
                .contains("\"timeout_seconds\": 60\n")
        );
        assert_eq!(Template::new().template_json().unwrap(), None);
    }

    #[test]
    fn template_env_json_merges_sorts_and_lets_the_last_win() {
        let t = Template::new()
            .set_envs([("Z", "1"), ("A", "\"quoted\" \\ $x")])
            .run_cmd("true")
            .set_envs([("Z", "2")]);
        assert_eq!(
            t.template_env_json().unwrap().unwrap(),
            r#"{
  "envs": {
    "A": "\"quoted\" \\ $x",
    "Z": "2"
  },
  "version": "rayito.template-env/1"
}
"#
        );
        assert_eq!(Template::new().template_env_json().unwrap(), None);
        assert_eq!(
            Template::new()
                .set_envs(Vec::<(String, String)>::new())
                .template_env_json()
                .unwrap(),
            None
        );
    }
}
