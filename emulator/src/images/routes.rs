//! The image API's routes (restJson1, `lambda-microvms` 2025-09-09): the
//! paths, statuses and shapes `aws-sdk-lambdamicrovms` 1.18 sends and
//! parses. Every call passes the control plane's gate first.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Extension, Path, Query, State};
use axum::response::IntoResponse;
use axum::routing::get;
use bytes::Bytes;
use http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::super::api_error::ApiError;
use super::super::control::{Reply, decode_page_token, encode_page_token, gate, ok, parse_body};
use super::super::faults::Operation;
use super::super::guard::Signed;
use super::super::model::MicrovmState;
use super::super::registry::Shared;
use super::super::validate::{self, Violations};
use super::config::{self, ImageInput};
use super::{MANAGED_IMAGE, build};

/// The image routes, merged into the control plane's router.
pub(crate) fn router() -> Router<Arc<Shared>> {
    const IMAGE: &str = "/2025-09-09/microvm-images/{id}";
    const VERSION: &str = "/2025-09-09/microvm-images/{id}/versions/{version}";
    Router::new()
        .route(
            "/2025-09-09/microvm-images",
            get(list_images).post(create_image),
        )
        .route(IMAGE, get(get_image).put(update_image).delete(delete_image))
        .route(
            "/2025-09-09/microvm-images/{id}/versions",
            get(list_versions),
        )
        .route(
            VERSION,
            get(get_version)
                .patch(update_version)
                .delete(delete_version),
        )
        .route(
            "/2025-09-09/microvm-images/{id}/versions/{version}/builds",
            get(list_builds),
        )
        .route(
            "/2025-09-09/microvm-images/{id}/versions/{version}/builds/{build}",
            get(get_build),
        )
        .route(
            "/2025-09-09/managed-microvm-images/{id}/versions",
            get(list_managed_versions),
        )
}

/// The query of every list operation (unknown parameters ignored).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PageQuery {
    max_results: Option<String>,
    next_token: Option<String>,
    name_filter: Option<String>,
}

/// An image identifier from the URI: (name, ARN).
///
/// # Errors
/// ValidationException for a malformed one; ResourceNotFoundException for
/// an ARN of another account or region.
pub(crate) fn resolve(shared: &Shared, id: &str) -> Result<(String, String), ApiError> {
    let mut v = Violations::default();
    v.length("imageIdentifier", id.chars().count(), 1, 256);
    v.finish()?;
    let s = &shared.settings;
    let name = match validate::parse_image_arn(id) {
        Some(arn) if arn.region == s.region && arn.account == s.account_id => arn.name,
        Some(_) => return Err(ApiError::image_not_found(id)),
        None if id.starts_with("arn:") => {
            return Err(ApiError::validation(
                "imageIdentifier must be an image name or a MicroVM image ARN.",
            ));
        }
        None if !config::is_image_name(id) => {
            return Err(ApiError::validation(format!(
                "1 validation error detected: Value at 'imageIdentifier' failed to satisfy constraint: Member must satisfy regular expression pattern: {}",
                config::NAME_PATTERN
            )));
        }
        None => id.to_string(),
    };
    let arn = s.image_arn(&name);
    Ok((name, arn))
}

/// One page of `items` and its `nextToken`.
fn page(items: Vec<Value>, q: &PageQuery) -> Result<Value, ApiError> {
    let (size, start) = validate::page(
        q.max_results.as_deref(),
        q.next_token.as_deref(),
        decode_page_token,
    )?;
    let end = start.saturating_add(size).min(items.len());
    let slice = items.get(start..end).unwrap_or_default().to_vec();
    let mut out = json!({ "items": slice });
    if end < items.len()
        && let Some(obj) = out.as_object_mut()
    {
        obj.insert("nextToken".into(), json!(encode_page_token(end)));
    }
    Ok(out)
}

async fn create_image(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    body: Bytes,
) -> Reply {
    gate(&shared, &signed, Operation::CreateMicrovmImage)?;
    let (input, _): (ImageInput, Value) = parse_body(&body)?;
    let valid = config::image_input(&input, true)?;
    let name = valid.name.unwrap_or_default();
    let arn = shared.settings.image_arn(&name);
    let tags = input.tags.clone().unwrap_or_default();
    let (answer, version) = shared.images.create(&name, &arn, valid.config, tags)?;
    build::spawn(&shared, name, version);
    Ok((StatusCode::CREATED, axum::Json(answer)).into_response())
}

async fn update_image(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    Path(id): Path<String>,
    body: Bytes,
) -> Reply {
    gate(&shared, &signed, Operation::UpdateMicrovmImage)?;
    let (input, _): (ImageInput, Value) = parse_body(&body)?;
    let (name, arn) = resolve(&shared, &id)?;
    let valid = config::image_input(&input, false)?;
    let (answer, version) = shared.images.update(&name, &arn, valid.config)?;
    build::spawn(&shared, name, version);
    ok(answer)
}

