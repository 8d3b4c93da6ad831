//! Request bodies: each read within its deadline and size limit, and all of
//! them counted against one budget of bytes the requests in flight may hold
//! (`max_body_bytes_in_flight`), so many large bodies at once cannot exhaust
//! memory: past it a request gets 503 with `Retry-After`, as past
//! `max_connections`.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, header};
use futures_util::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::Config;
use crate::dialect::ApiError;

/// The budget is counted in KiB: a permit count is a `u32`.
const UNIT: usize = 1024;

/// The most room a body's buffer is given before its bytes come: a chat
/// request of a few KiB needs one allocation, and a large declared length
/// reserves nothing it has not sent.
const FIRST_ROOM: usize = 64 * 1024;

/// The bytes request bodies may hold at once, shared by every handler.
#[derive(Clone)]
pub(super) struct BodyBudget {
    units: Arc<Semaphore>,
}

/// A body's share of the budget, given back when it is dropped.
pub(super) struct Held(Option<OwnedSemaphorePermit>);

impl BodyBudget {
    /// A budget of `bytes` (at start: a new one needs a restart).
    pub(super) fn new(bytes: usize) -> Self {
        BodyBudget { units: Arc::new(Semaphore::new(bytes.div_ceil(UNIT).min(Semaphore::MAX_PERMITS))) }
    }

    /// Reads the body within the config's `body_read_timeout`, refusing it
    /// as soon as it passes `max_body_bytes` (at once when its declared
    /// length already does) or the budget has no room for the bytes that
    /// have come.
    pub(super) async fn read(
        &self,
        headers: &HeaderMap,
        body: Body,
        config: &Config,
    ) -> Result<(Vec<u8>, Held), ApiError> {
        let (limit, timeout) = (config.max_body_bytes, config.body_read_timeout);
        let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|length| length > u64::try_from(limit).unwrap_or(u64::MAX)) {
            return Err(ApiError::too_large(limit));
        }
        // The budget counts bytes as they arrive, never a declared length:
        // a head that declares 32 MiB and sends nothing holds nothing, so
        // a few such heads cannot shut every other request out. The buffer
        // starts at most [`FIRST_ROOM`] large and grows with what comes.
        let mut held = Held(None);
        let first = declared.and_then(|length| usize::try_from(length).ok()).unwrap_or(0).min(FIRST_ROOM);
        let mut stream = body.into_data_stream();
        let read = async {
            let mut out = Vec::with_capacity(first);
            while let Some(chunk) = stream.next().await {
                let chunk =
                    chunk.map_err(|err| ApiError::bad_request(format!("could not read request body: {err}")))?;
                if out.len().saturating_add(chunk.len()) > limit {
                    return Err(ApiError::too_large(limit));
                }
                self.grow(&mut held, out.len() + chunk.len())?;
                out.extend_from_slice(&chunk);
            }
            Ok(out)
        };
        let out = tokio::time::timeout(timeout, read).await.unwrap_or_else(|_| Err(ApiError::body_timeout(timeout)))?;
        Ok((out, held))
    }

    /// Makes `held` cover `bytes`, or refuses the request when the budget
    /// has no room: nothing waits for room, so no request holds a share
    /// while it waits for more.
    fn grow(&self, held: &mut Held, bytes: usize) -> Result<(), ApiError> {
        let have = held.0.as_ref().map_or(0, OwnedSemaphorePermit::num_permits);
        let want = bytes.div_ceil(UNIT);
        if want <= have {
            return Ok(());
        }
        let more = u32::try_from(want - have).map_err(|_| ApiError::bodies_in_flight())?;
        let permit = Arc::clone(&self.units).try_acquire_many_owned(more).map_err(|_| ApiError::bodies_in_flight())?;
        match &mut held.0 {
            Some(have) => have.merge(permit),
            None => held.0 = Some(permit),
        }
        Ok(())
    }
}
