//! The top-level settings of a config, validated before its providers and
//! routes, and how a `listen` address is read.

use std::sync::Arc;
use std::time::Duration;

use super::{Access, Budgets, Config, Provider, Route, Secret, StateConfig, UpstreamLimits};

/// The top-level settings, waiting for the providers and routes.
pub(super) struct Top {
    pub(super) listen: std::net::SocketAddr,
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
            store: super::StoreConfig::default_for(None),
            alerts: Vec::new(),
            drills: Vec::new(),
        }
    }
}

/// An address as `ip:port`, or `host:port` resolved now (the first address).
pub(super) fn resolve(text: &str) -> Option<std::net::SocketAddr> {
    use std::net::ToSocketAddrs;
    text.parse().ok().or_else(|| text.to_socket_addrs().ok()?.next())
}
