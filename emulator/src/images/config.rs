//! The CreateMicrovmImage / UpdateMicrovmImage body: checked against the
//! model's constraints (collected, in AWS's `Value at '<member>' failed to
//! satisfy constraint` form, values never echoed), then the service's own
//! checks (memory catalog, base version), and kept as the version's
//! config: the members GetMicrovmImageVersion echoes.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::super::api_error::ApiError;
use super::super::validate::Violations;

/// The memory sizes a MicroVM image may ask for, in MiB.
pub(crate) const MEMORY_CATALOG: [i64; 5] = [512, 1024, 2048, 4096, 8192];
/// ValidationException message for a memory size outside the catalog.
pub(crate) const MEMORY_MESSAGE: &str =
    "minimumMemoryInMiB must be one of 512, 1024, 2048, 4096, 8192.";
/// ValidationException message for a `baseImageVersion` that is not one
/// major number (`1.0`, `latest`, `x`).
pub(crate) const BASE_VERSION_MESSAGE: &str = "Expected a single major version number";
/// The image name pattern of the model.
pub(crate) const NAME_PATTERN: &str = "[a-zA-Z0-9-_]+";
const ROLE_PATTERN: &str = "arn:aws[a-zA-Z-]*:iam::\\d{12}:role/[\\w+=,.@/-]+";
const LOG_GROUP_PATTERN: &str = "[a-zA-Z0-9_\\-/.#]+";

/// Create/UpdateMicrovmImage body, parsed leniently: nested members stay
/// raw JSON and are checked by hand.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ImageInput {
    pub(crate) name: Option<String>,
    base_image_arn: Option<String>,
    base_image_version: Option<String>,
    build_role_arn: Option<String>,
    code_artifact: Option<Value>,
    resources: Option<Vec<Value>>,
    cpu_configurations: Option<Vec<Value>>,
    hooks: Option<Value>,
    logging: Option<Value>,
    environment_variables: Option<BTreeMap<String, String>>,
    additional_os_capabilities: Option<Vec<String>>,
    egress_network_connectors: Option<Vec<String>>,
    description: Option<String>,
    client_token: Option<String>,
    /// CreateMicrovmImage's tags (kept on the image, echoed by
    /// GetMicrovmImage).
    pub(crate) tags: Option<BTreeMap<String, String>>,
}

/// Whether `name` is a valid image name (`[a-zA-Z0-9-_]{1,64}`).
pub(crate) fn is_image_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn is_role_arn(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("arn:") else {
        return false;
    };
    let Some((partition, rest)) = rest.split_once(":iam::") else {
        return false;
    };
    let Some((account, role)) = rest.split_once(":role/") else {
        return false;
    };
    partition.starts_with("aws")
        && partition
            .bytes()
            .all(|b| b.is_ascii_alphabetic() || b == b'-')
        && account.len() == 12
        && account.bytes().all(|b| b.is_ascii_digit())
        && !role.is_empty()
        && role
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_+=,.@/-".contains(&b))
}

fn is_log_group(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"_-/.#".contains(&b))
}

/// An object member that must be an integer in `min..=max` (when present,
/// or always when `required`).
fn int_member(
    v: &mut Violations,
    obj: &Map<String, Value>,
    path: &str,
    key: &str,
    required: bool,
    min: i64,
    max: i64,
) {
    let member = format!("{path}.{key}");
    match obj.get(key) {
        None | Some(Value::Null) if required => v.not_null(&member),
        None | Some(Value::Null) => {}
        Some(n) => match n.as_i64() {
            Some(n) => v.range(&member, n, min, Some(max)),
            None => v.add(&member, "Member must be an integer"),
        },
    }
}

/// An object member that must be one of `values`.
fn enum_member(
    v: &mut Violations,
    obj: &Map<String, Value>,
    path: &str,
    key: &str,
    values: &[&str],
) {
    let member = format!("{path}.{key}");
    match obj.get(key).and_then(Value::as_str) {
        None => v.not_null(&member),
        Some(s) if values.contains(&s) => {}
        Some(_) => v.add(
            &member,
            format_args!(
                "Member must satisfy enum value set: [{}]",
                values.join(", ")
            ),
        ),
    }
}

fn object<'a>(
    v: &mut Violations,
    member: &str,
    value: &'a Value,
) -> Option<&'a Map<String, Value>> {
    let obj = value.as_object();
    if obj.is_none() {
        v.add(member, "Member must be a structure");
    }
    obj
}

