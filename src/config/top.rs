//! The config as a whole, and its top-level settings: where baton listens,
//! the limits on what clients send, shutdown, and the caps every route
//! carries; validated before its providers and routes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::budget::Budgets;
use super::keys::Access;
use super::ops::{Drill, Webhook};
use super::provider::Provider;
use super::route::{Route, UpstreamLimits};
use super::state::StateConfig;
use super::store::{StoreBackend, StoreConfig};
use super::telemetry::Telemetry;
use crate::secret::Secret;

/// Where the proxy listens when the config does not say.
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8080);
/// The largest request body accepted when the config does not say.
pub const DEFAULT_MAX_BODY_BYTES: usize = 32 * 1024 * 1024;
/// Request bytes all requests in flight may hold at once: eight bodies of
/// the largest size, far more of the usual few kilobytes.
pub const DEFAULT_MAX_BODY_BYTES_IN_FLIGHT: usize = 256 * 1024 * 1024;
/// How long streams may finish after SIGTERM when the config does not say.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// Client connections served at once when the config does not say; each
/// open stream also holds a provider connection, so twice this many
/// descriptors must be available.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// How long a client may take to send its request body when the config does not say.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a client may leave the answer unread when the config does not say.
pub const DEFAULT_CLIENT_STALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Everything `baton serve` needs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The proxy's listen address.
    pub listen: SocketAddr,
    /// Request bodies above this size are refused with 413.
    pub max_body_bytes: usize,
    /// Request bytes all requests in flight may hold at once; past it a
    /// request gets 503 with `Retry-After` (read at start only).
    pub max_body_bytes_in_flight: usize,
    /// The credential for admin actions such as drills; none disables them.
    pub admin_token: Option<Secret>,
    /// On SIGTERM, how long streams in flight may go on before they are ended.
    pub shutdown_grace: Duration,
    /// Client connections served at once; past it, new ones get 503 at once.
    pub max_connections: usize,
    /// How long a request body may take to arrive.
    pub body_read_timeout: Duration,
    /// How long an answer may wait for a client that stopped reading before
    /// the client's connection, and the provider's, are dropped.
    pub client_stall_timeout: Duration,
    /// Who may call.
    pub access: Access,
    /// The providers, in file order.
    pub providers: Vec<Arc<Provider>>,
    /// The routes, in file order; shared with the streams that use them.
    pub routes: Vec<Arc<Route>>,
    /// Spend budgets and per-request cost caps.
    pub budgets: Budgets,
    /// Where the state replicas share lives (`[state]`).
    pub state: StateConfig,
    /// Where traces are exported; `None` when they are off.
    pub telemetry: Option<Telemetry>,
    /// Where the request log and the spend ledger are kept (`[store]`).
    pub store: StoreConfig,
    /// The webhooks alerts go to (`[[alerts]]`).
    pub alerts: Vec<Webhook>,
    /// The drills run on a schedule (`[[drills]]`).
    pub drills: Vec<Drill>,
}

impl Config {
    /// Serves `listen` instead of the configured address (`--listen`),
    /// with the access rules that address calls for.
    pub fn listen_on(&mut self, listen: SocketAddr) {
        self.listen = listen;
        self.access.close_until_keyed(listen, self.store.backend != StoreBackend::None);
    }

    /// Finds the route a client's `model` names, by its name or an alias.
    pub fn route(&self, model: &str) -> Option<&Arc<Route>> {
        self.routes.iter().find(|route| route.answers_to(model))
    }
}

/// The top-level settings, waiting for the providers and routes.
pub(super) struct Top {
    pub(super) listen: SocketAddr,
    pub(super) max_body_bytes: usize,
    pub(super) max_body_bytes_in_flight: usize,
    pub(super) admin_token: Option<Secret>,
    pub(super) shutdown_grace: Duration,
    pub(super) max_connections: usize,
    pub(super) body_read_timeout: Duration,
    pub(super) client_stall_timeout: Duration,
    pub(super) limits: UpstreamLimits,
    pub(super) state: StateConfig,
}

impl Top {
    pub(super) fn into_config(
        self,
        access: Access,
        providers: Vec<Arc<Provider>>,
        routes: Vec<Arc<Route>>,
        budgets: Budgets,
    ) -> Config {
        Config {
            listen: self.listen,
            max_body_bytes: self.max_body_bytes,
            max_body_bytes_in_flight: self.max_body_bytes_in_flight,
            admin_token: self.admin_token,
            shutdown_grace: self.shutdown_grace,
            max_connections: self.max_connections,
            body_read_timeout: self.body_read_timeout,
            client_stall_timeout: self.client_stall_timeout,
            access,
            providers,
            routes,
            budgets,
            state: self.state,
            telemetry: None,
            store: StoreConfig::default_for(None),
            alerts: Vec::new(),
            drills: Vec::new(),
        }
    }
}

/// An address as `ip:port`, or `host:port` resolved now (the first address).
pub(super) fn resolve(text: &str) -> Option<SocketAddr> {
    use std::net::ToSocketAddrs;
    text.parse().ok().or_else(|| text.to_socket_addrs().ok()?.next())
}
