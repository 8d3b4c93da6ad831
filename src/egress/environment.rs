//! The proxy the environment names for a provider, read as curl and the
//! SDKs read it: `https_proxy` / `HTTPS_PROXY` for `https` URLs,
//! `http_proxy` / `HTTP_PROXY` for `http` ones (the lowercase form first),
//! and `no_proxy` / `NO_PROXY` for the hosts that go direct. The variables
//! are read through a lookup the caller passes, once, when the config loads.

use std::net::IpAddr;

use super::Proxy;

/// The proxy `env` names for `host:port` over `https` or plain http: none
/// when no variable is set or `NO_PROXY` lists the host. The variable's
/// name comes with the proxy, and with the error when its value is not a
/// proxy URL (the error never repeats the value).
pub fn proxy_from_env(
    env: &dyn Fn(&str) -> Option<String>,
    https: bool,
    host: &str,
    port: u16,
) -> Result<Option<(&'static str, Proxy)>, (&'static str, String)> {
    let names = if https { ["https_proxy", "HTTPS_PROXY"] } else { ["http_proxy", "HTTP_PROXY"] };
    let Some((name, url)) = first_set(env, names) else { return Ok(None) };
    if let Some((_, list)) = first_set(env, ["no_proxy", "NO_PROXY"])
        && NoProxy::parse(&list).matches(host, port)
    {
        return Ok(None);
    }
    Proxy::parse(&url).map(|proxy| Some((name, proxy))).map_err(|why| (name, why))
}

/// The first of `names` set to something other than blanks, with its value.
fn first_set(env: &dyn Fn(&str) -> Option<String>, names: [&'static str; 2]) -> Option<(&'static str, String)> {
    names.into_iter().find_map(|name| env(name).filter(|value| !value.trim().is_empty()).map(|value| (name, value)))
}

/// A `NO_PROXY` list: hosts, domains and addresses reached without a proxy.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NoProxy {
    /// `*`: nothing goes through a proxy.
    everything: bool,
    entries: Vec<Entry>,
}

/// One entry, limited to one port when it names one.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    pattern: Pattern,
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    /// A name: itself and every name under it.
    Domain(String),
    /// An address, or a network of them (`10.0.0.0/8`).
    Network(IpAddr, u8),
}

impl NoProxy {
    /// Reads a comma- (or space-) separated list. An entry is `*`; a host
    /// or domain, which also covers every name under it (a leading `.` or
    /// `*.` is the same); an IP address or a CIDR network; any of them with
    /// `:port` (IPv6 as `[::1]:port`) to cover that port only. Entries
    /// that are none of these are ignored, as curl ignores them.
    pub fn parse(list: &str) -> NoProxy {
        let mut no_proxy = NoProxy::default();
        for item in list.split([',', ' ', '\t']).map(str::trim).filter(|item| !item.is_empty()) {
            if item == "*" {
                no_proxy.everything = true;
            } else if let Some(entry) = Entry::parse(item) {
                no_proxy.entries.push(entry);
            }
        }
        no_proxy
    }

    /// Whether `host:port` goes direct.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        if self.everything {
            return true;
        }
        let host = host.trim_start_matches('[').trim_end_matches(']').trim_end_matches('.').to_ascii_lowercase();
        let address = host.parse::<IpAddr>().ok();
        self.entries.iter().filter(|entry| entry.port.is_none_or(|only| only == port)).any(|entry| {
            match (&entry.pattern, address) {
                (Pattern::Network(network, bits), Some(address)) => contains(*network, *bits, address),
                (Pattern::Domain(domain), None) => {
                    host == *domain || host.strip_suffix(domain.as_str()).is_some_and(|under| under.ends_with('.'))
                }
                _ => false,
            }
        })
    }
}

