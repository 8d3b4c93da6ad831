//! A simulated answer's body as it goes out: chunk by chunk, at the pace
//! asked for, watching the read side so a client that goes away is noticed
//! at once, with the faults that strike once its opening events are out.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{ReadHalf, WriteHalf};

use super::{Fault, misbehave, wire};
use crate::providers::simulate::Simulated;

/// What becomes of a connection once an exchange on it is over.
pub(super) enum Next {
    /// It takes the next request.
    KeepAlive,
    /// The server closes it.
    Close,
    /// The client closed it.
    PeerClosed,
}

/// A chunked response body, watching the read side so a client that goes
/// away is noticed at once, not at the next write.
pub(super) struct Chunked<'a, 'w, 'r> {
    pub(super) writer: &'a mut WriteHalf<'w>,
    pub(super) reader: &'a mut ReadHalf<'r>,
    /// Bytes written right behind the end of the body, in the same write.
    pub(super) trailer: Option<Vec<u8>>,
}

impl Chunked<'_, '_, '_> {
    pub(super) async fn send(&mut self, event: &[u8]) -> std::io::Result<()> {
        let mut chunk = format!("{:x}\r\n", event.len()).into_bytes();
        chunk.extend_from_slice(event);
        chunk.extend_from_slice(b"\r\n");
        self.writer.write_all(&chunk).await
    }

    pub(super) async fn end(&mut self) -> std::io::Result<()> {
        let mut end = b"0\r\n\r\n".to_vec();
        end.extend(self.trailer.take().unwrap_or_default());
        self.writer.write_all(&end).await
    }

    /// The faults that strike once the answer's head is out, before its
    /// first event: what becomes of the connection, or `None` to go on.
    pub(super) async fn before_opening(&mut self, fault: Option<Fault>) -> std::io::Result<Option<Next>> {
        match fault {
            Some(Fault::StallFirstToken) => Ok(Some(wait_peer_closed(self.reader).await)),
            Some(Fault::CloseBeforeToken) => Ok(Some(Next::Close)),
            Some(Fault::DataFlood) => {
                misbehave::flood(self.writer).await?;
                Ok(Some(Next::Close))
            }
            _ => Ok(None),
        }
    }

    /// The faults that strike once the answer's opening events are out:
    /// what becomes of the connection, or `None` to go on.
    pub(super) async fn after_opening(
        &mut self,
        fault: Option<Fault>,
        sim: &dyn Simulated,
    ) -> std::io::Result<Option<Next>> {
        let last = match fault {
            Some(Fault::RoleThenStall) => None,
            Some(Fault::Malformed) => Some(sim.malformed()),
            Some(Fault::WrongTypes) => Some(sim.wrong_types()),
            Some(Fault::ErrorEvent) => {
                self.send(&sim.error_event()).await?;
                self.end().await?;
                return Ok(Some(Next::Close));
            }
            _ => return Ok(None),
        };
        if let Some(event) = last {
            self.send(&event).await?;
        }
        Ok(Some(wait_peer_closed(self.reader).await))
    }

    /// `reasoning` reasoning deltas, `gap` apart, then their end; whether
    /// the client closed the connection meanwhile.
    pub(super) async fn think(
        &mut self,
        sim: &dyn Simulated,
        model: &str,
        reasoning: usize,
        gap: Duration,
    ) -> std::io::Result<bool> {
        for i in 0..reasoning {
            if self.pause(gap).await {
                return Ok(true);
            }
            self.send(&sim.reasoning(model, &wire::token("think", i))).await?;
        }
        if reasoning > 0 {
            for event in sim.end_of_reasoning() {
                self.send(&event).await?;
            }
        }
        Ok(false)
    }

    /// Each of `tokens` as `event` writes it, the first after `first` and
    /// the rest `gap` apart: how many went out, or `None` when the client
    /// closed the connection meanwhile.
    pub(super) async fn say(
        &mut self,
        tokens: impl Iterator<Item = String>,
        (first, gap): (Duration, Duration),
        event: impl Fn(&str) -> Vec<u8>,
    ) -> std::io::Result<Option<usize>> {
        let mut count = 0;
        for (n, token) in tokens.enumerate() {
            if self.pause(if n == 0 { first } else { gap }).await {
                return Ok(None);
            }
            self.send(&event(&token)).await?;
            count = n + 1;
        }
        Ok(Some(count))
    }

    /// Waits `delay`; true if the client closed the connection meanwhile.
    pub(super) async fn pause(&mut self, delay: Duration) -> bool {
        if delay.is_zero() {
            return false;
        }
        tokio::select! {
            _ = tokio::time::sleep(delay) => false,
            Next::PeerClosed = wait_peer_closed(self.reader) => true,
        }
    }
}

/// Holds the exchange open until the client closes its side.
pub(super) async fn wait_peer_closed(reader: &mut ReadHalf<'_>) -> Next {
    let mut scratch = [0u8; 1024];
    loop {
        match reader.read(&mut scratch).await {
            Ok(0) | Err(_) => return Next::PeerClosed,
            Ok(_) => {}
        }
    }
}
