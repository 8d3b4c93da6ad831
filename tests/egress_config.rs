//! A provider's `ca_file` and `proxy` at load time, and the environment's
//! `HTTPS_PROXY` / `HTTP_PROXY` / `NO_PROXY` read through the injected
//! lookup: what each resolves to, and every mistake named with its file,
//! line and key, without repeating a proxy's credentials.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::path::Path;

use baton::config::{Config, ConfigError, parse, parse_in};
use support::tls::TestCa;

/// One https provider, with `keys` added to it, and a route to it.
fn with_provider(base_url: &str, keys: &str) -> String {
    format!(
        "[[providers]]\nname = \"p\"\nkind = \"openai\"\nbase_url = \"{base_url}\"\n{keys}\n\n[[routes]]\nmodel = \"chat\"\ntargets = [{{ provider = \"p\", model = \"m\" }}]\n"
    )
}

fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    move |name| vars.iter().find(|(key, _)| key == name).map(|(_, value)| value.clone())
}

fn load(text: &str, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    parse(text, "baton.toml", &lookup(vars))
}

/// The proxy the provider's connections go through, as logs show it.
fn proxy_of(base_url: &str, keys: &str, vars: &[(&str, &str)]) -> Option<String> {
    let config = load(&with_provider(base_url, keys), vars).expect("valid");
    config.providers[0].egress.proxy().map(|proxy| proxy.url().to_owned())
}

fn error_of(text: &str, vars: &[(&str, &str)]) -> String {
    match load(text, vars) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(err @ ConfigError::Invalid { .. }) => err.to_string(),
        Err(other) => panic!("unexpected error {other}"),
    }
}

#[test]
fn the_environment_names_the_proxy_per_scheme_and_no_proxy_exempts_hosts() {
    let https = "https://api.openai.com/v1";
    let corp = [("HTTPS_PROXY", "http://corp:3128")];
    assert_eq!(proxy_of(https, "", &[]), None, "no variable, no proxy");
    assert_eq!(proxy_of(https, "", &corp).as_deref(), Some("http://corp:3128"));
    let both = [("https_proxy", "lower:1"), ("HTTPS_PROXY", "http://upper:2")];
    assert_eq!(proxy_of(https, "", &both).as_deref(), Some("http://lower:1"), "the lowercase form comes first");
    let plain_only = [("HTTP_PROXY", "http://plain:3128")];
    assert_eq!(proxy_of(https, "", &plain_only), None, "HTTP_PROXY is for http URLs");
    assert_eq!(proxy_of("http://vllm.lan:8000/v1", "", &plain_only).as_deref(), Some("http://plain:3128"));
    for no_proxy in ["openai.com", ".openai.com", "*.openai.com", "api.openai.com:443", "*", "x, openai.com"] {
        let vars = [corp[0], ("NO_PROXY", no_proxy)];
        assert_eq!(proxy_of(https, "", &vars), None, "NO_PROXY={no_proxy:?} goes direct");
    }
    for no_proxy in ["penai.com", "openai.com:8443", "10.0.0.0/8"] {
        let vars = [corp[0], ("no_proxy", no_proxy)];
        assert!(proxy_of(https, "", &vars).is_some(), "NO_PROXY={no_proxy:?} leaves it to the proxy");
    }
}

#[test]
fn a_provider_s_proxy_wins_over_the_environment_and_none_goes_direct() {
    let https = "https://api.openai.com/v1";
    let corp = [("HTTPS_PROXY", "http://corp:3128"), ("NO_PROXY", "openai.com")];
    assert_eq!(proxy_of(https, "proxy = \"http://own:8080\"", &corp).as_deref(), Some("http://own:8080"));
    assert_eq!(proxy_of(https, "proxy = \"none\"", &corp[..1]), None);
    assert_eq!(proxy_of(https, "proxy = \"\"", &corp[..1]), None, "empty, as curl's --proxy \"\"");
    let from_var = [("EGRESS", "http://var:1")];
    assert_eq!(proxy_of(https, "proxy = \"${EGRESS}\"", &from_var).as_deref(), Some("http://var:1"));
}

#[test]
fn proxy_credentials_are_kept_but_never_shown() {
    let vars = [("PROXY_PASSWORD", "hunter2")];
    let config = load(&with_provider("https://h/v1", "proxy = \"http://alice:${PROXY_PASSWORD}@corp:3128\""), &vars)
        .expect("ok");
    let proxy = config.providers[0].egress.proxy().expect("a proxy");
    assert_eq!(proxy.url(), "http://corp:3128");
    assert!(proxy.has_credentials());
    let printed = format!("{config:?}");
    assert!(!printed.contains("hunter2") && !printed.contains("alice"), "credentials in Debug: {printed}");
}

