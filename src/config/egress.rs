//! A provider's way out: `ca_file`, a PEM file of CAs trusted beside the
//! system's (read at load, relative to the config's directory), and
//! `proxy`, a proxy URL or `"none"`; without `proxy`, the environment's
//! `HTTPS_PROXY` / `HTTP_PROXY` / `NO_PROXY`, read through the same lookup
//! as `${VAR}`.

use std::io::Read;
use std::path::{Path, PathBuf};

use toml::Spanned;

use super::ConfigError;
use super::raw::RawProvider;
use super::validate::Checker;
use crate::providers::client::{Egress, Proxy, Trust, proxy_from_env};

/// The largest `ca_file` read: a system bundle of every public root is
/// about 200 KiB.
const CA_FILE_LIMIT: u64 = 4 * 1024 * 1024;

/// What `proxy` says to go direct, whatever the environment says (an empty
/// value says the same, as curl's `--proxy ""` does).
pub const NO_PROXY_WORD: &str = "none";

impl Checker<'_> {
    /// The provider's egress, with its `base_url` already checked.
    pub(super) fn egress(&self, raw: &RawProvider, i: usize, base_url: &str) -> Result<Egress, ConfigError> {
        let trust = match &raw.ca_file {
            Some(value) => Some(self.ca_file(value, &format!("providers[{i}].ca_file"))?),
            None => None,
        };
        Ok(Egress::new(trust, self.proxy(raw, i, base_url)?))
    }

    /// The certificates of `ca_file`; a missing, unreadable or empty file,
    /// or one without a certificate, is an error.
    fn ca_file(&self, value: &Spanned<String>, key: &str) -> Result<Trust, ConfigError> {
        let written = self.expand(value, key)?;
        if written.trim().is_empty() {
            return Err(self.error(value, key.to_owned(), "must name a PEM file"));
        }
        let path = match self.dir {
            Some(dir) if Path::new(&written).is_relative() => dir.join(&written),
            _ => PathBuf::from(&written),
        };
        let shown = path.display();
        let pem = read_capped(&path).map_err(|why| self.error(value, key.to_owned(), format!("{shown}: {why}")))?;
        Trust::from_pem(&pem).map_err(|why| self.error(value, key.to_owned(), format!("{shown} {why}")))
    }

    /// The proxy: `proxy` when written (`"none"` or empty for none), else
    /// the one the environment names for the provider's scheme and host.
    fn proxy(&self, raw: &RawProvider, i: usize, base_url: &str) -> Result<Option<Proxy>, ConfigError> {
        let key = format!("providers[{i}].proxy");
        if let Some(value) = &raw.proxy {
            let url = self.expand(value, &key)?;
            if url.trim().is_empty() || url.trim().eq_ignore_ascii_case(NO_PROXY_WORD) {
                return Ok(None);
            }
            return Proxy::parse(&url).map(Some).map_err(|why| self.error(value, key, why));
        }
        let Ok(url) = base_url.parse::<http::Uri>() else { return Ok(None) };
        let https = url.scheme_str() == Some("https");
        let host = url.host().unwrap_or_default();
        let port = url.port_u16().unwrap_or(if https { 443 } else { 80 });
        proxy_from_env(self.env, https, host, port).map(|found| found.map(|(_, proxy)| proxy)).map_err(|(name, why)| {
            let message = format!(
                "the environment's {name}: {why}; `proxy = \"{NO_PROXY_WORD}\"` or a proxy URL here overrides it"
            );
            self.error(&raw.base_url, key, message)
        })
    }
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
