//! Our `proto/rayito/v1/*.proto` against the reference descriptor set of the
//! wire contract (`reference/rayito-v1-0.17.1.fds.bin`, kept in this crate): every
//! message, enum and service in our files must match the reference exactly.

use std::collections::BTreeMap;

use prost::Message;
use prost_types::{
    DescriptorProto, EnumDescriptorProto, FieldDescriptorProto, FileDescriptorProto,
    FileDescriptorSet, ServiceDescriptorProto,
};

/// Our `.proto` files, compiled as the generated code was (protox, no protoc).
fn ours() -> FileDescriptorSet {
    let files = [
        "rayito/v1/common.proto",
        "rayito/v1/features.proto",
        "rayito/v1/network.proto",
        "rayito/v1/lifecycle.proto",
        "rayito/v1/health.proto",
        "rayito/v1/process.proto",
        "rayito/v1/filesystem.proto",
        "rayito/v1/code.proto",
        "rayito/v1/pty.proto",
        "rayito/v1/s3_mounts.proto",
        "rayito/v1/efs_volumes.proto",
        "rayito/v1/lifecycle_events.proto",
        "rayito/v1/telemetry_export.proto",
        "rayito/v1/secret_gateway.proto",
        "rayito/v1/configure.proto",
    ];
    let compiled =
        protox::compile(files, [env!("CARGO_MANIFEST_DIR")]).expect("our protos compile");
    FileDescriptorSet::decode(&compiled.encode_to_vec()[..]).expect("our descriptor set decodes")
}

fn reference() -> FileDescriptorSet {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/reference/rayito-v1-0.17.1.fds.bin"
    );
    let bytes = std::fs::read(path)
        .unwrap_or_else(|e| panic!("the reference descriptor set must be readable at {path}: {e}"));
    FileDescriptorSet::decode(&bytes[..]).expect("the reference descriptor set decodes")
}

/// Every difference between `ours` and `reference`, for the files in `ours`.
fn differences(ours: &FileDescriptorSet, reference: &FileDescriptorSet) -> Vec<String> {
    let mut diffs = Vec::new();
    let by_name: BTreeMap<&str, &FileDescriptorProto> =
        reference.file.iter().map(|f| (f.name(), f)).collect();
    for file in &ours.file {
        let Some(theirs) = by_name.get(file.name()) else {
            diffs.push(format!("{}: not in the reference set", file.name()));
            continue;
        };
        compare_file(file, theirs, &mut diffs);
    }
    diffs
}

fn compare_file(ours: &FileDescriptorProto, theirs: &FileDescriptorProto, d: &mut Vec<String>) {
    let at = ours.name();
    check(d, at, "package", ours.package(), theirs.package());
    check(d, at, "syntax", ours.syntax(), theirs.syntax());
    let mut deps_ours = ours.dependency.clone();
    let mut deps_theirs = theirs.dependency.clone();
    deps_ours.sort();
    deps_theirs.sort();
    check(d, at, "imports", &deps_ours, &deps_theirs);
    compare_messages(at, &ours.message_type, &theirs.message_type, d);
    compare_enums(at, &ours.enum_type, &theirs.enum_type, d);
    compare_services(at, &ours.service, &theirs.service, d);
}

fn check<T: PartialEq + std::fmt::Debug + ?Sized>(
    d: &mut Vec<String>,
    at: &str,
    what: &str,
    ours: &T,
    theirs: &T,
) {
    if ours != theirs {
        d.push(format!(
            "{at}: {what} is {ours:?}, the reference has {theirs:?}"
        ));
    }
}

