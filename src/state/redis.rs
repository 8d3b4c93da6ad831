//! The Redis store: every check-and-update is one Lua script, sent by
//! `EVALSHA` (loaded again by itself after a Redis restart), so replicas
//! never race between a read and a write; every key expires by itself.
//!
//! The client is the `redis` crate's multiplexed connection: one TCP
//! connection per replica that pipelines the calls of every request, with
//! only its tokio and script features. It is made on the first ping and
//! dropped at the first error; the [`Store`](super::Store) then pings a new
//! one into being from the background, never on a request.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, Script};

use super::memory::millis;
use super::{
    Adjust, BreakerAction, Limit, Probe, ProviderReport, ProviderView, SharedState, StateFuture, Taken, Unavailable,
};
use crate::config::Secret;

/// The scripts, each loaded once per Redis and then called by its hash.
struct Scripts {
    take: Script,
    adjust: Script,
    breakers: Script,
    spend: Script,
    used: Script,
}

/// One replica's connection to the Redis every replica shares.
pub struct RedisState {
    client: Result<Client, String>,
    connection: Mutex<Option<MultiplexedConnection>>,
    prefix: String,
    /// This replica's name in probe keys.
    id: String,
    timeout: Duration,
    scripts: Scripts,
}

impl RedisState {
    /// A store at `url` whose keys start with `prefix`; it connects on first use.
    pub fn new(url: &Secret, prefix: &str, timeout: Duration) -> Self {
        RedisState {
            client: Client::open(url.expose()).map_err(|err| err.to_string()),
            connection: Mutex::new(None),
            prefix: prefix.to_owned(),
            id: format!("{:016x}", fastrand::u64(..)),
            timeout,
            scripts: Scripts {
                take: Script::new(include_str!("take.lua")),
                adjust: Script::new(include_str!("adjust.lua")),
                breakers: Script::new(include_str!("breakers.lua")),
                spend: Script::new(include_str!("spend.lua")),
                used: Script::new(include_str!("used.lua")),
            },
        }
    }

    /// The connection, made now when there is none.
    async fn connection(&self) -> Result<MultiplexedConnection, Unavailable> {
        if let Some(connection) = self.connection.lock().unwrap_or_else(PoisonError::into_inner).clone() {
            return Ok(connection);
        }
        let client = self.client.as_ref().map_err(|err| Unavailable(err.clone()))?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout));
        let connection = client.get_multiplexed_async_connection_with_config(&config).await.map_err(unavailable)?;
        *self.connection.lock().unwrap_or_else(PoisonError::into_inner) = Some(connection.clone());
        Ok(connection)
    }

    /// Runs `script` with `keys` and `args`; an error drops the connection,
    /// so the next ping makes a fresh one.
    async fn run<T: redis::FromRedisValue>(
        &self,
        script: &Script,
        keys: &[String],
        args: &[String],
    ) -> Result<T, Unavailable> {
        let mut connection = self.connection().await?;
        let mut invocation = script.prepare_invoke();
        keys.iter().for_each(|key| {
            invocation.key(key);
        });
        args.iter().for_each(|arg| {
            invocation.arg(arg);
        });
        let answer = invocation.invoke_async(&mut connection).await;
        answer.map_err(|err| {
            *self.connection.lock().unwrap_or_else(PoisonError::into_inner) = None;
            unavailable(err)
        })
    }

    fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }
}

fn unavailable(err: redis::RedisError) -> Unavailable {
    Unavailable(err.to_string())
}

impl SharedState for RedisState {
    fn take<'a>(&'a self, limits: &'a [Limit]) -> StateFuture<'a, Taken> {
        Box::pin(async move {
            let keys: Vec<String> = limits.iter().map(|limit| self.key(&limit.name)).collect();
            let args: Vec<String> = limits
                .iter()
                .flat_map(|limit| [limit.per_minute.max(1).to_string(), limit.amount.to_string()])
                .collect();
            let answer: (usize, u64) = self.run(&self.scripts.take, &keys, &args).await?;
            Ok(match answer {
                (0, _) => Taken::Admitted,
                (i, wait_ms) => Taken::Refused { index: i - 1, retry_after: Duration::from_millis(wait_ms) },
            })
        })
    }

