//! The roots a TLS dial to an agent trusts: the system's store plus the
//! client's extra certificates (PEM, the TLS local backend's CA), made
//! into one certificate verifier per client on its first TLS dial and
//! shared by every connection it opens.
//!
//! tonic's `ClientTlsConfig::with_native_roots` reads and parses the
//! system's store (292 files under /etc/ssl/certs on the project machine)
//! each time an endpoint is configured, which was once per `create`: the
//! largest part of a warm create's client time (docs/performance.md,
//! "Create to ready against the reference SDK (issue 44 §1)"). The store is read once
//! per process instead, as a gRPC runtime does; a certificate added to it
//! later is seen by the next process.

use std::sync::{Arc, OnceLock};

use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;

/// The system's roots, read once per process (as many as parse).
fn native() -> &'static RootCertStore {
    static NATIVE: OnceLock<RootCertStore> = OnceLock::new();
    NATIVE.get_or_init(|| {
        let mut store = RootCertStore::empty();
        let _ = store.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        store
    })
}

/// The verifier of one client's TLS dials. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct AgentRoots {
    /// The extra roots (PEM), beyond the system's.
    pems: Arc<[String]>,
    /// Made on the first TLS dial; `None` when no root at all loaded.
    verifier: Arc<OnceLock<Option<Arc<dyn ServerCertVerifier>>>>,
}

impl std::fmt::Debug for AgentRoots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRoots")
            .field("extra", &self.pems.len())
            .finish_non_exhaustive()
    }
}

impl AgentRoots {
    /// The system's roots plus `pems` (certificates that do not parse are
    /// skipped, as tonic skipped them).
    pub(crate) fn new(pems: Vec<String>) -> Self {
        Self {
            pems: pems.into(),
            verifier: Arc::default(),
        }
    }

    /// The verifier, made on the first call: `None` when neither the
    /// system nor the extra certificates gave a root.
    pub(crate) fn verifier(&self) -> Option<Arc<dyn ServerCertVerifier>> {
        self.verifier
            .get_or_init(|| {
                let mut store = native().clone();
                for pem in self.pems.iter() {
                    let certs =
                        CertificateDer::pem_slice_iter(pem.as_bytes()).filter_map(Result::ok);
                    let _ = store.add_parsable_certificates(certs);
                }
                let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
                WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider)
                    .build()
                    .ok()
                    .map(|v| v as Arc<dyn ServerCertVerifier>)
            })
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A throwaway self-signed CA (P-256, no key kept): a root that parses
    /// on any host, with or without a system store.
    const TEST_CA: &str = "-----BEGIN CERTIFICATE-----
MIIBijCCAS+gAwIBAgIULq+tti1minFdegfvv88Qpo+qjFIwCgYIKoZIzj0EAwIw
GTEXMBUGA1UEAwwOcmF5aXRvLXRlc3QtY2EwIBcNMjYxMjA3MDYzNTI2WhgPMjEy
NjExMTMwNjM1MjZaMBkxFzAVBgNVBAMMDnJheWl0by10ZXN0LWNhMFkwEwYHKoZI
zj0CAQYIKoZIzj0DAQcDQgAE4UI8mlyt5UraX3FgcCiiyJXH5lNQgzZ7ofJnqQQN
ekqd86Its4BEBHNc4irHKPIvzvZScwKvTseLTPB2zhY+q6NTMFEwHQYDVR0OBBYE
FG7EjZOB1F2cI29MM7H/Kb14umszMB8GA1UdIwQYMBaAFG7EjZOB1F2cI29MM7H/
Kb14umszMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSQAwRgIhAL+5OVHG
c6UKvWDA0sxk9Q7HhU0dSiQlX9UmOWR6taouAiEA6DPRUU0zUCRb0HNV7skWHaij
6K+JxhlHcnUR6a1BNaE=
-----END CERTIFICATE-----
";

    /// One verifier per client, shared by every dial (and every clone of
    /// the client's roots): the system's store is not read again per
    /// sandbox.
    #[test]
    fn a_clients_dials_share_one_verifier() {
        let roots = AgentRoots::new(vec![TEST_CA.to_owned()]);
        let first = roots.verifier().expect("the extra root parses");
        let again = roots.clone().verifier().expect("made once");
        assert!(Arc::ptr_eq(&first, &again));
        // Another client makes its own.
        let other = AgentRoots::new(vec![TEST_CA.to_owned()]);
        assert!(!Arc::ptr_eq(&first, &other.verifier().expect("parses")));
    }
}
