//! `rayito-emulator [--addr 127.0.0.1:4566] [--root DIR] [--region R]
//! [--account-id ID] [--image NAME]... [--tls] [--pids-max N] [--memory-max-mib MIB]
//! [--access-key-id ID] [--latency PROFILE]`: serves the emulator until SIGTERM or Ctrl-C, after
//! printing the endpoint, the access key it accepts and the environment a
//! client needs.
//!
//! The access key is generated at start unless a fixed one is given: its id
//! with `--access-key-id` (or `RAYITO_EMULATOR_ACCESS_KEY_ID`), its secret
//! with `RAYITO_EMULATOR_SECRET_ACCESS_KEY` (or `--secret-access-key`, which
//! other local users can read in the process list). Not the `AWS_*`
//! variables: a shell holding real AWS keys would hand them to the emulator,
//! which prints what it accepts.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;

use super::{AccessKey, Emulator, EmulatorConfig, LatencyProfile};

/// The environment variable of a fixed access key id.
pub const ACCESS_KEY_ID_ENV: &str = "RAYITO_EMULATOR_ACCESS_KEY_ID";
/// The environment variable of a fixed secret access key.
pub const SECRET_ACCESS_KEY_ENV: &str = "RAYITO_EMULATOR_SECRET_ACCESS_KEY";

/// `rayito-emulator`'s flags (the whole command line).
#[derive(Debug, Parser)]
#[command(
    name = "rayito-emulator",
    version,
    about = "A local emulator of the Lambda MicroVMs API, its proxy and the S3, STS, CloudWatch Logs and EFS calls rayito makes; serves until SIGTERM or Ctrl-C"
)]
pub struct EmulatorArgs {
    /// Control-plane address; loopback only.
    #[arg(long, value_name = "IP:PORT", default_value = "127.0.0.1:4566")]
    pub addr: SocketAddr,
    /// Directory holding one root directory per MicroVM (default: a fresh
    /// `rayito-emulator-*` under the temporary directory).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Region of the image ARNs.
    #[arg(long, value_name = "REGION", default_value = "us-east-1")]
    pub region: String,
    /// Account id of the image ARNs.
    #[arg(long, value_name = "ID", default_value = "000000000000")]
    pub account_id: String,
    /// An image name RunMicrovm accepts (repeatable; default `rayito-base`).
    #[arg(long = "image", value_name = "NAME")]
    pub images: Vec<String>,
    /// TLS mode, as AWS: each MicroVM's endpoint is a bare loopback address
    /// served with TLS (ALPN h2) on port 443, certificates from a CA made at
    /// start (needs root or CAP_NET_BIND_SERVICE).
    #[arg(long)]
    pub tls: bool,
    /// With `--tls`: the CA constrains DNS names only, not IP addresses,
    /// for clients on BoringSSL (grpc-core, so the reference Python SDK),
    /// which refuses a CA that constrains IP addresses.
    #[arg(long, requires = "tls")]
    pub tls_no_ip_constraints: bool,
    /// Each MicroVM's limits.
    #[command(flatten)]
    pub limits: rayito_agent::cli::LimitArgs,
    /// A fixed access key id to accept (default: one generated at start;
    /// also `RAYITO_EMULATOR_ACCESS_KEY_ID`). Needs its secret.
    #[arg(long, value_name = "ID")]
    pub access_key_id: Option<String>,
    /// The secret of `--access-key-id` (prefer
    /// `RAYITO_EMULATOR_SECRET_ACCESS_KEY`: a flag shows in the process list).
    #[arg(long, value_name = "SECRET")]
    pub secret_access_key: Option<String>,
    /// How long create, suspend and resume take: `off`, `aws` (create 3 s,
    /// suspend 0.5 s, resume 0.8 s) or `create=MS,suspend=MS,resume=MS`
    /// (default off; also `RAYITO_EMULATOR_LATENCY`).
    #[arg(long, value_name = "PROFILE", value_parser = LatencyProfile::parse)]
    pub latency: Option<LatencyProfile>,
}