fn hooks(v: &mut Violations, hooks: &Value) {
    let Some(obj) = object(v, "hooks", hooks) else {
        return;
    };
    int_member(v, obj, "hooks", "port", false, 1, 65_535);
    const STATES: [&str; 2] = ["ENABLED", "DISABLED"];
    if let Some(image) = obj.get("microvmImageHooks") {
        let path = "hooks.microvmImageHooks";
        if let Some(image) = object(v, path, image) {
            for hook in ["ready", "validate"] {
                enum_member(v, image, path, hook, &STATES);
                int_member(
                    v,
                    image,
                    path,
                    &format!("{hook}TimeoutInSeconds"),
                    true,
                    1,
                    3600,
                );
            }
        }
    }
    if let Some(runtime) = obj.get("microvmHooks") {
        let path = "hooks.microvmHooks";
        if let Some(runtime) = object(v, path, runtime) {
            for hook in ["run", "resume", "suspend", "terminate"] {
                enum_member(v, runtime, path, hook, &STATES);
                int_member(
                    v,
                    runtime,
                    path,
                    &format!("{hook}TimeoutInSeconds"),
                    true,
                    1,
                    60,
                );
            }
        }
    }
}

fn logging(v: &mut Violations, logging: &Value) {
    let Some(obj) = object(v, "logging", logging) else {
        return;
    };
    if obj.len() != 1 {
        v.add("logging", "Member must have exactly one member set");
        return;
    }
    if let Some(cw) = obj.get("cloudWatch") {
        let Some(cw) = object(v, "logging.cloudWatch", cw) else {
            return;
        };
        match cw.get("logGroup").and_then(Value::as_str) {
            None => v.not_null("logging.cloudWatch.logGroup"),
            Some(g) => {
                v.length("logging.cloudWatch.logGroup", g.chars().count(), 1, 512);
                if !is_log_group(g) {
                    v.add(
                        "logging.cloudWatch.logGroup",
                        format_args!(
                            "Member must satisfy regular expression pattern: {LOG_GROUP_PATTERN}"
                        ),
                    );
                }
            }
        }
        if let Some(s) = cw.get("logStream").and_then(Value::as_str) {
            v.length("logging.cloudWatch.logStream", s.chars().count(), 1, 512);
        }
    } else if !obj.contains_key("disabled") {
        v.add("logging", "Member must have exactly one member set");
    }
}

fn environment(v: &mut Violations, env: &BTreeMap<String, String>) {
    v.length("environmentVariables", env.len(), 0, 100);
    if env.keys().any(|k| k.is_empty() || k.chars().count() > 256) {
        v.add(
            "environmentVariables",
            "Map keys must satisfy constraint: [Member must have length between 1 and 256]",
        );
    }
    if env.keys().any(|k| k.chars().any(char::is_whitespace)) {
        v.add(
            "environmentVariables",
            "Map keys must satisfy constraint: [Member must satisfy regular expression pattern: [^\\s]+]",
        );
    }
    if env.values().any(|val| val.chars().count() > 4096) {
        v.add(
            "environmentVariables",
            "Map value must satisfy constraint: [Member must have length less than or equal to 4096]",
        );
    }
}

/// A valid body: the image name (Create only) and the version's config.
#[derive(Clone, Debug)]
pub(crate) struct ValidImage {
    pub(crate) name: Option<String>,
    pub(crate) config: Map<String, Value>,
}

