//! What `--help` says beyond each flag: an example section for every
//! command, the long form of `rayito --help` (exit codes, environment),
//! completion scripts, and the command reference docs/cli.md carries
//! (rendered from the same tree and checked by a test).

#[cfg(test)]
use std::fmt::Write as _;

use clap::CommandFactory as _;
use serde_json::json;

use crate::{Cli, Format};

/// `rayito --help`: what the short form leaves out.
const LONG_ABOUT: &str = "\
Sandboxes on AWS Lambda MicroVMs (or on this machine with `--local`).

A sandbox is a MicroVM with an agent: run commands and Python cells in it,
move files in and out, open a terminal, pause and resume it. `--local` (or
RAYITO_BACKEND=local) runs a daemon on this host instead of calling AWS: it
needs no account, and runs sandbox code ON THIS HOST with best-effort
isolation.";

/// The long help's closing part: exit codes and environment.
const LONG_AFTER: &str = "\
Exit codes:
  0    success
  1    a failure retrying will not cure (the error's kind says why); also
       run-code's cell raised, doctor found something to fix
  2    a usage error
  3    local status: the daemon does not run
  75   a retryable failure (capacity, rate limit, a lost connection)
  sandbox exec and sandbox shell exit with the command's own code (0-255;
  128+N when signal N ended it); their own failures, usage included, exit
  125 and a command past --timeout 124, as docker run and timeout do. A
  command may exit 124 or 125 itself: --output json tells them apart
  (\"exit_code\" or \"error\").

Environment:
  RAYITO_BACKEND=local     as --local
  RAYITO_TEMPLATE          the image sandboxes start from (an image ARN)
  RAYITO_CACHE_DIR         where access tokens and the local daemon's state
                           are kept (else $XDG_CACHE_HOME/rayito, else
                           ~/.cache/rayito; files of mode 0600)
  RAYITO_TRANSFER_BUCKET   files put/get above 8 MiB go through this S3
                           bucket (RAYITO_TRANSFER_PREFIX, _REGION)
  RAYITO_BUCKET            the artifact bucket of template and image builds
  AWS_REGION, AWS_PROFILE  as --region and --profile
  RUST_LOG                 overrides -v/-q for the SDK's events";

/// Examples for each command, by its path under `rayito` (`""` is
/// `rayito` itself). A test checks that every command has some.
const EXAMPLES: &[(&str, &str)] = &[
    (
        "",
        "rayito --local sandbox create                 # prints the new sandbox's id
  rayito --local sandbox exec ID -- ls -l /home/user
  rayito --local sandbox shell ID
  rayito completions bash > ~/.local/share/bash-completion/completions/rayito",
    ),
    (
        "sandbox",
        "ID=$(rayito sandbox create)
  rayito sandbox exec \"$ID\" -- python3 --version
  rayito sandbox kill \"$ID\"",
    ),
    (
        "sandbox create",
        "rayito sandbox create --template arn:aws:lambda:us-east-1:123456789012:microvm-image:web
  rayito --local sandbox create --metadata owner=me --timeout 600
  rayito sandbox create --env APP_ENV=staging --env PATH_PREFIX
  rayito sandbox create --gateway openai=openai.toml   # prints the gateway's URL on stderr
  rayito sandbox create --template rayito-base-caps-efs --egress CONNECTOR_ARN --execution-role-arn ROLE_ARN --volume /mnt/data=fs-0123abcd:fsap-0123abcd
  rayito sandbox create --log-group /rayito/rayito-base --events   # lifecycle events into rayito events
  rayito sandbox create --telemetry https://collector.example.com:4318/v1/metrics --telemetry-bearer-secret otlp-key
  rayito --output json sandbox create --logs     # {\"sandbox_id\":...,\"template\":...}",
    ),
    (
        "sandbox list",
        "rayito sandbox list
  rayito sandbox list --metadata owner=me --state running --output json",
    ),
    (
        "sandbox info",
        "rayito sandbox info ID
  rayito --output json sandbox info ID",
    ),
    (
        "sandbox metrics",
        "rayito sandbox metrics ID
  rayito sandbox metrics ID --follow --interval 10",
    ),
    (
        "sandbox logs",
        "rayito sandbox logs ID --since 30m
  rayito sandbox logs ID --follow --json",
    ),
    (
        "sandbox kill",
        "rayito sandbox kill ID
  rayito sandbox kill ID1 ID2 3f2a               # several (a unique start of an id will do)
  rayito sandbox kill --all --metadata owner=ci  # this cache's running ones with that metadata",
    ),
    (
        "sandbox prune",
        "rayito sandbox prune --dry-run
  rayito sandbox prune                           # forgets ended sandboxes' tokens",
    ),
    (
        "sandbox host",
        "rayito sandbox exec --detach ID -- 'python3 -m http.server 8000'
  rayito sandbox host ID 8000                    # the URL
  rayito --output json sandbox host ID 8000 --show-headers   # and the headers to send",
    ),
    (
        "sandbox set-timeout",
        "rayito sandbox create --timeout 600 --max-lifetime 2h
  rayito sandbox set-timeout ID 90m              # ends 90 minutes from now",
    ),
    (
        "sandbox gateways",
        "rayito sandbox gateways ID                     # name, URL, port, last error
  rayito --output json sandbox gateways ID",
    ),
    (
        "sandbox mounts",
        "rayito sandbox mounts ID                       # mount path, state, last error
  rayito --output json sandbox mounts ID",
    ),
    (
        "sandbox volumes",
        "rayito sandbox volumes ID                      # mount path, state, last error
  rayito --output json sandbox volumes ID",
    ),
    ("sandbox pause", "rayito sandbox pause ID"),
    ("sandbox resume", "rayito sandbox resume ID"),
    (
        "sandbox connect",
        "eval \"$(rayito sandbox connect ID)\"          # then, in that shell:
  rayito sandbox exec \"$RAYITO_SANDBOX_ID\" -- uptime",
    ),
    (
        "sandbox exec",
        "rayito sandbox exec ID -- ls -l \"my file.txt\"   # arguments passed as they are
  rayito sandbox exec ID -- 'cd /tmp && ls | wc -l'   # one argument: a bash command line
  rayito sandbox exec ID --cwd /home/user/app --timeout 300 -- make test
  rayito --output json sandbox exec ID -- python3 -c 'print(42)'
  rayito sandbox exec ID -- 'tar -czf - /home/user/out' | tar -xzf -   # bytes as they are
  printf 'print(1+1)\\n' | rayito sandbox exec -i ID -- python3 -   # stdin streamed
  rayito sandbox exec -it ID -- python3                # a terminal, as docker exec -it
  rayito sandbox exec --detach ID -- 'python3 -m http.server 8000'   # prints the pid",
    ),
    (
        "sandbox shell",
        "rayito sandbox shell ID
  printf 'echo hi\\nexit 3\\n' | rayito sandbox shell ID   # exits 3",
    ),
    (
        "sandbox run-code",
        "rayito sandbox run-code ID 'import math; math.pi'
  rayito --output json sandbox run-code ID 'int(\"x\")'   # exit 1, the error as data
  rayito sandbox run-code ID --file analysis.py --timeout 10m
  printf 'print(1+1)\\n' | rayito sandbox run-code ID -",
    ),
    (
        "sandbox files",
        "rayito sandbox files put ID data.csv /home/user/data.csv
  rayito sandbox files get ID /home/user/out.json out.json
  rayito sandbox files ls ID /home/user",
    ),
    (
        "sandbox files put",
        "rayito sandbox files put ID model.bin /home/user/model.bin
  rayito sandbox files put ID --recursive ./src /home/user/src",
    ),
    (
        "sandbox files get",
        "rayito sandbox files get ID /home/user/report.csv report.csv
  rayito sandbox files get ID /home/user/log.txt | tail
  rayito sandbox files get ID --recursive /home/user/out ./out",
    ),
    (
        "sandbox files ls",
        "rayito sandbox files ls ID
  rayito --output json sandbox files ls ID /tmp",
    ),
    (
        "sandbox network",
        "rayito sandbox network get ID
  rayito sandbox network set ID --allow-out pypi.org --allow-out files.pythonhosted.org --deny-all",
    ),
    (
        "sandbox network get",
        "rayito sandbox network get ID
  rayito --output json sandbox network get ID",
    ),
    (
        "sandbox network set",
        "rayito sandbox network set ID --deny-out 10.0.0.0/8
  rayito sandbox network set ID --allow-out api.example.com --deny-all
  rayito sandbox network set ID                      # unrestricted again",
    ),
    (
        "template",
        "rayito template build site.toml --name web
  rayito template status web",
    ),
    (
        "template build",
        "rayito template build site.toml --name web
  rayito --local template build site.json --name web --memory-mb 4096 --force",
    ),
    (
        "template status",
        "rayito template status web
  rayito template status web --version 3",
    ),
    ("template logs", "rayito template logs web --limit 50"),
    (
        "template list",
        "rayito template list
  rayito template list --filter web --output json",
    ),
    (
        "image",
        "rayito image zip base/ rayito-image.zip --arch X86_64
  rayito image publish --artifact rayito-image.zip --base-image-version latest",
    ),
    (
        "image zip",
        "rayito image zip base/ rayito-image.zip --agent-binary ./rayito-agent --arch X86_64",
    ),
    (
        "image publish",
        "rayito image publish --artifact rayito-image.zip --base-image-version latest
  rayito image publish --artifact rayito-image.zip --base-image-version latest --sizes 512mb,4gb
  rayito image publish --artifact rayito-image.zip --base-image-version latest --os-capabilities ALL",
    ),
    (
        "image list",
        "rayito image list
  rayito image list rayito-base",
    ),
    ("image sizes", "rayito image sizes --image-name my-base"),
    (
        "image prune",
        "rayito image prune --keep 2 --dry-run
  rayito image prune --image-name my-base --keep 3",
    ),
    (
        "pool",
        "rayito pool start --size 4 &
  rayito pool take",
    ),
    (
        "pool start",
        "rayito pool start --size 4 --warmup \"python3 -c 'import numpy'\"",
    ),
    ("pool take", "ID=$(rayito pool take --wait 30)"),
    ("pool stats", "rayito pool stats --name web"),
    ("pool drain", "rayito pool drain --name web"),
    (
        "secret",
        "printf %s \"$OPENAI_API_KEY\" | rayito secret create openai-key
  rayito secret list",
    ),
    (
        "secret create",
        "printf %s \"$TOKEN\" | rayito secret create github-token --metadata owner=ci
  rayito secret create db-password --from-file ./password.txt",
    ),
    (
        "secret update",
        "rayito secret update db-password --from-file ./new-password.txt",
    ),
    (
        "secret info",
        "rayito secret info db-password
  rayito --output json secret info db-password",
    ),
    (
        "secret list",
        "rayito secret list
  rayito secret list --limit 10 --next-token TOKEN",
    ),
    ("secret delete", "rayito secret delete db-password"),
    (
        "mounts",
        "rayito mounts policy deploy --bucket my-datasets --prefix team7/
  rayito mounts policy status",
    ),
    (
        "agent",
        "rayito agent template build --bucket my-artifacts
  rayito agent run 'Fix the failing test' --file rayito-agent.toml --stream",
    ),
    (
        "agent run",
        "rayito agent run 'Summarise README.md' --file rayito-agent.toml
  rayito --local agent run 'Fix the failing test' --stream --output json
  rayito agent run 'And now the docs' --session-id rda_0123456789abcdef0123456789abcdef",
    ),
    (
        "agent template",
        "rayito agent template build --bucket my-artifacts",
    ),
    (
        "agent template build",
        "rayito agent template build --bucket my-artifacts --memory-mb 4096
  rayito --local agent template build --name rayito-agent",
    ),
    ("agent init", "rayito agent init   # next round: exits 2 and says so"),
    ("agent build", "rayito agent build   # next round: exits 2 and says so"),
    ("agent detect", "rayito agent detect   # next round: exits 2 and says so"),
    ("agent deploy", "rayito agent deploy   # next round: exits 2 and says so"),
    ("agent export", "rayito agent export   # next round: exits 2 and says so"),
    ("agent invoke", "rayito agent invoke   # next round: exits 2 and says so"),
    ("agent status", "rayito agent status   # next round: exits 2 and says so"),
    ("agent stop", "rayito agent stop   # next round: exits 2 and says so"),
    ("agent delete", "rayito agent delete   # next round: exits 2 and says so"),
    ("agent list", "rayito agent list   # next round: exits 2 and says so"),
    (
        "events",
        "rayito events deploy --artifact-bucket my-artifacts --log-group-name /rayito/rayito-base --yes
  rayito events webhook add https://hooks.example.com/rayito --secret-name receiver --type sandbox.lifecycle.killed
  rayito events list --sandbox-id ID --order asc",
    ),
    (
        "events deploy",
        "rayito events deploy --artifact-bucket my-artifacts --log-group-name /rayito/rayito-base --artifact events-webhooks.zip --yes
  rayito --local events deploy --log-group-name /rayito/rayito-base --yes",
    ),
    (
        "events status",
        "rayito events status --output json",
    ),
    (
        "events destroy",
        "rayito events destroy --yes",
    ),
    (
        "events list",
        "rayito events list --type sandbox.lifecycle.killed --limit 10
  rayito events list --sandbox-id ID --order asc --output json",
    ),
    (
        "events webhook",
        "rayito events webhook add https://hooks.example.com/rayito --secret-name receiver --type sandbox.lifecycle.created --type sandbox.lifecycle.killed
  rayito events webhook list",
    ),
    (
        "events webhook add",
        "rayito events webhook add https://hooks.example.com/rayito --secret-name receiver --type sandbox.lifecycle.killed
  rayito --local events webhook add http://127.0.0.1:8080/hook --secret-name receiver --type sandbox.lifecycle.created",
    ),
    (
        "events webhook list",
        "rayito events webhook list --output json",
    ),
    (
        "events webhook remove",
        "rayito events webhook remove 0123456789abcdef",
    ),
    (
        "events dead-letters",
        "rayito --local events dead-letters --output json",
    ),
    (
        "mounts policy",
        "rayito mounts policy deploy --bucket my-datasets --prefix team7/ --writable
  rayito mounts policy destroy",
    ),
    (
        "mounts policy deploy",
        "rayito mounts policy deploy --bucket my-datasets
  rayito mounts policy deploy --bucket other-bucket --stack-name rayito-s3-mounts-other --prefix runs/",
    ),
    (
        "mounts policy status",
        "rayito mounts policy status --output json",
    ),
    (
        "mounts policy destroy",
        "rayito mounts policy destroy --stack-name rayito-s3-mounts-other",
    ),
    (
        "volume",
        "rayito volume create --file-system-id fs-0123456789abcdef0 datasets
  rayito volume list --file-system-id fs-0123456789abcdef0",
    ),
    (
        "volume create",
        "rayito volume create --file-system-id fs-0123456789abcdef0 datasets   # prints its access point",
    ),
    (
        "volume list",
        "rayito volume list --file-system-id fs-0123456789abcdef0
  rayito --output json volume list --file-system-id fs-0123456789abcdef0",
    ),
    (
        "volume destroy",
        "rayito volume destroy --file-system-id fs-0123456789abcdef0 datasets  # the files stay",
    ),
    (
        "volumes",
        "rayito volumes check --vpc-id vpc-0123456789abcdef0 --subnet-id subnet-0123456789abcdef0
  rayito volumes status",
    ),
    (
        "volumes check",
        "rayito volumes check --vpc-id vpc-0123456789abcdef0 --subnet-id subnet-0123456789abcdef0,subnet-0fedcba9876543210",
    ),
    (
        "volumes deploy",
        "rayito volumes deploy --vpc-id vpc-0123456789abcdef0 --subnet-id subnet-0123456789abcdef0
  rayito volumes deploy --vpc-id vpc-0123456789abcdef0 --subnet-id subnet-0123456789abcdef0 --read-only --no-wait",
    ),
    (
        "volumes status",
        "rayito volumes status
  rayito --output json volumes status --stack-name rayito-efs-volumes",
    ),
    (
        "volumes destroy",
        "rayito volumes destroy                         # the file system is kept
  rayito volumes destroy --delete-file-system    # and its data deleted too",
    ),
    (
        "dashboard",
        "rayito dashboard                          # prints the URL to open (127.0.0.1 only)
  rayito --local dashboard --allow-actions --port 8765",
    ),
    (
        "dashboard cloudwatch",
        "rayito dashboard cloudwatch --out board.json
  rayito dashboard cloudwatch --log-group-prefix /rayito/ --otlp --quota",
    ),
    (
        "fleet",
        "rayito fleet list --state running
  rayito fleet kill --image my-image      # prints the plan and its confirmation; acts on nothing",
    ),
    (
        "fleet list",
        "rayito fleet list
  rayito fleet list --state suspended --metadata team=data --json",
    ),
    ("fleet images", "rayito fleet images --json"),
    (
        "fleet kill",
        "rayito fleet kill --state suspended                  # the plan only
  rayito fleet kill --state suspended --confirm kill-3-1a2b3c4d",
    ),
    (
        "fleet pause",
        "rayito fleet pause --metadata team=data --yes",
    ),
    (
        "fleet resume",
        "rayito fleet resume ID1 ID2 --yes",
    ),
    (
        "fleet set-timeout",
        "rayito fleet set-timeout 3600 --state running      # the plan only
  rayito fleet set-timeout 3600 --state running --yes",
    ),
    (
        "stack",
        "rayito stack list
  rayito stack deploy metadata-index --yes",
    ),
    ("stack list", "rayito --output json stack list"),
    (
        "stack status",
        "rayito stack status metadata-index",
    ),
    (
        "stack deploy",
        "rayito stack deploy s3-mounts --param BucketName=my-bucket   # prints the changes only
  rayito stack deploy s3-mounts --param BucketName=my-bucket --tag team=data --yes",
    ),
    (
        "stack destroy",
        "rayito stack destroy metadata-index --yes",
    ),
    (
        "doctor",
        "rayito doctor
  rayito --region eu-west-1 --output json doctor
  rayito doctor --launch                 # also starts a sandbox, runs a command in it, kills it
  rayito doctor --efs-vpc-id vpc-0abc --efs-subnet-ids subnet-1,subnet-2
  rayito doctor --simulate logs,secrets   # also simulate those features' IAM actions",
    ),
    (
        "setup",
        "rayito setup                                   # the plan; nothing is written
  rayito setup --yes --agent-binary ./rayito-agent
  rayito setup --yes --agent-binary ./rayito-agent --caps-image",
    ),
    (
        "local",
        "rayito local status
  rayito local fault throttle --creates 3
  rayito local stop",
    ),
    ("local status", "rayito local status --output json"),
    ("local stop", "rayito local stop"),
    (
        "local fault",
        "rayito --local local fault throttle --creates 3
  rayito --local sandbox create          # retried past 3 throttles, or exit 75
  rayito --local local fault clear",
    ),
    (
        "local fault throttle",
        "rayito local fault throttle --creates 10 --retry-after 0
  rayito local fault throttle --operation GetMicrovm --count 5",
    ),
    (
        "local fault capacity",
        "rayito local fault capacity --count 100",
    ),
    ("local fault quota", "rayito local fault quota"),
    (
        "local fault proxy-status",
        "rayito local fault proxy-status --status 403 --count 2",
    ),
    ("local fault cut", "rayito local fault cut ID"),
    ("local fault kill-agent", "rayito local fault kill-agent ID"),
    ("local fault fill-disk", "rayito local fault fill-disk ID"),
    ("local fault expire", "rayito local fault expire ID"),
    (
        "local fault hold-builds",
        "rayito local fault hold-builds
  rayito local fault hold-builds --release",
    ),
    ("local fault clear", "rayito local fault clear"),
    (
        "local fault list",
        "rayito local fault list
  rayito --output json local fault list",
    ),
    (
        "completions",
        "rayito completions bash > ~/.local/share/bash-completion/completions/rayito
  rayito completions zsh > \"${fpath[1]}/_rayito\"
  rayito completions fish > ~/.config/fish/completions/rayito.fish",
    ),
];

/// The examples section of the command at `path`.
fn examples(path: &str) -> Option<String> {
    EXAMPLES
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, text)| format!("Examples:\n  {text}"))
}

