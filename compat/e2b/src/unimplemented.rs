//! E2B features Lambda MicroVMs cannot provide: each is a typed
//! `SandboxError::Unimplemented` with a stable feature key, returned before
//! any call to AWS. Never a `SandboxException`, never an approximation.

use rayito::SandboxError;

/// Where every one of these errors points.
pub const DOC: &str = "docs/e2b-compat.md";

/// A missing E2B feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Missing {
    /// `Sandbox.fork`.
    Fork,
    /// `create_snapshot`.
    CreateSnapshot,
    /// `list_snapshots`.
    ListSnapshots,
    /// `delete_snapshot`.
    DeleteSnapshot,
    /// `connect(on_resume="reboot")`.
    ConnectReboot,
    /// `pause(keep_memory=False)`.
    PauseWithoutMemory,
    /// `network.rules`.
    NetworkRules,
    /// `network.mask_request_host`.
    NetworkMaskRequestHost,
    /// `network.allow_public_traffic=True`.
    NetworkAllowPublicTraffic,
    /// `network.https_ports`.
    NetworkHttpsPorts,
    /// `iam`.
    Iam,
    /// `mcp` on create.
    Mcp,
    /// `get_mcp_url`.
    GetMcpUrl,
    /// `get_mcp_token`.
    GetMcpToken,
    /// `get_signature`.
    GetSignature,
    /// `volume_mounts`.
    VolumeMounts,
    /// A language with no kernel here (R, Java).
    Language,
    /// `network.dns_servers`.
    NetworkDnsServers,
    /// `idempotency_key` on create.
    IdempotencyKey,
    /// `traffic_access_token`.
    TrafficAccessToken,
    /// `sandbox_domain`, `envd_api_url`, `envd_direct_url`,
    /// `connection_config`.
    EnvdEndpoints,
    /// `upload_url` in a build without the `s3` feature.
    UploadUrl,
    /// `download_url` in a build without the `s3` feature.
    DownloadUrl,
    /// E2B's `Template` class in a build without the `templates` feature.
    Template,
    /// `Template().from_image(..)` and every start but the base image.
    TemplateImage,
    /// A `TemplateBuilder` step with no rayito template step.
    TemplateStep,
    /// `TemplateBuilder.apt_install`.
    TemplateApt,
    /// `Template.get_tags` / `assign_tags` / `remove_tags`, `tags=`.
    TemplateTags,
    /// E2B's `Volume` class.
    Volume,
    /// E2B's `Secret` class in a build without the `secrets` feature.
    Secret,
    /// `Secret.fill`: E2B's placeholder.
    SecretFill,
}

