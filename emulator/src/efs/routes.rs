//! The EFS routes under `/2015-02-01/` on the control plane's router (the
//! guard has checked the `Host` and scoped the signature to
//! `elasticfilesystem`). Each handler counts its call, refuses what the
//! gate refuses, then runs its operation off the async threads (they touch
//! the disk: the state file, the directories).

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Extension, Path, Query, State};
use axum::response::{IntoResponse as _, Response};
use axum::routing::{delete, get, post};
use bytes::Bytes;
use http::header;

use super::LocalEfs;
use super::error::EfsError;
use super::ops::Done;
use crate::guard::Signed;
use crate::registry::Shared;

/// Where every EFS route starts: a request under it is an EFS call.
pub(crate) const PREFIX: &str = "/2015-02-01/";

/// The EFS routes.
pub(crate) fn router() -> Router<Arc<Shared>> {
    Router::new()
        .route(
            "/2015-02-01/file-systems",
            post(create_file_system).get(describe_file_systems),
        )
        .route("/2015-02-01/file-systems/{id}", delete(delete_file_system))
        .route(
            "/2015-02-01/access-points",
            post(create_access_point).get(describe_access_points),
        )
        .route(
            "/2015-02-01/access-points/{id}",
            delete(delete_access_point),
        )
        .route("/2015-02-01/mount-targets", get(describe_mount_targets))
        .route(
            "/2015-02-01/mount-targets/{id}",
            delete(delete_mount_target),
        )
        .route(
            "/2015-02-01/resource-tags/{id}",
            post(tag_resource)
                .get(list_tags_for_resource)
                .delete(untag_resource),
        )
}

type Pairs = Result<Query<Vec<(String, String)>>, QueryRejection>;

/// Gates the call, runs `op` on a blocking thread, and answers.
async fn run(
    shared: &Shared,
    signed: &Signed,
    action: &str,
    op: impl FnOnce(&LocalEfs) -> Done + Send + 'static,
) -> Response {
    let efs = shared.efs.clone();
    if let Err(err) = efs.gate(signed, action) {
        return err.into_response();
    }
    let done = tokio::task::spawn_blocking(move || op(&efs))
        .await
        .unwrap_or_else(|_| Err(EfsError::internal("The request could not be completed.")));
    match done {
        Ok((status, Some(body))) => (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response(),
        Ok((status, None)) => (status, Body::empty()).into_response(),
        Err(err) => err.into_response(),
    }
}

/// The query's pairs; BadRequest for one that does not parse.
fn pairs(query: Pairs) -> Result<Vec<(String, String)>, EfsError> {
    query
        .map(|Query(q)| q)
        .map_err(|_| EfsError::bad_request("The query string is malformed."))
}

async fn create_file_system(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    body: Bytes,
) -> Response {
    run(&shared, &signed, "CreateFileSystem", move |efs| {
        efs.create_file_system(&body)
    })
    .await
}

async fn describe_file_systems(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    query: Pairs,
) -> Response {
    run(&shared, &signed, "DescribeFileSystems", move |efs| {
        efs.describe_file_systems(&pairs(query)?)
    })
    .await
}

async fn delete_file_system(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    Path(id): Path<String>,
) -> Response {
    run(&shared, &signed, "DeleteFileSystem", move |efs| {
        efs.delete_file_system(&id)
    })
    .await
}

async fn create_access_point(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    body: Bytes,
) -> Response {
    run(&shared, &signed, "CreateAccessPoint", move |efs| {
        efs.create_access_point(&body)
    })
    .await
}

async fn describe_access_points(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    query: Pairs,
) -> Response {
    run(&shared, &signed, "DescribeAccessPoints", move |efs| {
        efs.describe_access_points(&pairs(query)?)
    })
    .await
}

async fn delete_access_point(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    Path(id): Path<String>,
) -> Response {
    run(&shared, &signed, "DeleteAccessPoint", move |efs| {
        efs.delete_access_point(&id)
    })
    .await
}

async fn describe_mount_targets(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    query: Pairs,
) -> Response {
    run(&shared, &signed, "DescribeMountTargets", move |efs| {
        efs.describe_mount_targets(&pairs(query)?)
    })
    .await
}

async fn delete_mount_target(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    Path(id): Path<String>,
) -> Response {
    run(&shared, &signed, "DeleteMountTarget", move |efs| {
        efs.delete_mount_target(&id)
    })
    .await
}

async fn tag_resource(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    run(&shared, &signed, "TagResource", move |efs| {
        efs.tag_resource(&id, &body)
    })
    .await
}

async fn list_tags_for_resource(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    Path(id): Path<String>,
    query: Pairs,
) -> Response {
    run(&shared, &signed, "ListTagsForResource", move |efs| {
        efs.list_tags_for_resource(&id, &pairs(query)?)
    })
    .await
}

async fn untag_resource(
    State(shared): State<Arc<Shared>>,
    Extension(signed): Extension<Signed>,
    Path(id): Path<String>,
    query: Pairs,
) -> Response {
    run(&shared, &signed, "UntagResource", move |efs| {
        efs.untag_resource(&id, &pairs(query)?)
    })
    .await
}
