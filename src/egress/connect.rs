//! Opening a connection to a provider: TCP with Nagle off, directly or
//! through the provider's proxy (a `CONNECT` tunnel for `https`), TLS for
//! `https` with the provider's trust: a connection whose HTTP/1.1 the
//! caller drives.

use std::sync::Arc;

use rustls::client::danger::ServerCertVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::ServerName;
use rustls::{CertificateError, Error as TlsError};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_util::either::Either;

use super::connection::Connection;
use super::{ClientError, Origin};

/// Opens connections; holds the TLS settings of every `https` provider that
/// trusts the system's roots only.
#[derive(Clone)]
pub(super) struct Connector {
    tls: TlsConnector,
}

/// TLS 1.2 and 1.3 with `verifier`, offering HTTP/1.1 only in ALPN.
pub(super) fn tls_connector(
    provider: Arc<CryptoProvider>,
    verifier: Arc<dyn ServerCertVerifier>,
) -> Result<TlsConnector, ClientError> {
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| ClientError::Tls(err.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsConnector::from(Arc::new(config)))
}

impl Connector {
    /// TLS with the platform's trust store.
    pub(super) fn new() -> Result<Self, ClientError> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let verifier = rustls_platform_verifier::Verifier::new(Arc::clone(&provider))
            .map_err(|err| ClientError::Tls(err.to_string()))?;
        Ok(Connector { tls: tls_connector(provider, Arc::new(verifier))? })
    }

    /// A new connection to `origin`, ready for its first request.
    pub(super) async fn connect(&self, origin: &Origin) -> Result<Connection, ClientError> {
        let tcp = reach(origin).await?;
        let io = if origin.https {
            let name = ServerName::try_from(origin.host.clone())
                .map_err(|_| ClientError::Tls(format!("{:?} is not a valid TLS server name", origin.host)))?;
            let tls = origin.egress.trust().map_or(&self.tls, |trust| trust.connector());
            Either::Right(tls.connect(name, tcp).await.map_err(|err| ClientError::Tls(tls_failure(&err)))?)
        } else {
            Either::Left(tcp)
        };
        Ok(Connection::new(io))
    }
}

/// A TCP connection that leads to `origin`: to the provider itself, or to
/// its proxy, tunnelled on to the provider for `https` (a plain `http`
/// request goes to the proxy in absolute form instead).
async fn reach(origin: &Origin) -> Result<TcpStream, ClientError> {
    match origin.egress.proxy() {
        None => {
            let tcp = TcpStream::connect((origin.host.as_str(), origin.port)).await.map_err(ClientError::connect)?;
            tcp.set_nodelay(true).map_err(ClientError::connect)?;
            Ok(tcp)
        }
        Some(proxy) => {
            let mut tcp = proxy.connect().await?;
            if origin.https {
                proxy.tunnel(&mut tcp, &origin.host, origin.port).await?;
            }
            Ok(tcp)
        }
    }
}

/// Why the TLS handshake failed, with what to do about the likeliest case:
/// a certificate from a CA the provider's trust does not hold.
fn tls_failure(err: &std::io::Error) -> String {
    let cause = err.get_ref().and_then(|inner| inner.downcast_ref::<TlsError>());
    match cause {
        Some(TlsError::InvalidCertificate(CertificateError::UnknownIssuer)) => {
            format!(
                "{err}: the provider's certificate is not signed by a CA baton trusts (a private CA goes in the provider's ca_file)"
            )
        }
        _ => err.to_string(),
    }
}