impl Missing {
    /// Every missing feature, in the order of `docs/e2b-compat.md`.
    pub const ALL: &'static [Missing] = &[
        Self::Fork,
        Self::CreateSnapshot,
        Self::ListSnapshots,
        Self::DeleteSnapshot,
        Self::ConnectReboot,
        Self::PauseWithoutMemory,
        Self::NetworkRules,
        Self::NetworkMaskRequestHost,
        Self::NetworkAllowPublicTraffic,
        Self::NetworkHttpsPorts,
        Self::Iam,
        Self::Mcp,
        Self::GetMcpUrl,
        Self::GetMcpToken,
        Self::GetSignature,
        Self::VolumeMounts,
        Self::Language,
        Self::NetworkDnsServers,
        Self::IdempotencyKey,
        Self::TrafficAccessToken,
        Self::EnvdEndpoints,
        Self::UploadUrl,
        Self::DownloadUrl,
        Self::Template,
        Self::TemplateImage,
        Self::TemplateStep,
        Self::TemplateApt,
        Self::TemplateTags,
        Self::Volume,
        Self::Secret,
        Self::SecretFill,
    ];

    /// The stable feature key (`SandboxError::Unimplemented::feature`).
    pub const fn key(self) -> &'static str {
        match self {
            Self::Fork => "fork",
            Self::CreateSnapshot => "create_snapshot",
            Self::ListSnapshots => "list_snapshots",
            Self::DeleteSnapshot => "delete_snapshot",
            Self::ConnectReboot => "connect(on_resume=reboot)",
            Self::PauseWithoutMemory => "pause(keep_memory=false)",
            Self::NetworkRules => "network.rules",
            Self::NetworkMaskRequestHost => "network.mask_request_host",
            Self::NetworkAllowPublicTraffic => "network.allow_public_traffic",
            Self::NetworkHttpsPorts => "network.https_ports",
            Self::Iam => "iam",
            Self::Mcp => "mcp",
            Self::GetMcpUrl => "get_mcp_url",
            Self::GetMcpToken => "get_mcp_token",
            Self::GetSignature => "get_signature",
            Self::VolumeMounts => "volume_mounts",
            Self::Language => "language",
            Self::NetworkDnsServers => "network.dns_servers",
            Self::IdempotencyKey => "idempotency_key",
            Self::TrafficAccessToken => "traffic_access_token",
            Self::EnvdEndpoints => "envd_endpoints",
            Self::UploadUrl => "upload_url",
            Self::DownloadUrl => "download_url",
            Self::Template => "template",
            Self::TemplateImage => "template.from_image",
            Self::TemplateStep => "template.step",
            Self::TemplateApt => "template.apt_install",
            Self::TemplateTags => "template.tags",
            Self::Volume => "volume",
            Self::Secret => "secret",
            Self::SecretFill => "secret.fill",
        }
    }

    /// Why (a fixed text, transcribed in `docs/e2b-compat.md`).
    pub const fn reason(self) -> &'static str {
        match self {
            Self::Fork | Self::CreateSnapshot | Self::ListSnapshots | Self::DeleteSnapshot => {
                "Lambda MicroVMs cannot copy a running MicroVM's memory"
            }
            Self::ConnectReboot => "resuming a MicroVM always restores its memory and disk",
            Self::PauseWithoutMemory => "suspending a MicroVM always keeps its memory and disk",
            Self::NetworkRules | Self::NetworkMaskRequestHost => {
                "there is no egress proxy outside the MicroVM"
            }
            Self::NetworkAllowPublicTraffic => {
                "every request to a sandbox needs a proxy token; unauthenticated access does not exist"
            }
            Self::NetworkHttpsPorts => "there is no end-to-end TLS to a port of the sandbox",
            Self::Iam => "there are no audience tokens; the only identity is the execution role",
            Self::Mcp | Self::GetMcpUrl | Self::GetMcpToken => {
                "the proxy needs a short-lived token header, so a fixed-token URL cannot work"
            }
            Self::GetSignature => "an envd signature does not authenticate at the AWS proxy",
            Self::VolumeMounts | Self::Volume => "there is no file data plane outside a MicroVM",
            Self::Language => {
                "only python, bash, javascript and typescript kernels exist; R and Java are not offered"
            }
            Self::NetworkDnsServers => {
                "the egress policy sets no DNS servers; set them in the image's /etc/resolv.conf"
            }
            Self::IdempotencyKey => {
                "the SDK passes no caller key to the control plane; find an earlier create with list(metadata)"
            }
            Self::TrafficAccessToken => {
                "each port has its own short-lived proxy token; read it from get_host(port)"
            }
            Self::EnvdEndpoints => {
                "a MicroVM has no envd endpoint; the SDK connects to the agent through the AWS proxy"
            }
            Self::UploadUrl | Self::DownloadUrl => {
                "presigned URLs need S3 staging; build rayito-e2b with its s3 feature and set RAYITO_TRANSFER_BUCKET"
            }
            Self::Template => {
                "templates are built by rayito's template builds (on AWS and on the local backend); build rayito-e2b with its templates feature"
            }
            Self::TemplateImage => {
                "templates are built on a rayito base image only; start with from_base_image()"
            }
            Self::TemplateStep => "no rayito template step does this; write it as run_cmd",
            Self::TemplateApt => {
                "the base image is Amazon Linux, which has no apt; use dnf_install"
            }
            Self::TemplateTags => {
                "template images have versions, not tags; build another name for each tag"
            }
            Self::Secret => {
                "secrets live in AWS Secrets Manager through rayito's secret store; build rayito-e2b with its secrets feature"
            }
            Self::SecretFill => {
                "nothing resolves ${e2b.secrets.<name>} placeholders; give a sandbox the secret as an environment variable with rayito's SandboxBuilder::secret"
            }
        }
    }

    /// The error: `Unimplemented { feature: key, reason, doc: DOC }`.
    pub fn error(self) -> SandboxError {
        SandboxError::unimplemented(self.key(), self.reason(), Some(DOC))
    }
}
