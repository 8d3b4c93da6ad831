//! The HTTP exchange every adapter shares: send, check the status and content
//! type, turn error bodies into [`ProviderError`]s, then bytes → SSE → decoder.

use std::borrow::Cow;
use std::fmt::Display;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http::header::{ACCEPT, CONTENT_ENCODING, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderName, HeaderValue, Method};

use super::{Adapter, Counting, Decoder, EventStream, Opener, Opening, ProviderError, ProviderKind, Upstream, sse};
use crate::egress::{Client, ClientError, ResponseBody};
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::event::{ChatRequest, Event};
use crate::request::{Key, Native};

/// How much of an error body is read to explain a failure.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// Idle upstream connections kept per provider host: enough to reuse under a
/// steady load, few enough that a burst does not keep thousands of file
/// descriptors open after it.
const MAX_IDLE_PER_PROVIDER: usize = 512;

/// How long an idle upstream connection is kept.
const IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The real providers, over HTTP: one client and its keep-alive pool.
/// Deadlines are the core's, so the client has no timeouts of its own and
/// never follows redirects.
#[derive(Clone)]
pub struct HttpOpener {
    client: Client,
}

impl HttpOpener {
    /// An opener with its own connection pool and TLS settings.
    pub fn new() -> Result<Self, ClientError> {
        Ok(HttpOpener { client: Client::new(MAX_IDLE_PER_PROVIDER, IDLE_TIMEOUT)? })
    }
}

impl Opener for HttpOpener {
    fn open<'a>(&'a self, kind: ProviderKind, upstream: Upstream<'a>, request: &'a ChatRequest) -> Opening<'a> {
        Box::pin(open(&self.client, kind, upstream, request))
    }

    fn count_tokens<'a>(
        &'a self,
        kind: ProviderKind,
        upstream: Upstream<'a>,
        request: &'a ChatRequest,
    ) -> Counting<'a> {
        Box::pin(count_tokens(&self.client, kind, upstream, request))
    }
}

/// Asks the provider to count `req`'s input tokens: its `input_tokens`, or
/// why not.
async fn count_tokens(
    client: &Client,
    kind: ProviderKind,
    upstream: Upstream<'_>,
    req: &ChatRequest,
) -> Result<u64, ProviderError> {
    let adapter = kind.adapter_for(upstream.model);
    let mut request = adapter
        .count_request(upstream, req)
        .ok_or_else(|| ProviderError::Request(format!("a {kind} provider counts no tokens")))??;
    if let Some(credential) = &upstream.account.credential {
        credential.authorize(&mut request, upstream.egress).await?;
    }
    let response =
        client.send_via(request, upstream.egress).await.map_err(|err| ProviderError::Connect(err.to_string()))?;
    if !response.status().is_success() {
        return Err(error_response(adapter, response).await);
    }
    let body = read_limited(response).await;
    let counted: serde_json::Value =
        serde_json::from_str(&body).map_err(|err| ProviderError::Malformed(err.to_string()))?;
    counted["input_tokens"].as_u64().ok_or_else(|| ProviderError::Malformed("no `input_tokens` in the count".into()))
}

/// A streaming JSON POST with the adapter's headers: what every adapter's
/// request has in common. Fails only on a URL or header value HTTP cannot
/// carry, which config validation already refuses.
pub(super) fn post_json(
    url: String,
    headers: &[(HeaderName, &str)],
    body: &impl serde::Serialize,
) -> Result<http::Request<Bytes>, ProviderError> {
    let body =
        serde_json::to_vec(body).map_err(|err| ProviderError::Request(format!("cannot encode the body: {err}")))?;
    post_body(url, headers, body)
}

/// [`post_json`] of a body already encoded.
fn post_body(
    url: String,
    headers: &[(HeaderName, &str)],
    body: Vec<u8>,
) -> Result<http::Request<Bytes>, ProviderError> {
    // Put together in place: a builder moves the whole request on each step.
    let uri = http::Uri::try_from(url).map_err(|err| ProviderError::Request(format!("cannot build it: {err}")))?;
    let mut request = http::Request::new(Bytes::from(body));
    *request.method_mut() = Method::POST;
    *request.uri_mut() = uri;
    let fields = request.headers_mut();
    fields.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    fields.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    for (name, value) in headers {
        let value = HeaderValue::from_str(value)
            .map_err(|_| ProviderError::Request(format!("cannot build it: the {name} header's value is not valid")))?;
        fields.append(name.clone(), value);
    }
    Ok(request)
}

