//! An HTTP proxy that connections to a provider go through: its address,
//! the credentials it wants (sent as `Proxy-Authorization: Basic`, never
//! shown), and the `CONNECT` that opens a tunnel through it.

use std::fmt;
use std::time::Duration;

use http::HeaderValue;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::ClientError;

/// The largest answer to `CONNECT` read: a status line and a few headers.
const ANSWER_LIMIT: usize = 8 * 1024;

/// How long a proxy may take to answer `CONNECT` (the attempt's own
/// deadlines usually end the wait sooner).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// An `http://` proxy. Equal proxies have the same address and credentials,
/// so a tunnel opened with one set of credentials is never lent to another.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Proxy {
    host: String,
    port: u16,
    /// `Basic …`, marked sensitive; none without credentials in the URL.
    authorization: Option<HeaderValue>,
    /// `http://host:port`: how messages name the proxy, credentials left out.
    shown: String,
}

impl fmt::Debug for Proxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let credentials = if self.authorization.is_some() { " (with credentials)" } else { "" };
        write!(f, "Proxy({}{credentials})", self.shown)
    }
}

impl Proxy {
    /// Reads a proxy URL as curl does: `http://[user[:password]@]host[:port]`,
    /// the scheme optional, the port 80 when left out, the user and password
    /// percent-decoded. The error never repeats the URL, which may hold a
    /// password.
    pub fn parse(url: &str) -> Result<Proxy, String> {
        let url = url.trim();
        let rest = match url.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
            Some((scheme, _)) => {
                return Err(format!(
                    "a {scheme}:// proxy is not supported: baton speaks to HTTP proxies, http://host:port"
                ));
            }
            None => url,
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '?', '#']) {
            return Err("a proxy URL has no path: write http://host:port".to_owned());
        }
        let (userinfo, address) = match rest.rsplit_once('@') {
            Some((userinfo, address)) => (Some(userinfo), address),
            None => (None, rest),
        };
        let (host, port) = host_and_port(address)?;
        let authorization = match userinfo {
            Some(userinfo) => Some(basic(userinfo)?),
            None => None,
        };
        let shown = format!("http://{}:{port}", bracketed(&host));
        Ok(Proxy { host, port, authorization, shown })
    }

    /// `http://host:port`, without credentials: safe to log.
    pub fn url(&self) -> &str {
        &self.shown
    }

    /// Whether the URL carried credentials.
    pub fn has_credentials(&self) -> bool {
        self.authorization.is_some()
    }

    /// The `Proxy-Authorization` value, for a request sent to the proxy in
    /// absolute form.
    pub(super) fn authorization(&self) -> Option<&HeaderValue> {
        self.authorization.as_ref()
    }

    /// A TCP connection to the proxy itself.
    pub(super) async fn connect(&self) -> Result<TcpStream, ClientError> {
        let tcp = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|err| ClientError::Proxy(format!("cannot reach the proxy {}: {err}", self.shown)))?;
        tcp.set_nodelay(true).map_err(ClientError::connect)?;
        Ok(tcp)
    }

    /// Asks the proxy on `tcp` for a tunnel to `host:port`. Any 2xx answer
    /// opens it; anything else, or no answer in time, is a failure to
    /// connect that names the proxy and what it said.
    pub(super) async fn tunnel(&self, tcp: &mut TcpStream, host: &str, port: u16) -> Result<(), ClientError> {
        let target = format!("{}:{port}", bracketed(host));
        let mut request = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n").into_bytes();
        if let Some(authorization) = &self.authorization {
            request.extend_from_slice(b"Proxy-Authorization: ");
            request.extend_from_slice(authorization.as_bytes());
            request.extend_from_slice(b"\r\n");
        }
        request.extend_from_slice(b"\r\n");
        let exchange = async {
            tcp.write_all(&request).await?;
            read_answer(tcp).await
        };
        let fail = |why: String| Err(ClientError::Proxy(format!("the proxy {} {why}", self.shown)));
        match tokio::time::timeout(ANSWER_TIMEOUT, exchange).await {
            Err(_) => fail(format!("did not answer CONNECT {target} within {} s", ANSWER_TIMEOUT.as_secs())),
            Ok(Err(err)) => fail(format!("broke off the CONNECT {target}: {err}")),
            Ok(Ok(Answer::Status { code: 200..=299, extra: false, .. })) => Ok(()),
            Ok(Ok(Answer::Status { code: 200..=299, extra: true, .. })) => {
                fail(format!("sent bytes after its answer to CONNECT {target}"))
            }
            Ok(Ok(Answer::Status { code, reason, .. })) => {
                let hint = if code == 407 { ": it wants credentials, or refused those in the proxy URL" } else { "" };
                fail(format!("answered CONNECT {target} with {code} {reason}{hint}"))
            }
            Ok(Ok(Answer::Closed)) => fail(format!("closed the connection before answering CONNECT {target}")),
            Ok(Ok(Answer::TooLarge)) => {
                fail(format!("answered CONNECT {target} with a head over {ANSWER_LIMIT} bytes"))
            }
            Ok(Ok(Answer::NotHttp)) => fail(format!("answered CONNECT {target} with something that is not HTTP")),
        }
    }
}

/// What a proxy said to `CONNECT`.
enum Answer {
    /// A whole response head; `extra` when bytes followed it.
    Status {
        code: u16,
        reason: String,
        extra: bool,
    },
    Closed,
    TooLarge,
    NotHttp,
}

