//! One parked (or warming) sandbox of a pool: its record, in the JSON
//! shape of schema `rayito.pool/1` (shared with the reference's Python and
//! TypeScript SDKs), plus the owner and lease our shared stores add.

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::error::SandboxError;
use crate::secret::Secret;

/// The schema string of a pool's file.
pub(crate) const POOL_SCHEMA: &str = "rayito.pool/1";

/// Where a slot is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SlotState {
    /// From RunMicrovm until it is parked.
    Warming,
    /// Parked: suspended, waiting for a take.
    Ready,
}

impl SlotState {
    /// `warming` or `ready`.
    pub fn as_str(self) -> &'static str {
        match self {
            SlotState::Warming => "warming",
            SlotState::Ready => "ready",
        }
    }
}

/// The idle policy a slot was created with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SlotIdle {
    pub max_idle_seconds: u64,
    pub suspended_duration_seconds: u64,
    pub auto_resume: bool,
}

/// One slot: what a take needs to resume and connect to it.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct SlotRecord {
    pub sandbox_id: String,
    pub access_token: Secret,
    pub endpoint: String,
    /// The image ARN (a record of another image belongs to another pool).
    pub template: String,
    pub template_version: String,
    pub started_at: SystemTime,
    pub maximum_duration_seconds: u64,
    pub region: String,
    pub state: SlotState,
    pub idle: SlotIdle,
    pub execution_role_arn: Option<String>,
    pub parked_at: Option<SystemTime>,
}

// The token never shows.
crate::secret::redacted_debug! {
    non_exhaustive SlotRecord |o| sandbox_id, state, started_at, maximum_duration_seconds,
    parked_at
}

impl SlotRecord {
    /// When the MicroVM reaches its maximum duration.
    pub(crate) fn expires_at(&self) -> SystemTime {
        self.started_at + Duration::from_secs(self.maximum_duration_seconds)
    }
}

/// A record as a store keeps it: with the owner and lease of a warming
/// slot (who makes it, and until when a crash of that owner is not
/// assumed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StoredSlot {
    pub record: SlotRecord,
    pub owner: Option<String>,
    pub lease_until: Option<SystemTime>,
}

/// The JSON form of one slot.
#[derive(Serialize, Deserialize)]
struct SlotJson {
    sandbox_id: String,
    access_token: String,
    endpoint: String,
    template: String,
    template_version: String,
    started_at: String,
    maximum_duration_seconds: u64,
    region: String,
    state: SlotState,
    idle: SlotIdle,
    #[serde(default)]
    execution_role_arn: Option<String>,
    #[serde(default)]
    ingress: Vec<String>,
    #[serde(default)]
    egress: Vec<String>,
    #[serde(default)]
    parked_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lease_until: Option<String>,
}

/// The JSON document of a pool's file.
#[derive(Serialize, Deserialize)]
struct PoolDocument {
    schema: String,
    #[serde(default)]
    slots: Vec<serde_json::Value>,
}

/// `2026-12-01T19:00:00Z`: ISO-8601 UTC, as the reference writes it.
pub(crate) fn iso_utc(t: SystemTime) -> String {
    crate::aws::time::rfc3339(t)
}

fn parse_iso(text: &str) -> Option<SystemTime> {
    crate::aws::time::parse_rfc3339(text)
}

fn bad_file(what: &'static str) -> SandboxError {
    SandboxError::invalid_argument(
        "store",
        format!("the pool file holds {what}; remove the file or point the pool at another one"),
    )
}

impl StoredSlot {
    fn to_json(&self) -> SlotJson {
        let r = &self.record;
        SlotJson {
            sandbox_id: r.sandbox_id.clone(),
            access_token: r.access_token.expose().to_owned(),
            endpoint: r.endpoint.clone(),
            template: r.template.clone(),
            template_version: r.template_version.clone(),
            started_at: iso_utc(r.started_at),
            maximum_duration_seconds: r.maximum_duration_seconds,
            region: r.region.clone(),
            state: r.state,
            idle: r.idle,
            execution_role_arn: r.execution_role_arn.clone(),
            ingress: Vec::new(),
            egress: Vec::new(),
            parked_at: r.parked_at.map(iso_utc),
            owner: self.owner.clone(),
            lease_until: self.lease_until.map(iso_utc),
        }
    }