/// Validates a Create (`create`: `name` required) or Update body.
///
/// # Errors
/// ValidationException with the model's or the service's message.
pub(crate) fn image_input(input: &ImageInput, create: bool) -> Result<ValidImage, ApiError> {
    let mut v = Violations::default();
    if create {
        match &input.name {
            None => v.not_null("name"),
            Some(n) => {
                v.length("name", n.chars().count(), 1, 64);
                if !n.is_empty() && !is_image_name(n) && n.chars().count() <= 64 {
                    v.add(
                        "name",
                        format_args!(
                            "Member must satisfy regular expression pattern: {NAME_PATTERN}"
                        ),
                    );
                }
            }
        }
    }
    match &input.base_image_arn {
        None => v.not_null("baseImageArn"),
        Some(a) => v.length("baseImageArn", a.chars().count(), 1, 2048),
    }
    match &input.build_role_arn {
        None => v.not_null("buildRoleArn"),
        Some(r) if !is_role_arn(r) => v.add(
            "buildRoleArn",
            format_args!("Member must satisfy regular expression pattern: {ROLE_PATTERN}"),
        ),
        Some(_) => {}
    }
    match &input.code_artifact {
        None => v.not_null("codeArtifact"),
        Some(a) => match a.as_object() {
            Some(obj) if obj.len() == 1 && obj.contains_key("uri") => {
                match obj.get("uri").and_then(Value::as_str) {
                    Some(uri) => v.length("codeArtifact.uri", uri.chars().count(), 1, 2048),
                    None => v.not_null("codeArtifact.uri"),
                }
            }
            _ => v.add("codeArtifact", "Member must have exactly one member set"),
        },
    }
    let mut memory = None;
    if let Some(list) = &input.resources {
        v.length("resources", list.len(), 0, 1);
        for (i, r) in list.iter().enumerate() {
            let path = format!("resources.{}", i + 1);
            if let Some(obj) = object(&mut v, &path, r) {
                int_member(
                    &mut v,
                    obj,
                    &path,
                    "minimumMemoryInMiB",
                    true,
                    1,
                    i64::from(i32::MAX),
                );
                memory = memory.or(obj.get("minimumMemoryInMiB").and_then(Value::as_i64));
            }
        }
    }
    if let Some(list) = &input.cpu_configurations {
        for (i, c) in list.iter().enumerate() {
            let path = format!("cpuConfigurations.{}", i + 1);
            if let Some(obj) = object(&mut v, &path, c) {
                enum_member(&mut v, obj, &path, "architecture", &["ARM_64", "X86_64"]);
            }
        }
    }
    if let Some(h) = &input.hooks {
        hooks(&mut v, h);
    }
    if let Some(l) = &input.logging {
        logging(&mut v, l);
    }
    if let Some(env) = &input.environment_variables {
        environment(&mut v, env);
    }
    if let Some(caps) = &input.additional_os_capabilities {
        for (i, c) in caps.iter().enumerate() {
            if c != "ALL" {
                v.add(
                    &format!("additionalOsCapabilities.{}", i + 1),
                    "Member must satisfy enum value set: [ALL]",
                );
            }
        }
    }
    if let Some(egress) = &input.egress_network_connectors {
        v.length("egressNetworkConnectors", egress.len(), 0, 1);
    }
    if let Some(t) = &input.client_token {
        v.length("clientToken", t.chars().count(), 1, 128);
    }
    v.finish()?;
    // The service's own checks, after the model's.
    if memory.is_some_and(|m| !MEMORY_CATALOG.contains(&m)) {
        return Err(ApiError::validation(MEMORY_MESSAGE));
    }
    let base_version = match &input.base_image_version {
        None => 1,
        Some(s) => parse_major(s).ok_or_else(|| ApiError::validation(BASE_VERSION_MESSAGE))?,
    };
    let mut config = Map::new();
    let mut put = |key: &str, value: Option<Value>| {
        if let Some(value) = value {
            config.insert(key.to_string(), value);
        }
    };
    put(
        "baseImageArn",
        input.base_image_arn.clone().map(Value::from),
    );
    put("baseImageVersion", Some(json!(format!("{base_version}.0"))));
    put(
        "buildRoleArn",
        input.build_role_arn.clone().map(Value::from),
    );
    put("codeArtifact", input.code_artifact.clone());
    put("resources", input.resources.clone().map(Value::from));
    put(
        "cpuConfigurations",
        input.cpu_configurations.clone().map(Value::from),
    );
    put("hooks", input.hooks.clone());
    put("logging", input.logging.clone());
    put(
        "environmentVariables",
        input.environment_variables.as_ref().map(|e| json!(e)),
    );
    put(
        "additionalOsCapabilities",
        input.additional_os_capabilities.clone().map(Value::from),
    );
    put(
        "egressNetworkConnectors",
        input.egress_network_connectors.clone().map(Value::from),
    );
    put("description", input.description.clone().map(Value::from));
    Ok(ValidImage {
        name: input.name.clone(),
        config,
    })
}

/// One major version number: digits only, at least 1 (`1`, `2`), never
/// `1.0`.
pub(crate) fn parse_major(s: &str) -> Option<u32> {
    if s.is_empty() || s.len() > 9 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok().filter(|n| *n >= 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(extra: Value) -> ImageInput {
        let mut b = json!({
            "name": "img",
            "baseImageArn": "arn:aws:lambda:us-east-1:aws:microvm-image:al2023-1",
            "buildRoleArn": "arn:aws:iam::000000000000:role/rayito-m0-build-us-east-1",
            "codeArtifact": {"uri": "s3://b/k.zip"},
        });
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::from_value(b).unwrap()
    }

    #[test]
    fn a_minimal_body_is_echoed_with_the_base_version_as_major_dot_zero() {
        let ok = image_input(&body(json!({"baseImageVersion": "3"})), true).unwrap();
        assert_eq!(ok.config["baseImageVersion"], "3.0");
        assert_eq!(ok.name.as_deref(), Some("img"));
        assert!(!ok.config.contains_key("environmentVariables"));
    }

    #[test]
    fn role_arns_and_names_are_checked_by_shape() {
        assert!(is_role_arn("arn:aws:iam::123456789012:role/x/y_z"));
        assert!(!is_role_arn("arn:aws:iam::1234:role/x"));
        assert!(!is_role_arn("arn:aws:s3:::bucket"));
        assert!(is_image_name("a-b_C9") && !is_image_name("a:b") && !is_image_name(""));
        assert_eq!(parse_major("10"), Some(10));
        for bad in ["1.0", "0", "", "-1", "latest", "99999999999"] {
            assert_eq!(parse_major(bad), None, "{bad}");
        }
    }
}