/// Reads the proxy's response head, at most [`ANSWER_LIMIT`] bytes of it.
async fn read_answer(tcp: &mut TcpStream) -> std::io::Result<Answer> {
    let mut buffer = vec![0; ANSWER_LIMIT];
    let mut filled = 0;
    loop {
        let Some(free) = buffer.get_mut(filled..).filter(|free| !free.is_empty()) else {
            return Ok(Answer::TooLarge);
        };
        let read = tcp.read(free).await?;
        if read == 0 {
            return Ok(Answer::Closed);
        }
        filled += read;
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut response = httparse::Response::new(&mut headers);
        match response.parse(buffer.get(..filled).unwrap_or_default()) {
            Ok(httparse::Status::Complete(end)) => {
                let code = response.code.unwrap_or_default();
                let reason = response.reason.unwrap_or_default().chars().take(100).collect();
                return Ok(Answer::Status { code, reason, extra: filled > end });
            }
            Ok(httparse::Status::Partial) => {}
            Err(_) => return Ok(Answer::NotHttp),
        }
    }
}

/// The host and port of `host[:port]` or `[v6][:port]`, the port 80 when
/// left out.
fn host_and_port(address: &str) -> Result<(String, u16), String> {
    let (host, port) = match address.strip_prefix('[') {
        Some(v6) => {
            let (host, after) = v6.split_once(']').ok_or("an IPv6 address is missing its `]`")?;
            (host, after.strip_prefix(':'))
        }
        None => match address.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (address, None),
        },
    };
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | ':');
    if host.is_empty() || !host.chars().all(valid) {
        return Err("names no host, as http://proxy.internal:3128 does".to_owned());
    }
    let port = match port {
        Some(port) => {
            port.parse::<u16>().ok().filter(|port| *port > 0).ok_or("the port is not a number from 1 to 65535")?
        }
        None => 80,
    };
    Ok((host.to_ascii_lowercase(), port))
}

/// `host`, in brackets when it is an IPv6 address.
fn bracketed(host: &str) -> String {
    if host.contains(':') { format!("[{host}]") } else { host.to_owned() }
}

/// `Basic base64(user:password)` for the URL's `user[:password]`, marked
/// sensitive so it never prints.
fn basic(userinfo: &str) -> Result<HeaderValue, String> {
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    let credentials = [percent_decoded(user)?, b":".to_vec(), percent_decoded(password)?].concat();
    let mut value = HeaderValue::try_from(format!("Basic {}", base64(&credentials)))
        .map_err(|_| "the proxy credentials cannot be sent".to_owned())?;
    value.set_sensitive(true);
    Ok(value)
}

/// `%XX` escapes decoded, as a URL's user and password may carry them.
fn percent_decoded(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len());
    let mut bytes = text.bytes();
    while let Some(byte) = bytes.next() {
        if byte != b'%' {
            out.push(byte);
            continue;
        }
        let hex = [bytes.next(), bytes.next()];
        let digits = hex.iter().flatten().filter_map(|digit| char::from(*digit).to_digit(16)).collect::<Vec<_>>();
        match digits.as_slice() {
            [high, low] => out.push(u8::try_from(high * 16 + low).unwrap_or_default()),
            _ => return Err("the proxy credentials hold a `%` that is not followed by two hex digits".to_owned()),
        }
    }
    Ok(out)
}

/// Standard base64 with padding (RFC 4648 §4), as Basic authentication takes it.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let group = chunk.iter().enumerate().fold(0u32, |group, (i, byte)| group | (u32::from(*byte) << (16 - 8 * i)));
        for i in 0..4 {
            let index = usize::try_from((group >> (18 - 6 * i)) & 0x3f).unwrap_or_default();
            let letter = if i <= chunk.len() { ALPHABET.get(index).copied().unwrap_or(b'=') } else { b'=' };
            out.push(char::from(letter));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_follows_the_rfc_examples() {
        let cases =
            [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE=")];
        for (plain, encoded) in cases {
            assert_eq!(base64(plain.as_bytes()), encoded, "{plain:?}");
        }
        assert_eq!(base64(b"Aladdin:open sesame"), "QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
    }

    #[test]
    fn a_proxy_url_is_read_as_curl_reads_it() {
        let proxy = Proxy::parse("http://user:p%40ss@Proxy.Corp:3128/").expect("valid");
        assert_eq!((proxy.host.as_str(), proxy.port, proxy.url()), ("proxy.corp", 3128, "http://proxy.corp:3128"));
        let authorization = proxy.authorization().expect("credentials");
        assert_eq!(authorization.to_str().ok(), Some(format!("Basic {}", base64(b"user:p@ss")).as_str()));
        assert!(authorization.is_sensitive());
        assert!(!format!("{proxy:?}").contains("user"), "{proxy:?}");
        assert_eq!(Proxy::parse("proxy:8080").expect("no scheme").url(), "http://proxy:8080");
        assert_eq!(Proxy::parse("http://proxy").expect("no port").url(), "http://proxy:80");
        assert_eq!(Proxy::parse("http://[::1]:3128").expect("v6").url(), "http://[::1]:3128");
        for bad in [
            "socks5://h:1",
            "https://h:1",
            "http://h:1/path",
            "http://:1",
            "http://h:0",
            "http://h:x",
            "http://u:%zz@h:1",
        ] {
            let err = Proxy::parse(bad).expect_err(bad);
            assert!(!err.contains("zz"), "{err}");
        }
    }
}
