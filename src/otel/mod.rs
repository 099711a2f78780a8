//! One span per public operation (docs/observability.md).
//!
//! Every public operation of the spec's list (sandbox create, connect,
//! kill, pause, resume; commands run; code run; the file operations) runs
//! inside a `tracing` span named `rayito.<area>.<operation>` whose fields
//! are the spec's closed attribute set ([`Attr`]: a value outside it cannot
//! be built). A `tracing-opentelemetry` user gets them as OpenTelemetry
//! spans without any feature of ours. With the `otel` feature and a tracer
//! provider given to the builder, the same operation is also a CLIENT-kind
//! OpenTelemetry span of tracer `rayito` (the `bridge` module), and every
//! gRPC call made under it carries its W3C `traceparent`.
//!
//! Spans are attached with `Instrument` (never an entered guard held across
//! an await), so a public future stays `Send`.

#[cfg(feature = "otel")]
mod bridge;
#[cfg(all(test, feature = "otel"))]
pub(crate) use self::bridge::remote_parent;
#[cfg(feature = "otel")]
pub(crate) use self::bridge::{Tracer, trace_headers};

use std::future::Future;

use tracing::Instrument as _;

use crate::error::SandboxError;

macro_rules! names {
    ($($variant:ident => $name:literal),+ $(,)?) => {
        /// The operations that are spans, each with its span name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum Name {
            $($variant),+
        }

        impl Name {
            /// The span's name (`rayito.files.read`).
            pub(crate) const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $name),+
                }
            }

            /// A new `tracing` span of this name with every field of the
            /// closed set declared (empty until recorded). `otel.kind` and
            /// `otel.status_*` are read by `tracing-opentelemetry`, which
            /// turns them into the span's kind and status, not attributes.
            fn tracing_span(self) -> tracing::Span {
                match self {
                    $(Self::$variant => tracing::info_span!(
                        target: "rayito::span",
                        $name,
                        otel.kind = "client",
                        otel.status_code = tracing::field::Empty,
                        otel.status_description = tracing::field::Empty,
                        rayito.sandbox.id = tracing::field::Empty,
                        rayito.region = tracing::field::Empty,
                        rayito.template.name = tracing::field::Empty,
                        rayito.resume_generation = tracing::field::Empty,
                        rayito.operation = tracing::field::Empty,
                        rayito.commands.exit_code = tracing::field::Empty,
                        rayito.commands.background = tracing::field::Empty,
                        rayito.code.language = tracing::field::Empty,
                        rayito.files.operation = tracing::field::Empty,
                        rayito.files.count = tracing::field::Empty,
                        rayito.files.bytes = tracing::field::Empty,
                        rayito.error.type = tracing::field::Empty,
                    )),+
                }
            }
        }
    };
}

names! {
    SandboxCreate => "rayito.sandbox.create",
    SandboxConnect => "rayito.sandbox.connect",
    SandboxKill => "rayito.sandbox.kill",
    SandboxPause => "rayito.sandbox.pause",
    SandboxResume => "rayito.sandbox.resume",
    CommandsRun => "rayito.commands.run",
    CodeRun => "rayito.code.run",
    FilesRead => "rayito.files.read",
    FilesWrite => "rayito.files.write",
    FilesWriteFiles => "rayito.files.write_files",
    FilesList => "rayito.files.list",
    FilesExists => "rayito.files.exists",
    FilesGetInfo => "rayito.files.get_info",
    FilesRemove => "rayito.files.remove",
    FilesRename => "rayito.files.rename",
    FilesMakeDir => "rayito.files.make_dir",
}

impl Name {
    /// The operation without the `rayito.` prefix (`files.read`): the
    /// value of `rayito.operation`.
    fn operation(self) -> &'static str {
        let name = self.as_str();
        name.strip_prefix("rayito.").unwrap_or(name)
    }

    /// The file operation (`read`) of a `rayito.files.*` span.
    fn files_operation(self) -> Option<&'static str> {
        self.as_str().strip_prefix("rayito.files.")
    }
}

/// Longest user-chosen text kept in an attribute (a template or language
/// name); longer text is cut at a character boundary.
const MAX_NAME_CHARS: usize = 128;

