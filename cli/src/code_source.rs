//! Where `sandbox run-code` takes its cell from: the argument, stdin
//! (`-`), or a file (`--file`); and its `--timeout`.

use std::io::Read as _;
use std::path::PathBuf;
use std::time::Duration;

use crate::commands::Failure;

/// `run-code`'s code and options.
#[derive(Debug, clap::Args)]
pub(crate) struct CodeArgs {
    /// The code; `-` reads it from stdin.
    #[arg(value_name = "CODE", required_unless_present = "file")]
    code: Option<String>,
    /// Read the code from this file instead.
    #[arg(long, value_name = "FILE", conflicts_with = "code")]
    file: Option<PathBuf>,
    /// The cell's timeout (300, 90s, 10m; default 300 s): the kernel is
    /// interrupted then and the cell fails with `ExecutionTimeout`.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse)]
    timeout: Option<Duration>,
}

impl CodeArgs {
    /// The code, read from where the arguments say, and the options.
    ///
    /// # Errors
    /// A file or stdin that cannot be read, or is not UTF-8.
    pub(crate) fn read(self) -> Result<(String, rayito::RunCodeOptions), Failure> {
        let code = match (self.code, self.file) {
            (_, Some(path)) => {
                let bytes = std::fs::read(&path).map_err(|err| {
                    Failure::Cli(format!("cannot read {}: {err}", path.display()))
                })?;
                String::from_utf8(bytes)
                    .map_err(|_| Failure::Cli(format!("{} is not UTF-8 text", path.display())))?
            }
            (Some(code), None) if code == "-" => {
                let mut code = String::new();
                std::io::stdin().read_to_string(&mut code).map_err(|err| {
                    Failure::Cli(format!("cannot read the code from stdin: {err}"))
                })?;
                code
            }
            (Some(code), None) => code,
            // clap requires one of the two.
            (None, None) => String::new(),
        };
        let mut options = rayito::RunCodeOptions::new();
        if let Some(timeout) = self.timeout {
            options = options.timeout(timeout);
        }
        Ok((code, options))
    }
}