async fn get_image(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    Path(id): Path<String>,
) -> Reply {
    gate(&shared, &signed, Operation::GetMicrovmImage)?;
    let (name, arn) = resolve(&shared, &id)?;
    ok(shared.images.image_view(&name, &arn)?)
}

async fn list_images(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    Query(q): Query<PageQuery>,
) -> Reply {
    gate(&shared, &signed, Operation::ListMicrovmImages)?;
    ok(page(
        shared.images.image_items(q.name_filter.as_deref()),
        &q,
    )?)
}

async fn delete_image(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    Path(id): Path<String>,
) -> Reply {
    gate(&shared, &signed, Operation::DeleteMicrovmImage)?;
    let (name, arn) = resolve(&shared, &id)?;
    shared.images.delete_image(&name, &arn)?;
    let dir = shared.settings.root.join("images").join(&name);
    shared.discard_spares_under(&dir);
    let _ = tokio::fs::remove_dir_all(dir).await;
    ok(json!({ "imageIdentifier": arn, "state": "DELETING" }))
}

async fn list_versions(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    Path(id): Path<String>,
    Query(q): Query<PageQuery>,
) -> Reply {
    gate(&shared, &signed, Operation::ListMicrovmImageVersions)?;
    let (name, arn) = resolve(&shared, &id)?;
    ok(page(shared.images.version_items(&name, &arn)?, &q)?)
}

async fn get_version(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    Path((id, version)): Path<(String, String)>,
) -> Reply {
    gate(&shared, &signed, Operation::GetMicrovmImageVersion)?;
    let (name, arn) = resolve(&shared, &id)?;
    ok(shared.images.version_view(&name, &arn, &version)?)
}

/// UpdateMicrovmImageVersion body.
#[derive(Debug, Default, Deserialize)]
struct StatusInput {
    status: Option<String>,
}

async fn update_version(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    Path((id, version)): Path<(String, String)>,
    body: Bytes,
) -> Reply {
    gate(&shared, &signed, Operation::UpdateMicrovmImageVersion)?;
    let (input, _): (StatusInput, Value) = parse_body(&body)?;
    let mut v = Violations::default();
    let active = match input.status.as_deref() {
        None => {
            v.not_null("status");
            false
        }
        Some("ACTIVE") => true,
        Some("INACTIVE") => false,
        Some(_) => {
            v.add(
                "status",
                "Member must satisfy enum value set: [ACTIVE, INACTIVE]",
            );
            false
        }
    };
    v.finish()?;
    let (name, arn) = resolve(&shared, &id)?;
    ok(shared.images.set_status(&name, &arn, &version, active)?)
}

async fn delete_version(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    Path((id, version)): Path<(String, String)>,
) -> Reply {
    gate(&shared, &signed, Operation::DeleteMicrovmImageVersion)?;
    let (name, arn) = resolve(&shared, &id)?;
    // A MicroVM not yet terminated keeps its version.
    let vms = shared.all();
    let live = |number: u32| {
        vms.iter().any(|vm| {
            vm.spec.image_arn == arn
                && super::parse_version(&vm.spec.image_version) == Some(number)
                && vm.state() != MicrovmState::Terminated
        })
    };
    let number = shared.images.delete_version(&name, &arn, &version, live)?;
    let dir = build::version_dir(&shared, &name, number);
    shared.discard_spares_under(&dir);
    let _ = tokio::fs::remove_dir_all(dir).await;
    ok(json!({
        "imageIdentifier": arn,
        "imageVersion": number.to_string(),
        "state": "DELETING",
    }))
}

async fn list_builds(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    Path((id, version)): Path<(String, String)>,
    Query(q): Query<PageQuery>,
) -> Reply {
    gate(&shared, &signed, Operation::ListMicrovmImageBuilds)?;
    let (name, arn) = resolve(&shared, &id)?;
    let build = shared.images.build_view(&name, &arn, &version, None)?;
    ok(page(vec![build], &q)?)
}

async fn get_build(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    Path((id, version, build_id)): Path<(String, String, String)>,
) -> Reply {
    gate(&shared, &signed, Operation::GetMicrovmImageBuild)?;
    let (name, arn) = resolve(&shared, &id)?;
    ok(shared
        .images
        .build_view(&name, &arn, &version, Some(&build_id))?)
}

async fn list_managed_versions(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    Path(id): Path<String>,
    Query(q): Query<PageQuery>,
) -> Reply {
    gate(&shared, &signed, Operation::ListManagedMicrovmImageVersions)?;
    let arn = format!(
        "arn:aws:lambda:{}:aws:microvm-image:{MANAGED_IMAGE}",
        shared.settings.region
    );
    if id != MANAGED_IMAGE && id != arn {
        return Err(ApiError::not_found(
            "ManagedMicrovmImage",
            MANAGED_IMAGE,
            format!("Managed MicroVM image not found; the managed image is {MANAGED_IMAGE}."),
        ));
    }
    let item = json!({
        "imageArn": arn,
        "imageVersion": "1",
        "status": "AVAILABLE",
        "createdAt": 1_767_225_600.0,
        "updatedAt": 1_767_225_600.0,
    });
    ok(page(vec![item], &q)?)
}