/// One attribute of the closed set. Nothing else can be put on a span:
/// never command text, code, paths, env values, secret names or values,
/// tokens or URLs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Attr {
    /// `rayito.sandbox.id`.
    SandboxId(String),
    /// `rayito.region` (`local` for the local backend).
    Region(String),
    /// `rayito.template.name`: the template (image name or ARN) asked for.
    TemplateName(String),
    /// `rayito.resume_generation`.
    ResumeGeneration(u64),
    /// `rayito.operation`.
    Operation(&'static str),
    /// `rayito.commands.exit_code`.
    ExitCode(i32),
    /// `rayito.commands.background`.
    Background(bool),
    /// `rayito.code.language`.
    Language(String),
    /// `rayito.files.operation`.
    FilesOperation(&'static str),
    /// `rayito.files.count`.
    FilesCount(u64),
    /// `rayito.files.bytes`.
    FilesBytes(u64),
    /// `rayito.error.type`: the error's kind string (`file_not_found`).
    ErrorType(&'static str),
}

/// An attribute's value, for both span kinds.
#[cfg_attr(not(feature = "otel"), allow(dead_code))]
pub(crate) enum Value<'a> {
    Str(&'a str),
    I64(i64),
    Bool(bool),
}

impl Attr {
    /// Every key of the closed set, in the spec's order.
    #[cfg(test)]
    pub(crate) const KEYS: [&'static str; 12] = [
        "rayito.sandbox.id",
        "rayito.region",
        "rayito.template.name",
        "rayito.resume_generation",
        "rayito.operation",
        "rayito.commands.exit_code",
        "rayito.commands.background",
        "rayito.code.language",
        "rayito.files.operation",
        "rayito.files.count",
        "rayito.files.bytes",
        "rayito.error.type",
    ];

    /// A user-chosen name (template, language), bounded.
    pub(crate) fn name_text(text: &str) -> String {
        text.chars().take(MAX_NAME_CHARS).collect()
    }

    /// The attribute's key.
    pub(crate) const fn key(&self) -> &'static str {
        match self {
            Self::SandboxId(_) => "rayito.sandbox.id",
            Self::Region(_) => "rayito.region",
            Self::TemplateName(_) => "rayito.template.name",
            Self::ResumeGeneration(_) => "rayito.resume_generation",
            Self::Operation(_) => "rayito.operation",
            Self::ExitCode(_) => "rayito.commands.exit_code",
            Self::Background(_) => "rayito.commands.background",
            Self::Language(_) => "rayito.code.language",
            Self::FilesOperation(_) => "rayito.files.operation",
            Self::FilesCount(_) => "rayito.files.count",
            Self::FilesBytes(_) => "rayito.files.bytes",
            Self::ErrorType(_) => "rayito.error.type",
        }
    }

    /// The attribute's value (counts above `i64::MAX` saturate).
    pub(crate) fn value(&self) -> Value<'_> {
        match self {
            Self::SandboxId(s) | Self::Region(s) | Self::TemplateName(s) | Self::Language(s) => {
                Value::Str(s)
            }
            Self::Operation(s) | Self::FilesOperation(s) | Self::ErrorType(s) => Value::Str(s),
            Self::ResumeGeneration(n) | Self::FilesCount(n) | Self::FilesBytes(n) => {
                Value::I64(i64::try_from(*n).unwrap_or(i64::MAX))
            }
            Self::ExitCode(code) => Value::I64(i64::from(*code)),
            Self::Background(b) => Value::Bool(*b),
        }
    }

    fn record(&self, span: &tracing::Span) {
        match self.value() {
            Value::Str(s) => span.record(self.key(), s),
            Value::I64(n) => span.record(self.key(), n),
            Value::Bool(b) => span.record(self.key(), b),
        };
    }
}

/// The attributes an operation learns from its outcome (the sandbox id a
/// create got, a command's exit code, the bytes read).
pub(crate) type Learned = Vec<Attr>;

/// What an operation on a handle reads from it (the sandbox core
/// implements it; this module does not know the handle).
pub(crate) trait Traced {
    /// The sandbox id.
    fn sandbox_id(&self) -> &str;
    /// The region of its client (`None`: the local backend's).
    fn region(&self) -> Option<&str>;
    /// The tracer of its spans.
    #[cfg(feature = "otel")]
    fn tracer(&self) -> Option<&Tracer>;
}

/// A public operation about to run: its span name, the attributes known
/// before it starts, and (feature `otel`) the tracer of its handle.
#[derive(Debug)]
#[must_use]
pub(crate) struct Op {
    name: Name,
    attrs: Vec<Attr>,
    #[cfg(feature = "otel")]
    tracer: Option<Tracer>,
}

impl Op {
    /// The operation `name`, with `rayito.operation` (and, for a file
    /// operation, `rayito.files.operation`).
    pub(crate) fn new(name: Name) -> Self {
        let mut attrs = vec![Attr::Operation(name.operation())];
        if let Some(op) = name.files_operation() {
            attrs.push(Attr::FilesOperation(op));
        }
        Self {
            name,
            attrs,
            #[cfg(feature = "otel")]
            tracer: None,
        }
    }

    /// Adds an attribute known before the operation runs.
    pub(crate) fn with(mut self, attr: Attr) -> Self {
        self.attrs.push(attr);
        self
    }

    /// The operation of the handle `sandbox`: its id, region and tracer.
    pub(crate) fn on(self, sandbox: &impl Traced) -> Self {
        let this = self
            .with(Attr::SandboxId(sandbox.sandbox_id().to_owned()))
            .with(Attr::Region(sandbox.region().unwrap_or("local").to_owned()));
        #[cfg(feature = "otel")]
        let this = this.traced_by(sandbox.tracer());
        this
    }