impl EmulatorArgs {
    /// The emulator configuration these flags and `env` (the process
    /// environment, or a stand-in) describe.
    ///
    /// # Errors
    /// A message when only one of the access key id and its secret is given,
    /// or either is empty.
    pub fn config_from(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<EmulatorConfig, String> {
        let mut config = self.config();
        if self.latency.is_none() {
            config.latency = LatencyProfile::from_env(&env)?;
        }
        let id = self
            .access_key_id
            .clone()
            .or_else(|| env(ACCESS_KEY_ID_ENV));
        let secret = self
            .secret_access_key
            .clone()
            .or_else(|| env(SECRET_ACCESS_KEY_ENV));
        match (id, secret) {
            (None, None) => {}
            (Some(id), Some(secret)) if !id.is_empty() && !secret.is_empty() => {
                config.access_keys = vec![AccessKey::new(id, secret)];
            }
            _ => {
                return Err(format!(
                    "a fixed access key needs both an id (--access-key-id or {ACCESS_KEY_ID_ENV}) and a secret ({SECRET_ACCESS_KEY_ENV} or --secret-access-key), neither empty; give both or neither (then one is generated)"
                ));
            }
        }
        Ok(config)
    }

    /// The emulator configuration these flags describe, with a generated
    /// access key (see [`EmulatorArgs::config_from`] for fixed ones).
    pub fn config(&self) -> EmulatorConfig {
        let mut config = EmulatorConfig {
            addr: self.addr,
            region: self.region.clone(),
            account_id: self.account_id.clone(),
            tls: self.tls,
            tls_ip_name_constraints: !self.tls_no_ip_constraints,
            sandbox_limits: self.limits.limits(),
            latency: self.latency.unwrap_or_default(),
            ..EmulatorConfig::default()
        };
        if let Some(root) = &self.root {
            config.root = root.clone();
        }
        if !self.images.is_empty() {
            config.images = self.images.clone();
        }
        config
    }
}

/// The lines printed at start: the endpoint, the access key it accepts
/// (`aws_access_key_id: ...`, `aws_secret_access_key: ...`), then `export`
/// lines for a shell (the S3 endpoint last, as `AWS_ENDPOINT_URL_S3`, which
/// AWS SDKs read for S3 alone); in TLS mode also `ca: PATH` and the variables of the
/// recipe for unchanged AWS clients (docs/local.md).
pub(crate) fn banner(emulator: &Emulator, region: &str, image: &str) -> String {
    let url = emulator.endpoint_url();
    let key = emulator.access_key();
    let mut out = format!(
        "rayito emulator listening on {url}\n\
         aws_access_key_id: {id}\n\
         aws_secret_access_key: {secret}\n\
         export AWS_ENDPOINT_URL={url}\n\
         export AWS_ACCESS_KEY_ID={id}\n\
         export AWS_SECRET_ACCESS_KEY={secret}\n\
         export AWS_REGION={region}\n\
         export RAYITO_TEMPLATE={arn}\n\
         export AWS_ENDPOINT_URL_S3={s3}\n",
        id = key.id,
        secret = key.secret,
        arn = emulator.image_arn(image),
        s3 = emulator.s3_endpoint_url(),
    );
    if let Some(ca) = emulator.ca_path() {
        let ca = ca.display();
        out.push_str(&format!(
            "export AWS_ENDPOINT_URL_LAMBDA_MICROVMS={url}\n\
             export GRPC_DEFAULT_SSL_ROOTS_FILE_PATH={ca}\n\
             ca: {ca}\n"
        ));
    }
    out
}

async fn stop_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = ctrl_c.await;
        }
    }
}

/// Runs the emulator on its own runtime until SIGTERM or Ctrl-C; returns
/// the process exit code (0 after a clean stop, 1 when the emulator cannot
/// start, 2 for a half-given access key).
pub fn run(args: EmulatorArgs) -> i32 {
    match tokio::runtime::Runtime::new() {
        Ok(rt) => rt.block_on(run_async(args)),
        Err(e) => {
            eprintln!("rayito-emulator: cannot start a runtime: {e}");
            1
        }
    }
}

