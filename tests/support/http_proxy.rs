//! A forward HTTP proxy on a free loopback port, as corporate networks have
//! one: `CONNECT host:port` tunnels and absolute-form requests, each noted
//! before it is passed on, or one fixed refusal for every request.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The most of a client's bytes after the head that a connection notes.
const NOTED_BYTES: usize = 64 * 1024;

/// What the proxy saw on one connection.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    /// The head's first line, as `CONNECT 127.0.0.1:443 HTTP/1.1`.
    pub request_line: String,
    /// The `Proxy-Authorization` header, if one came.
    pub authorization: Option<String>,
    /// What the client sent after the head (the tunnel's bytes, for `CONNECT`).
    pub sent: Vec<u8>,
}

/// A running proxy; dropping it stops it.
pub struct HttpProxy {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: super::Task,
}

impl HttpProxy {
    /// A proxy that opens every tunnel and passes on every request.
    pub async fn start() -> HttpProxy {
        Self::serving(None).await
    }

    /// A proxy that answers every request with `status` (as `407 Proxy
    /// Authentication Required`) and closes.
    pub async fn refusing(status: &'static str) -> HttpProxy {
        Self::serving(Some(status)).await
    }

    async fn serving(refusal: Option<&'static str>) -> HttpProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let addr = listener.local_addr().expect("addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let noted = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(serve(client, Arc::clone(&noted), refusal));
            }
        });
        HttpProxy { addr, seen, task: task.into() }
    }

    /// `http://127.0.0.1:port`, optionally with `user:password@`.
    pub fn url(&self, credentials: Option<&str>) -> String {
        let credentials = credentials.map(|c| format!("{c}@")).unwrap_or_default();
        format!("http://{credentials}{}", self.addr)
    }

    /// Every connection so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("seen").clone()
    }

    /// The request line of every connection so far.
    pub fn request_lines(&self) -> Vec<String> {
        self.seen().into_iter().map(|seen| seen.request_line).collect()
    }
}

/// One client connection: read its head, then refuse it, tunnel it, or pass
/// the absolute-form request on.
async fn serve(mut client: TcpStream, seen: Arc<Mutex<Vec<Seen>>>, refusal: Option<&'static str>) {
    let Some((head, rest)) = read_head(&mut client).await else { return };
    let request_line = head.lines().next().unwrap_or_default().to_owned();
    let authorization = head
        .lines()
        .find_map(|line| line.split_once(':').filter(|(name, _)| name.eq_ignore_ascii_case("proxy-authorization")))
        .map(|(_, value)| value.trim().to_owned());
    let index = {
        let mut seen = seen.lock().expect("seen");
        seen.push(Seen { request_line: request_line.clone(), authorization, sent: rest.clone() });
        seen.len() - 1
    };
    if let Some(status) = refusal {
        let answer = format!(
            "HTTP/1.1 {status}\r\nproxy-authenticate: Basic realm=\"corp\"\r\ncontent-length: 6\r\nconnection: close\r\n\r\ndenied"
        );
        let _ = client.write_all(answer.as_bytes()).await;
        return;
    }
    let mut words = request_line.split(' ');
    let (method, target) = (words.next().unwrap_or_default(), words.next().unwrap_or_default());
    let tunnel = method == "CONNECT";
    let authority = if tunnel {
        target.to_owned()
    } else {
        target.trim_start_matches("http://").split('/').next().unwrap_or_default().to_owned()
    };
    let Ok(mut upstream) = TcpStream::connect(authority.as_str()).await else {
        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n").await;
        return;
    };
    if tunnel {
        let _ = client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await;
    } else {
        let _ = upstream.write_all(head.as_bytes()).await;
        let _ = upstream.write_all(&rest).await;
    }
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_upstream, mut to_upstream) = upstream.into_split();
    let downstream = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut from_upstream, &mut to_client).await;
    });
    let mut buffer = vec![0; 16 * 1024];
    while let Ok(read @ 1..) = from_client.read(&mut buffer).await {
        {
            let mut seen = seen.lock().expect("seen");
            let sent = &mut seen[index].sent;
            let room = NOTED_BYTES.saturating_sub(sent.len()).min(read);
            sent.extend_from_slice(&buffer[..room]);
        }
        if to_upstream.write_all(&buffer[..read]).await.is_err() {
            break;
        }
    }
    downstream.abort();
}

/// The head up to its blank line, and whatever came after it in the same reads.
async fn read_head(client: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buffer = Vec::new();
    let mut chunk = [0; 4096];
    loop {
        let read = client.read(&mut chunk).await.ok().filter(|read| *read > 0)?;
        buffer.extend_from_slice(&chunk[..read]);
        if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            let rest = buffer.split_off(end + 4);
            return Some((String::from_utf8_lossy(&buffer).into_owned(), rest));
        }
        if buffer.len() > 64 * 1024 {
            return None;
        }
    }
}
