//! The `[telemetry]` table: whether traces are exported over OTLP/HTTP, and
//! where. Off unless the config or the standard `OTEL_*` variables say so.

use serde::Deserialize;
use toml::Spanned;

use super::check::Checker;
use super::error::ConfigError;

/// The service name traces carry when neither the config nor `OTEL_SERVICE_NAME` gives one.
pub const DEFAULT_SERVICE_NAME: &str = "baton";
/// The base URL of the collector, the standard variable's name.
const ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The full URL traces are posted to, used as written.
const TRACES_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// The standard variable naming the service.
const SERVICE_NAME_VAR: &str = "OTEL_SERVICE_NAME";
/// The standard variable that turns every signal off.
const DISABLED_VAR: &str = "OTEL_SDK_DISABLED";
/// Where OTLP/HTTP traces go below a base URL.
const TRACES_PATH: &str = "v1/traces";

/// The `[telemetry]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTelemetry {
    enabled: Option<Spanned<bool>>,
    otlp_endpoint: Option<Spanned<String>>,
    service_name: Option<Spanned<String>>,
}

/// Where traces are exported, when they are on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Telemetry {
    /// The URL spans are posted to as OTLP protobuf (`…/v1/traces`).
    pub traces_endpoint: String,
    /// The `service.name` resource attribute of every span.
    pub service_name: String,
}

