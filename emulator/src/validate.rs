//! Input validation with AWS's messages. Model constraints (lengths, ranges,
//! required members) are collected and reported together in the
//! `N validation error(s) detected: Value at '<member>' failed to satisfy
//! constraint: <rule>` form; values are never echoed (the payload is
//! sensitive). Service checks that AWS makes after the model's (ARN format,
//! the 60-minute token cap) have their own measured messages.

use std::time::Duration;

use serde_json::Value;

use super::api_error::ApiError;
use super::model::{AuthTokenInput, IdlePolicy, ListMicrovmsQuery, RunMicrovmInput};

/// Longest `runHookPayload`, in characters.
pub(crate) const MAX_PAYLOAD_CHARS: usize = 4096;
/// Longest `maximumDurationInSeconds`.
pub(crate) const MAX_DURATION_SECONDS: i64 = 28_800;
/// Longest auth token lifetime AWS grants.
pub(crate) const MAX_TOKEN_MINUTES: i64 = 60;
/// Largest ListMicrovms page.
pub(crate) const MAX_PAGE: usize = 50;

/// Model-constraint failures of one request.
#[derive(Default, Debug)]
pub(crate) struct Violations(Vec<String>);

impl Violations {
    pub(crate) fn add(&mut self, member: &str, rule: impl std::fmt::Display) {
        self.0.push(format!(
            "Value at '{member}' failed to satisfy constraint: {rule}"
        ));
    }

    pub(crate) fn not_null(&mut self, member: &str) {
        self.add(member, "Member must not be null");
    }

    pub(crate) fn length(&mut self, member: &str, len: usize, min: usize, max: usize) {
        if len < min {
            self.add(
                member,
                format_args!("Member must have length greater than or equal to {min}"),
            );
        } else if len > max {
            self.add(
                member,
                format_args!("Member must have length less than or equal to {max}"),
            );
        }
    }

    pub(crate) fn range(&mut self, member: &str, value: i64, min: i64, max: Option<i64>) {
        if value < min {
            self.add(
                member,
                format_args!("Member must have value greater than or equal to {min}"),
            );
        } else if let Some(max) = max.filter(|m| value > *m) {
            self.add(
                member,
                format_args!("Member must have value less than or equal to {max}"),
            );
        }
    }

    pub(crate) fn finish(self) -> Result<(), ApiError> {
        match self.0.len() {
            0 => Ok(()),
            1 => Err(ApiError::validation(format!(
                "1 validation error detected: {}",
                self.0[0]
            ))),
            n => Err(ApiError::validation(format!(
                "{n} validation errors detected: {}",
                self.0.join("; ")
            ))),
        }
    }
}

/// An image ARN, split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ImageArn {
    pub(crate) region: String,
    pub(crate) account: String,
    pub(crate) name: String,
}

/// Parses `arn:<partition>:lambda:<region>:<12 digits>:microvm-image:<name>`.
pub(crate) fn parse_image_arn(s: &str) -> Option<ImageArn> {
    let parts: Vec<&str> = s.split(':').collect();
    let [arn, partition, service, region, account, kind, name] = parts.as_slice() else {
        return None;
    };
    let name_ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    let ok = *arn == "arn"
        && partition.starts_with("aws")
        && *service == "lambda"
        && !region.is_empty()
        && region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && account.len() == 12
        && account.bytes().all(|b| b.is_ascii_digit())
        && *kind == "microvm-image"
        && name_ok;
    ok.then(|| ImageArn {
        region: region.to_string(),
        account: account.to_string(),
        name: name.to_string(),
    })
}

/// A RunMicrovm request that passed validation (the image is not yet looked up).
#[derive(Clone, Debug)]
pub(crate) struct ValidRun {
    pub(crate) image: ImageArn,
    pub(crate) image_arn: String,
    pub(crate) max_duration_seconds: i64,
    pub(crate) payload: String,
}

/// Validates a RunMicrovm body.
pub(crate) fn run_microvm(input: &RunMicrovmInput) -> Result<ValidRun, ApiError> {
    let mut v = Violations::default();
    match &input.image_identifier {
        None => v.not_null("imageIdentifier"),
        Some(id) => v.length("imageIdentifier", id.chars().count(), 1, 256),
    }
    if let Some(p) = &input.run_hook_payload {
        v.length("runHookPayload", p.chars().count(), 0, MAX_PAYLOAD_CHARS);
    }
    if let Some(d) = input.maximum_duration_in_seconds {
        v.range("maximumDurationInSeconds", d, 1, Some(MAX_DURATION_SECONDS));
    }
    if let Some(t) = &input.client_token {
        v.length("clientToken", t.chars().count(), 1, 128);
    }
    if let Some(p) = &input.idle_policy {
        idle_policy(&mut v, p);
    }
    for (member, list) in [
        (
            "ingressNetworkConnectors",
            &input.ingress_network_connectors,
        ),
        ("egressNetworkConnectors", &input.egress_network_connectors),
    ] {
        if let Some(list) = list {
            v.length(member, list.len(), 0, 10);
        }
    }
    if let Some(logging) = &input.logging {
        let members = logging.as_object().map(|o| o.len()).unwrap_or(0);
        if members != 1 {
            v.add("logging", "Member must have exactly one member set");
        }
    }
    v.finish()?;
    let image_arn = input.image_identifier.clone().unwrap_or_default();
    let image =
        parse_image_arn(&image_arn).ok_or_else(|| ApiError::validation("Invalid ARN format"))?;
    Ok(ValidRun {
        image,
        image_arn,
        max_duration_seconds: input
            .maximum_duration_in_seconds
            .unwrap_or(MAX_DURATION_SECONDS),
        payload: input.run_hook_payload.clone().unwrap_or_default(),
    })
}

