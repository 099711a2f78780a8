//! E2B's `Template` chain (this crate's `templates` feature) built for
//! real on the embedded local backend: `Template().from_base_image()`
//! with steps, `to_json` / `to_dockerfile`, `Template.build`, `exists`,
//! `get_build_status`, a sandbox created from the template, and a failing
//! step as E2B's `BuildException`. Run by `.ci/run`
//! (`cargo test -p rayito-e2b --features templates --test templates`).

use rayito_e2b::exceptions::{E2bClass, is_instance};
use rayito_e2b::{
    ApiParams, Backend, Sandbox, SandboxOpts, Template, TemplateBuildStatus, TemplateOpts,
};

#[path = "../../../tests/skip_support/mod.rs"]
mod skip;

/// A name no other test (or earlier run) uses.
fn unique(prefix: &str) -> String {
    use std::hash::{BuildHasher as _, RandomState};
    let n = RandomState::new().hash_one(std::time::SystemTime::now()) as u32;
    format!("{prefix}-{n:08x}")
}

fn local() -> TemplateOpts {
    TemplateOpts {
        backend: Backend::Local,
        ..TemplateOpts::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_e2b_template_chain_builds_locally_and_its_sandboxes_see_it() {
    if let Some(reason) = skip::local_builds_unavailable() {
        skip::skip(reason);
        return;
    }
    let context = tempfile::tempdir().expect("context dir");
    std::fs::write(context.path().join("hello.txt"), "hello from the context\n").unwrap();
    let template = Template::new()
        .from_base_image()
        .run_cmd("mkdir -p /srv/e2b && echo built > /srv/e2b/built.txt")
        .copy("hello.txt", "/srv/e2b/hello.txt")
        .set_envs(&[("GREETING", "hola")])
        .make_dir("/srv/e2b/it's here")
        .run_cmd("echo moved > /srv/e2b/old.txt && echo gone > /srv/e2b/gone.txt")
        .rename("/srv/e2b/old.txt", "/srv/e2b/it's here/new.txt", false)
        .make_symlink("/srv/e2b/it's here/new.txt", "/srv/e2b/link.txt", false)
        .remove("/srv/e2b/gone.txt", true, false)
        .set_workdir("/srv/e2b");

    // Rendered without a build: the SDK's JSON and Dockerfile layer.
    let json = Template::to_json(&template).expect("to_json");
    assert!(
        json.contains("mkdir -p /srv/e2b && echo built > /srv/e2b/built.txt"),
        "{json}"
    );
    let dockerfile = Template::to_dockerfile(&template).expect("to_dockerfile");
    assert!(
        dockerfile.contains("RUN mkdir -p /srv/e2b && echo built > /srv/e2b/built.txt"),
        "{dockerfile}"
    );
    assert!(dockerfile.contains("WORKDIR /srv/e2b"), "{dockerfile}");

    let name = unique("e2b-tpl");
    assert!(!Template::exists(&name, local()).await.expect("exists"));
    let info = Template::build(
        &template,
        &name,
        TemplateOpts {
            context_dir: Some(context.path().to_path_buf()),
            ..local()
        },
    )
    .await
    .expect("the build succeeds");
    assert_eq!(
        (info.name.as_str(), info.alias.as_str()),
        (name.as_str(), name.as_str())
    );
    assert_eq!(info.build_id, format!("{}/{name}", info.version));
    assert!(
        info.template_id
            .ends_with(&format!(":microvm-image:{name}")),
        "{info:?}"
    );
    assert!(info.tags.is_empty());
    assert!(Template::exists(&name, local()).await.expect("exists"));
    assert!(
        Template::alias_exists(&name, local())
            .await
            .expect("alias_exists")
    );
    assert_eq!(
        Template::get_build_status(&info, local())
            .await
            .expect("status"),
        TemplateBuildStatus::Ready
    );

    // A sandbox of the template sees its files, environment and workdir.
    let sbx = Sandbox::create(SandboxOpts {
        backend: Backend::Local,
        template: Some(name.clone()),
        ..SandboxOpts::default()
    })
    .await
    .expect("a sandbox of the template");
    let out = sbx
        .commands()
        .run("cat /srv/e2b/built.txt /srv/e2b/hello.txt; echo \"$GREETING\"; cat /srv/e2b/link.txt; ls /srv/e2b")
        .await
        .expect("the image's files and environment");
    assert_eq!(
        out.stdout,
        "built\nhello from the context\nhola\nmoved\nbuilt.txt\nhello.txt\nit's here\nlink.txt\n"
    );
    sbx.kill(ApiParams::default()).await.expect("kill");

    // The same template again in the background: the version is reused.
    let again = Template::build_in_background(
        &template,
        &name,
        TemplateOpts {
            context_dir: Some(context.path().to_path_buf()),
            ..local()
        },
    )
    .await
    .expect("build_in_background");
    assert_eq!(
        again.version, info.version,
        "an identical version is reused"
    );
    assert_eq!(
        Template::get_build_status(&again, local())
            .await
            .expect("status"),
        TemplateBuildStatus::Ready
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_step_is_a_build_exception() {
    if let Some(reason) = skip::local_builds_unavailable() {
        skip::skip(reason);
        return;
    }
    let template = Template::new().from_base_image().run_cmd("exit 3");
    let err = Template::build(&template, &unique("e2b-fail"), local())
        .await
        .expect_err("the step fails");
    assert!(is_instance(&err, E2bClass::BuildException), "{err:?}");
    assert_eq!(
        err.to_string(),
        "template build step 2 failed with exit code 3; fix that step (its command and the end of the build log are in the error)"
    );
}