/// Traces are on when `[telemetry]` gives an `otlp_endpoint`, or, when it
/// does not, when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
/// `OTEL_EXPORTER_OTLP_ENDPOINT` is set; `enabled = false` and
/// `OTEL_SDK_DISABLED=true` turn them off.
pub(super) fn check(
    check: &Checker<'_>,
    raw: Option<&Spanned<RawTelemetry>>,
) -> Result<Option<Telemetry>, ConfigError> {
    let table = raw.map(Spanned::get_ref);
    if table.and_then(|t| t.enabled.as_ref()).is_some_and(|enabled| !*enabled.get_ref()) {
        return Ok(None);
    }
    let var = |name: &str| (check.env)(name).map(|value| value.trim().to_owned()).filter(|v| !v.is_empty());
    if var(DISABLED_VAR).is_some_and(|value| value.eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    let line = raw.map_or(1, |raw| check.line(raw.span().start));
    let traces_endpoint = match table.and_then(|t| t.otlp_endpoint.as_ref()) {
        Some(value) => {
            let base = check.expand(value, "telemetry.otlp_endpoint")?;
            below(&base).map_err(|why| check.error(value, "telemetry.otlp_endpoint".to_owned(), why))?
        }
        None => match (var(TRACES_ENDPOINT_VAR), var(ENDPOINT_VAR)) {
            (Some(full), _) => {
                checked(&full).map(|()| full).map_err(|why| at(check, line, TRACES_ENDPOINT_VAR, why))?
            }
            (None, Some(base)) => below(&base).map_err(|why| at(check, line, ENDPOINT_VAR, why))?,
            (None, None) => return Ok(None),
        },
    };
    let service_name = match table.and_then(|t| t.service_name.as_ref()) {
        Some(value) => {
            let name = check.expand(value, "telemetry.service_name")?;
            if name.trim().is_empty() {
                return Err(check.error(value, "telemetry.service_name".to_owned(), "must not be empty"));
            }
            name
        }
        None => var(SERVICE_NAME_VAR).unwrap_or_else(|| DEFAULT_SERVICE_NAME.to_owned()),
    };
    Ok(Some(Telemetry { traces_endpoint, service_name }))
}

/// An error about a value that came from the environment, placed at `line`.
fn at(check: &Checker<'_>, line: usize, variable: &str, message: String) -> ConfigError {
    ConfigError::Invalid { path: check.label.to_owned(), line, key: variable.to_owned(), message }
}

/// The traces URL below collector base URL `base`, as the OTLP exporter
/// specification builds it from `OTEL_EXPORTER_OTLP_ENDPOINT`.
fn below(base: &str) -> Result<String, String> {
    checked(base)?;
    let base = base.trim_end_matches('/');
    Ok(format!("{base}/{TRACES_PATH}"))
}

/// Whether `url` is one the exporter can post to: `http://` or `https://`
/// with a host (the exporter sends with the providers' client, TLS included).
fn checked(url: &str) -> Result<(), String> {
    match url.parse::<http::Uri>() {
        Ok(uri) if matches!(uri.scheme_str(), Some("http" | "https")) && uri.host().is_some() => Ok(()),
        _ => Err(format!("{url:?} is not an http:// or https:// URL like http://127.0.0.1:4318")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

    use super::*;
    use crate::config::parse;

    use crate::config::ONE_ROUTE as ROUTE;

    /// The telemetry of a whole config file with `top` above its one route,
    /// read with `env` as the environment.
    fn load(top: &str, env: &[(&str, &str)]) -> Result<Option<Telemetry>, ConfigError> {
        let text = format!("{top}\n{ROUTE}");
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        let config = parse(&text, "t.toml", &move |name| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))?;
        Ok(config.telemetry)
    }

    fn traces(top: &str, env: &[(&str, &str)]) -> Option<Telemetry> {
        load(top, env).expect("a valid config")
    }

    #[test]
    fn traces_are_off_unless_something_turns_them_on() {
        assert_eq!(traces("", &[]), None, "no table and no variable: off");
        assert_eq!(traces("[telemetry]\nservice_name = \"x\"", &[]), None, "a table without an endpoint: off");
    }

    #[test]
    fn the_config_endpoint_is_a_base_url_and_wins_over_the_environment() {
        let on =
            traces("[telemetry]\notlp_endpoint = \"http://collector:4318/\"", &[(ENDPOINT_VAR, "http://env:4318")]);
        let on = on.expect("on");
        assert_eq!(on.traces_endpoint, "http://collector:4318/v1/traces");
        assert_eq!(on.service_name, DEFAULT_SERVICE_NAME);
    }

    #[test]
    fn the_standard_variables_turn_traces_on_when_the_config_does_not_say() {
        let base = traces("", &[(ENDPOINT_VAR, "http://otel:4318"), (SERVICE_NAME_VAR, "gateway")]).expect("on");
        assert_eq!(
            base,
            Telemetry { traces_endpoint: "http://otel:4318/v1/traces".into(), service_name: "gateway".into() }
        );
        let full = traces("", &[(TRACES_ENDPOINT_VAR, "http://otel:4318/custom"), (ENDPOINT_VAR, "http://x:1")]);
        assert_eq!(full.expect("on").traces_endpoint, "http://otel:4318/custom", "the signal's own URL is used as is");
    }

    #[test]
    fn enabled_false_and_otel_sdk_disabled_keep_traces_off() {
        let env = [(ENDPOINT_VAR, "http://otel:4318")];
        assert_eq!(traces("[telemetry]\nenabled = false", &env), None);
        assert_eq!(traces("", &[(ENDPOINT_VAR, "http://otel:4318"), (DISABLED_VAR, "true")]), None);
    }

    #[test]
    fn bad_endpoints_are_reported_with_their_key() {
        let err = load("[telemetry]\notlp_endpoint = \"ftp://collector:4318\"", &[]).unwrap_err().to_string();
        assert!(err.contains("telemetry.otlp_endpoint") && err.contains("not an http:// or https:// URL"), "{err}");
        let err = load("", &[(ENDPOINT_VAR, "collector:4318")]).unwrap_err().to_string();
        assert!(err.contains(ENDPOINT_VAR) && err.contains("not an http:// or https:// URL"), "{err}");
        let hosted = traces("[telemetry]\notlp_endpoint = \"https://otlp.example.com\"", &[]);
        assert_eq!(
            hosted.expect("on").traces_endpoint,
            "https://otlp.example.com/v1/traces",
            "a hosted collector over TLS"
        );
        let err = load("[telemetry]\notlp_endpoint = \"http://c:4318\"\nservice_name = \" \"", &[]).unwrap_err();
        assert!(err.to_string().contains("telemetry.service_name"), "{err}");
    }
}
