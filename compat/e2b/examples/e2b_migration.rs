//! E2B's code-interpreter quickstart, moved to rayito.
//!
//! E2B's version (Python, `e2b-code-interpreter`):
//!
//! ```text
//! from e2b_code_interpreter import Sandbox
//!
//! sbx = Sandbox.create()
//! execution = sbx.run_code("print('hello world')")
//! print(execution.logs)
//!
//! execution = sbx.run_code(CHART)        # a matplotlib chart
//! first = execution.results[0]
//! if first.png:
//!     open("chart.png", "wb").write(base64.b64decode(first.png))
//!
//! result = sbx.commands.run("ls -l /home/user")
//! print(result.stdout)
//! sbx.files.write("/home/user/hello.txt", "hello from the host")
//! print(sbx.files.read("/home/user/hello.txt"))
//! for entry in sbx.files.list("/home/user"):
//!     print(entry.name)
//! sbx.kill()
//! ```
//!
//! This file makes the same calls in the same order. What changed: the
//! imports, and the one choice E2B has no equivalent for, where sandboxes
//! run (the local backend here unless `RAYITO_BACKEND=aws`). Rust's options
//! structs stand for Python's keyword arguments. The chart cell uses
//! matplotlib when the sandbox's image has it and draws the same sine curve
//! by hand otherwise (the local backend's image has no matplotlib); either
//! way the result is a PNG, as at E2B.
//!
//! ```sh
//! cargo run -p rayito-e2b --example e2b_migration
//! ```

use base64::Engine as _;
use rayito_e2b::{ApiParams, Backend, RunCodeOpts, Sandbox, SandboxOpts};

/// The chart cell: E2B's matplotlib sine chart, or the same curve as a PNG
/// drawn without matplotlib.
const CHART: &str = r#"
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import math
    xs = [i / 5 for i in range(100)]
    plt.plot(xs, [math.sin(x) for x in xs])
    plt.show()
except ImportError:
    import math, struct, zlib

    class SineChart:
        """A 200x100 grey PNG of sin(x) on [0, 20]."""
        def _repr_png_(self):
            w, h = 200, 100
            rows = [bytearray([255] * w) for _ in range(h)]
            for px in range(w):
                y = math.sin(px / 10)
                rows[int((1 - y) * (h - 1) / 2)][px] = 0
            raw = b"".join(b"\x00" + bytes(r) for r in rows)
            def chunk(kind, data):
                body = kind + data
                return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))
            header = struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)
            return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
                    + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))

        def __repr__(self):
            return "<Figure size 200x100 with 1 Axes>"

    display(SineChart())
"#;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The backend choice: the one line E2B has no equivalent for.
    let backend = match std::env::var("RAYITO_BACKEND").as_deref() {
        Ok("aws") => Backend::FromEnv,
        _ => Backend::Local,
    };
    let sbx = Sandbox::create(SandboxOpts {
        backend,
        ..SandboxOpts::default()
    })
    .await?;

    let execution = sbx
        .run_code("print('hello world')", RunCodeOpts::new())
        .await?;
    println!("{:?}", execution.logs);

    let execution = sbx.run_code(CHART, RunCodeOpts::new()).await?;
    if let Some(png) = execution.results.first().and_then(|r| r.png.as_deref()) {
        let bytes = base64::engine::general_purpose::STANDARD.decode(png)?;
        let path = std::env::temp_dir().join("chart.png");
        std::fs::write(&path, &bytes)?;
        println!("chart: {} bytes of PNG in {}", bytes.len(), path.display());
    }

    let result = sbx.commands().run("ls -l /home/user").await?;
    print!("{}", result.stdout);
    sbx.files()
        .write("/home/user/hello.txt", "hello from the host")
        .await?;
    println!(
        "{}",
        sbx.files().read_to_string("/home/user/hello.txt").await?
    );
    for entry in sbx.files().list("/home/user").await? {
        println!("{}", entry.name);
    }

    sbx.kill(ApiParams::default()).await?;
    Ok(())
}