#[test]
fn proxy_mistakes_are_named_without_their_credentials() {
    for (keys, says) in [
        ("proxy = \"socks5://alice:hunter2@corp:1080\"", "a socks5:// proxy is not supported"),
        ("proxy = \"https://alice:hunter2@corp:3128\"", "a https:// proxy is not supported"),
        ("proxy = \"http://alice:hunter2@corp:99999\"", "the port is not a number"),
        ("proxy = \"http://alice:hunter2@corp:3128/path\"", "a proxy URL has no path"),
        ("proxy = \"http://alice:hunter2@\"", "names no host"),
    ] {
        let text = with_provider("https://h/v1", keys);
        let err = error_of(&text, &[]);
        assert!(err.starts_with("baton.toml:5: providers[0].proxy: "), "{keys}: {err}");
        assert!(err.contains(says), "{keys}: {err}");
        assert!(!err.contains("hunter2") && !err.contains("alice"), "{keys}: credentials in {err}");
    }
    let vars = [("HTTPS_PROXY", "socks5://alice:hunter2@corp:1080")];
    let err = error_of(&with_provider("https://h/v1", ""), &vars);
    assert!(err.starts_with("baton.toml:4: providers[0].proxy: the environment's HTTPS_PROXY: a socks5://"), "{err}");
    assert!(err.contains("proxy = \\\"none\\\"") || err.contains("proxy = \"none\""), "says how to override: {err}");
    assert!(!err.contains("hunter2"), "{err}");
    assert!(
        load(&with_provider("https://h/v1", "proxy = \"none\""), &vars).is_ok(),
        "overridden, the variable is unread"
    );
    let exempt = [vars[0], ("NO_PROXY", "h")];
    assert!(load(&with_provider("https://h/v1", ""), &exempt).is_ok(), "exempt, the variable is unread");
}

#[test]
fn a_ca_file_is_read_at_load_relative_to_the_config_s_directory() {
    let ca = TestCa::new("config");
    let path = ca.write_pem("egress-config", "private-ca.pem");
    let dir = path.parent().expect("a directory");
    let relative = with_provider("https://vllm.internal/v1", "ca_file = \"private-ca.pem\"");
    let config = parse_in(&relative, "baton.toml", &lookup(&[]), Some(dir)).expect("found next to the config");
    assert_eq!(config.providers[0].egress.trust().map(|trust| trust.certificates()), Some(1));
    let file = dir.join("baton.toml");
    std::fs::write(&file, &relative).expect("write the config");
    assert!(baton::config::load(&file).is_ok(), "a config file reads its ca_file from its own directory");
    let absolute = with_provider("https://vllm.internal/v1", &format!("ca_file = {:?}", path.display().to_string()));
    assert!(load(&absolute, &[]).is_ok(), "an absolute path is read as written");
    let bundle = dir.join("bundle.pem");
    std::fs::write(&bundle, format!("{}{}", ca.pem, TestCa::new("second").pem)).expect("write the bundle");
    let config = parse_in(&relative.replace("private-ca.pem", "bundle.pem"), "baton.toml", &lookup(&[]), Some(dir));
    assert_eq!(config.expect("a bundle").providers[0].egress.trust().map(|trust| trust.certificates()), Some(2));
}

#[test]
fn a_ca_file_that_is_missing_empty_or_holds_no_certificate_is_named() {
    let dir = std::env::temp_dir().join(format!("baton-test-{}-egress-bad-ca", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("empty.pem"), "").expect("write");
    std::fs::write(dir.join("garbage.pem"), "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
        .expect("write");
    std::fs::write(
        dir.join("key.pem"),
        "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n",
    )
    .expect("write");
    let cases = [
        ("ca_file = \"missing.pem\"", "missing.pem: cannot read it"),
        ("ca_file = \"empty.pem\"", "empty.pem holds no certificate"),
        ("ca_file = \"key.pem\"", "key.pem holds no certificate"),
        ("ca_file = \"garbage.pem\"", "garbage.pem cannot be trusted"),
        ("ca_file = \".\"", ": cannot read it"),
        ("ca_file = \"\"", "must name a PEM file"),
        ("ca_file = \"${NO_SUCH_VAR}\"", "environment variable NO_SUCH_VAR is not set"),
    ];
    for (keys, says) in cases {
        let text = with_provider("https://h/v1", keys);
        let err = parse_in(&text, "conf/baton.toml", &lookup(&[]), Some(&dir)).map(|_| ()).expect_err(keys).to_string();
        assert!(err.starts_with("conf/baton.toml:5: providers[0].ca_file: "), "{keys}: {err}");
        assert!(err.contains(says), "{keys}: {err}");
    }
    let elsewhere = with_provider("https://h/v1", "ca_file = \"empty.pem\"");
    let err =
        parse_in(&elsewhere, "b.toml", &lookup(&[]), Some(Path::new("/nonexistent"))).map(|_| ()).expect_err("no");
    assert!(err.to_string().contains("/nonexistent/empty.pem"), "the path tried is named: {err}");
}
