//! The HTTP client spans leave by: the one baton reaches providers with (its
//! pool, TLS with the platform's trust store, no URL or header in its
//! errors), so a collector may be local over `http://` or hosted over
//! `https://`, with no second HTTP stack in the build.

use std::time::Duration;

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};

use crate::egress::{Client, ClientError};

/// The most of a collector's answer read: OTLP answers are a few bytes.
const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// Connections kept to the collector between batches: one batch goes at a time.
const IDLE_CONNECTIONS: usize = 2;
/// How long an idle connection to the collector is kept.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Posts OTLP batches with the providers' client, each bounded by a timeout.
pub(super) struct ExportClient {
    client: Client,
    timeout: Duration,
}

impl std::fmt::Debug for ExportClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportClient").field("timeout", &self.timeout).finish_non_exhaustive()
    }
}

impl ExportClient {
    /// A client of its own (its own connection pool) whose every export,
    /// answer included, ends within `timeout`.
    pub(super) fn new(timeout: Duration) -> Result<Self, ClientError> {
        Ok(ExportClient { client: Client::new(IDLE_CONNECTIONS, IDLE_TIMEOUT)?, timeout })
    }

    async fn post(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (parts, mut body) = self.client.send(request).await?.into_parts();
        let mut answer = BytesMut::new();
        while let Some(chunk) = body.next().await {
            answer.extend_from_slice(&chunk?);
            if answer.len() > MAX_ANSWER_BYTES {
                return Err(format!("the collector's answer is over {MAX_ANSWER_BYTES} bytes").into());
            }
        }
        Ok(Response::from_parts(parts, answer.freeze()))
    }
}

#[async_trait]
impl HttpClient for ExportClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        match tokio::time::timeout(self.timeout, self.post(request)).await {
            Ok(answered) => answered,
            Err(_) => Err(format!("the collector did not answer within {} ms", self.timeout.as_millis()).into()),
        }
    }
}
