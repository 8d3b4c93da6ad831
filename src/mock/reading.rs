//! Reading one HTTP/1.1 request off a simulated provider's connection,
//! its head parsed and its JSON body kept for the test to check.

use std::collections::HashMap;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use super::RecordedRequest;

/// The largest request read; a larger one closes the connection.
const MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;

/// Reads one request, and its body's bytes as sent; `None` when the client
/// closed the connection or sent garbage.
pub(super) async fn read_request(socket: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<(RecordedRequest, Vec<u8>)> {
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut parsed = httparse::Request::new(&mut headers);
        if let httparse::Status::Complete(head_len) = parsed.parse(buffer).ok()? {
            let path = parsed.path.unwrap_or("/").to_owned();
            let headers: HashMap<String, String> = parsed
                .headers
                .iter()
                .map(|h| (h.name.to_ascii_lowercase(), String::from_utf8_lossy(h.value).into_owned()))
                .collect();
            let body_len: usize = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
            if head_len + body_len > MAX_REQUEST_BYTES {
                return None;
            }
            while buffer.len() < head_len + body_len {
                read_more(socket, buffer).await?;
            }
            // A body that is not JSON (a form) is kept as its text.
            let raw = buffer[head_len..head_len + body_len].to_vec();
            let body = match serde_json::from_slice(&raw) {
                Ok(body) => body,
                Err(_) if raw.is_empty() => serde_json::Value::Null,
                Err(_) => serde_json::Value::String(String::from_utf8_lossy(&raw).into_owned()),
            };
            buffer.drain(..head_len + body_len);
            return Some((RecordedRequest { path, headers, body, fault: None }, raw));
        }
        if buffer.len() > MAX_REQUEST_BYTES {
            return None;
        }
        read_more(socket, buffer).await?;
    }
}

async fn read_more(socket: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<()> {
    let mut chunk = [0u8; 8192];
    match socket.read(&mut chunk).await {
        Ok(0) | Err(_) => None,
        Ok(n) => {
            buffer.extend_from_slice(&chunk[..n]);
            Some(())
        }
    }
}
