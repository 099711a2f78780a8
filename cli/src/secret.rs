//! `rayito secret ...`: the SDK's `SecretStore` (AWS Secrets Manager,
//! docs/secrets.md). A value comes from stdin or a file, never from the
//! command line (where `ps` and shell history would keep it), and is
//! never printed; neither is a name in an error.

use std::collections::BTreeMap;
use std::io::{IsTerminal as _, Read as _};
use std::path::PathBuf;

use clap::{Args, Subcommand};
use rayito::secrets::{MAX_VALUE_BYTES, SecretInfo, SecretStore, SecretStoreOptions};
use rayito::{SandboxError, Secret};
use serde_json::{Value, json};

use crate::commands::{Failure, exit_code, parse_pair};
use crate::{Format, Global, output};

/// The secret subcommands.
#[derive(Debug, Subcommand)]
pub enum SecretCommand {
    /// Creates a secret (version 1) with the value read from stdin, or
    /// from --from-file; bytes as given (a trailing newline is kept: use
    /// `printf %s`).
    Create {
        #[command(flatten)]
        store: StoreArgs,
        /// The secret's name under the prefix.
        name: String,
        #[command(flatten)]
        value: ValueArgs,
        /// Metadata `key=value` (repeatable), kept in its description.
        #[arg(long, value_parser = parse_pair)]
        metadata: Vec<(String, String)>,
        /// The KMS key (id, alias or ARN) to encrypt it with (default:
        /// the account's aws/secretsmanager).
        #[arg(long, value_name = "KEY")]
        kms_key_id: Option<String>,
    },
    /// Writes a new version of a secret's value (stdin or --from-file);
    /// --metadata replaces its metadata.
    Update {
        #[command(flatten)]
        store: StoreArgs,
        /// The secret's name under the prefix.
        name: String,
        #[command(flatten)]
        value: ValueArgs,
        /// Metadata `key=value` (repeatable): replaces the metadata.
        #[arg(long, value_parser = parse_pair)]
        metadata: Vec<(String, String)>,
    },
    /// What the store knows of a secret (never its value).
    Info {
        #[command(flatten)]
        store: StoreArgs,
        /// The secret's name under the prefix, or its ARN.
        name: String,
    },
    /// One page of the secrets under the prefix (never a value).
    List {
        #[command(flatten)]
        store: StoreArgs,
        /// Secrets per page (1 to 100).
        #[arg(long, default_value_t = 100)]
        limit: u32,
        /// The page after the one that printed this token.
        #[arg(long)]
        next_token: Option<String>,
    },
    /// Deletes a secret at once, without a recovery window (exit 0 also
    /// when it did not exist: `deleted: false`).
    Delete {
        #[command(flatten)]
        store: StoreArgs,
        /// The secret's name under the prefix.
        name: String,
    },
}

/// Where the store keeps its secrets.
#[derive(Debug, Args)]
pub struct StoreArgs {
    /// The prefix of names in Secrets Manager.
    #[arg(long, default_value = rayito::secrets::DEFAULT_PREFIX)]
    prefix: String,
}

/// Where a value comes from.
#[derive(Debug, Args)]
pub struct ValueArgs {
    /// Read the value from this file instead of stdin.
    #[arg(long, value_name = "PATH")]
    from_file: Option<PathBuf>,
}

/// Runs one secret subcommand; returns the exit code.
pub async fn run(global: Global, command: SecretCommand) -> i32 {
    let format = global.output;
    exit_code(format, dispatch(&global, command).await)
}

async fn store(
    global: &Global,
    args: &StoreArgs,
    kms: Option<&str>,
) -> Result<SecretStore, Failure> {
    let mut options = SecretStoreOptions::new().prefix(&args.prefix);
    if let Some(profile) = &global.profile {
        let mut loader =
            aws_config::defaults(aws_config::BehaviorVersion::latest()).profile_name(profile);
        if let Some(region) = &global.region {
            loader = loader.region(aws_config::Region::new(region.clone()));
        }
        options = options.sdk_config(loader.load().await);
    }
    if let Some(region) = &global.region {
        options = options.region(region);
    }
    if let Some(key) = kms {
        options = options.kms_key_id(key);
    }
    Ok(SecretStore::new(options)?)
}

