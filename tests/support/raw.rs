//! A provider written against raw TCP, for the bytes no well-behaved server
//! sends: each request gets the steps a test scripts for it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One thing the raw provider does while answering.
#[derive(Clone, Debug)]
pub enum Step {
    /// Write these bytes.
    Write(Vec<u8>),
    /// Wait.
    Sleep(Duration),
    /// Write these bytes again and again until the peer goes away.
    Flood(Vec<u8>),
    /// Close the connection.
    Close,
}

/// The head of a 200 answer whose SSE body runs until the connection closes.
pub const SSE_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";

/// A running raw provider.
pub struct RawProvider {
    /// `http://127.0.0.1:port`.
    pub url: String,
    accepted: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
    broken: Arc<AtomicUsize>,
    ended: Arc<AtomicUsize>,
}

impl RawProvider {
    /// Serves every request with `script(n)`, `n` counting requests from 0.
    pub async fn start(script: impl Fn(usize) -> Vec<Step> + Send + Sync + 'static) -> RawProvider {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let (accepted, requests, broken, ended): (
            Arc<AtomicUsize>,
            Arc<AtomicUsize>,
            Arc<AtomicUsize>,
            Arc<AtomicUsize>,
        ) = Default::default();
        let counts = (Arc::clone(&accepted), Arc::clone(&requests), Arc::clone(&broken), Arc::clone(&ended));
        let script = Arc::new(script);
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                counts.0.fetch_add(1, Ordering::SeqCst);
                let (script, requests) = (Arc::clone(&script), Arc::clone(&counts.1));
                let (broken, ended) = (Arc::clone(&counts.2), Arc::clone(&counts.3));
                tokio::spawn(async move {
                    if serve(socket, move || script(requests.fetch_add(1, Ordering::SeqCst))).await.is_err() {
                        broken.fetch_add(1, Ordering::SeqCst);
                    }
                    ended.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        RawProvider { url, accepted, requests, broken, ended }
    }

    /// The base URL to configure it at, as an OpenAI-kind provider.
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.url)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Requests read so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// Connections that are over, however they ended.
    pub fn ended(&self) -> usize {
        self.ended.load(Ordering::SeqCst)
    }

    /// Connections the peer closed while an answer was being written.
    pub fn broken(&self) -> usize {
        self.broken.load(Ordering::SeqCst)
    }
}

/// Answers requests until the peer leaves; an error when it left mid-answer.
async fn serve(mut socket: TcpStream, next: impl Fn() -> Vec<Step>) -> std::io::Result<()> {
    while read_request(&mut socket).await {
        for step in next() {
            let written = match step {
                Step::Write(bytes) => socket.write_all(&bytes).await,
                Step::Sleep(wait) => {
                    tokio::time::sleep(wait).await;
                    Ok(())
                }
                Step::Flood(bytes) => loop {
                    if let Err(err) = socket.write_all(&bytes).await {
                        break Err(err);
                    }
                },
                Step::Close => return Ok(()),
            };
            written?;
        }
    }
    Ok(())
}

/// Reads one request (head and `content-length` body); false at EOF.
pub async fn read_request(socket: &mut TcpStream) -> bool {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match socket.read(&mut byte).await {
            Ok(1) => head.push(byte[0]),
            _ => return false,
        }
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    socket.read_exact(&mut body).await.is_ok()
}

/// An OpenAI text chunk as one SSE event.
pub fn openai_text(text: &str) -> String {
    format!(
        "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":{}}},\"finish_reason\":null}}]}}\n\n",
        serde_json::to_string(text).expect("json")
    )
}

/// The end of an OpenAI answer: a finish chunk and `[DONE]`.
pub fn openai_end() -> String {
    "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n".to_owned()
}

/// A whole JSON answer with `status` (`"429 Too Many Requests"`) and the
/// `extra_headers` lines, each ending in CRLF.
pub fn json_answer(status: &str, extra_headers: &str, body: &str) -> Vec<u8> {
    let length = body.len();
    format!(
        "HTTP/1.1 {status}\r\n{extra_headers}content-type: application/json\r\ncontent-length: {length}\r\n\r\n{body}"
    )
    .into_bytes()
}

/// A whole chunked (keep-alive) SSE answer with `body` as its one chunk.
pub fn chunked_answer(body: &str) -> Vec<u8> {
    let mut out = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
    out.extend_from_slice(format!("{:x}\r\n{body}\r\n0\r\n\r\n", body.len()).as_bytes());
    out
}
