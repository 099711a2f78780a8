//! Why a transfer ended FAILED or CANCELLED: a closed set of reasons, each
//! with the `StreamError` code the SDK maps (spec C4) and one fixed
//! sentence. A message is `<reason>: <sentence>` and never holds a URL,
//! bucket, key, path or anything S3 answered.

use rayito_proto::tokens::stream_code;

use crate::pb;

/// The closed set of reasons a transfer fails for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reason {
    /// The object did not arrive, or the transfer did not finish, before
    /// the URLs expired.
    Expired,
    /// The object is larger than `max_bytes`.
    TooLarge,
    /// The exported file became shorter than its size at accept.
    FileShrank,
    /// The bytes' sha256 is not the expected one.
    ChecksumMismatch,
    /// S3 refused a presigned request (403).
    S3Denied,
    /// S3 could not be reached, timed out or answered unexpectedly.
    S3Unavailable,
    /// Writing the object would leave less than the disk reserve free.
    DiskReserve,
    /// The disk filled up while the file was written.
    DiskFull,
    /// CancelTransfer.
    Cancelled,
}

impl Reason {
    /// Every reason, for the tests that pin them.
    #[cfg(test)]
    pub(crate) const ALL: [Reason; 9] = [
        Reason::Expired,
        Reason::TooLarge,
        Reason::FileShrank,
        Reason::ChecksumMismatch,
        Reason::S3Denied,
        Reason::S3Unavailable,
        Reason::DiskReserve,
        Reason::DiskFull,
        Reason::Cancelled,
    ];

    /// The token before the colon.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Reason::Expired => "expired",
            Reason::TooLarge => "too_large",
            Reason::FileShrank => "file_shrank",
            Reason::ChecksumMismatch => "checksum_mismatch",
            Reason::S3Denied => "s3_denied",
            Reason::S3Unavailable => "s3_unavailable",
            Reason::DiskReserve => "disk_reserve",
            Reason::DiskFull => "disk_full",
            Reason::Cancelled => "cancelled",
        }
    }

    /// The `StreamError.code` the SDK maps to an error kind.
    pub(crate) fn code(self) -> &'static str {
        match self {
            Reason::Expired => stream_code::DEADLINE_EXCEEDED,
            Reason::TooLarge | Reason::FileShrank | Reason::ChecksumMismatch => {
                stream_code::FAILED_PRECONDITION
            }
            Reason::S3Denied => stream_code::PERMISSION_DENIED,
            Reason::S3Unavailable => stream_code::UNAVAILABLE,
            Reason::DiskReserve | Reason::DiskFull => stream_code::RESOURCE_EXHAUSTED,
            Reason::Cancelled => stream_code::CANCELLED,
        }
    }

    /// The whole message, `<reason>: <sentence>`.
    pub(crate) fn message(self) -> &'static str {
        match self {
            Reason::Expired => "expired: the transfer did not finish before its URLs expired",
            Reason::TooLarge => "too_large: the object is larger than the transfer allows",
            Reason::FileShrank => "file_shrank: the file became shorter while it was exported",
            Reason::ChecksumMismatch => {
                "checksum_mismatch: the bytes' sha256 is not the expected one"
            }
            Reason::S3Denied => "s3_denied: S3 refused a presigned request",
            Reason::S3Unavailable => {
                "s3_unavailable: S3 could not be reached or answered unexpectedly"
            }
            Reason::DiskReserve => {
                "disk_reserve: the file would leave less free space than the disk reserve"
            }
            Reason::DiskFull => "disk_full: the disk filled up while the file was written",
            Reason::Cancelled => "cancelled: the transfer was cancelled",
        }
    }

    /// The `StreamError` a FAILED or CANCELLED state carries.
    pub(crate) fn stream_error(self) -> pb::StreamError {
        pb::StreamError {
            code: self.code().to_owned(),
            message: self.message().to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every message starts with its reason and a colon (what the SDK
    /// splits on) and is pinned here, as docs/transfers.md lists them.
    #[test]
    fn messages_start_with_their_reason() {
        for r in Reason::ALL {
            let (head, rest) = r.message().split_once(": ").expect("a colon");
            assert_eq!(head, r.as_str());
            assert!(!rest.is_empty() && !rest.contains(':'), "{rest}");
        }
        // docs/transfers.md transcribes every message.
        let doc = include_str!("../../../docs/transfers.md");
        for r in Reason::ALL {
            assert!(
                doc.contains(&format!("`{}`", r.message())),
                "{}",
                r.as_str()
            );
        }
        let codes: Vec<_> = Reason::ALL.iter().map(|r| r.code()).collect();
        assert_eq!(
            codes,
            [
                "deadline_exceeded",
                "failed_precondition",
                "failed_precondition",
                "failed_precondition",
                "permission_denied",
                "unavailable",
                "resource_exhausted",
                "resource_exhausted",
                "cancelled"
            ]
        );
    }
}
