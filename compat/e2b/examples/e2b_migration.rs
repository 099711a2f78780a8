//! An E2B-style program moved to rayito by changing its imports.
//!
//! Before (E2B's code-interpreter SDK, in Python):
//!
//! ```text
//! from e2b_code_interpreter import Sandbox
//! sbx = Sandbox.create(timeout=120)
//! ```
//!
//! After: `use rayito_e2b::{Sandbox, SandboxOpts, ...}`. This example picks
//! the embedded local backend (`Backend::Local`) unless `RAYITO_BACKEND=aws`,
//! so it runs with no AWS account:
//!
//! ```sh
//! cargo run -p rayito-e2b --example e2b_migration
//! ```

use std::time::Duration;

use rayito_e2b::exceptions::{E2bClass, class_of, is_instance};
use rayito_e2b::{ApiParams, Backend, CommandOpts, RunCodeOpts, Sandbox, SandboxOpts};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let backend = match std::env::var("RAYITO_BACKEND").as_deref() {
        Ok("aws") => Backend::FromEnv,
        _ => Backend::Local,
    };
    let sbx = Sandbox::create(SandboxOpts {
        timeout: Some(Duration::from_secs(120)),
        backend,
        ..SandboxOpts::default()
    })
    .await?;
    println!("sandbox {}", sbx.sandbox_id());

    let execution = sbx
        .run_code(
            "import statistics\ndata = [3, 1, 4, 1, 5, 9, 2, 6]\nstatistics.mean(data)",
            RunCodeOpts::new().on_stdout(|m| print!("{}", m.line)),
        )
        .await?;
    println!("mean: {}", execution.text().unwrap_or("<none>"));

    // A rich result, as a DataFrame or a chart gives one: every format the
    // object offers (`_repr_html_` here; pandas and matplotlib, where the
    // image has them, give HTML and PNG the same way).
    let table = sbx
        .run_code(
            "class Table:\n    def _repr_html_(self):\n        return '<table><tr><td>3.875</td></tr></table>'\n    def __repr__(self):\n        return 'Table(mean=3.875)'\nTable()",
            RunCodeOpts::new(),
        )
        .await?;
    if let Some(result) = table.results.first() {
        println!("formats: {:?}", result.formats());
        println!("html: {}", result.html.as_deref().unwrap_or("<none>"));
    }

    let listing = sbx
        .commands()
        .run_with(
            "ls -la $HOME",
            CommandOpts::new().timeout(Duration::from_secs(10)),
        )
        .await?;
    print!("{}", listing.stdout);

    sbx.files()
        .write("/home/user/report.txt", b"mean computed\n".to_vec())
        .await?;
    let back = sbx.files().read_to_string("/home/user/report.txt").await?;
    print!("report: {back}");

    match sbx.commands().run("exit 2").await {
        Err(e) if is_instance(&e, E2bClass::CommandExitException) => {
            println!("caught {}: {e}", class_of(&e).name());
        }
        other => println!("unexpected: {other:?}"),
    }
    match sbx.fork().await {
        Err(e) if is_instance(&e, E2bClass::UnimplementedError) => println!("fork: {e}"),
        other => println!("unexpected: {other:?}"),
    }

    sbx.kill(ApiParams::default()).await?;
    Ok(())
}