    fn from_json(j: SlotJson) -> Result<Self, SandboxError> {
        let time = |t: &str| parse_iso(t).ok_or_else(|| bad_file("a slot with an invalid time"));
        Ok(StoredSlot {
            record: SlotRecord {
                sandbox_id: j.sandbox_id,
                access_token: Secret::new(j.access_token),
                endpoint: j.endpoint,
                template: j.template,
                template_version: j.template_version,
                started_at: time(&j.started_at)?,
                maximum_duration_seconds: j.maximum_duration_seconds,
                region: j.region,
                state: j.state,
                idle: j.idle,
                execution_role_arn: j.execution_role_arn,
                parked_at: j.parked_at.as_deref().map(time).transpose()?,
            },
            owner: j.owner,
            lease_until: j.lease_until.as_deref().map(time).transpose()?,
        })
    }
}

/// One record as JSON (the shape of a pool file's slot, token included;
/// no owner or lease): what the DynamoDB store keeps in `record`.
#[cfg(feature = "dynamodb")]
pub(crate) fn record_to_json(record: &SlotRecord) -> String {
    let slot = StoredSlot {
        record: record.clone(),
        owner: None,
        lease_until: None,
    };
    serde_json::to_string(&slot.to_json()).unwrap_or_default()
}

/// The record of [`record_to_json`]'s text; `None` when it is not one.
#[cfg(feature = "dynamodb")]
pub(crate) fn record_from_json(text: &str) -> Option<SlotRecord> {
    let json: SlotJson = serde_json::from_str(text).ok()?;
    StoredSlot::from_json(json).ok().map(|slot| slot.record)
}

