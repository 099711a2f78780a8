//! The built-in runtimes of the registry not built in this release: each
//! is `Unimplemented` with a reason naming exactly what is missing, so a
//! caller learns what to use instead (a `CustomRuntime` speaking protocol
//! v1) rather than a bare "not supported".

use crate::error::SandboxError;

/// The page that documents the runtimes.
pub(crate) const DOC: &str = "docs/agent.md";

/// Why `name` is not built, when it is one of the unbuilt runtimes.
pub(crate) fn reason(name: &str) -> Option<&'static str> {
    Some(match name {
        "deepagents" => {
            "the deepagents runtime is not built in this release: it needs its protocol v1 \
             runner and a hash-pinned Python virtualenv of deepagents and LangChain in \
             AgentTemplate, neither of which exists yet; run deepagents as an \
             AgentRuntime::Custom meanwhile"
        }
        "langgraph" => {
            "the langgraph runtime is not built in this release: it needs a protocol v1 \
             runner that loads your graph's entrypoint and its Python dependencies in \
             AgentTemplate, neither of which exists yet; run your graph as an \
             AgentRuntime::Custom meanwhile"
        }
        "strands" => {
            "the strands runtime is not built in this release: it needs Strands Agents \
             1.61.1 in a Python virtualenv of AgentTemplate and its protocol v1 runner, \
             neither of which exists yet; run Strands as an AgentRuntime::Custom meanwhile"
        }
        "hermes" => {
            "the hermes runtime is not built in this release: it needs Hermes 0.22.2 on \
             CPython 3.14 in AgentTemplate and the adapter that drives its loopback API on \
             port 8642, neither of which exists yet; run Hermes as an AgentRuntime::Custom \
             meanwhile"
        }
        _ => return None,
    })
}

/// `Unimplemented` for an unbuilt runtime (`feature` is `agent runtime
/// <name>`), or `None` for a name not in the list.
pub(crate) fn refusal(name: &str) -> Option<SandboxError> {
    reason(name)
        .map(|why| SandboxError::unimplemented(format!("agent runtime {name}"), why, Some(DOC)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each refusal's exact text (docs/agent.md transcribes them: its
    /// test keeps the two in step).
    #[test]
    fn each_unbuilt_runtime_is_refused_with_what_it_lacks() {
        for (name, lacks) in [
            (
                "deepagents",
                "hash-pinned Python virtualenv of deepagents and LangChain",
            ),
            ("langgraph", "loads your graph's entrypoint"),
            ("strands", "Strands Agents 1.61.1"),
            ("hermes", "Hermes 0.22.2 on CPython 3.14"),
        ] {
            let err = refusal(name).expect(name);
            assert_eq!(err.kind(), crate::ErrorKind::Unimplemented, "{name}");
            let text = err.to_string();
            assert!(
                text.starts_with(&format!(
                    "feature agent runtime {name} is not available: the {name} runtime is not \
                     built in this release: "
                )),
                "{text}"
            );
            assert!(text.contains(lacks), "{text}");
            assert!(text.ends_with("meanwhile; see docs/agent.md"), "{text}");
        }
        assert!(refusal("opencode").is_none());
    }

    /// docs/agent.md transcribes each reason whole.
    #[test]
    fn the_guide_transcribes_each_reason() {
        let doc = include_str!("../../../docs/agent.md");
        for name in ["deepagents", "langgraph", "strands", "hermes"] {
            let row = format!("| `{name}` | `{}` |", reason(name).unwrap());
            assert!(doc.contains(&row), "docs/agent.md lacks {row}");
        }
        assert!(refusal("custom").is_none());
    }
}
