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