    fn adjust<'a>(&'a self, changes: &'a [(Limit, Adjust)]) -> StateFuture<'a, ()> {
        Box::pin(async move {
            if changes.is_empty() {
                return Ok(());
            }
            let keys: Vec<String> = changes.iter().map(|(limit, _)| self.key(&limit.name)).collect();
            let args: Vec<String> = changes
                .iter()
                .flat_map(|(limit, how)| {
                    let how = match how {
                        Adjust::GiveBack => "back",
                        Adjust::Charge => "charge",
                    };
                    [limit.per_minute.max(1).to_string(), limit.amount.to_string(), how.to_owned()]
                })
                .collect();
            let _: i64 = self.run(&self.scripts.adjust, &keys, &args).await?;
            Ok(())
        })
    }

    fn sync_providers<'a>(&'a self, reports: &'a [ProviderReport]) -> StateFuture<'a, Vec<ProviderView>> {
        Box::pin(async move {
            if reports.is_empty() {
                return Ok(Vec::new());
            }
            let mut keys = Vec::with_capacity(reports.len() * 3);
            let mut args = vec![self.id.clone()];
            for report in reports {
                keys.push(self.key(&format!("breaker:{}", report.provider)));
                keys.push(self.key(&format!("probe:{}", report.provider)));
                keys.push(self.key(&format!("cooldown:{}", report.provider)));
                let (action, ms) = match report.action {
                    BreakerAction::Read => ("read", 0),
                    BreakerAction::Opened(left) => ("open", millis(left)),
                    BreakerAction::Closed(keep) => ("closed", millis(keep)),
                    BreakerAction::ClaimProbe(hold) => ("claim", millis(hold)),
                };
                let cooldown = report.cooldown.map_or(0, millis);
                args.extend([action.to_owned(), ms.to_string(), cooldown.to_string()]);
            }
            let answer: Vec<u64> = self.run(&self.scripts.breakers, &keys, &args).await?;
            let left = |ms: u64| (ms > 0).then(|| Duration::from_millis(ms));
            let views = answer.chunks_exact(3).map(|view| ProviderView {
                open_for: left(view[0]),
                probe: match view[1] {
                    1 => Probe::Mine,
                    2 => Probe::Taken,
                    3 => Probe::Closed,
                    _ => Probe::Free,
                },
                cooling_for: left(view[2]),
            });
            Ok(views.collect())
        })
    }

    fn spend<'a>(&'a self, scopes: &'a [(String, f64)]) -> StateFuture<'a, Vec<[f64; 3]>> {
        Box::pin(async move {
            let keys: Vec<String> = scopes.iter().map(|(scope, _)| self.key(&format!("spend:{scope}"))).collect();
            let args: Vec<String> = scopes.iter().map(|(_, usd)| format!("{usd:.12}")).collect();
            let answer: Vec<String> = self.run(&self.scripts.spend, &keys, &args).await?;
            let usd = |text: &String| text.parse::<f64>().unwrap_or(0.0);
            Ok(answer.chunks_exact(3).map(|windows| [usd(&windows[0]), usd(&windows[1]), usd(&windows[2])]).collect())
        })
    }

    fn ping(&self) -> StateFuture<'_, ()> {
        Box::pin(async move {
            let mut connection = self.connection().await?;
            let pong: Result<String, _> = redis::cmd("PING").query_async(&mut connection).await;
            pong.map(drop).map_err(|err| {
                *self.connection.lock().unwrap_or_else(PoisonError::into_inner) = None;
                unavailable(err)
            })
        })
    }

    fn lease<'a>(&'a self, name: &'a str, ttl: Duration) -> StateFuture<'a, bool> {
        Box::pin(async move {
            let mut connection = self.connection().await?;
            let mut set = redis::cmd("SET");
            set.arg(self.key(name)).arg(&self.id).arg("NX").arg("PX").arg(millis(ttl));
            let answer: Result<Option<String>, _> = set.query_async(&mut connection).await;
            answer.map(|taken| taken.is_some()).map_err(|err| {
                *self.connection.lock().unwrap_or_else(PoisonError::into_inner) = None;
                unavailable(err)
            })
        })
    }

    fn used<'a>(&'a self, limits: &'a [Limit]) -> StateFuture<'a, Vec<f64>> {
        Box::pin(async move {
            if limits.is_empty() {
                return Ok(Vec::new());
            }
            let keys: Vec<String> = limits.iter().map(|limit| self.key(&limit.name)).collect();
            let answer: Vec<String> = self.run(&self.scripts.used, &keys, &[]).await?;
            Ok(answer.iter().map(|share| share.parse::<f64>().unwrap_or(0.0)).collect())
        })
    }
}
