//! What an idle sandbox handle holds (issue 13, goal 5): live heap bytes per
//! handle, counted by dhat's allocator, and the call sites that hold them.
//!
//! N handles (first argument, default 100) are created from this process
//! against an emulator running out of process (`rayito-emulator`,
//! found next to this example's directory or at `$RAYITO_EMULATOR_BIN`), each
//! from its own builder as the `scale` section of `floor_bench` does. The
//! heap is counted from just before the first create to just after the last
//! one (the handles all alive and idle); blocks allocated earlier (the
//! warm-up's lazy statics) are not counted. It prints the live bytes and
//! blocks per handle, the RSS growth per handle for comparison, and the call
//! sites holding the most live bytes at that point, grouped by the first
//! frame outside the allocator, the standard library and the async
//! runtime's plumbing. The whole profile is written to `dhat-heap.json`
//! (view it with dhat's `dh_view.html`).
//!
//! ```text
//! cargo build --release -p rayito-tests --example handle_memory
//! cargo build --release -p rayito-emulator --bin rayito-emulator
//! ./target/release/examples/handle_memory [handles] [top]
//! ```
//!
//! dhat's allocator records a backtrace per allocation, so this example is
//! slow and its timings mean nothing; `floor_bench` measures the time.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use rayito::{AwsOptions, Sandbox, SandboxBuilder};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The profile's file name (in the current directory).
const PROFILE: &str = "dhat-heap.json";

fn builder_for(endpoint: &str, template: &str) -> SandboxBuilder {
    Sandbox::builder()
        .aws(
            AwsOptions::new()
                .endpoint_url(endpoint)
                .region("us-east-1")
                .static_credentials("AKIDBENCH", "bench"),
        )
        .template(template)
}

/// A `/proc/self/status` field in KiB.
fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// The emulator as a child process; killed on drop.
struct ExternalEmulator {
    child: std::process::Child,
    endpoint: String,
    template: String,
}

impl Drop for ExternalEmulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn external_emulator() -> Result<ExternalEmulator, Error> {
    use std::io::BufRead as _;
    let bin = match std::env::var_os("RAYITO_EMULATOR_BIN") {
        Some(bin) => PathBuf::from(bin),
        None => {
            let exe = std::env::current_exe()?;
            exe.parent()
                .and_then(|p| p.parent())
                .ok_or("no directory for rayito-emulator")?
                .join("rayito-emulator")
        }
    };
    if !bin.is_file() {
        return Err(format!(
            "{} not found: build it (cargo build --release -p rayito-emulator --bin rayito-emulator) or set RAYITO_EMULATOR_BIN",
            bin.display()
        )
        .into());
    }
    let mut child = std::process::Command::new(&bin)
        .args(["--addr", "127.0.0.1:0"])
        // The key `builder_for` signs with.
        .env("RAYITO_EMULATOR_ACCESS_KEY_ID", "AKIDBENCH")
        .env("RAYITO_EMULATOR_SECRET_ACCESS_KEY", "bench")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut endpoint = None;
    let mut template = None;
    for line in std::io::BufReader::new(stdout).lines() {
        let line = line?;
        if let Some(url) = line.strip_prefix("rayito emulator listening on ") {
            endpoint = Some(url.trim().to_owned());
        } else if let Some(arn) = line.strip_prefix("export RAYITO_TEMPLATE=") {
            template = Some(arn.trim().to_owned());
            break;
        }
    }
    match (endpoint, template) {
        (Some(endpoint), Some(template)) => Ok(ExternalEmulator {
            child,
            endpoint,
            template,
        }),
        _ => {
            let _ = child.kill();
            let _ = child.wait();
            Err("unexpected emulator banner".into())
        }
    }
}

/// Frames that say nothing about who holds the memory.
fn is_plumbing(frame: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "[root]",
        "dhat::",
        "<dhat::",
        "alloc::",
        "<alloc::",
        "core::",
        "<core::",
        "std::",
        "<std::",
        "__rust",
        "hashbrown::",
        "<hashbrown::",
        "bytes::",
        "<bytes::",
        "tokio::runtime::",
        "tokio::task::",
        "<tokio::runtime::",
        "tokio::sync::",
        "<tokio::sync::",
        "slab::",
        "indexmap::",
    ];
    let name = function_name(frame);
    PREFIXES.iter().any(|p| name.starts_with(p)) || name.starts_with("0x")
}

