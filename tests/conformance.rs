//! The HTTP/1.1 conformance corpora, `tests/conformance/server.txt` and
//! `client.txt`, written from RFC 9112 and RFC 9110 rather than from what
//! baton does: every request head and body a client may send gets the
//! answers its case names, with the connection closed or carrying another
//! request as named, and every reply a provider may send is taken as its
//! case says: answered, or failed with the named class. Every case runs,
//! and every case that does not hold is reported at once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::Duration;

use baton::mock::MockProvider;
use bytes::{Buf, BytesMut};
use support::raw::{RawProvider, Step};
use support::{ChatConfig, Proxy, Spawned, chat_body, post_chat, run};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The chat body the server corpus's `{chat}` stands for.
const CHAT: &str = r#"{"model":"chat","messages":[{"role":"user","content":"hi"}]}"#;

/// How long one answer may take to come, or the close after it.
const READ_LIMIT: Duration = Duration::from_secs(10);

/// One case of a corpus.
#[derive(Debug)]
struct Case {
    title: String,
    /// The bytes sent (by the client, or by the provider).
    bytes: Vec<u8>,
    /// Every directive after the block: `shutdown`, `then`, `expect`.
    directives: Vec<(String, String)>,
}

impl Case {
    fn directive(&self, name: &str) -> Option<&str> {
        self.directives.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }
}

/// The cases of `text`, whose byte blocks start at a `block` line, with
/// `macros` expanded in them before escapes.
fn corpus(text: &str, block: &str, macros: &[(&str, String)]) -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    let mut in_block = false;
    for line in text.lines() {
        if let Some(title) = line.strip_prefix("=== ") {
            cases.push(Case { title: title.to_owned(), bytes: Vec::new(), directives: Vec::new() });
            in_block = false;
            continue;
        }
        let Some(case) = cases.last_mut() else { continue };
        let directive = line
            .split_once(':')
            .filter(|(name, _)| matches!(*name, "shutdown" | "then" | "expect") || (!in_block && *name == "rfc"));
        if let Some((name, value)) = directive {
            in_block = false;
            case.directives.push((name.to_owned(), value.trim().to_owned()));
        } else if line == block {
            in_block = true;
        } else if in_block {
            let mut expanded = line.to_owned();
            for (name, value) in macros {
                expanded = expanded.replace(name, value);
            }
            case.bytes.extend(unescape(&expanded));
        }
    }
    assert!(!cases.is_empty(), "the corpus has cases");
    for case in &cases {
        assert!(case.directive("rfc").is_some(), "{}: cites the RFC", case.title);
        assert!(case.directive("expect").is_some(), "{}: says what is expected", case.title);
    }
    cases
}

/// `\r`, `\n`, `\t`, `\\` and `\xHH` turned into their bytes.
fn unescape(line: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(line.len());
    let mut bytes = line.bytes();
    while let Some(byte) = bytes.next() {
        if byte != b'\\' {
            out.push(byte);
            continue;
        }
        match bytes.next() {
            Some(b'r') => out.push(b'\r'),
            Some(b'n') => out.push(b'\n'),
            Some(b't') => out.push(b'\t'),
            Some(b'\\') => out.push(b'\\'),
            Some(b'x') => {
                let hex: String = [bytes.next(), bytes.next()].iter().flatten().map(|b| *b as char).collect();
                out.push(u8::from_str_radix(&hex, 16).unwrap_or_else(|_| panic!("a bad \\x escape in {line:?}")));
            }
            other => panic!("an unknown escape {other:?} in {line:?}"),
        }
    }
    out
}

/// One answer read off a connection: its status, or how reading ended.
#[derive(Debug, PartialEq, Eq)]
enum Read {
    Status(u16),
    Closed,
    TimedOut,
    Garbage(String),
}

/// Reads HTTP/1.1 answers off a client connection, framing each by its
/// head, with an HTTP parser other than baton's own.
struct Answers {
    socket: TcpStream,
    buf: BytesMut,
}