async fn run_async(args: EmulatorArgs) -> i32 {
    let config = match args.config_from(|name| std::env::var(name).ok()) {
        Ok(config) => config,
        Err(message) => {
            eprintln!("rayito-emulator: {message}");
            return 2;
        }
    };
    let region = config.region.clone();
    let image = config.images.first().cloned().unwrap_or_default();
    let emulator = match Emulator::start(config).await {
        Ok(e) => e,
        Err(e) => {
            eprintln!("rayito-emulator: cannot start: {e}");
            return 1;
        }
    };
    print!("{}", banner(&emulator, &region, &image));
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    stop_signal().await;
    emulator.shutdown().await;
    0
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    fn emulator_args(line: &str) -> Result<super::EmulatorArgs, clap::Error> {
        let words = ["rayito-emulator"]
            .into_iter()
            .chain(line.split_whitespace());
        super::EmulatorArgs::try_parse_from(words)
    }

    #[test]
    fn parses_flags_and_refuses_unknown_ones() {
        let c = emulator_args("--addr 127.0.0.1:5000 --region eu-west-1 --image a --image b")
            .unwrap()
            .config();
        assert_eq!(c.addr.to_string(), "127.0.0.1:5000");
        assert_eq!(c.region, "eu-west-1");
        assert_eq!(c.images, ["a", "b"]);
        assert!(!c.tls);
        let c = emulator_args("").unwrap().config();
        assert_eq!(c.addr.to_string(), "127.0.0.1:4566");
        assert_eq!(c.images, ["rayito-base"]);
        assert!(emulator_args("--tls").unwrap().config().tls);
        assert!(
            emulator_args("--tls")
                .unwrap()
                .config()
                .tls_ip_name_constraints
        );
        let bare = emulator_args("--tls --tls-no-ip-constraints")
            .unwrap()
            .config();
        assert!(bare.tls && !bare.tls_ip_name_constraints);
        let err = emulator_args("--tls-no-ip-constraints").unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);
        let err = emulator_args("--bogus").unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::UnknownArgument);
        let err = emulator_args("--addr").unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::InvalidValue);
        let err = emulator_args("--addr nope").unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation);
    }

    #[test]
    fn the_latency_profile_comes_from_the_flag_or_the_environment() {
        use super::LatencyProfile;
        let none = |_: &str| None;
        let off = emulator_args("").unwrap().config_from(none).unwrap();
        assert!(off.latency.is_off(), "off by default");
        let aws = |name: &str| (name == LatencyProfile::ENV).then(|| "aws".to_owned());
        let by_env = emulator_args("").unwrap().config_from(aws).unwrap();
        assert_eq!(by_env.latency, LatencyProfile::AWS);
        // A flag wins over the environment.
        let by_flag = emulator_args("--latency resume=100")
            .unwrap()
            .config_from(aws)
            .unwrap();
        assert_eq!(
            by_flag.latency,
            LatencyProfile::new(
                std::time::Duration::ZERO,
                std::time::Duration::ZERO,
                std::time::Duration::from_millis(100)
            )
        );
        let err = emulator_args("--latency fast").unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation);
        let bad = |_: &str| Some("fast".to_owned());
        let err = emulator_args("").unwrap().config_from(bad).unwrap_err();
        assert!(err.starts_with("RAYITO_EMULATOR_LATENCY: "), "{err}");
    }

    #[test]
    fn access_keys_are_generated_or_fixed_by_flag_or_environment() {
        let none = |_: &str| None;
        let a = emulator_args("").unwrap().config_from(none).unwrap();
        let b = emulator_args("").unwrap().config_from(none).unwrap();
        assert_eq!(a.access_keys.len(), 1);
        assert_ne!(a.access_keys, b.access_keys, "each start generates its own");

        let c = emulator_args("--access-key-id AKIDFLAG --secret-access-key s3cret")
            .unwrap()
            .config_from(none)
            .unwrap();
        assert_eq!(c.access_keys, [super::AccessKey::new("AKIDFLAG", "s3cret")]);

        let env = |name: &str| match name {
            super::ACCESS_KEY_ID_ENV => Some("AKIDENV".to_owned()),
            super::SECRET_ACCESS_KEY_ENV => Some("envsecret".to_owned()),
            _ => None,
        };
        let d = emulator_args("").unwrap().config_from(env).unwrap();
        assert_eq!(
            d.access_keys,
            [super::AccessKey::new("AKIDENV", "envsecret")]
        );
        // A flag wins over the environment.
        let e = emulator_args("--access-key-id AKIDFLAG")
            .unwrap()
            .config_from(env)
            .unwrap();
        assert_eq!(
            e.access_keys,
            [super::AccessKey::new("AKIDFLAG", "envsecret")]
        );

        for half in ["--access-key-id AKIDFLAG", "--secret-access-key s3cret"] {
            let err = emulator_args(half).unwrap().config_from(none).unwrap_err();
            assert_eq!(
                err,
                "a fixed access key needs both an id (--access-key-id or RAYITO_EMULATOR_ACCESS_KEY_ID) and a secret (RAYITO_EMULATOR_SECRET_ACCESS_KEY or --secret-access-key), neither empty; give both or neither (then one is generated)"
            );
        }
    }
}
