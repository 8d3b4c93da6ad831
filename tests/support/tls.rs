//! A provider behind TLS whose certificate comes from a private CA the test
//! makes: the CA (its PEM is what a `ca_file` holds), and a TLS front that
//! ends TLS with a leaf for `localhost` and `127.0.0.1` and passes the bytes
//! on to a plain provider, noting the server name each client asked for.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

/// A private CA and the leaf it signed for `localhost` and `127.0.0.1`.
pub struct TestCa {
    /// The CA's certificate in PEM, as a `ca_file` holds it.
    pub pem: String,
    chain: Vec<CertificateDer<'static>>,
    key: Vec<u8>,
}

impl TestCa {
    /// A fresh CA, unknown to every trust store, and its leaf.
    pub fn new(name: &str) -> TestCa {
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, format!("baton test CA {name}"));
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().expect("ca key")).expect("ca cert");
        let mut leaf = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).expect("leaf");
        leaf.distinguished_name.push(DnType::CommonName, "localhost");
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let leaf_key = KeyPair::generate().expect("leaf key");
        let leaf = leaf.signed_by(&leaf_key, &ca).expect("leaf cert");
        TestCa { pem: ca.pem(), chain: vec![leaf.der().clone(), ca.der().clone()], key: leaf_key.serialize_der() }
    }

    /// Writes the CA's PEM to `file` in a fresh directory named after the
    /// test process and `dir`, and returns its path.
    pub fn write_pem(&self, dir: &str, file: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("baton-test-{}-{dir}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join(file);
        std::fs::write(&path, &self.pem).expect("write the CA");
        path
    }

    fn server_config(&self) -> rustls::ServerConfig {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key.clone()));
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_no_client_auth()
            .with_single_cert(self.chain.clone(), key)
            .expect("the leaf and its key");
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        config
    }
}

/// TLS on a free loopback port in front of a plain provider at `behind`.
pub struct TlsFront {
    pub addr: SocketAddr,
    /// The server name (SNI) of each session that completed its handshake.
    sessions: Arc<Mutex<Vec<Option<String>>>>,
    task: super::Task,
}

impl TlsFront {
    /// Serves TLS with `ca`'s leaf, passing each session's bytes to `behind`.
    pub async fn start(ca: &TestCa, behind: SocketAddr) -> TlsFront {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the TLS front");
        let addr = listener.local_addr().expect("addr");
        let acceptor = TlsAcceptor::from(Arc::new(ca.server_config()));
        let sessions = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&sessions);
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, seen) = (acceptor.clone(), Arc::clone(&seen));
                tokio::spawn(async move {
                    // A client that refuses the certificate ends the handshake here.
                    let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                    let name = tls.get_ref().1.server_name().map(str::to_owned);
                    seen.lock().expect("sessions").push(name);
                    let Ok(mut plain) = TcpStream::connect(behind).await else { return };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
        TlsFront { addr, sessions, task: task.into() }
    }

    /// An OpenAI-style base URL naming this front by `host`.
    pub fn base_url(&self, host: &str) -> String {
        format!("https://{host}:{}/v1", self.addr.port())
    }

    /// The server names of the sessions that completed their handshake.
    pub fn sessions(&self) -> Vec<Option<String>> {
        self.sessions.lock().expect("sessions").clone()
    }
}