/// Adds the examples (and, at the top, the long form) to `command` and
/// its subcommands.
fn decorate(command: clap::Command, path: &str) -> clap::Command {
    let mut command = match examples(path) {
        Some(text) => command.after_help(text),
        None => command,
    };
    let names: Vec<String> = command
        .get_subcommands()
        .filter(|sub| !sub.is_hide_set())
        .map(|sub| sub.get_name().to_owned())
        .collect();
    for name in names {
        let sub_path = if path.is_empty() {
            name.clone()
        } else {
            format!("{path} {name}")
        };
        command = command.mut_subcommand(&name, |sub| decorate(sub, &sub_path));
    }
    command
}

/// The whole command tree, as parsed and shown.
pub fn command() -> clap::Command {
    let root = decorate(Cli::command(), "");
    let short_after = root
        .get_after_help()
        .map(ToString::to_string)
        .unwrap_or_default();
    root.long_about(LONG_ABOUT)
        .after_help(format!(
            "{short_after}\n\n`rayito --help` adds exit codes and the environment."
        ))
        .after_long_help(format!("{short_after}\n\n{LONG_AFTER}"))
}

/// `rayito completions SHELL`: the script on stdout (in a JSON document
/// with `--output json`).
pub fn completions(shell: clap_complete::Shell, format: Format) -> i32 {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command(), "rayito", &mut script);
    match format {
        Format::Text => {
            if let Err(err) = crate::output::write_bytes(&script) {
                return crate::output::stdout_failed(&err);
            }
        }
        Format::Json => crate::output::json(&json!({
            "shell": shell.to_string(),
            "script": String::from_utf8_lossy(&script),
        })),
    }
    0
}