/// Pairs items by name, reporting the ones present on one side only.
fn pair_by_name<'a, T>(
    at: &str,
    what: &str,
    ours: &'a [T],
    theirs: &'a [T],
    name: impl Fn(&T) -> &str,
    d: &mut Vec<String>,
) -> Vec<(&'a T, &'a T)> {
    let theirs_by: BTreeMap<&str, &T> = theirs.iter().map(|t| (name(t), t)).collect();
    let ours_by: BTreeMap<&str, &T> = ours.iter().map(|t| (name(t), t)).collect();
    for n in theirs_by.keys().filter(|n| !ours_by.contains_key(*n)) {
        d.push(format!(
            "{at}: {what} {n} is in the reference but not in ours"
        ));
    }
    let mut pairs = Vec::new();
    for (n, o) in &ours_by {
        match theirs_by.get(n) {
            Some(t) => pairs.push((*o, *t)),
            None => d.push(format!("{at}: {what} {n} is ours but not in the reference")),
        }
    }
    pairs
}

fn oneof_name(m: &DescriptorProto, f: &FieldDescriptorProto) -> Option<String> {
    f.oneof_index
        .and_then(|i| m.oneof_decl.get(i as usize))
        .map(|o| o.name().to_string())
}

/// Our extensions of the contract: fields the reference lacks, each numbered
/// 100 or above so that no reference field of a later version takes the
/// number (`<file>: <message>`, number, name). An agent that does not know
/// one ignores it (proto3). docs/architecture.md lists them.
const EXTENSIONS: &[(&str, i32, &str)] = &[
    (
        "rayito/v1/telemetry_export.proto: TelemetryExportConfig",
        100,
        "endpoint",
    ),
    (
        "rayito/v1/filesystem.proto: StartImportRequest",
        100,
        "chunk_gets",
    ),
    (
        "rayito/v1/filesystem.proto: StartImportRequest",
        101,
        "chunk_deletes",
    ),
    (
        "rayito/v1/features.proto: AgentFeatures",
        100,
        "chunked_import",
    ),
];

