//! The page: static files embedded in the binary, served by name with
//! their content type (no directory walk, no file system).

use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};

/// (name under `/static/`, content type, content).
const FILES: &[(&str, &str, &str)] = &[
    ("style.css", CSS, include_str!("../static/style.css")),
    ("app.js", JS, include_str!("../static/app.js")),
    ("api.js", JS, include_str!("../static/api.js")),
    ("dom.js", JS, include_str!("../static/dom.js")),
    ("charts.js", JS, include_str!("../static/charts.js")),
    (
        "views/fleet.js",
        JS,
        include_str!("../static/views/fleet.js"),
    ),
    (
        "views/sandbox.js",
        JS,
        include_str!("../static/views/sandbox.js"),
    ),
    (
        "views/images.js",
        JS,
        include_str!("../static/views/images.js"),
    ),
    (
        "views/quotas.js",
        JS,
        include_str!("../static/views/quotas.js"),
    ),
    ("views/cost.js", JS, include_str!("../static/views/cost.js")),
];

const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// The page's one HTML document (every view is a fragment route of it).
pub(crate) async fn index() -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        include_str!("../static/index.html"),
    )
        .into_response()
}

pub(crate) async fn file(Path(name): Path<String>) -> Response {
    match FILES.iter().find(|(n, _, _)| *n == name) {
        Some((_, kind, body)) => ([(header::CONTENT_TYPE, *kind)], *body).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}
