//! S3: code artifacts of template builds (feature `templates`,
//! [`artifacts`]), and, with the caller's credentials, checkpoints and
//! staged transfers (feature `s3`, [`objects`] and [`presign`]).

#[cfg(feature = "templates")]
pub(crate) mod artifacts;
#[cfg(feature = "s3")]
pub(crate) mod objects;
#[cfg(feature = "s3")]
pub(crate) mod presign;