async fn dispatch(global: &Global, command: SecretCommand) -> Result<i32, Failure> {
    let format = global.output;
    match command {
        SecretCommand::Create {
            store: args,
            name,
            value,
            metadata,
            kms_key_id,
        } => {
            let store = store(global, &args, kms_key_id.as_deref()).await?;
            let value = read_value(&value)?;
            let metadata: BTreeMap<String, String> = metadata.into_iter().collect();
            let info = store.create(&name, value, &metadata).await?;
            print_info(format, "created", &info);
        }
        SecretCommand::Update {
            store: args,
            name,
            value,
            metadata,
        } => {
            let store = store(global, &args, None).await?;
            let value = read_value(&value)?;
            let metadata: Option<BTreeMap<String, String>> =
                (!metadata.is_empty()).then(|| metadata.into_iter().collect());
            let info = store.update(&name, value, metadata.as_ref()).await?;
            print_info(format, "updated", &info);
        }
        SecretCommand::Info { store: args, name } => {
            let store = store(global, &args, None).await?;
            let info = store.get_info(&name).await?;
            match format {
                Format::Json => output::json(&info_json(&info)),
                Format::Text => {
                    outln!("name: {}", info.name);
                    outln!("arn: {}", info.secret_id);
                    outln!("version: {}", info.version);
                    outln!("created_at: {}", output::unix(info.created_at));
                    outln!("updated_at: {}", output::unix(info.updated_at));
                    for (key, value) in &info.metadata {
                        outln!("metadata {key}={value}");
                    }
                }
            }
        }
        SecretCommand::List {
            store: args,
            limit,
            next_token,
        } => {
            let store = store(global, &args, None).await?;
            let page = store.list(limit, next_token.as_deref()).await?;
            match format {
                Format::Json => output::json(&json!({
                    "secrets": page.secrets.iter().map(info_json).collect::<Vec<_>>(),
                    "next_token": page.next_token,
                })),
                Format::Text => {
                    for info in &page.secrets {
                        outln!("{}\tversion {}", info.name, info.version);
                    }
                    if let Some(token) = &page.next_token {
                        output::note(&format!("more: --next-token {token}"));
                    }
                }
            }
        }
        SecretCommand::Delete { store: args, name } => {
            let store = store(global, &args, None).await?;
            let deleted = store.destroy(&name).await?;
            match format {
                Format::Json => output::json(&json!({ "name": name, "deleted": deleted })),
                Format::Text if deleted => outln!("deleted {name}"),
                Format::Text => outln!("{name} did not exist"),
            }
        }
    }
    Ok(0)
}

fn info_json(info: &SecretInfo) -> Value {
    json!({
        "name": info.name,
        "secret_id": info.secret_id,
        "version": info.version,
        "metadata": info.metadata,
        "created_at": output::unix(info.created_at),
        "updated_at": output::unix(info.updated_at),
    })
}

fn print_info(format: Format, verb: &str, info: &SecretInfo) {
    match format {
        Format::Json => output::json(&info_json(info)),
        Format::Text => outln!("{verb} {} version {}", info.name, info.version),
    }
}

/// The value, from the file or stdin: at most one byte past the limit is
/// read (the SDK then refuses it by its size), and it must be UTF-8. On a
/// terminal, what is typed is not echoed.
fn read_value(args: &ValueArgs) -> Result<Secret, Failure> {
    let limit = u64::try_from(MAX_VALUE_BYTES).unwrap_or(u64::MAX) + 1;
    let mut bytes = Vec::new();
    match &args.from_file {
        Some(path) => {
            let file = std::fs::File::open(path)
                .map_err(|err| Failure::Cli(format!("cannot read {}: {err}", path.display())))?;
            file.take(limit)
                .read_to_end(&mut bytes)
                .map_err(|err| Failure::Cli(format!("cannot read {}: {err}", path.display())))?;
        }
        None => {
            let stdin = std::io::stdin();
            let _quiet = if stdin.is_terminal() {
                output::note("the secret's value (not echoed; end with Ctrl-D):");
                NoEcho::enter()
            } else {
                None
            };
            stdin
                .lock()
                .take(limit)
                .read_to_end(&mut bytes)
                .map_err(|err| Failure::Cli(format!("cannot read the value from stdin: {err}")))?;
        }
    }
    let text = String::from_utf8(bytes).map_err(|_| {
        Failure::Sdk(SandboxError::invalid_argument(
            "value",
            "a secret value must be UTF-8 text; pass text (base64 for binary data)",
        ))
    })?;
    Ok(Secret::from(text))
}

/// The terminal's echo turned off, restored when dropped.
struct NoEcho {
    saved: rustix::termios::Termios,
}

impl NoEcho {
    fn enter() -> Option<NoEcho> {
        use rustix::termios::{self, LocalModes, OptionalActions};
        let stdin = std::io::stdin();
        let saved = termios::tcgetattr(&stdin).ok()?;
        let mut quiet = saved.clone();
        quiet.local_modes.remove(LocalModes::ECHO);
        termios::tcsetattr(&stdin, OptionalActions::Now, &quiet).ok()?;
        Some(NoEcho { saved })
    }
}

impl Drop for NoEcho {
    fn drop(&mut self) {
        let _ = rustix::termios::tcsetattr(
            std::io::stdin(),
            rustix::termios::OptionalActions::Now,
            &self.saved,
        );
    }
}
