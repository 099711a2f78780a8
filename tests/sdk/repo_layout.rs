//! The README's layout table names exactly the workspace's crates: a crate
//! added or moved without the README saying so fails here.

use std::collections::BTreeSet;
use std::path::Path;

fn root() -> &'static Path {
    crate::sdk_support::repo_root()
}

/// The `members = [..]` list of the workspace manifest, as directories with a
/// trailing slash (`.` is the root crate, listed in the README as `src/`).
fn workspace_members() -> BTreeSet<String> {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).expect("Cargo.toml");
    let start = manifest.find("members = [").expect("a members list") + "members = [".len();
    let end = start + manifest[start..].find(']').expect("the list ends");
    manifest[start..end]
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .map(|m| {
            if m == "." {
                "src/".to_owned()
            } else {
                format!("{m}/")
            }
        })
        .collect()
}

/// The paths in the first column of the README's layout table that hold a
/// crate (a `Cargo.toml`, or `src/` for the root crate).
fn readme_crates() -> BTreeSet<String> {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let layout = readme.split("## Layout").nth(1).expect("a Layout section");
    layout
        .lines()
        .take_while(|l| l.starts_with('|') || l.trim().is_empty())
        .filter_map(|l| l.split('`').nth(1))
        .filter(|path| path.ends_with('/'))
        .filter(|path| *path == "src/" || root().join(path).join("Cargo.toml").is_file())
        .map(str::to_owned)
        .collect()
}

#[test]
fn readme_layout_lists_every_workspace_crate() {
    let members = workspace_members();
    assert!(members.contains("proto/"), "members parsed: {members:?}");
    assert_eq!(readme_crates(), members);
}

/// The AWS SDK's crates are known only to the AWS edge (`src/aws/`): a
/// file of `src/` outside it that names `aws_sdk_*` or `aws_smithy_*`
/// fails here (docs/architecture.md, "Modules and their one job").
#[test]
fn only_the_aws_edge_names_the_aws_sdk_crates() {
    let src = root().join("src");
    let edge = src.join("aws");
    let mut stack = vec![src.clone()];
    let mut leaks = Vec::new();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("a directory of src/") {
            let path = entry.expect("an entry").path();
            if path.starts_with(&edge) {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("a source file");
            for (n, line) in text.lines().enumerate() {
                if line.contains("aws_sdk_") || line.contains("aws_smithy_") {
                    let shown = path.strip_prefix(root()).unwrap_or(&path).display();
                    leaks.push(format!("{shown}:{}: {}", n + 1, line.trim()));
                }
            }
        }
    }
    leaks.sort();
    assert!(
        leaks.is_empty(),
        "only src/aws/ may name the AWS SDK's crates; move these calls into the edge:\n{}",
        leaks.join("\n")
    );
}

/// Every `.rs` file of `src/` (but those under `skip`), by path relative to
/// the repository, with its parsed syntax.
fn parsed_sources(skip: &Path) -> Vec<(String, syn::File)> {
    let mut stack = vec![root().join("src")];
    let mut files = Vec::new();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("a directory of src/") {
            let path = entry.expect("an entry").path();
            if path.starts_with(skip) {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("a source file");
                let shown = path.strip_prefix(root()).unwrap_or(&path);
                let shown = shown.to_string_lossy().replace('\\', "/");
                let file = syn::parse_file(&text).unwrap_or_else(|e| panic!("{shown}: {e}"));
                files.push((shown, file));
            }
        }
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    files
}

/// Whether `attrs` hold `#[cfg(test)]` (the item exists only in tests).
fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Meta>()
                .is_ok_and(|meta| meta.path().is_ident("test"))
    })
}

/// The places a file names the crate `tonic`: a path (in code, a `use`, an
/// attribute) or a macro's tokens whose first segment is `tonic`.
#[derive(Default)]
struct NamesTonic(Vec<String>);

