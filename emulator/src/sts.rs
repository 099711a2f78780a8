//! STS `GetCallerIdentity` (awsQuery, `POST /` with a form body): the
//! account an image name resolves in and S3's expected bucket owner, as a
//! client on AWS asks it.

/// Whether a form body asks for GetCallerIdentity.
pub(crate) fn is_get_caller_identity(body: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(body) else {
        return false;
    };
    text.split('&')
        .any(|pair| pair == "Action=GetCallerIdentity")
}

/// The GetCallerIdentity response (`text/xml`).
pub(crate) fn answer(account: &str) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    (
        [(axum::http::header::CONTENT_TYPE, "text/xml")],
        get_caller_identity_xml(account, &super::ids::uuid_v4()),
    )
        .into_response()
}

/// The XML answer for the emulator's one identity.
pub(crate) fn get_caller_identity_xml(account: &str, request_id: &str) -> String {
    format!(
        "<GetCallerIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\
<GetCallerIdentityResult>\
<Arn>arn:aws:iam::{account}:user/rayito-emulator</Arn>\
<UserId>AIDARAYITOEMULATOR</UserId>\
<Account>{account}</Account>\
</GetCallerIdentityResult>\
<ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata>\
</GetCallerIdentityResponse>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_get_caller_identity_action_is_recognised() {
        assert!(is_get_caller_identity(
            b"Action=GetCallerIdentity&Version=2011-06-15"
        ));
        assert!(!is_get_caller_identity(
            b"Action=AssumeRole&Version=2011-06-15"
        ));
        assert!(!is_get_caller_identity(b"\xff"));
    }
}