fn idle_policy(v: &mut Violations, p: &IdlePolicy) {
    match p.max_idle_duration_seconds {
        None => v.not_null("idlePolicy.maxIdleDurationSeconds"),
        Some(s) => v.range(
            "idlePolicy.maxIdleDurationSeconds",
            s,
            60,
            Some(MAX_DURATION_SECONDS),
        ),
    }
    match p.suspended_duration_seconds {
        None => v.not_null("idlePolicy.suspendedDurationSeconds"),
        Some(s) => v.range(
            "idlePolicy.suspendedDurationSeconds",
            s,
            0,
            Some(MAX_DURATION_SECONDS),
        ),
    }
    if p.auto_resume_enabled.is_none() {
        v.not_null("idlePolicy.autoResumeEnabled");
    }
}

/// Validates a MicroVM id taken from the URI.
pub(crate) fn microvm_identifier(id: &str) -> Result<(), ApiError> {
    let mut v = Violations::default();
    v.length("microvmIdentifier", id.chars().count(), 1, 256);
    v.finish()
}

/// A validated ListMicrovms query.
#[derive(Clone, Debug)]
pub(crate) struct ValidList {
    pub(crate) max_results: usize,
    pub(crate) start: usize,
    pub(crate) image_identifier: Option<String>,
    pub(crate) image_version: Option<String>,
}

/// Validates a list operation's `maxResults` (1 to 50, default 50) and
/// `nextToken`; `decode_token` turns a token into the index to start at.
/// Returns (page size, start index).
pub(crate) fn page(
    max_results: Option<&str>,
    next_token: Option<&str>,
    decode_token: impl Fn(&str) -> Option<usize>,
) -> Result<(usize, usize), ApiError> {
    let mut v = Violations::default();
    let mut size = MAX_PAGE;
    if let Some(raw) = max_results {
        match raw.parse::<i64>() {
            Ok(n) => {
                v.range("maxResults", n, 1, Some(MAX_PAGE as i64));
                size = n.clamp(1, MAX_PAGE as i64) as usize;
            }
            Err(_) => v.add("maxResults", "Member must be an integer"),
        }
    }
    v.finish()?;
    let start = match next_token {
        None => 0,
        Some(t) => {
            decode_token(t).ok_or_else(|| ApiError::validation("Invalid pagination token."))?
        }
    };
    Ok((size, start))
}

/// Validates a ListMicrovms query; `decode_token` turns a `nextToken` into
/// the index to start at.
pub(crate) fn list_microvms(
    q: &ListMicrovmsQuery,
    decode_token: impl Fn(&str) -> Option<usize>,
) -> Result<ValidList, ApiError> {
    let mut v = Violations::default();
    let mut max_results = MAX_PAGE;
    if let Some(raw) = &q.max_results {
        match raw.parse::<i64>() {
            Ok(n) => {
                v.range("maxResults", n, 1, Some(MAX_PAGE as i64));
                max_results = n.clamp(1, MAX_PAGE as i64) as usize;
            }
            Err(_) => v.add("maxResults", "Member must be an integer"),
        }
    }
    v.finish()?;
    let start = match &q.next_token {
        None => 0,
        Some(t) => {
            decode_token(t).ok_or_else(|| ApiError::validation("Invalid pagination token."))?
        }
    };
    Ok(ValidList {
        max_results,
        start,
        image_identifier: q.image_identifier.clone(),
        image_version: q.image_version.clone(),
    })
}

/// Inclusive port ranges a token covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PortSet(pub(crate) Vec<(u16, u16)>);

impl PortSet {
    /// Whether `port` is in one of the ranges.
    pub(crate) fn covers(&self, port: u16) -> bool {
        self.0.iter().any(|(a, b)| *a <= port && port <= *b)
    }
}

/// A validated CreateMicrovmAuthToken request.
#[derive(Clone, Debug)]
pub(crate) struct ValidAuthToken {
    pub(crate) ttl: Duration,
    pub(crate) ports: PortSet,
}

