//! How connections to one provider leave baton: the certificates trusted
//! beside the system's, and the proxy they go through. Both are part of the
//! pool's key, so two providers with different trust or proxies never share
//! a connection.

use std::fmt;
use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio_rustls::TlsConnector;

use super::Proxy;
use super::connect::tls_connector;

/// A provider's way out. The default goes direct and trusts the system's
/// roots only, and costs nothing per request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Egress {
    trust: Option<Arc<Trust>>,
    proxy: Option<Arc<Proxy>>,
}

impl Egress {
    /// Direct, with the system's trust.
    pub const DIRECT: Egress = Egress { trust: None, proxy: None };

    /// Through `proxy` when there is one, trusting `trust` beside the
    /// system's roots when there is that.
    pub fn new(trust: Option<Trust>, proxy: Option<Proxy>) -> Self {
        Egress { trust: trust.map(Arc::new), proxy: proxy.map(Arc::new) }
    }

    /// The proxy connections go through, if any.
    pub fn proxy(&self) -> Option<&Proxy> {
        self.proxy.as_deref()
    }

    /// The certificates trusted beside the system's, if any.
    pub fn trust(&self) -> Option<&Trust> {
        self.trust.as_deref()
    }

    /// What differs from going direct with the system's trust, in words
    /// safe to print; none when nothing does.
    pub fn describe(&self) -> Option<String> {
        let proxy = self.proxy().map(|proxy| {
            let credentials = if proxy.has_credentials() { " (with credentials)" } else { "" };
            format!("through the proxy {}{credentials}", proxy.url())
        });
        let trust = self.trust().map(|trust| match trust.certificates() {
            1 => "trusting 1 more certificate beside the system's".to_owned(),
            n => format!("trusting {n} more certificates beside the system's"),
        });
        let parts: Vec<String> = proxy.into_iter().chain(trust).collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

/// Certificates (a private CA, most often) trusted beside the platform's
/// roots, with the TLS settings that trust them. Two are equal when they
/// hold the same certificates.
pub struct Trust {
    /// SHA-256 over the certificates, each prefixed by its length.
    fingerprint: [u8; 32],
    certificates: usize,
    tls: TlsConnector,
}

impl Trust {
    /// Trusts every certificate in `pem` beside the platform's roots. Fails
    /// when it holds no certificate, or one that cannot be a root.
    pub fn from_pem(pem: &[u8]) -> Result<Trust, String> {
        let certificates = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|err| format!("is not a PEM file: {err}"))?;
        if certificates.is_empty() {
            return Err("holds no certificate (a PEM `-----BEGIN CERTIFICATE-----` block)".to_owned());
        }
        let mut digest = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
        for certificate in &certificates {
            digest.update(&(certificate.len() as u64).to_be_bytes());
            digest.update(certificate);
        }
        let fingerprint = digest.finish().as_ref().try_into().map_err(|_| "cannot be fingerprinted".to_owned())?;
        let count = certificates.len();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let verifier = rustls_platform_verifier::Verifier::new_with_extra_roots(certificates, Arc::clone(&provider))
            .map_err(|err| format!("cannot be trusted: {err}"))?;
        let tls = tls_connector(provider, Arc::new(verifier)).map_err(|err| err.to_string())?;
        Ok(Trust { fingerprint, certificates: count, tls })
    }

    /// How many certificates are trusted.
    pub fn certificates(&self) -> usize {
        self.certificates
    }

    /// The TLS settings that trust them.
    pub(super) fn connector(&self) -> &TlsConnector {
        &self.tls
    }
}

impl PartialEq for Trust {
    fn eq(&self, other: &Self) -> bool {
        self.fingerprint == other.fingerprint
    }
}

impl Eq for Trust {}

impl std::hash::Hash for Trust {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.fingerprint.hash(state);
    }
}

impl fmt::Debug for Trust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let short: String = self.fingerprint.iter().take(4).map(|byte| format!("{byte:02x}")).collect();
        write!(f, "Trust({} certificates, sha256 {short}…)", self.certificates)
    }
}