/// The command reference of docs/cli.md: for each visible command its
/// usage, what it does, its own options and its examples, as `--help`
/// shows them.
#[cfg(test)]
pub fn reference() -> String {
    let mut root = command();
    root.build();
    let mut out = String::new();
    render(&root, "", &mut out);
    out
}

#[cfg(test)]
fn render(command: &clap::Command, path: &str, out: &mut String) {
    let title = if path.is_empty() {
        "rayito".to_owned()
    } else {
        format!("rayito {path}")
    };
    let _ = writeln!(out, "### `{title}`\n");
    if let Some(about) = command.get_about() {
        let _ = writeln!(out, "{}\n", one_line(&about.to_string()));
    }
    let usage = command.clone().render_usage().to_string();
    let _ = writeln!(out, "```text\n{}", usage.trim_end());
    let options: Vec<String> = command
        .get_arguments()
        .filter(|arg| !arg.is_hide_set() && (path.is_empty() || !arg.is_global_set()))
        .filter(|arg| !matches!(arg.get_id().as_str(), "help" | "version"))
        .map(|arg| {
            let name = match (arg.get_long(), arg.get_short()) {
                (Some(long), Some(short)) => format!("-{short}, --{long}"),
                (Some(long), None) => format!("--{long}"),
                // A positional shows its value name, as the usage line
                // does (`<LOCAL_PATH>`), else its id.
                (None, _) => match arg.get_value_names().and_then(|names| names.first()) {
                    Some(name) => format!("<{name}>"),
                    None => format!("<{}>", arg.get_id().as_str().to_uppercase()),
                },
            };
            let help = arg
                .get_help()
                .map(|h| one_line(&h.to_string()))
                .unwrap_or_default();
            format!("  {name}: {help}")
        })
        .collect();
    if !options.is_empty() {
        let _ = writeln!(out, "\n{}", options.join("\n"));
    }
    if let Some(text) = examples(path) {
        let _ = writeln!(out, "\n{text}");
    }
    let _ = writeln!(out, "```\n");
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        if sub.get_name() == "help" {
            continue;
        }
        let sub_path = if path.is_empty() {
            sub.get_name().to_owned()
        } else {
            format!("{path} {}", sub.get_name())
        };
        render(sub, &sub_path, out);
    }
}