fn compare_fields(at: &str, o: &DescriptorProto, t: &DescriptorProto, d: &mut Vec<String>) {
    let o_fields: BTreeMap<i32, _> = o.field.iter().map(|f| (f.number(), f)).collect();
    let t_fields: BTreeMap<i32, _> = t.field.iter().map(|f| (f.number(), f)).collect();
    for n in t_fields.keys().filter(|n| !o_fields.contains_key(*n)) {
        d.push(format!(
            "{at}: field #{n} ({}) is missing",
            t_fields[n].name()
        ));
    }
    for (n, of) in &o_fields {
        let Some(tf) = t_fields.get(n) else {
            if EXTENSIONS.contains(&(at, *n, of.name())) && *n >= 100 {
                continue;
            }
            d.push(format!(
                "{at}: field #{n} ({}) is not in the reference",
                of.name()
            ));
            continue;
        };
        let fat = format!("{at}.{} (#{n})", of.name());
        check(d, &fat, "name", of.name(), tf.name());
        check(d, &fat, "type", &of.r#type(), &tf.r#type());
        check(d, &fat, "type_name", of.type_name(), tf.type_name());
        check(d, &fat, "label", &of.label(), &tf.label());
        check(
            d,
            &fat,
            "proto3_optional",
            &of.proto3_optional(),
            &tf.proto3_optional(),
        );
        check(d, &fat, "oneof", &oneof_name(o, of), &oneof_name(t, tf));
    }
}

fn compare_messages(
    at: &str,
    ours: &[DescriptorProto],
    theirs: &[DescriptorProto],
    d: &mut Vec<String>,
) {
    for (o, t) in pair_by_name(at, "message", ours, theirs, |m| m.name(), d) {
        let at = format!("{at}: {}", o.name());
        check(
            d,
            &at,
            "map_entry",
            &o.options.as_ref().map(|x| x.map_entry()),
            &t.options.as_ref().map(|x| x.map_entry()),
        );
        compare_fields(&at, o, t, d);
        let o_oneofs: Vec<_> = o.oneof_decl.iter().map(|x| x.name()).collect();
        let t_oneofs: Vec<_> = t.oneof_decl.iter().map(|x| x.name()).collect();
        check(d, &at, "oneofs", &o_oneofs, &t_oneofs);
        compare_messages(&at, &o.nested_type, &t.nested_type, d);
        compare_enums(&at, &o.enum_type, &t.enum_type, d);
    }
}

fn compare_enums(
    at: &str,
    ours: &[EnumDescriptorProto],
    theirs: &[EnumDescriptorProto],
    d: &mut Vec<String>,
) {
    for (o, t) in pair_by_name(at, "enum", ours, theirs, |e| e.name(), d) {
        let values = |e: &EnumDescriptorProto| {
            e.value
                .iter()
                .map(|v| (v.name().to_string(), v.number()))
                .collect::<Vec<_>>()
        };
        let eat = format!("{at}: enum {}", o.name());
        check(d, &eat, "values", &values(o), &values(t));
    }
}

fn compare_services(
    at: &str,
    ours: &[ServiceDescriptorProto],
    theirs: &[ServiceDescriptorProto],
    d: &mut Vec<String>,
) {
    for (o, t) in pair_by_name(at, "service", ours, theirs, |s| s.name(), d) {
        let sat = format!("{at}: service {}", o.name());
        for (om, tm) in pair_by_name(&sat, "method", &o.method, &t.method, |m| m.name(), d) {
            let mat = format!("{sat}.{}", om.name());
            check(d, &mat, "input", om.input_type(), tm.input_type());
            check(d, &mat, "output", om.output_type(), tm.output_type());
            check(
                d,
                &mat,
                "client_streaming",
                &om.client_streaming(),
                &tm.client_streaming(),
            );
            check(
                d,
                &mat,
                "server_streaming",
                &om.server_streaming(),
                &tm.server_streaming(),
            );
        }
    }
}

#[test]
fn our_protos_match_the_reference_descriptor_set() {
    let diffs = differences(&ours(), &reference());
    assert!(
        diffs.is_empty(),
        "wire contract differences:\n{}",
        diffs.join("\n")
    );
}

#[test]
fn our_files_are_the_ones_the_contract_requires() {
    let mut names: Vec<String> = ours().file.iter().map(|f| f.name().to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "rayito/v1/code.proto",
            "rayito/v1/common.proto",
            "rayito/v1/configure.proto",
            "rayito/v1/efs_volumes.proto",
            "rayito/v1/features.proto",
            "rayito/v1/filesystem.proto",
            "rayito/v1/health.proto",
            "rayito/v1/lifecycle.proto",
            "rayito/v1/lifecycle_events.proto",
            "rayito/v1/network.proto",
            "rayito/v1/process.proto",
            "rayito/v1/pty.proto",
            "rayito/v1/s3_mounts.proto",
            "rayito/v1/secret_gateway.proto",
            "rayito/v1/telemetry_export.proto",
        ]
    );
}

/// The reference set holds nothing we lack: all 15 files are compared.
#[test]
fn every_reference_file_is_ours() {
    let ours: Vec<String> = ours().file.iter().map(|f| f.name().to_string()).collect();
    let reference = reference();
    let missing: Vec<&str> = reference
        .file
        .iter()
        .map(|f| f.name())
        .filter(|n| !ours.iter().any(|o| o == n))
        .collect();
    assert!(missing.is_empty(), "reference files we lack: {missing:?}");
    assert_eq!(reference.file.len(), 15);
}

#[test]
fn services_are_served_under_the_reference_paths() {
    let mut paths: Vec<String> = Vec::new();
    for f in ours().file {
        for s in &f.service {
            for m in &s.method {
                paths.push(format!("/{}.{}/{}", f.package(), s.name(), m.name()));
            }
        }
    }
    for p in [
        "/rayito.v1.HealthService/Health",
        "/rayito.v1.ProcessService/Start",
        "/rayito.v1.ProcessService/Connect",
        "/rayito.v1.FilesystemService/Write",
        "/rayito.v1.CodeService/Execute",
        "/rayito.v1.LifecycleService/SetTimeout",
        "/rayito.v1.ConfigureService/Configure",
        "/rayito.v1.ConfigureService/ConfigureStatus",
    ] {
        assert!(paths.iter().any(|x| x == p), "{p} is not served");
    }
}