    /// The OpenTelemetry tracer the operation's span goes to (`None`: no
    /// OpenTelemetry span; the `tracing` span is made anyway).
    #[cfg(feature = "otel")]
    pub(crate) fn traced_by(mut self, tracer: Option<&Tracer>) -> Self {
        self.tracer = tracer.cloned();
        self
    }

    /// Runs `operation` inside the span; `learned` names what its success
    /// adds to the span. A failure adds `rayito.error.type` (the kind) and
    /// the ERROR status; a `CommandExit` also its exit code.
    pub(crate) async fn run<T, F>(
        self,
        operation: F,
        learned: impl FnOnce(&T) -> Learned,
    ) -> Result<T, SandboxError>
    where
        F: Future<Output = Result<T, SandboxError>>,
    {
        let span = self.name.tracing_span();
        for attr in &self.attrs {
            attr.record(&span);
        }
        #[cfg(feature = "otel")]
        let otel = self
            .tracer
            .as_ref()
            .map(|tracer| tracer.start(self.name.as_str(), &self.attrs));
        let instrumented = operation.instrument(span.clone());
        #[cfg(feature = "otel")]
        let result = match &otel {
            Some(cx) => {
                opentelemetry::context::FutureExt::with_context(instrumented, cx.clone()).await
            }
            None => instrumented.await,
        };
        #[cfg(not(feature = "otel"))]
        let result = instrumented.await;
        let outcome = match &result {
            Ok(value) => learned(value),
            Err(err) => failure(err),
        };
        for attr in &outcome {
            attr.record(&span);
        }
        if let Err(err) = &result {
            span.record("otel.status_code", "error");
            span.record("otel.status_description", err.kind().as_str());
        }
        #[cfg(feature = "otel")]
        if let Some(cx) = &otel {
            bridge::finish(cx, &outcome, result.as_ref().err());
        }
        result
    }
}

/// What a failure puts on the span: its kind, and a command's exit code.
fn failure(err: &SandboxError) -> Learned {
    let mut attrs = Vec::with_capacity(2);
    if let SandboxError::CommandExit { exit_code, .. } = err {
        attrs.push(Attr::ExitCode(*exit_code));
    }
    attrs.push(Attr::ErrorType(err.kind().as_str()));
    attrs
}

/// Nothing learned from the outcome.
pub(crate) fn nothing<T>(_: &T) -> Learned {
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_attribute_key_is_of_the_closed_set() {
        let all = [
            Attr::SandboxId(String::new()),
            Attr::Region(String::new()),
            Attr::TemplateName(String::new()),
            Attr::ResumeGeneration(0),
            Attr::Operation(""),
            Attr::ExitCode(0),
            Attr::Background(false),
            Attr::Language(String::new()),
            Attr::FilesOperation(""),
            Attr::FilesCount(0),
            Attr::FilesBytes(0),
            Attr::ErrorType(""),
        ];
        let keys: Vec<_> = all.iter().map(Attr::key).collect();
        assert_eq!(keys, Attr::KEYS);
    }

    #[test]
    fn names_and_operations() {
        assert_eq!(Name::FilesWriteFiles.as_str(), "rayito.files.write_files");
        assert_eq!(Name::FilesWriteFiles.operation(), "files.write_files");
        assert_eq!(Name::FilesWriteFiles.files_operation(), Some("write_files"));
        assert_eq!(Name::SandboxCreate.operation(), "sandbox.create");
        assert_eq!(Name::CommandsRun.files_operation(), None);
    }

    /// docs/observability.md transcribes the names and the closed set.
    #[test]
    fn the_doc_lists_every_name_and_attribute() {
        let doc = include_str!("../../docs/observability.md");
        let names = [
            Name::SandboxCreate,
            Name::SandboxConnect,
            Name::SandboxKill,
            Name::SandboxPause,
            Name::SandboxResume,
            Name::CommandsRun,
            Name::CodeRun,
            Name::FilesRead,
            Name::FilesWrite,
            Name::FilesWriteFiles,
            Name::FilesList,
            Name::FilesExists,
            Name::FilesGetInfo,
            Name::FilesRemove,
            Name::FilesRename,
            Name::FilesMakeDir,
        ];
        for name in names {
            assert!(
                doc.contains(&format!("| `{}` |", name.as_str())),
                "{} is not in the doc's table",
                name.as_str()
            );
        }
        for key in Attr::KEYS {
            assert!(
                doc.contains(&format!("| `{key}` |")),
                "{key} is not in the doc's table"
            );
        }
    }

    #[test]
    fn a_long_name_is_cut() {
        let long = "é".repeat(500);
        assert_eq!(Attr::name_text(&long).chars().count(), MAX_NAME_CHARS);
    }
}