impl NamesTonic {
    /// `tonic::` in a macro's tokens (printed with a space around `::`).
    fn tokens(&mut self, tokens: &str) {
        let mut rest = tokens;
        while let Some(at) = rest.find("tonic ::") {
            let before = rest[..at].chars().next_back();
            if !before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                self.0.push("tonic:: in a macro's tokens".to_owned());
            }
            rest = &rest[at + "tonic ::".len()..];
        }
    }
}

impl<'ast> syn::visit::Visit<'ast> for NamesTonic {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.segments.first().is_some_and(|s| s.ident == "tonic") {
            let shown: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
            self.0.push(shown.join("::"));
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_use_path(&mut self, path: &'ast syn::UsePath) {
        if path.ident == "tonic" {
            self.0.push("use tonic::..".to_owned());
        }
        syn::visit::visit_use_path(self, path);
    }

    fn visit_use_name(&mut self, name: &'ast syn::UseName) {
        if name.ident == "tonic" {
            self.0.push("use tonic".to_owned());
        }
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.tokens(&mac.tokens.to_string());
        syn::visit::visit_macro(self, mac);
    }
}

/// The files outside `src/transport/` that may name tonic, and why: the
/// fast tests' in-memory agents implement the generated gRPC services, and
/// a service implementation is written against tonic's own types. Both are
/// compiled only for tests (`#[cfg(test)] mod ..`).
const TONIC_OUTSIDE_TRANSPORT: &[(&str, &str)] = &[
    (
        "src/seam_tests.rs",
        "the seam tests' in-memory agent: a tonic server of the generated services",
    ),
    (
        "src/configure/tests.rs",
        "the configure tests' in-memory ConfigureService, a tonic server",
    ),
];

/// gRPC is known only to the transport (`src/transport/`): a file of `src/`
/// outside it whose code names `tonic` (a path, a `use`, an attribute, a
/// macro's tokens; prose in comments does not count) fails here, but the
/// test-only in-memory agents of [`TONIC_OUTSIDE_TRANSPORT`].
#[test]
fn only_the_transport_names_tonic() {
    use syn::visit::Visit as _;
    let mut leaks = Vec::new();
    let mut excepted = BTreeSet::new();
    for (path, file) in parsed_sources(&root().join("src/transport")) {
        let mut names = NamesTonic::default();
        names.visit_file(&file);
        if names.0.is_empty() {
            continue;
        }
        if TONIC_OUTSIDE_TRANSPORT.iter().any(|(p, _)| *p == path) {
            excepted.insert(path);
            continue;
        }
        for name in names.0 {
            leaks.push(format!("{path}: {name}"));
        }
    }
    assert!(
        leaks.is_empty(),
        "only src/transport/ may name tonic; move these into the transport:\n{}",
        leaks.join("\n")
    );
    let listed: BTreeSet<String> = TONIC_OUTSIDE_TRANSPORT
        .iter()
        .map(|(p, _)| (*p).to_owned())
        .collect();
    assert_eq!(
        excepted, listed,
        "an exception that no longer names tonic: remove it from the list"
    );
    // The exceptions stay test-only.
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).expect("src/lib.rs");
    assert!(
        lib.contains("#[cfg(test)]\nmod seam_tests;"),
        "seam_tests is test-only"
    );
    let configure =
        std::fs::read_to_string(root().join("src/configure.rs")).expect("src/configure.rs");
    assert!(
        configure.contains("#[cfg(test)]\nmod tests;"),
        "configure's tests are test-only"
    );
}

/// Whether a file holds only tests (its errors may be built to assert on).
fn is_test_file(path: &str) -> bool {
    ["tests.rs", "mock_tests.rs", "seam_tests.rs"]
        .iter()
        .any(|name| path.ends_with(&format!("/{name}")))
}

/// The construction expressions of a `SandboxError` variant
/// (`SandboxError::Variant { .. }`, `SandboxError::Variant(..)`, a bare
/// `SandboxError::Variant`, and `Self::Variant ..` in an `impl SandboxError`),
/// outside `#[cfg(test)]` modules and items. Patterns are not expressions,
/// so a `match` or `matches!` on a variant does not count.
#[derive(Default)]
struct BuildsSandboxError {
    in_impl: bool,
    found: Vec<String>,
}

