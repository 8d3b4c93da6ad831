//! Opening a connection to a provider: TCP with Nagle off, TLS for `https`,
//! then an HTTP/1.1 handshake whose connection the caller drives.

use std::sync::Arc;

use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_util::either::Either;

use super::{ClientError, Connection, Origin, RequestBody};

/// Bytes read from a provider at a time. Events are a few hundred bytes, so
/// this holds dozens; hyper's adaptive default starts at 8 KiB and grows,
/// which costs more memory per open stream than it saves in reads.
const READ_BUFFER: usize = 4096;

/// A plain or TLS socket.
pub(super) type Io = TokioIo<Either<TcpStream, TlsStream<TcpStream>>>;

/// Opens connections; holds the TLS settings every `https` provider shares.
#[derive(Clone)]
pub(super) struct Connector {
    tls: TlsConnector,
}

impl Connector {
    /// TLS with the platform's trust store and ALPN offering HTTP/1.1 only.
    pub(super) fn new() -> Result<Self, ClientError> {
        use rustls_platform_verifier::BuilderVerifierExt;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .and_then(|builder| builder.with_platform_verifier())
            .map_err(|err| ClientError::Tls(err.to_string()))?
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Connector { tls: TlsConnector::from(Arc::new(config)) })
    }

    /// A new connection to `origin`, ready for its first request.
    pub(super) async fn connect(&self, origin: &Origin) -> Result<Connection, ClientError> {
        let tcp = TcpStream::connect((origin.host.as_str(), origin.port)).await.map_err(ClientError::connect)?;
        tcp.set_nodelay(true).map_err(ClientError::connect)?;
        let io = if origin.https {
            let name = ServerName::try_from(origin.host.clone())
                .map_err(|_| ClientError::Tls(format!("{:?} is not a valid TLS server name", origin.host)))?;
            Either::Right(self.tls.connect(name, tcp).await.map_err(|err| ClientError::Tls(err.to_string()))?)
        } else {
            Either::Left(tcp)
        };
        let (sender, driver) = http1::Builder::new()
            .read_buf_exact_size(Some(READ_BUFFER))
            .handshake::<_, RequestBody>(TokioIo::new(io))
            .await
            .map_err(|err| ClientError::Http(super::chain(&err)))?;
        Ok(Connection::new(sender, driver))
    }
}
