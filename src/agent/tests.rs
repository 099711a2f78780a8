//! The agent's pure parts: the spec's refusals, the protocol decoder, the
//! limits, the gateway presets, the `agent` error messages.