impl BuildsSandboxError {
    /// The variant `path` names, if it names one.
    fn variant(&self, path: &syn::Path) -> Option<String> {
        let names: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        let at = names
            .iter()
            .position(|n| n == "SandboxError" || (self.in_impl && n == "Self"))?;
        let variant = names.get(at + 1)?;
        variant
            .starts_with(|c: char| c.is_ascii_uppercase())
            .then(|| names[at..].join("::"))
    }
}

impl<'ast> syn::visit::Visit<'ast> for BuildsSandboxError {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if !is_cfg_test(&item.attrs) {
            syn::visit::visit_item_mod(self, item);
        }
    }

    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        if !is_cfg_test(&item.attrs) {
            syn::visit::visit_item_fn(self, item);
        }
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        if is_cfg_test(&item.attrs) {
            return;
        }
        let outer = self.in_impl;
        self.in_impl = matches!(&*item.self_ty, syn::Type::Path(t)
            if t.path.segments.last().is_some_and(|s| s.ident == "SandboxError"));
        syn::visit::visit_item_impl(self, item);
        self.in_impl = outer;
    }

    fn visit_expr_struct(&mut self, expr: &'ast syn::ExprStruct) {
        if let Some(variant) = self.variant(&expr.path) {
            self.found.push(format!("{variant} {{ .. }}"));
        }
        syn::visit::visit_expr_struct(self, expr);
    }

    fn visit_expr_call(&mut self, expr: &'ast syn::ExprCall) {
        if let syn::Expr::Path(func) = &*expr.func
            && let Some(variant) = self.variant(&func.path)
        {
            self.found.push(format!("{variant}(..)"));
        } else {
            self.visit_expr(&expr.func);
        }
        for arg in &expr.args {
            self.visit_expr(arg);
        }
    }

    fn visit_expr_path(&mut self, expr: &'ast syn::ExprPath) {
        if let Some(variant) = self.variant(&expr.path) {
            self.found.push(variant);
        }
    }

    /// A macro's arguments when they are expressions (`format!`, `Ok`
    /// wrapped in `vec!`, ...), else its `{ .. }` blocks (`boxed!(T, { .. })`);
    /// `matches!` takes a pattern, not a construction.
    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        if mac.path.is_ident("matches") {
            return;
        }
        let exprs = syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated;
        if let Ok(exprs) = mac.parse_body_with(exprs) {
            for expr in &exprs {
                self.visit_expr(expr);
            }
            return;
        }
        for token in mac.tokens.clone() {
            if let proc_macro2::TokenTree::Group(group) = token {
                let stmts = syn::parse::Parser::parse2(syn::Block::parse_within, group.stream());
                if let (proc_macro2::Delimiter::Brace, Ok(stmts)) = (group.delimiter(), stmts) {
                    for stmt in &stmts {
                        self.visit_stmt(stmt);
                    }
                }
            }
        }
    }
}

/// A `SandboxError` is built only in `src/error/` (its constructors keep
/// the messages, the codes and the redaction in one place): a variant's
/// construction anywhere else in `src/` fails here. Tests (`#[cfg(test)]`
/// modules and items, `tests.rs`, `mock_tests.rs`, `seam_tests.rs`) may
/// build errors to assert on.
#[test]
fn only_the_error_module_builds_a_sandbox_error() {
    use syn::visit::Visit as _;
    let mut leaks = Vec::new();
    for (path, file) in parsed_sources(&root().join("src/error")) {
        if is_test_file(&path) {
            continue;
        }
        let mut builds = BuildsSandboxError::default();
        builds.visit_file(&file);
        for found in builds.found {
            leaks.push(format!("{path}: {found}"));
        }
    }
    assert!(
        leaks.is_empty(),
        "only src/error/ may build a SandboxError; give these a constructor there:\n{}",
        leaks.join("\n")
    );
}
