//! `[[providers]]`: one upstream API account each — its kind, where it is,
//! its key, its breaker, its quota — and its way out: `ca_file`, a PEM file
//! of CAs trusted beside the system's (read at load, relative to the
//! config's directory), and `proxy`, a proxy URL or `"none"`; without
//! `proxy`, the environment's `HTTPS_PROXY` / `HTTP_PROXY` / `NO_PROXY`,
//! read through the same lookup as `${VAR}`.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use super::breaker::{BreakerSettings, RawBreaker, breaker_settings};
use super::check::Checker;
use super::error::ConfigError;
use crate::egress::{Egress, Proxy, Trust, proxy_from_env};
use crate::providers::{Account, ProviderKind, Settings};
use crate::secret::Secret;

/// The largest `ca_file` read: a system bundle of every public root is
/// about 200 KiB.
const CA_FILE_LIMIT: u64 = 4 * 1024 * 1024;

/// What `proxy` says to go direct, whatever the environment says (an empty
/// value says the same, as curl's `--proxy ""` does).
pub const NO_PROXY_WORD: &str = "none";

/// One `[[providers]]` entry as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProvider {
    pub name: Spanned<String>,
    pub kind: Spanned<String>,
    pub api: Option<Spanned<String>>,
    pub base_url: Option<Spanned<String>>,
    pub api_key: Option<Spanned<String>>,
    pub region: Option<Spanned<String>>,
    pub project: Option<Spanned<String>>,
    pub api_version: Option<Spanned<String>>,
    pub credentials_file: Option<Spanned<String>>,
    pub credentials: Option<Spanned<String>>,
    pub aws_access_key_id: Option<Spanned<String>>,
    pub aws_secret_access_key: Option<Spanned<String>>,
    pub aws_session_token: Option<Spanned<String>>,
    pub breaker: Option<Spanned<RawBreaker>>,
    pub rpm: Option<Spanned<u64>>,
    pub tpm: Option<Spanned<u64>>,
    pub ca_file: Option<Spanned<String>>,
    pub proxy: Option<Spanned<String>>,
}

/// One upstream API account.
#[derive(Debug)]
pub struct Provider {
    /// Unique name, shown in headers, logs and errors.
    pub name: String,
    /// The wire dialect.
    pub kind: ProviderKind,
    /// The gateway's key, if the provider takes one.
    pub api_key: Option<Secret>,
    /// What its kind made of its settings: its base URL (the kind's SDK
    /// convention), its options and its credential beyond a key.
    pub account: Account,
    /// When the provider's circuit breaker opens.
    pub breaker: BreakerSettings,
    /// The provider's quota for this account, requests per minute: a
    /// target over it is skipped (`over_quota`).
    pub rpm: Option<u64>,
    /// The provider's quota, tokens per minute (estimated before, settled after).
    pub tpm: Option<u64>,
    /// How its connections leave: the proxy they go through (`proxy`, or
    /// the environment's `HTTPS_PROXY` / `HTTP_PROXY` unless `NO_PROXY`
    /// names the host) and the CA trusted beside the system's (`ca_file`).
    pub egress: Egress,
}

/// Provider `i` as the rest of baton uses it: a known kind and API, an
/// http(s) `base_url`, a key a header can carry, its breaker, quota and egress.
pub(super) fn check(check: &Checker<'_>, raw: &RawProvider, i: usize) -> Result<Provider, ConfigError> {
    let key = |field: &str| format!("providers[{i}].{field}");
    let name = raw.name.get_ref().trim().to_owned();
    if name.is_empty() {
        return Err(check.error(&raw.name, key("name"), "must not be empty"));
    }
    let Some(kind) = ProviderKind::from_config_kind(raw.kind.get_ref()) else {
        let expected = ProviderKind::config_kinds().join(", ");
        let message = format!("unknown kind {:?}; expected one of {expected}", raw.kind.get_ref());
        return Err(check.error(&raw.kind, key("kind"), message));
    };
    let kind = match (&raw.api, kind) {
        (None, kind) => kind,
        (Some(api), ProviderKind::OpenAi) => match api.get_ref().as_str() {
            "chat_completions" => ProviderKind::OpenAi,
            "responses" => ProviderKind::OpenAiResponses,
            other => {
                let message = format!("unknown api {other:?}; expected chat_completions or responses");
                return Err(check.error(api, key("api"), message));
            }
        },
        (Some(api), kind) => {
            let message = format!("a {kind} provider speaks one API; `api` is for an openai-kind provider");
            return Err(check.error(api, key("api"), message));
        }
    };
    let base_url = match &raw.base_url {
        Some(written) => Some(http_url(check, written, &key("base_url"))?),
        None => None,
    };
    let api_key = header_secret(check, raw.api_key.as_ref(), &key("api_key"))?;
    let account = account(check, raw, kind, base_url.as_deref(), api_key.as_ref(), i)?;
    let breaker = match &raw.breaker {
        Some(breaker) => breaker_settings(check, breaker.get_ref(), &key("breaker"))?,
        None => BreakerSettings::default(),
    };
    let per_minute = |value: &Option<Spanned<u64>>, field: &str| match value {
        Some(n) if *n.get_ref() == 0 => Err(check.error(n, key(field), "must be at least 1 per minute")),
        Some(n) => Ok(Some(*n.get_ref())),
        None => Ok(None),
    };
    let (rpm, tpm) = (per_minute(&raw.rpm, "rpm")?, per_minute(&raw.tpm, "tpm")?);
    let egress = egress(check, raw, i, &account.base_url)?;
    Ok(Provider { name, kind, api_key, account, breaker, rpm, tpm, egress })
}