/// The same-dialect path's request: the client's body as sent, with only
/// the fields of `set` written over, and the client's headers of that API
/// beside the adapter's. The body is read only as far as its top-level
/// fields: what they hold is copied, never parsed.
pub(super) fn post_native(
    url: String,
    headers: &[(HeaderName, &str)],
    native: &Native,
    set: &[(&str, Set<'_>)],
) -> Result<http::Request<Bytes>, ProviderError> {
    let body = splice(&native.body, set)
        .map_err(|err| ProviderError::Request(format!("cannot read the client's body again: {err}")))?;
    let mut request = post_body(url, headers, body)?;
    for (name, value) in &native.headers {
        request.headers_mut().append(name.clone(), value.clone());
    }
    Ok(request)
}

/// A field baton writes over the client's in a body it sends as the client
/// wrote it: no JSON tree is built for it, as every attempt writes some.
#[derive(Clone, Copy)]
pub(super) enum Set<'a> {
    /// A JSON string of this text (the target's model).
    Str(&'a str),
    /// This JSON, written as it is: `true`, `{"include_usage":true}`.
    Json(&'a str),
    /// No such field: the client's is left out (a cloud that takes the
    /// model in its path refuses one in the body).
    Drop,
}

/// The JSON object `body` with the fields of `set` written over: the
/// client's fields in the order sent, each as the bytes it came as, a name
/// sent twice kept once as its last (as a JSON reader keeps it), then
/// those of `set`.
fn splice(body: &[u8], set: &[(&str, Set<'_>)]) -> Result<Vec<u8>, serde_json::Error> {
    let Fields(fields) = serde_json::from_slice(body)?;
    // Each name's last field, found by sorting (a stable sort keeps the
    // order within a name), so a body of many fields costs no more than its sort.
    let mut by_name: Vec<usize> = (0..fields.len()).collect();
    by_name.sort_by(|a, b| fields[*a].0.cmp(&fields[*b].0));
    let mut kept = vec![false; fields.len()];
    for (i, index) in by_name.iter().enumerate() {
        let last = by_name.get(i + 1).is_none_or(|next| fields[*next].0 != fields[*index].0);
        kept[*index] = last && !set.iter().any(|(name, _)| *name == fields[*index].0);
    }
    let mut out = Vec::with_capacity(body.len() + 96);
    out.push(b'{');
    for (name, value) in fields.iter().zip(&kept).filter(|(_, kept)| **kept).map(|(field, _)| field) {
        serde_json::to_writer(&mut out, name.as_ref())?;
        out.push(b':');
        out.extend_from_slice(value.get().as_bytes());
        out.push(b',');
    }
    for (name, value) in set {
        if matches!(value, Set::Drop) {
            continue;
        }
        serde_json::to_writer(&mut out, name)?;
        out.push(b':');
        match value {
            Set::Str(text) => serde_json::to_writer(&mut out, text)?,
            Set::Json(json) => out.extend_from_slice(json.as_bytes()),
            Set::Drop => {}
        }
        out.push(b',');
    }
    match out.last_mut() {
        Some(last @ b',') => *last = b'}',
        _ => out.push(b'}'),
    }
    Ok(out)
}

/// A JSON object's top-level fields in the order they came, each value
/// borrowed as its bytes, each name borrowed unless it held an escape.
struct Fields<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> Deserialize<'de> for Fields<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(FieldsVisitor)
    }
}

/// Reads [`Fields`].
struct FieldsVisitor;

impl<'de> Visitor<'de> for FieldsVisitor {
    type Value = Fields<'de>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields<'de>, A::Error> {
        let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(8));
        while let Some(Key(name)) = map.next_key()? {
            fields.push((name, map.next_value()?));
        }
        Ok(Fields(fields))
    }
}

/// Sends `req` to `upstream` and returns its answer as events. Errors before the
/// stream starts (status, content type, connection) come back here; errors in
/// the stream come as items. Dropping the stream closes the connection.
pub async fn open(
    client: &Client,
    kind: ProviderKind,
    upstream: Upstream<'_>,
    req: &ChatRequest,
) -> Result<EventStream, ProviderError> {
    let adapter = kind.adapter_for(upstream.model);
    let mut request = adapter.request(upstream, req)?;
    if let Some(context) = upstream.traceparent.and_then(|context| http::HeaderValue::from_str(context).ok()) {
        request.headers_mut().insert("traceparent", context);
    }
    if let Some(credential) = &upstream.account.credential {
        credential.authorize(&mut request, upstream.egress).await?;
    }
    let response = client.send_via(request, upstream.egress).await.map_err(|err| match err {
        ClientError::Url(why) => ProviderError::Request(why.to_owned()),
        ClientError::Http(why) => ProviderError::NoResponse(why),
        ClientError::Protocol(why) => ProviderError::Protocol(why),
        err => ProviderError::Connect(err.to_string()),
    })?;
    let status = response.status();
    if !status.is_success() {
        // A credential the provider no longer takes (an expired or revoked
        // token) is not offered again.
        if status == http::StatusCode::UNAUTHORIZED
            && let Some(credential) = &upstream.account.credential
        {
            credential.rejected();
        }
        return Err(Box::pin(error_response(adapter, response)).await);
    }
    if let Some(coding) = response.headers().get(CONTENT_ENCODING)
        && !coding.as_bytes().eq_ignore_ascii_case(b"identity")
    {
        return Err(ProviderError::ContentEncoding(String::from_utf8_lossy(coding.as_bytes()).into_owned()));
    }
    let content_type = response.headers().get(CONTENT_TYPE).and_then(|value| value.to_str().ok()).unwrap_or_default();
    let expected = adapter.content_type();
    // Media types are case-insensitive (RFC 9110 §8.3.1).
    if !content_type.get(..expected.len()).is_some_and(|media| media.eq_ignore_ascii_case(expected)) {
        return Err(ProviderError::ContentType(content_type.to_owned()));
    }
    let body = Box::pin(response.into_body().map(|chunk| chunk.map_err(|err| err.to_string())));
    let frames = adapter.frames(body, upstream.max_event_bytes);
    // A reasoning signature means something only to the API that wrote it.
    let signatures = adapter.dialect() == Some(req.dialect);
    Ok(Box::pin(Decoding { sse: frames, decoder: adapter.decoder(), pending: Vec::new(), ended: false, signatures }))
}

/// Runs a byte stream through the SSE parser and `decoder`, with the default
/// cap on one event's size. The stream ends after the first error, or after
/// the decoder's end marker.
pub fn decode<S, B, E>(bytes: S, decoder: Box<dyn Decoder>) -> EventStream
where
    S: Stream<Item = Result<B, E>> + Send + 'static,
    B: Into<Bytes> + Send + 'static,
    E: Display + Send + 'static,
{
    decode_capped(bytes, decoder, sse::DEFAULT_MAX_EVENT_BYTES)
}

/// [`decode`] with an event larger than `max_event_bytes` failing the stream.
pub fn decode_capped<S, B, E>(bytes: S, decoder: Box<dyn Decoder>, max_event_bytes: usize) -> EventStream
where
    S: Stream<Item = Result<B, E>> + Send + 'static,
    B: Into<Bytes> + Send + 'static,
    E: Display + Send + 'static,
{
    let sse = sse::events(bytes, max_event_bytes);
    Box::pin(Decoding { sse, decoder, pending: Vec::new(), ended: false, signatures: true })
}

/// Runs a byte stream through `kind`'s framing (SSE, or AWS's event
/// stream) and decoder, with the default cap on one event's size: an
/// answer as the driver reads it, for tests and benchmarks.
pub fn decode_as<S, B, E>(kind: ProviderKind, bytes: S) -> EventStream
where
    S: Stream<Item = Result<B, E>> + Send + 'static,
    B: Into<Bytes> + Send + 'static,
    E: Display + Send + 'static,
{
    decode_with(kind.adapter(), bytes)
}

/// [`decode_as`] through one adapter of a kind whose models speak different
/// APIs (`kind.adapter_for(model)`: Claude or Converse on Bedrock).
pub fn decode_with<S, B, E>(adapter: &'static dyn Adapter, bytes: S) -> EventStream
where
    S: Stream<Item = Result<B, E>> + Send + 'static,
    B: Into<Bytes> + Send + 'static,
    E: Display + Send + 'static,
{
    let body = Box::pin(bytes.map(|chunk| chunk.map(Into::into).map_err(|err| err.to_string())));
    let frames = adapter.frames(body, sse::DEFAULT_MAX_EVENT_BYTES);
    Box::pin(Decoding { sse: frames, decoder: adapter.decoder(), pending: Vec::new(), ended: false, signatures: true })
}

/// A provider's events, as its kind frames them, through its decoder, one
/// event at a time; reasoning signatures are kept only when `signatures`
/// says the client can send them back to the API that wrote them.
struct Decoding<S> {
    /// The SSE events, held in place: they box the bytes under them.
    sse: S,
    decoder: Box<dyn Decoder>,
    /// The last SSE event's events not yet yielded, last first, so popping
    /// yields them in order; the one list serves the whole stream.
    pending: Vec<Event>,
    ended: bool,
    signatures: bool,
}

impl<S> Stream for Decoding<S>
where
    S: Stream<Item = Result<sse::SseEvent, ProviderError>> + Send + Unpin,
{
    type Item = Result<Event, ProviderError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(event) = this.pending.pop() {
                return Poll::Ready(Some(Ok(event)));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            let step = if this.decoder.is_done() { None } else { ready!(this.sse.poll_next_unpin(cx)) };
            let outcome = match step {
                Some(Ok(event)) => this.decoder.on_event(&event, &mut this.pending).map(|()| {
                    if !this.signatures {
                        this.pending.retain(|event| !matches!(event, Event::Signature(_)));
                    }
                    this.pending.reverse();
                }),
                Some(Err(err)) => Err(err),
                None => {
                    this.ended = true;
                    this.decoder.finish()
                }
            };
            if let Err(err) = outcome {
                this.ended = true;
                this.pending.clear();
                return Poll::Ready(Some(Err(err)));
            }
        }
    }
}

async fn error_response(adapter: &dyn Adapter, response: http::Response<ResponseBody>) -> ProviderError {
    let status = response.status().as_u16();
    let retry_after = retry_after(response.headers());
    let body = read_limited(response).await;
    let message = error_message(&body);
    // The whole body: OpenAI says it in its `code`, others in the message.
    let context_length = adapter.is_context_length(&body);
    ProviderError::from_status(status, message, retry_after, context_length)
}

async fn read_limited(response: http::Response<ResponseBody>) -> String {
    let mut body = Vec::new();
    let mut chunks = response.into_body();
    while let Some(Ok(chunk)) = chunks.next().await {
        body.extend_from_slice(&chunk);
        if body.len() >= ERROR_BODY_LIMIT {
            body.truncate(ERROR_BODY_LIMIT);
            break;
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// The human-readable message of an error body. OpenAI, Anthropic and Gemini
/// all put it at `error.message`; anything else is passed on as text.
fn error_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    match parsed.as_ref().and_then(|value| value.pointer("/error/message")).and_then(|m| m.as_str()) {
        Some(message) => message.to_owned(),
        None if body.trim().is_empty() => "no error body".to_owned(),
        None => body.trim().chars().take(500).collect(),
    }
}

/// How long the provider asks to be left alone: `retry-after-ms` (Azure's
/// and OpenAI's, in milliseconds) when it is sent, else `Retry-After`.
fn retry_after(headers: &http::HeaderMap) -> Option<Duration> {
    let millis = headers.get("retry-after-ms").and_then(|value| value.to_str().ok());
    match millis.and_then(|millis| millis.trim().parse::<f64>().ok()).filter(|ms| ms.is_finite() && *ms >= 0.0) {
        Some(ms) => Some(Duration::from_secs_f64((ms / 1000.0).min(u32::MAX as f64))),
        None => headers.get(RETRY_AFTER).and_then(|value| value.to_str().ok()).and_then(parse_retry_after),
    }
}

/// `Retry-After` as seconds or an HTTP date.
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(SystemTime::now()).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spliced(body: &str, set: &[(&str, Set<'_>)]) -> String {
        String::from_utf8(splice(body.as_bytes(), set).unwrap_or_default()).unwrap_or_default()
    }

    #[test]
    fn a_spliced_body_keeps_the_client_s_fields_as_sent_in_order_with_baton_s_written_over() {
        let set = [("model", Set::Str("m\"2")), ("stream", Set::Json("true"))];
        let body = r#"{ "zeta" : [1, 2.50, "x"], "model":"m1", "a\u0062c":{"k": null}, "stream":false }"#;
        assert_eq!(spliced(body, &set), r#"{"zeta":[1, 2.50, "x"],"abc":{"k": null},"model":"m\"2","stream":true}"#);
        assert_eq!(spliced("{}", &set), r#"{"model":"m\"2","stream":true}"#);
        assert_eq!(spliced(r#"{"a":1}"#, &[]), r#"{"a":1}"#);
        assert_eq!(spliced("{}", &[]), "{}");
        let dropped = [("model", Set::Drop), ("v", Set::Json("1"))];
        assert_eq!(spliced(r#"{"model":"m","a":1}"#, &dropped), r#"{"a":1,"v":1}"#);
        assert_eq!(spliced(r#"{"model":"m"}"#, &[("model", Set::Drop)]), "{}");
    }

    #[test]
    fn a_name_sent_twice_is_kept_once_as_its_last_where_it_last_came() {
        let body = r#"{"a":1,"b":2,"a":3,"c":4,"b":5,"b":6}"#;
        assert_eq!(spliced(body, &[]), r#"{"a":3,"c":4,"b":6}"#);
        let many: Vec<String> = (0..20_000).map(|i| format!(r#""k{}":{i}"#, i % 3)).collect();
        let body = format!("{{{}}}", many.join(","));
        assert_eq!(spliced(&body, &[]), r#"{"k2":19997,"k0":19998,"k1":19999}"#);
    }

    #[test]
    fn a_body_that_is_not_an_object_is_refused() {
        for body in ["[1]", "\"x\"", "{\"a\":", "{\"a\":1} x", ""] {
            assert!(splice(body.as_bytes(), &[]).is_err(), "{body}");
        }
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        assert_eq!(parse_retry_after("7"), Some(Duration::from_secs(7)));
        let soon = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(30));
        let parsed = parse_retry_after(&soon).unwrap_or_default();
        assert!(parsed > Duration::from_secs(27) && parsed <= Duration::from_secs(30), "got {parsed:?}");
        assert_eq!(parse_retry_after("soon"), None);
    }

    #[test]
    fn retry_after_ms_wins_over_retry_after_and_a_bad_one_is_passed_over() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            pairs.iter().map(|(name, value)| (HeaderName::from_static(name), HeaderValue::from_static(value))).collect()
        };
        let both = headers(&[("retry-after-ms", "1500"), ("retry-after", "7")]);
        assert_eq!(retry_after(&both), Some(Duration::from_millis(1500)));
        let fraction = headers(&[("retry-after-ms", "250.5")]);
        assert_eq!(retry_after(&fraction), Some(Duration::from_micros(250_500)));
        for bad in ["-1", "soon", "NaN", "inf"] {
            let value = HeaderValue::from_str(bad).unwrap_or(HeaderValue::from_static("x"));
            let mut map: http::HeaderMap = headers(&[("retry-after", "7")]);
            map.insert("retry-after-ms", value);
            assert_eq!(retry_after(&map), Some(Duration::from_secs(7)), "{bad}");
        }
        assert_eq!(retry_after(&headers(&[])), None);
    }

    #[test]
    fn error_message_reads_every_providers_shape() {
        assert_eq!(error_message(r#"{"error":{"message":"slow down","type":"rate_limit"}}"#), "slow down");
        assert_eq!(
            error_message(r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#),
            "Overloaded"
        );
        assert_eq!(error_message("upstream exploded"), "upstream exploded");
        assert_eq!(error_message(""), "no error body");
    }
}