/// A help text on one line (clap wraps doc comments as written).
#[cfg(test)]
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every visible command's path.
    fn paths(command: &clap::Command, path: &str, out: &mut Vec<String>) {
        out.push(path.to_owned());
        for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
            let sub_path = if path.is_empty() {
                sub.get_name().to_owned()
            } else {
                format!("{path} {}", sub.get_name())
            };
            paths(sub, &sub_path, out);
        }
    }

    #[test]
    fn every_command_has_examples_and_every_example_a_command() {
        let mut all = Vec::new();
        paths(&Cli::command(), "", &mut all);
        let missing: Vec<_> = all.iter().filter(|p| examples(p).is_none()).collect();
        assert!(missing.is_empty(), "commands without examples: {missing:?}");
        let stale: Vec<_> = EXAMPLES
            .iter()
            .map(|(p, _)| p)
            .filter(|p| !all.iter().any(|a| a == *p))
            .collect();
        assert!(stale.is_empty(), "examples of no command: {stale:?}");
        command().debug_assert();
    }

    #[test]
    fn the_help_of_a_command_shows_its_examples() {
        let mut root = command();
        let help = root
            .find_subcommand_mut("sandbox")
            .and_then(|s| s.find_subcommand_mut("exec"))
            .expect("sandbox exec")
            .render_help()
            .to_string();
        assert!(
            help.contains("Examples:\n  rayito sandbox exec ID -- ls -l"),
            "{help}"
        );
        let long = command().render_long_help().to_string();
        assert!(long.contains("Exit codes:"), "{long}");
        assert!(long.contains("RAYITO_TRANSFER_BUCKET"), "{long}");
    }

    /// docs/cli.md holds the reference between its markers, as rendered
    /// here; `RAYITO_BLESS=1` rewrites it.
    #[test]
    fn docs_cli_md_holds_the_reference_of_the_help() {
        const START: &str = "<!-- reference:start (generated from --help; RAYITO_BLESS=1 cargo test -p rayito-cli docs_cli_md rewrites it) -->\n";
        const END: &str = "<!-- reference:end -->";
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/cli.md");
        let doc = std::fs::read_to_string(path).expect("docs/cli.md");
        let (Some(start), Some(end)) = (doc.find(START), doc.find(END)) else {
            panic!("docs/cli.md lacks the reference markers");
        };
        let current = &doc[start + START.len()..end];
        let wanted = format!("\n{}", reference());
        if current != wanted {
            if std::env::var_os("RAYITO_BLESS").is_some() {
                let new = format!("{}{START}{wanted}{}", &doc[..start], &doc[end..]);
                std::fs::write(path, new).expect("rewrite docs/cli.md");
            } else {
                panic!(
                    "docs/cli.md's reference is not the help's: run RAYITO_BLESS=1 cargo test -p rayito-cli docs_cli_md"
                );
            }
        }
    }
}