/// Validates a CreateMicrovmAuthToken body.
pub(crate) fn auth_token(input: &AuthTokenInput) -> Result<ValidAuthToken, ApiError> {
    let mut v = Violations::default();
    match input.expiration_in_minutes {
        None => v.not_null("expirationInMinutes"),
        Some(m) => v.range("expirationInMinutes", m, 1, None),
    }
    let mut ports = Vec::new();
    match &input.allowed_ports {
        None => v.not_null("allowedPorts"),
        Some(list) if list.is_empty() => v.length("allowedPorts", 0, 1, usize::MAX),
        Some(list) => {
            for (i, spec) in list.iter().enumerate() {
                match port_spec(spec) {
                    Some(range) => ports.push(range),
                    None => v.add(
                        &format!("allowedPorts.{}", i + 1),
                        "Member must be a port (1-65535), a range with startPort <= endPort, or allPorts",
                    ),
                }
            }
        }
    }
    v.finish()?;
    let minutes = input.expiration_in_minutes.unwrap_or(MAX_TOKEN_MINUTES);
    if minutes > MAX_TOKEN_MINUTES {
        return Err(ApiError::validation(format!(
            "ExpirationMinutes {minutes} exceeded max allowed of {MAX_TOKEN_MINUTES}."
        )));
    }
    Ok(ValidAuthToken {
        ttl: Duration::from_secs(minutes as u64 * 60),
        ports: PortSet(ports),
    })
}

/// One `PortSpecification` union member as a range.
fn port_spec(spec: &Value) -> Option<(u16, u16)> {
    let obj = spec.as_object()?;
    if obj.len() != 1 {
        return None;
    }
    let port = |v: &Value| {
        v.as_u64()
            .filter(|p| (1..=65_535).contains(p))
            .map(|p| p as u16)
    };
    if let Some(p) = obj.get("port") {
        let p = port(p)?;
        return Some((p, p));
    }
    if let Some(r) = obj.get("range") {
        let (a, b) = (port(r.get("startPort")?)?, port(r.get("endPort")?)?);
        return (a <= b).then_some((a, b));
    }
    if obj.contains_key("allPorts") {
        return Some((1, 65_535));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(body: Value) -> Result<ValidRun, ApiError> {
        run_microvm(&serde_json::from_value(body).unwrap())
    }

    const ARN: &str = "arn:aws:lambda:us-east-1:000000000000:microvm-image:rayito-base";

    #[test]
    fn arns_parse_and_bare_names_do_not() {
        let a = parse_image_arn(ARN).unwrap();
        assert_eq!(
            (a.region.as_str(), a.account.as_str(), a.name.as_str()),
            ("us-east-1", "000000000000", "rayito-base")
        );
        for bad in [
            "rayito-base",
            "arn:aws:lambda:us-east-1:0:microvm-image:x",
            "arn:aws:s3:us-east-1:000000000000:microvm-image:x",
            "arn:aws:lambda:us-east-1:000000000000:function:x",
            "arn:aws:lambda:us-east-1:000000000000:microvm-image:",
        ] {
            assert_eq!(parse_image_arn(bad), None, "{bad}");
        }
        assert_eq!(
            run(json!({"imageIdentifier": "rayito-base"}))
                .unwrap_err()
                .message,
            "Invalid ARN format"
        );
    }

    #[test]
    fn model_violations_are_collected_without_values() {
        let e = run(json!({"imageIdentifier": ARN, "runHookPayload": "s".repeat(4097), "maximumDurationInSeconds": 28801})).unwrap_err();
        assert_eq!(e.name, "ValidationException");
        assert_eq!(
            e.message,
            "2 validation errors detected: Value at 'runHookPayload' failed to satisfy constraint: Member must have length less than or equal to 4096; Value at 'maximumDurationInSeconds' failed to satisfy constraint: Member must have value less than or equal to 28800"
        );
        let e = run(json!({"imageIdentifier": ARN, "idlePolicy": {"maxIdleDurationSeconds": 59, "suspendedDurationSeconds": 0, "autoResumeEnabled": true}})).unwrap_err();
        assert_eq!(
            e.message,
            "1 validation error detected: Value at 'idlePolicy.maxIdleDurationSeconds' failed to satisfy constraint: Member must have value greater than or equal to 60"
        );
        assert!(run(json!({"imageIdentifier": ARN, "runHookPayload": "é".repeat(4096)})).is_ok());
    }

    #[test]
    fn token_expiry_cap_has_the_measured_message() {
        let e = auth_token(
            &serde_json::from_value(
                json!({"expirationInMinutes": 61, "allowedPorts": [{"port": 8080}]}),
            )
            .unwrap(),
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "ExpirationMinutes 61 exceeded max allowed of 60."
        );
        let ok = auth_token(&serde_json::from_value(json!({"expirationInMinutes": 60, "allowedPorts": [{"port": 8080}, {"range": {"startPort": 3000, "endPort": 3010}}]})).unwrap()).unwrap();
        assert!(ok.ports.covers(8080) && ok.ports.covers(3005) && !ok.ports.covers(9000));
        let e = auth_token(
            &serde_json::from_value(json!({"expirationInMinutes": 5, "allowedPorts": []})).unwrap(),
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "1 validation error detected: Value at 'allowedPorts' failed to satisfy constraint: Member must have length greater than or equal to 1"
        );
    }
}