impl Answers {
    /// The next final answer's status (interim ones are passed over).
    async fn next(&mut self) -> Read {
        loop {
            let mut fields = [httparse::EMPTY_HEADER; 64];
            let mut response = httparse::Response::new(&mut fields);
            match response.parse(&self.buf) {
                Ok(httparse::Status::Complete(len)) => {
                    let status = response.code.unwrap_or(0);
                    let header = |name: &str| {
                        response
                            .headers
                            .iter()
                            .find(|field| field.name.eq_ignore_ascii_case(name))
                            .map(|field| String::from_utf8_lossy(field.value).trim().to_ascii_lowercase())
                    };
                    let chunked = header("transfer-encoding").is_some_and(|coding| coding.ends_with("chunked"));
                    let length = header("content-length").and_then(|length| length.parse::<usize>().ok());
                    self.buf.advance(len);
                    if (100..200).contains(&status) {
                        continue;
                    }
                    let body = if chunked {
                        self.chunked().await
                    } else if let Some(length) = length {
                        self.fill_to(length).await.then(|| self.buf.advance(length))
                    } else {
                        self.rest().await
                    };
                    return match body {
                        Some(()) => Read::Status(status),
                        None => Read::Garbage(format!("the body of a {status} answer was cut short")),
                    };
                }
                Ok(httparse::Status::Partial) => match self.fill().await {
                    Some(0) if self.buf.is_empty() => return Read::Closed,
                    Some(0) => return Read::Garbage(String::from_utf8_lossy(&self.buf).into_owned()),
                    Some(_) => {}
                    None => return Read::TimedOut,
                },
                Err(err) => return Read::Garbage(format!("{err}: {}", String::from_utf8_lossy(&self.buf))),
            }
        }
    }

    /// Reads once more; the bytes read (0 at the close), none past the limit.
    async fn fill(&mut self) -> Option<usize> {
        match tokio::time::timeout(READ_LIMIT, self.socket.read_buf(&mut self.buf)).await {
            Ok(Ok(read)) => Some(read),
            Ok(Err(_)) => Some(0),
            Err(_) => None,
        }
    }

    async fn fill_to(&mut self, length: usize) -> bool {
        while self.buf.len() < length {
            if !matches!(self.fill().await, Some(1..)) {
                return false;
            }
        }
        true
    }

    /// Skips a chunked body.
    async fn chunked(&mut self) -> Option<()> {
        loop {
            let line_end = loop {
                if let Some(end) = self.buf.windows(2).position(|pair| pair == b"\r\n") {
                    break end;
                }
                if !matches!(self.fill().await, Some(1..)) {
                    return None;
                }
            };
            let line = String::from_utf8_lossy(&self.buf[..line_end]).into_owned();
            let size = usize::from_str_radix(line.split(';').next().unwrap_or_default().trim(), 16).ok()?;
            self.buf.advance(line_end + 2);
            if size == 0 {
                // No trailers from baton: the blank line ends the body.
                self.fill_to(2).await.then(|| self.buf.advance(2))?;
                return Some(());
            }
            self.fill_to(size + 2).await.then(|| self.buf.advance(size + 2))?;
        }
    }

    /// Skips a body that runs to the close.
    async fn rest(&mut self) -> Option<()> {
        loop {
            match self.fill().await {
                Some(0) => {
                    self.buf.clear();
                    return Some(());
                }
                Some(_) => {}
                None => return None,
            }
        }
    }
}

/// What the server did with `case`, said as its `expect:` line says it.
async fn serve_case(proxy: &Proxy, case: &Case) -> String {
    let mut socket = TcpStream::connect(proxy.addr).await.expect("connect");
    socket.write_all(&case.bytes).await.expect("send the case");
    if case.directive("shutdown") == Some("yes") {
        socket.shutdown().await.expect("half-close");
    }
    let want = case.directive("expect").unwrap_or_default();
    let statuses = want.split_whitespace().filter(|word| word.parse::<u16>().is_ok()).count();
    let mut answers = Answers { socket, buf: BytesMut::new() };
    let mut got = Vec::new();
    for _ in 0..statuses {
        match answers.next().await {
            Read::Status(status) => got.push(status.to_string()),
            other => {
                got.push(format!("{other:?}"));
                return got.join(" ");
            }
        }
    }
    if want.ends_with("open") {
        let probe = b"GET /healthz HTTP/1.1\r\nHost: baton\r\nConnection: close\r\n\r\n";
        if answers.socket.write_all(probe).await.is_err() {
            got.push("closed (the probe could not be sent)".to_owned());
            return got.join(" ");
        }
        match answers.next().await {
            Read::Status(200) => got.push("open".to_owned()),
            Read::Closed => got.push("close".to_owned()),
            other => got.push(format!("{other:?} to the probe")),
        }
    } else {
        match answers.next().await {
            Read::Closed => got.push("close".to_owned()),
            Read::Status(status) => got.push(format!("{status} (an answer more than expected)")),
            other => got.push(format!("{other:?}")),
        }
    }
    got.join(" ")
}

