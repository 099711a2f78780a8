//! The indexes a newcomer reads keep up with the repository: docs/README.md
//! links every page of `docs/`, docs/examples.md lists every example of the
//! workspace with a command that runs it (the right package, every cargo
//! feature the example requires, the same command as the example's own
//! header), and the licence the manifests name is in the checkout.

use std::collections::BTreeSet;
use std::path::Path;

fn root() -> &'static Path {
    crate::sdk_support::repo_root()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The targets of the markdown links `](target)` of `text`.
fn link_targets(text: &str) -> BTreeSet<String> {
    text.split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_docs_index_links_every_page_and_only_real_ones() {
    let index = read("docs/README.md");
    let linked = link_targets(&index);
    let pages: BTreeSet<String> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".md") && name != "README.md")
        .collect();
    let missing: Vec<&String> = pages.iter().filter(|p| !linked.contains(*p)).collect();
    assert!(
        missing.is_empty(),
        "docs/README.md does not list {missing:?}"
    );
    for target in &linked {
        assert!(
            root().join("docs").join(target).is_file(),
            "docs/README.md links {target}, which does not exist"
        );
    }
    let readme = read("README.md");
    assert!(
        readme.contains("docs/README.md"),
        "the README points at the docs index"
    );
}

/// The package a directory's examples belong to, and whether it is the root.
fn package_of(dir: &str) -> String {
    let manifest = read(&format!("{dir}/Cargo.toml"));
    let package = manifest
        .split("[package]")
        .nth(1)
        .unwrap_or_else(|| panic!("{dir}/Cargo.toml has a [package]"));
    let line = package
        .lines()
        .find(|l| l.trim_start().starts_with("name"))
        .expect("a package name");
    line.split('"').nth(1).expect("a quoted name").to_owned()
}

/// `required-features` of the root manifest's `[[example]] name = NAME`.
fn required_features(name: &str) -> Vec<String> {
    let manifest = read("Cargo.toml");
    for block in manifest.split("[[example]]").skip(1) {
        let block = block.split("\n[").next().unwrap_or(block);
        if block.contains(&format!("name = \"{name}\"")) {
            let Some(line) = block.lines().find(|l| l.starts_with("required-features")) else {
                return Vec::new();
            };
            return line
                .split('"')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect();
        }
    }
    Vec::new()
}

/// The `//!` header of an example file.
fn header(path: &str) -> String {
    read(path)
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_examples_page_lists_every_example_with_the_command_that_runs_it() {
    let page = read("docs/examples.md");
    let rows: Vec<(&str, &str)> = page
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split(" | ").collect();
            let path = cells[0].trim_start_matches("| ").trim_matches('`');
            let command = cells
                .last()
                .unwrap()
                .trim_end_matches(" |")
                .trim_matches('`');
            (path, command)
        })
        .collect();
    let listed: BTreeSet<&str> = rows.iter().map(|(path, _)| *path).collect();

    let dirs = [
        ".",
        "tests",
        "agent",
        "emulator",
        "compat/e2b",
        "cli",
        "mcp",
        "proto",
    ];
    let mut found = BTreeSet::new();
    for dir in dirs {
        let examples = root().join(dir).join("examples");
        let Ok(entries) = std::fs::read_dir(&examples) else {
            continue;
        };
        for entry in entries {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if let Some(stem) = name.strip_suffix(".rs") {
                let path = if dir == "." {
                    format!("examples/{name}")
                } else {
                    format!("{dir}/examples/{name}")
                };
                found.insert((dir, stem.to_owned(), path));
            }
        }
    }
    assert!(found.len() >= 19, "examples found: {found:?}");

    let mut failures = Vec::new();
    for (dir, stem, path) in &found {
        let Some((_, command)) = rows.iter().find(|(p, _)| p == path) else {
            failures.push(format!("{path}: not listed"));
            continue;
        };
        if !command.contains(&format!("--example {stem}")) {
            failures.push(format!(
                "{path}: `{command}` does not name --example {stem}"
            ));
        }
        if *dir == "." {
            if command.contains(" -p ") {
                failures.push(format!("{path}: `{command}` names a package"));
            }
            for feature in required_features(stem) {
                // `local` is a default feature: the command needs no flag.
                if feature != "local" && !command.contains(&format!("--features {feature}")) {
                    failures.push(format!("{path}: `{command}` lacks --features {feature}"));
                }
            }
        } else {
            let package = package_of(dir);
            if !command.contains(&format!("-p {package} ")) {
                failures.push(format!("{path}: `{command}` does not name -p {package}"));
            }
        }
        if !header(path).contains(command) {
            failures.push(format!("{path}: its header does not show `{command}`"));
        }
    }
    for path in &listed {
        if !found.iter().any(|(_, _, p)| p == path) {
            failures.push(format!(
                "docs/examples.md lists {path}, which does not exist"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_licence_the_manifests_name_is_in_the_checkout() {
    let manifest = read("Cargo.toml");
    assert!(manifest.contains("license = \"Apache-2.0\""));
    assert!(
        !manifest.contains("example.invalid"),
        "a placeholder repository URL"
    );
    let licence = read("LICENSE");
    assert!(
        licence.contains("Apache License") && licence.contains("Version 2.0, January 2004"),
        "LICENSE is the Apache License 2.0"
    );
}

/// Every code fence of every page closes on a line of its own (a fence
/// closed with text after it swallowed the next paragraph of docs/cli.md).
#[test]
fn every_code_fence_of_the_docs_closes_cleanly() {
    let mut pages = vec!["README.md".to_owned(), "CONTRIBUTING.md".to_owned()];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") {
            pages.push(format!("docs/{name}"));
        }
    }
    let mut failures = Vec::new();
    for page in pages {
        let mut open: Option<usize> = None;
        for (n, line) in read(&page).lines().enumerate() {
            if !line.starts_with("```") {
                continue;
            }
            match open {
                None => open = Some(n + 1),
                Some(_) if line.trim_end() == "```" => open = None,
                Some(_) => failures.push(format!(
                    "{page}:{}: a fence closes with text after it",
                    n + 1
                )),
            }
        }
        if let Some(line) = open {
            failures.push(format!("{page}:{line}: a fence never closes"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
