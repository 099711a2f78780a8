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
            Self::VolumeMounts => "there is no file data plane outside a MicroVM",
            Self::Language => {
                "only python, bash, javascript and typescript kernels exist; R and Java are not offered"
            }
        }
    }

    /// The error: `Unimplemented { feature: key, reason, doc: DOC }`.
    pub fn error(self) -> SandboxError {
        SandboxError::unimplemented(self.key(), self.reason(), Some(DOC))
    }
}
