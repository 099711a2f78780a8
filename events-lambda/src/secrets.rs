//! Secret values from Secrets Manager: the stack key (the forwarder) and
//! each webhook's signing secret (the deliverer). A value is its
//! `SecretString`'s UTF-8 bytes, else its `SecretBinary`.

use aws_sdk_secretsmanager::Client;

use crate::Failure;

/// Reads the current value of secret `id` (a name or an ARN).
///
/// # Errors
/// When Secrets Manager fails or the secret holds no value.
pub async fn read(client: &Client, id: &str) -> Result<Vec<u8>, Failure> {
    let out = client
        .get_secret_value()
        .secret_id(id)
        .send()
        .await
        .map_err(|e| Failure::aws("GetSecretValue", &e))?;
    if let Some(text) = out.secret_string() {
        return Ok(text.as_bytes().to_vec());
    }
    out.secret_binary()
        .map(|b| b.as_ref().to_vec())
        .ok_or_else(|| Failure::other("GetSecretValue", "empty_secret"))
}
