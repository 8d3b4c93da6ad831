//! Admin-only request features, behind the config's `admin_token`: without a
//! matching `x-baton-admin-token` header they are refused, never ignored.

use axum::http::HeaderMap;

use super::error::ApiError;
use crate::config::Config;
use crate::core::Drills;

/// The header that carries drills: `provider=fault_class, …`.
pub const DRILL_HEADER: &str = "x-baton-drill";
/// The header that carries the admin credential.
pub const ADMIN_TOKEN_HEADER: &str = "x-baton-admin-token";

/// The drills a request asks for, refused unless it carries the admin token.
pub fn drills(headers: &HeaderMap, config: &Config) -> Result<Drills, ApiError> {
    let Some(spec) = headers.get(DRILL_HEADER) else { return Ok(Drills::default()) };
    authorize(headers, config, "drills")?;
    let spec = spec.to_str().map_err(|_| ApiError::bad_request(format!("{DRILL_HEADER} is not text")))?;
    Drills::parse(spec).map_err(|err| ApiError::bad_request(format!("{DRILL_HEADER}: {err}")))
}

/// Checks the admin credential for `what`.
pub fn authorize(headers: &HeaderMap, config: &Config, what: &str) -> Result<(), ApiError> {
    let Some(expected) = &config.admin_token else {
        return Err(ApiError::forbidden(format!("{what} are disabled: no admin_token is configured")));
    };
    let given = headers.get(ADMIN_TOKEN_HEADER).map(|value| value.as_bytes()).unwrap_or_default();
    if constant_time_eq(given, expected.expose().as_bytes()) {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!("{what} need a valid {ADMIN_TOKEN_HEADER}")))
    }
}

/// Compares without an early exit, so response timing does not reveal how
/// much of a guessed token was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}