/// dhat's frame text is `0xADDR: function (file:line:col)`: the function.
fn function_name(frame: &str) -> &str {
    let text = frame.split_once(": ").map_or(frame, |(_, rest)| rest);
    text.rsplit_once(" (").map_or(text, |(name, _)| name)
}

/// The live bytes at the end of the profile, by first telling frame.
fn holders(path: &str, top: usize) -> Result<(), Error> {
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    let frames: Vec<&str> = json["ftbl"]
        .as_array()
        .ok_or("no ftbl")?
        .iter()
        .map(|f| f.as_str().unwrap_or(""))
        .collect();
    let mut by_site: HashMap<String, (u64, u64)> = HashMap::new();
    let mut total = 0;
    for pp in json["pps"].as_array().ok_or("no pps")? {
        let bytes = pp["eb"].as_u64().unwrap_or(0);
        if bytes == 0 {
            continue;
        }
        total += bytes;
        let stack: Vec<&str> = pp["fs"]
            .as_array()
            .map(|fs| {
                fs.iter()
                    .filter_map(|i| frames.get(usize::try_from(i.as_u64()?).ok()?).copied())
                    .collect()
            })
            .unwrap_or_default();
        let telling = stack.iter().find(|f| !is_plumbing(f));
        let rayito = stack
            .iter()
            .find(|f| function_name(f).contains("rayito::"))
            .filter(|r| Some(*r) != telling);
        let site = match (telling, rayito) {
            (Some(t), Some(r)) => format!("{}\n        via {}", function_name(t), function_name(r)),
            (Some(t), None) => function_name(t).to_owned(),
            (None, _) => "(no telling frame)".to_owned(),
        };
        let entry = by_site.entry(site).or_default();
        entry.0 += bytes;
        entry.1 += pp["ebk"].as_u64().unwrap_or(0);
    }
    let mut sites: Vec<_> = by_site.into_iter().collect();
    sites.sort_by_key(|site| std::cmp::Reverse(site.1.0));
    println!("live at the end of the profile: {total} bytes; the biggest holders:");
    for (site, (bytes, blocks)) in sites.into_iter().take(top) {
        println!(
            "{:>9} bytes {:>6} blocks ({:>4.1}%)  {site}",
            bytes,
            blocks,
            bytes as f64 * 100.0 / total.max(1) as f64
        );
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let sandboxes: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let top: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(25);
    let emulator = external_emulator()?;
    let (endpoint, template) = (emulator.endpoint.clone(), emulator.template.clone());

    // Warm-up: the first create pays for lazy statics, TLS roots, pools.
    let warm = builder_for(&endpoint, &template).create().await?;
    warm.run_code("1").await?;
    warm.commands().run("true").await?;
    warm.kill().await?;
    drop(warm);

    let rss_before = status_kib("VmRSS:");
    let anon_before = status_kib("RssAnon:");
    let profiler = dhat::Profiler::builder().file_name(PROFILE).build();
    let heap_before = dhat::HeapStats::get();
    let started = Instant::now();
    let mut handles = Vec::with_capacity(sandboxes);
    for batch in (0..sandboxes).collect::<Vec<_>>().chunks(10) {
        let created = futures_util::future::try_join_all(
            batch
                .iter()
                .map(|_| builder_for(&endpoint, &template).create()),
        )
        .await?;
        handles.extend(created);
    }
    let heap_after = dhat::HeapStats::get();
    let rss_after = status_kib("VmRSS:");
    let anon_after = status_kib("RssAnon:");
    let n = sandboxes.max(1) as f64;
    println!(
        "{sandboxes} idle handles (created in {:.1?} under dhat):",
        started.elapsed()
    );
    println!(
        "live heap: {:.1} KiB per handle, {:.0} blocks per handle",
        heap_after.curr_bytes.saturating_sub(heap_before.curr_bytes) as f64 / 1024.0 / n,
        heap_after
            .curr_blocks
            .saturating_sub(heap_before.curr_blocks) as f64
            / n,
    );
    println!(
        "RSS: {:.1} KiB per handle (anonymous {:.1} KiB; dhat's own records count here too)",
        rss_after.saturating_sub(rss_before) as f64 / n,
        anon_after.saturating_sub(anon_before) as f64 / n,
    );
    // Ends the profile with every handle alive: its end-of-run figures are
    // what the idle handles hold.
    drop(profiler);
    holders(PROFILE, top)?;

    futures_util::future::try_join_all(handles.iter().map(|sbx| sbx.kill())).await?;
    drop(handles);
    drop(emulator);
    Ok(())
}