type Mutation = Box<dyn Fn(&mut FileDescriptorSet)>;

/// The comparison itself must see a change of each kind it claims to check.
#[test]
fn the_comparison_detects_every_kind_of_drift() {
    let reference = reference();
    let our_files: Vec<String> = ours().file.iter().map(|f| f.name().to_string()).collect();
    let mutations: Vec<(&str, Mutation)> = vec![
        (
            "field number",
            Box::new(|s| field(s, "process", "EndEvent", 0).number = Some(9)),
        ),
        (
            "field type",
            Box::new(|s| field(s, "process", "EndEvent", 0).r#type = Some(5)),
        ),
        (
            "field name",
            Box::new(|s| field(s, "common", "User", 0).name = Some("user".into())),
        ),
        (
            "proto3 optional",
            Box::new(|s| field(s, "process", "StartRequest", 4).proto3_optional = Some(false)),
        ),
        (
            "label",
            Box::new(|s| field(s, "process", "ProcessConfig", 1).label = Some(1)),
        ),
        (
            "oneof membership",
            Box::new(|s| field(s, "process", "ProcessEvent", 0).oneof_index = None),
        ),
        (
            "enum value",
            Box::new(|s| file(s, "common").enum_type[0].value[1].number = Some(7)),
        ),
        (
            "method name",
            Box::new(|s| file(s, "code").service[0].method[0].name = Some("Create".into())),
        ),
        (
            "streaming kind",
            Box::new(|s| file(s, "filesystem").service[0].method[1].client_streaming = Some(false)),
        ),
        (
            "oneof membership in a section file",
            Box::new(|s| {
                let m = file(s, "telemetry_export")
                    .message_type
                    .iter_mut()
                    .find(|m| m.name() == "TelemetryExportConfig")
                    .expect("message in the reference");
                for f in m.field.iter_mut().filter(|f| f.name() == "bearer") {
                    f.oneof_index = None;
                }
            }),
        ),
        (
            "section enum value",
            Box::new(|s| file(s, "configure").enum_type[1].value[3].number = Some(9)),
        ),
        (
            "missing message",
            Box::new(|s| drop(file(s, "code").message_type.pop())),
        ),
    ];
    for (what, mutate) in mutations {
        let mut changed = reference.clone();
        mutate(&mut changed);
        changed
            .file
            .retain(|f| our_files.iter().any(|o| o == f.name()));
        assert!(
            !differences(&changed, &reference).is_empty(),
            "a change of {what} went unnoticed"
        );
    }
}

fn file<'a>(set: &'a mut FileDescriptorSet, short: &str) -> &'a mut FileDescriptorProto {
    let name = format!("rayito/v1/{short}.proto");
    set.file
        .iter_mut()
        .find(|f| f.name() == name)
        .expect("file in the reference")
}

fn field<'a>(
    set: &'a mut FileDescriptorSet,
    short: &str,
    message: &str,
    index: usize,
) -> &'a mut FieldDescriptorProto {
    let m = file(set, short)
        .message_type
        .iter_mut()
        .find(|m| m.name() == message)
        .expect("message in the reference");
    &mut m.field[index]
}

/// Each listed extension is in our files, at its number (the list does not
/// go stale), and nowhere in the reference.
#[test]
fn every_extension_is_ours_only() {
    let ours = ours();
    let reference = reference();
    for &(at, number, name) in EXTENSIONS {
        let (file, message) = at.split_once(": ").expect("<file>: <message>");
        let find = |set: &FileDescriptorSet| {
            set.file
                .iter()
                .find(|f| f.name() == file)
                .and_then(|f| f.message_type.iter().find(|m| m.name() == message))
                .and_then(|m| m.field.iter().find(|f| f.number() == number).cloned())
        };
        let field = find(&ours).unwrap_or_else(|| panic!("{at} #{number} is not in our protos"));
        assert_eq!(field.name(), name);
        assert!(
            find(&reference).is_none(),
            "{at} #{number} is the reference's"
        );
    }
}