impl Entry {
    fn parse(item: &str) -> Option<Entry> {
        let (host, port) = split_port(item)?;
        let pattern = match host.split_once('/') {
            Some((address, bits)) => {
                let address = address.parse::<IpAddr>().ok()?;
                let bits = bits.parse::<u8>().ok().filter(|bits| *bits <= max_bits(address))?;
                Pattern::Network(address, bits)
            }
            None => match host.parse::<IpAddr>() {
                Ok(address) => Pattern::Network(address, max_bits(address)),
                Err(_) => {
                    let domain = host.trim_start_matches("*.").trim_start_matches('.').trim_end_matches('.');
                    if domain.is_empty() {
                        return None;
                    }
                    Pattern::Domain(domain.to_ascii_lowercase())
                }
            },
        };
        Some(Entry { pattern, port })
    }
}

/// `host` and its port, if any: `[v6]:port`, `host:port`, or a bare IPv6
/// address (more than one colon, no brackets). `None` for a port that is
/// not a number.
fn split_port(item: &str) -> Option<(&str, Option<u16>)> {
    if let Some(v6) = item.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        return match after.strip_prefix(':') {
            Some(port) => Some((host, Some(port.parse().ok()?))),
            None => Some((host, None)),
        };
    }
    match item.split_once(':') {
        Some((host, port)) if !port.contains(':') => Some((host, Some(port.parse().ok()?))),
        _ => Some((item, None)),
    }
}

fn max_bits(address: IpAddr) -> u8 {
    if address.is_ipv4() { 32 } else { 128 }
}

/// Whether `address` lies in `network/bits`.
fn contains(network: IpAddr, bits: u8, address: IpAddr) -> bool {
    let (network, address, width) = match (network, address) {
        (IpAddr::V4(network), IpAddr::V4(address)) => {
            (u128::from(network.to_bits()), u128::from(address.to_bits()), 32)
        }
        (IpAddr::V6(network), IpAddr::V6(address)) => (network.to_bits(), address.to_bits(), 128),
        _ => return false,
    };
    let shift = width - u32::from(bits);
    if shift >= 128 {
        return true;
    }
    (network >> shift) == (address >> shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_proxy_covers_hosts_domains_addresses_networks_and_ports() {
        let list =
            NoProxy::parse(" internal.corp, .svc.local,*.lan, 10.0.0.0/8 ,127.0.0.1, [::1]:8443, vllm:8000,bad/99");
        let direct = [
            ("internal.corp", 443),
            ("api.internal.corp", 443),
            ("a.svc.local", 80),
            ("svc.local", 80),
            ("box.lan", 80),
            ("10.1.2.3", 443),
            ("127.0.0.1", 9),
            ("[::1]", 8443),
            ("vllm", 8000),
            ("Internal.Corp.", 443),
        ];
        for (host, port) in direct {
            assert!(list.matches(host, port), "{host}:{port} goes direct");
        }
        let proxied =
            [("api.openai.com", 443), ("notinternal.corp", 443), ("11.0.0.1", 443), ("[::1]", 443), ("vllm", 8001)];
        for (host, port) in proxied {
            assert!(!list.matches(host, port), "{host}:{port} goes through the proxy");
        }
        assert!(NoProxy::parse("*").matches("anything", 1));
        assert!(!NoProxy::parse("").matches("anything", 1));
    }

    #[test]
    fn the_lowercase_variable_comes_first_and_no_proxy_wins() {
        let env = |name: &str| match name {
            "https_proxy" => Some("http://lower:1".to_owned()),
            "HTTPS_PROXY" => Some("http://upper:1".to_owned()),
            "HTTP_PROXY" => Some("http://plain:1".to_owned()),
            "NO_PROXY" => Some("direct.corp".to_owned()),
            _ => None,
        };
        let url = |https, host| {
            proxy_from_env(&env, https, host, 443).map(|found| found.map(|(name, p)| (name, p.url().to_owned())))
        };
        assert_eq!(url(true, "api.openai.com"), Ok(Some(("https_proxy", "http://lower:1".to_owned()))));
        assert_eq!(url(false, "api.openai.com"), Ok(Some(("HTTP_PROXY", "http://plain:1".to_owned()))));
        assert_eq!(url(true, "x.direct.corp"), Ok(None));
        assert_eq!(proxy_from_env(&|_| None, true, "h", 1).map(|found| found.is_some()), Ok(false));
    }
}