/// `value` expanded, when it is an http(s) URL with a host.
fn http_url(check: &Checker<'_>, value: &Spanned<String>, key: &str) -> Result<String, ConfigError> {
    let url = check.expand(value, key)?;
    match url.parse::<http::Uri>() {
        Ok(parsed) if matches!(parsed.scheme_str(), Some("http" | "https")) && parsed.host().is_some() => Ok(url),
        // The value as written: an expanded ${VAR} may hold a secret.
        _ => Err(check.error(value, key.to_owned(), format!("{:?} is not an http(s) URL", value.get_ref()))),
    }
}

/// A secret an HTTP header will carry (a key, a token), expanded.
fn header_secret(
    check: &Checker<'_>,
    value: Option<&Spanned<String>>,
    key: &str,
) -> Result<Option<Secret>, ConfigError> {
    let Some(value) = value else { return Ok(None) };
    match check.secret(value, key)? {
        Some(secret) if http::HeaderValue::from_str(&secret).is_err() => {
            Err(check.error(value, key.to_owned(), "contains characters an HTTP header cannot carry"))
        }
        secret => Ok(secret.map(Secret::new)),
    }
}

impl RawProvider {
    /// The settings a provider's kind reads ([`Settings`]), each by its key
    /// with where it is written: a kind refuses one by its key, and the
    /// refusal is reported at its line.
    fn kind_settings(&self) -> [(&'static str, Option<&Spanned<String>>); 10] {
        [
            ("base_url", self.base_url.as_ref()),
            ("api_key", self.api_key.as_ref()),
            ("region", self.region.as_ref()),
            ("project", self.project.as_ref()),
            ("api_version", self.api_version.as_ref()),
            ("credentials_file", self.credentials_file.as_ref()),
            ("credentials", self.credentials.as_ref()),
            ("aws_access_key_id", self.aws_access_key_id.as_ref()),
            ("aws_secret_access_key", self.aws_secret_access_key.as_ref()),
            ("aws_session_token", self.aws_session_token.as_ref()),
        ]
    }
}

/// What the provider's kind makes of its settings; a setting it refuses
/// is reported at that setting's line.
fn account(
    check: &Checker<'_>,
    raw: &RawProvider,
    kind: ProviderKind,
    base_url: Option<&str>,
    api_key: Option<&Secret>,
    i: usize,
) -> Result<Account, ConfigError> {
    let key = |field: &str| format!("providers[{i}].{field}");
    let plain = |value: &Option<Spanned<String>>, field: &str| match value {
        Some(value) => check.expand(value, &key(field)).map(Some),
        None => Ok(None),
    };
    let (region, project) = (plain(&raw.region, "region")?, plain(&raw.project, "project")?);
    let (api_version, credentials) = (plain(&raw.api_version, "api_version")?, plain(&raw.credentials, "credentials")?);
    let credentials_file = plain(&raw.credentials_file, "credentials_file")?.map(|file| match check.dir {
        Some(dir) if Path::new(&file).is_relative() => dir.join(file),
        _ => PathBuf::from(file),
    });
    let aws_access_key_id = header_secret(check, raw.aws_access_key_id.as_ref(), &key("aws_access_key_id"))?;
    let aws_secret_access_key =
        header_secret(check, raw.aws_secret_access_key.as_ref(), &key("aws_secret_access_key"))?;
    let aws_session_token = header_secret(check, raw.aws_session_token.as_ref(), &key("aws_session_token"))?;
    let settings = Settings {
        kind,
        base_url,
        api_key,
        region: region.as_deref(),
        project: project.as_deref(),
        api_version: api_version.as_deref(),
        credentials_file: credentials_file.as_deref(),
        credentials: credentials.as_deref(),
        aws_access_key_id: aws_access_key_id.as_ref(),
        aws_secret_access_key: aws_secret_access_key.as_ref(),
        aws_session_token: aws_session_token.as_ref(),
        env: check.env,
        secrets_optional: check.secrets_optional,
    };
    kind.adapter().configure(&settings).map_err(|refusal| {
        let at = raw.kind_settings().into_iter().find_map(|(name, at)| (name == refusal.key).then_some(at)).flatten();
        let name = key(refusal.key);
        match at {
            Some(at) => check.error(at, name, refusal.message),
            None => check.error(&raw.kind, name, refusal.message),
        }
    })
}

/// The provider's egress, with its `base_url` already checked.
fn egress(check: &Checker<'_>, raw: &RawProvider, i: usize, base_url: &str) -> Result<Egress, ConfigError> {
    let trust = match &raw.ca_file {
        Some(value) => Some(ca_file(check, value, &format!("providers[{i}].ca_file"))?),
        None => None,
    };
    Ok(Egress::new(trust, proxy(check, raw, i, base_url)?))
}

/// The certificates of `ca_file`; a missing, unreadable or empty file,
/// or one without a certificate, is an error.
fn ca_file(check: &Checker<'_>, value: &Spanned<String>, key: &str) -> Result<Trust, ConfigError> {
    let written = check.expand(value, key)?;
    if written.trim().is_empty() {
        return Err(check.error(value, key.to_owned(), "must name a PEM file"));
    }
    let path = match check.dir {
        Some(dir) if Path::new(&written).is_relative() => dir.join(&written),
        _ => PathBuf::from(&written),
    };
    let shown = path.display();
    let pem = read_capped(&path).map_err(|why| check.error(value, key.to_owned(), format!("{shown}: {why}")))?;
    Trust::from_pem(&pem).map_err(|why| check.error(value, key.to_owned(), format!("{shown} {why}")))
}

/// The proxy: `proxy` when written (`"none"` or empty for none), else
/// the one the environment names for the provider's scheme and host.
fn proxy(check: &Checker<'_>, raw: &RawProvider, i: usize, base_url: &str) -> Result<Option<Proxy>, ConfigError> {
    let key = format!("providers[{i}].proxy");
    if let Some(value) = &raw.proxy {
        let url = check.expand(value, &key)?;
        if url.trim().is_empty() || url.trim().eq_ignore_ascii_case(NO_PROXY_WORD) {
            return Ok(None);
        }
        return Proxy::parse(&url).map(Some).map_err(|why| check.error(value, key, why));
    }
    let Ok(url) = base_url.parse::<http::Uri>() else { return Ok(None) };
    let https = url.scheme_str() == Some("https");
    let host = url.host().unwrap_or_default();
    let port = url.port_u16().unwrap_or(if https { 443 } else { 80 });
    proxy_from_env(check.env, https, host, port).map(|found| found.map(|(_, proxy)| proxy)).map_err(|(name, why)| {
        let message =
            format!("the environment's {name}: {why}; `proxy = \"{NO_PROXY_WORD}\"` or a proxy URL here overrides it");
        match &raw.base_url {
            Some(written) => check.error(written, key, message),
            None => check.error(&raw.kind, key, message),
        }
    })
}

/// The file's bytes, if it is no larger than [`CA_FILE_LIMIT`].
fn read_capped(path: &Path) -> Result<Vec<u8>, String> {
    let file = std::fs::File::open(path).map_err(|err| format!("cannot read it: {err}"))?;
    let mut pem = Vec::new();
    file.take(CA_FILE_LIMIT + 1).read_to_end(&mut pem).map_err(|err| format!("cannot read it: {err}"))?;
    if pem.len() as u64 > CA_FILE_LIMIT {
        return Err(format!("is larger than {} MiB, too large for a CA file", CA_FILE_LIMIT / 1024 / 1024));
    }
    Ok(pem)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_setting_its_kind_refuses_is_reported_at_its_own_line() {
        for (setting, value) in
            [("api_version", "\"2024-10-21\""), ("region", "\"us-east-1\""), ("credentials", "\"metadata\"")]
        {
            let text = format!(
                "[[providers]]\nname = \"p\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n{setting} = {value}\n\n\
                 [[routes]]\nmodel = \"chat\"\ntargets = [{{ provider = \"p\", model = \"m\" }}]\n"
            );
            let error = crate::config::parse(&text, "t.toml", &|_| None).err().map(|err| err.to_string());
            let error = error.unwrap_or_default();
            assert!(error.starts_with(&format!("t.toml:5: providers[0].{setting}:")), "{error}");
        }
    }
}
