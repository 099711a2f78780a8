//! Lifecycle events (extras §4), the parts every side shares: the agent
//! signs an event line with its sandbox's key ([`line`]), the pipeline
//! (the emulator locally, the stack's functions on AWS) checks and admits
//! it ([`line::parse`], [`admission`]) and signs each webhook delivery
//! ([`webhook`]); a receiving service checks a delivery with
//! [`webhook::verify`]. No I/O, no clock: callers pass the time.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod admission;
pub mod event;
pub mod key;
pub mod line;
#[cfg(feature = "url")]
pub mod url;
pub mod webhook;

pub use event::{Event, EventKind, KillReason};
