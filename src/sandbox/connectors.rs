//! The VPC network connectors of RunMicrovm (`ingressNetworkConnectors`,
//! `egressNetworkConnectors`): what may reach the sandbox and where its
//! traffic leaves. Checked before any call; sent only when given (an
//! omitted list keeps the image's defaults).

use crate::error::SandboxError;

/// The most connectors of one direction RunMicrovm takes.
pub(crate) const MAX_CONNECTORS: usize = 10;

/// The longest ARN accepted (the service's own bound on an ARN).
const MAX_ARN_CHARS: usize = 2_048;

/// One network connector of a sandbox: a managed one by name, or a VPC
/// connector of your account by ARN.
///
/// A string converts with `From`: a managed name (`"ALL_INGRESS"`, ...)
/// becomes that variant, anything else an [`NetworkConnector::Arn`]
/// (checked by `create`, before any call, to be an ARN).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NetworkConnector {
    /// `ALL_INGRESS`: every kind of inbound traffic.
    AllIngress,
    /// `NO_INGRESS`: no inbound traffic.
    NoIngress,
    /// `SHELL_INGRESS`: inbound shell access only.
    ShellIngress,
    /// `INTERNET_EGRESS`: outbound traffic to the internet (what a sandbox
    /// has when `egress` is not given and the image says so).
    InternetEgress,
    /// A connector of your account, by ARN (`arn:...`), sent as given.
    Arn(String),
}

impl NetworkConnector {
    /// The managed connectors, by their names.
    pub const MANAGED: [NetworkConnector; 4] = [
        NetworkConnector::AllIngress,
        NetworkConnector::NoIngress,
        NetworkConnector::ShellIngress,
        NetworkConnector::InternetEgress,
    ];

    /// A connector of your account by ARN.
    pub fn arn(arn: impl Into<String>) -> Self {
        Self::Arn(arn.into())
    }

    /// The managed connector's name (`ALL_INGRESS`, ...); `None` for an
    /// ARN.
    pub fn managed_name(&self) -> Option<&'static str> {
        match self {
            Self::AllIngress => Some("ALL_INGRESS"),
            Self::NoIngress => Some("NO_INGRESS"),
            Self::ShellIngress => Some("SHELL_INGRESS"),
            Self::InternetEgress => Some("INTERNET_EGRESS"),
            Self::Arn(_) => None,
        }
    }

    /// The ARN RunMicrovm takes: a managed connector's in `region`
    /// (`arn:aws:lambda:<region>:aws:network-connector:aws-network-connector:<NAME>`),
    /// or the one given.
    pub(crate) fn resolve(&self, region: &str) -> String {
        match self {
            Self::Arn(arn) => arn.clone(),
            managed => format!(
                "arn:aws:lambda:{region}:aws:network-connector:aws-network-connector:{}",
                managed.managed_name().unwrap_or_default()
            ),
        }
    }
}

impl From<&str> for NetworkConnector {
    fn from(value: &str) -> Self {
        Self::MANAGED
            .into_iter()
            .find(|c| c.managed_name() == Some(value))
            .unwrap_or_else(|| Self::Arn(value.to_owned()))
    }
}

impl From<String> for NetworkConnector {
    fn from(value: String) -> Self {
        match Self::from(value.as_str()) {
            Self::Arn(_) => Self::Arn(value),
            managed => managed,
        }
    }
}

/// A sandbox's connectors, as the builder holds them (`None`: not given).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Connectors {
    pub ingress: Option<Vec<NetworkConnector>>,
    pub egress: Option<Vec<NetworkConnector>>,
}

impl Connectors {
    /// Refuses more than 10 of a direction, or a value that is neither a
    /// managed connector nor an ARN (no I/O).
    ///
    /// # Errors
    /// `InvalidArgument` naming `ingress` or `egress`.
    pub(crate) fn check(&self) -> Result<(), SandboxError> {
        for (argument, list) in [("ingress", &self.ingress), ("egress", &self.egress)] {
            check_list(argument, list.as_deref().unwrap_or_default())?;
        }
        Ok(())
    }

    /// The ARNs of each direction RunMicrovm is sent (empty: not sent).
    pub(crate) fn resolved(&self, region: &str) -> (Vec<String>, Vec<String>) {
        let arns = |list: &Option<Vec<NetworkConnector>>| {
            list.iter()
                .flatten()
                .map(|c| c.resolve(region))
                .collect::<Vec<_>>()
        };
        (arns(&self.ingress), arns(&self.egress))
    }
}

fn check_list(argument: &'static str, list: &[NetworkConnector]) -> Result<(), SandboxError> {
    if list.len() > MAX_CONNECTORS {
        return Err(SandboxError::invalid_argument(
            argument,
            format!(
                "at most {MAX_CONNECTORS} connectors, got {}; pass fewer",
                list.len()
            ),
        ));
    }
    for connector in list {
        if let NetworkConnector::Arn(arn) = connector
            && !is_arn(arn)
        {
            let shown: String = arn.chars().take(64).collect::<String>();
            return Err(SandboxError::invalid_argument(
                argument,
                format!(
                    "{shown:?} is neither an ARN (arn:...) nor a managed connector (ALL_INGRESS, NO_INGRESS, SHELL_INGRESS, INTERNET_EGRESS)"
                ),
            ));
        }
    }
    Ok(())
}

/// `arn:` then at least one more character, within the bound, without
/// whitespace or control characters.
fn is_arn(text: &str) -> bool {
    text.len() > "arn:".len()
        && text.starts_with("arn:")
        && text.chars().count() <= MAX_ARN_CHARS
        && !text.chars().any(|c| c.is_whitespace() || c.is_control())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_to_managed_connectors_and_the_rest_to_arns() {
        assert_eq!(
            NetworkConnector::from("ALL_INGRESS"),
            NetworkConnector::AllIngress
        );
        assert_eq!(
            NetworkConnector::from("INTERNET_EGRESS".to_owned()),
            NetworkConnector::InternetEgress
        );
        assert_eq!(
            NetworkConnector::from("all_ingress"),
            NetworkConnector::arn("all_ingress")
        );
        assert_eq!(
            NetworkConnector::ShellIngress.resolve("eu-west-1"),
            "arn:aws:lambda:eu-west-1:aws:network-connector:aws-network-connector:SHELL_INGRESS"
        );
        let own = "arn:aws:lambda:us-east-1:123456789012:network-connector:vpc-1";
        assert_eq!(NetworkConnector::from(own).resolve("eu-west-1"), own);
    }

    #[test]
    fn arns_are_checked() {
        for good in ["arn:x", "arn:aws:lambda:us-east-1:1:network-connector:c"] {
            assert!(is_arn(good), "{good}");
        }
        let long = format!("arn:{}", "a".repeat(MAX_ARN_CHARS));
        for bad in ["", "arn:", "ARN:x", "arn:a b", "arn:a\n", long.as_str()] {
            assert!(!is_arn(bad), "{bad:?}");
        }
    }
}