#[test]
fn every_request_in_the_server_corpus_gets_the_answers_rfc_9112_gives_it() {
    run(Duration::from_secs(240), async {
        let provider = MockProvider::openai().marker("w").tokens(3).spawned().await;
        let config = ChatConfig::new().top("max_body_bytes = 4096").deadlines(5000, 5000).mock("p", &provider).toml();
        let proxy = Proxy::start(&config).await;
        let macros = [
            ("{chat_len}", CHAT.len().to_string()),
            ("{chat_hex}", format!("{:x}", CHAT.len())),
            ("{chat}", CHAT.to_owned()),
            ("{big_head}", format!("x-pad: {}\\r\\n", "a".repeat(9000))),
            ("{many_headers}", "x-h: 1\\r\\n".repeat(101)),
            ("{big_body}", "a".repeat(5000)),
        ];
        let cases = corpus(include_str!("conformance/server.txt"), "send:", &macros);
        let mut wrong = Vec::new();
        for case in &cases {
            let got = serve_case(&proxy, case).await;
            let want = case.directive("expect").unwrap_or_default();
            if got != want {
                wrong.push(format!("{}\n    expected: {want}\n    got:      {got}", case.title));
            }
        }
        assert!(wrong.is_empty(), "{} of {} server cases do not hold:\n{}", wrong.len(), cases.len(), wrong.join("\n"));
    });
}

/// What baton made of a provider's `case` reply, said as its `expect:`
/// line says it.
async fn take_reply(case: &Case) -> String {
    let reply = case.bytes.clone();
    let close = case.directive("then") == Some("close");
    let raw = RawProvider::start(move |_| {
        let mut steps = vec![Step::Write(reply.clone())];
        if close {
            steps.push(Step::Close);
        }
        steps
    })
    .await;
    let config = ChatConfig::new().deadlines(2000, 2000).raw("p", &raw).toml();
    let proxy = Proxy::start(&config).await;
    let answer = post_chat(&proxy, &chat_body(false)).await;
    let body: serde_json::Value = serde_json::from_str(&answer.raw).unwrap_or_default();
    if answer.status == 200 {
        let text = body["choices"][0]["message"]["content"].as_str().unwrap_or_default();
        return format!("answered {text}");
    }
    let message = body["error"]["message"].as_str().unwrap_or_default();
    match message.split_once("): ").and_then(|(_, rest)| rest.split_once(" after ")) {
        Some((class, _)) => format!("failed {class}"),
        None => format!("{} {message}", answer.status),
    }
}

#[test]
fn every_reply_in_the_client_corpus_is_taken_as_rfc_9112_says() {
    run(Duration::from_secs(120), async {
        let sse: String = ["hello", " world"]
            .iter()
            .map(|text| support::raw::openai_text(text))
            .chain([support::raw::openai_end()])
            .collect();
        let chunked: String = sse
            .as_bytes()
            .chunks(70)
            .map(|piece| format!("{:x}\r\n{}\r\n", piece.len(), String::from_utf8_lossy(piece)))
            .chain(["0\r\n\r\n".to_owned()])
            .collect();
        // Written as the corpus spells bytes, since escapes are read after macros.
        let escaped = |text: &str| text.replace('\\', "\\\\").replace('\r', "\\r").replace('\n', "\\n");
        let macros =
            [("{sse_len}", sse.len().to_string()), ("{sse_chunked}", escaped(&chunked)), ("{sse}", escaped(&sse))];
        let cases = corpus(include_str!("conformance/client.txt"), "reply:", &macros);
        let outcomes = futures_util::future::join_all(cases.iter().map(take_reply)).await;
        let wrong: Vec<String> = cases
            .iter()
            .zip(outcomes)
            .filter(|(case, got)| case.directive("expect") != Some(got.as_str()))
            .map(|(case, got)| {
                format!(
                    "{}\n    expected: {}\n    got:      {got}",
                    case.title,
                    case.directive("expect").unwrap_or_default()
                )
            })
            .collect();
        assert!(wrong.is_empty(), "{} of {} client cases do not hold:\n{}", wrong.len(), cases.len(), wrong.join("\n"));
    });
}