/// The bytes of a pool file holding `slots`: sorted keys, two-space
/// indent, as the reference writes it.
pub(crate) fn encode(slots: &[StoredSlot]) -> Vec<u8> {
    // serde_json::Value keeps object keys sorted (no preserve_order).
    let document = serde_json::json!({
        "schema": POOL_SCHEMA,
        "slots": slots
            .iter()
            .map(|s| serde_json::to_value(s.to_json()).unwrap_or_default())
            .collect::<Vec<_>>(),
    });
    let mut bytes = serde_json::to_vec_pretty(&document).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// The slots of a pool file (empty bytes: none).
///
/// # Errors
/// `InvalidArgument` (`store`) for another schema or a malformed file.
pub(crate) fn decode(bytes: &[u8]) -> Result<Vec<StoredSlot>, SandboxError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Vec::new());
    }
    let document: PoolDocument =
        serde_json::from_slice(bytes).map_err(|_| bad_file("no pool document"))?;
    if document.schema != POOL_SCHEMA {
        return Err(SandboxError::invalid_argument(
            "store",
            "the pool file has another schema than rayito.pool/1; use a file of its own for this pool",
        ));
    }
    document
        .slots
        .into_iter()
        .map(|v| {
            serde_json::from_value::<SlotJson>(v)
                .map_err(|_| bad_file("an invalid slot"))
                .and_then(StoredSlot::from_json)
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    /// Runs `processes` copies of the test binary's `claimer` test (the
    /// exact path `test`), each told `env` = `value`, and returns every slot
    /// id they report claimed (a line `CLAIMED id,id,...` each), so a store
    /// race test can check none was claimed twice or lost.
    pub(crate) fn race_claimers(
        test: &str,
        processes: usize,
        env: &str,
        value: &std::ffi::OsStr,
    ) -> Vec<String> {
        let exe = std::env::current_exe().unwrap();
        let children: Vec<_> = (0..processes)
            .map(|_| {
                std::process::Command::new(&exe)
                    .args(["--exact", test, "--nocapture"])
                    .env(env, value)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut all = Vec::new();
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "a claimer failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let text = String::from_utf8(out.stdout).unwrap();
            let line = text
                .lines()
                .find_map(|l| l.strip_prefix("CLAIMED "))
                .expect("the child reports what it claimed");
            all.extend(line.split(',').filter(|s| !s.is_empty()).map(str::to_owned));
        }
        all
    }

    /// A record for tests: `id`, image `image`, started `age` ago with a
    /// maximum duration of `max`.
    pub(crate) fn record(
        id: &str,
        image: &str,
        state: SlotState,
        expires_in: Duration,
    ) -> SlotRecord {
        let now = SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let started_at = std::time::UNIX_EPOCH + Duration::from_secs(now - 100);
        SlotRecord {
            sandbox_id: id.to_owned(),
            access_token: Secret::new("dG9rZW4tdG9rZW4tdG9rZW4tdG9rZW4"),
            endpoint: "127.0.0.1:1".to_owned(),
            template: image.to_owned(),
            template_version: "1".to_owned(),
            started_at,
            maximum_duration_seconds: 100 + expires_in.as_secs(),
            region: "us-east-1".to_owned(),
            state,
            idle: SlotIdle {
                max_idle_seconds: 300,
                suspended_duration_seconds: 28_500,
                auto_resume: true,
            },
            execution_role_arn: None,
            parked_at: None,
        }
    }

    #[test]
    fn a_file_round_trips_in_the_reference_shape() {
        let slot = StoredSlot {
            record: SlotRecord {
                started_at: UNIX_EPOCH + Duration::from_secs(1_796_083_200),
                parked_at: Some(UNIX_EPOCH + Duration::from_secs(1_796_083_260)),
                ..record(
                    "microvm-1",
                    "arn:img",
                    SlotState::Ready,
                    Duration::from_secs(60),
                )
            },
            owner: None,
            lease_until: None,
        };
        let bytes = encode(std::slice::from_ref(&slot));
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(
            text.starts_with("{\n  \"schema\": \"rayito.pool/1\",\n  \"slots\": ["),
            "{text}"
        );
        assert!(
            text.contains("\"started_at\": \"2026-12-01T00:00:00Z\""),
            "{text}"
        );
        assert!(
            text.contains("\"parked_at\": \"2026-12-01T00:01:00Z\""),
            "{text}"
        );
        assert!(text.contains("\"state\": \"ready\""), "{text}");
        assert!(!text.contains("owner"), "{text}");
        assert_eq!(decode(&bytes).unwrap(), vec![slot.clone()]);
        // The reference's own times carry microseconds.
        let theirs = text.replace("2026-12-01T00:00:00Z", "2026-12-01T00:00:00.250000Z");
        let back = decode(theirs.as_bytes()).unwrap();
        assert_eq!(
            back[0].record.started_at,
            slot.record.started_at + Duration::from_millis(250)
        );
    }

    #[test]
    fn another_schema_or_garbage_is_refused_and_nothing_is_empty() {
        assert_eq!(decode(b"").unwrap(), vec![]);
        assert_eq!(decode(b"  \n").unwrap(), vec![]);
        let err = decode(br#"{"schema":"rayito.pool/2","slots":[]}"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid store: the pool file has another schema than rayito.pool/1; use a file of its own for this pool"
        );
        let err = decode(b"{").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid store: the pool file holds no pool document; remove the file or point the pool at another one"
        );
        let err = decode(br#"{"schema":"rayito.pool/1","slots":[{"sandbox_id":1}]}"#).unwrap_err();
        assert!(err.to_string().contains("an invalid slot"), "{err}");
    }

    #[test]
    fn a_records_debug_hides_its_token() {
        let r = record(
            "microvm-1",
            "arn:img",
            SlotState::Ready,
            Duration::from_secs(60),
        );
        let shown = format!("{r:?}");
        assert!(!shown.contains("dG9rZW4"), "{shown}");
        assert!(shown.contains("microvm-1"), "{shown}");
    }
}
