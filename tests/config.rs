//! Config loading: a good file becomes routes; every mistake is an error that
//! names the file, the line and the key.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

use std::time::Duration;

use baton::config::{ConfigError, parse};
use baton::providers::ProviderKind;

const GOOD: &str = r#"
listen = "127.0.0.1:9090"

[[providers]]
name = "gemini"
kind = "gemini"
base_url = "https://generativelanguage.googleapis.com"
api_key = "${GEMINI_API_KEY}"

[[providers]]
name = "openai"
kind = "openai"
base_url = "https://api.openai.com/v1"
api_key = "${OPENAI_API_KEY}"

[[routes]]
model = "chat"
first_token_timeout_ms = 1200
idle_timeout_ms = 10000
targets = [
  { provider = "gemini", model = "gemini-2.5-flash" },
  { provider = "openai", model = "gpt-4o-mini" },
]
"#;

fn env(name: &str) -> Option<String> {
    match name {
        "GEMINI_API_KEY" => Some("gem-secret".to_owned()),
        "OPENAI_API_KEY" => Some("oai-secret".to_owned()),
        _ => None,
    }
}

/// Asserts that `text` is refused at `line`, naming `key`, with a message that says `says`.
fn assert_named(text: &str, line: usize, key: &str, says: &str) {
    let (got_line, got_key, message) = error_of(text);
    assert_eq!((got_line, got_key.as_str()), (line, key));
    assert!(message.contains(says), "{message}");
}

fn error_of(text: &str) -> (usize, String, String) {
    match parse(text, "baton.toml", &env) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(ConfigError::Invalid { path, line, key, message }) => {
            assert_eq!(path, "baton.toml", "the file is named");
            (line, key, message)
        }
        Err(other) => panic!("unexpected error {other}"),
    }
}

#[test]
fn the_design_example_loads_with_variables_resolved() {
    let config = parse(GOOD, "baton.toml", &env).expect("valid");
    assert_eq!(config.listen.to_string(), "127.0.0.1:9090");
    assert_eq!(config.providers.len(), 2);
    assert_eq!(config.providers[0].kind, ProviderKind::Gemini);
    assert_eq!(config.providers[1].api_key.as_ref().map(|k| k.expose()), Some("oai-secret"));
    let route = config.route("chat").expect("route");
    assert!(
        route.targets.iter().all(|t| t.first_token_timeout == Duration::from_millis(1200)),
        "the route deadline applies to every target"
    );
    assert_eq!(route.idle_timeout, Duration::from_secs(10));
    let targets: Vec<(&str, &str)> =
        route.targets.iter().map(|t| (t.provider.name.as_str(), t.model.as_str())).collect();
    assert_eq!(targets, vec![("gemini", "gemini-2.5-flash"), ("openai", "gpt-4o-mini")]);
}

#[test]
fn secrets_never_print() {
    let config = parse(GOOD, "baton.toml", &env).expect("valid");
    let printed = format!("{config:?}");
    assert!(!printed.contains("gem-secret") && !printed.contains("oai-secret"), "keys leaked into Debug: {printed}");
}

#[test]
fn an_unknown_top_level_key_is_named() {
    assert_named("listen = \"127.0.0.1:1\"\nlisten_port = 3\n", 2, "listen_port", "unknown field");
}

#[test]
fn an_unknown_provider_key_is_named() {
    let text = GOOD.replace("api_key = \"${OPENAI_API_KEY}\"", "api_key = \"${OPENAI_API_KEY}\"\norganisation = \"x\"");
    assert_named(&text, 15, "organisation", "unknown field `organisation`");
}

#[test]
fn a_duplicate_provider_name_is_named() {
    let text = GOOD.replace("name = \"openai\"", "name = \"gemini\"");
    assert_named(&text, 11, "providers[1].name", "duplicate provider name \"gemini\"");
}

#[test]
fn a_target_naming_no_provider_is_named() {
    let text = GOOD.replace("{ provider = \"openai\", model", "{ provider = \"opanai\", model");
    assert_named(&text, 22, "routes[0].targets[1].provider", "no provider is named \"opanai\"");
}

#[test]
fn an_empty_route_is_named() {
    let text = "[[routes]]\nmodel = \"chat\"\ntargets = []\n";
    assert_named(text, 3, "routes[0].targets", "at least one target");
}

#[test]
fn a_missing_environment_variable_is_named() {
    let text = GOOD.replace("${OPENAI_API_KEY}", "${OPENAI_KEY_TYPO}");
    assert_named(&text, 14, "providers[1].api_key", "OPENAI_KEY_TYPO is not set");
}

#[test]
fn other_mistakes_are_named() {
    let cases = [
        (GOOD.replace("kind = \"openai\"", "kind = \"opnai\""), 12, "providers[1].kind", "unknown kind"),
        (
            GOOD.replace("https://api.openai.com/v1", "api.openai.com"),
            13,
            "providers[1].base_url",
            "not an http(s) URL",
        ),
        (
            GOOD.replace("first_token_timeout_ms = 1200", "first_token_timeout_ms = 0"),
            18,
            "routes[0].first_token_timeout_ms",
            "at least 1 ms",
        ),
        (GOOD.replace("127.0.0.1:9090", "localhost"), 2, "listen", "not an address"),
        (
            GOOD.replace("kind = \"openai\"", "kind = \"openai\"\napi = \"assistants\""),
            13,
            "providers[1].api",
            "unknown api",
        ),
        (
            GOOD.replace("kind = \"gemini\"", "kind = \"gemini\"\napi = \"responses\""),
            7,
            "providers[0].api",
            "speaks one API",
        ),
        (GOOD.replace("${OPENAI_API_KEY}", "sk-line\\nbreak"), 14, "providers[1].api_key", "HTTP header"),
        (GOOD.replace("idle_timeout_ms = 10000", "idle_timeout_ms = \"ten\""), 19, "idle_timeout_ms", "invalid type"),
        (
            format!("{GOOD}\n[[routes]]\nmodel = \"chat\"\ntargets = [{{ provider = \"openai\", model = \"x\" }}]\n"),
            26,
            "routes[1].model",
            "duplicate route",
        ),
    ];
    for (text, line, key, needle) in cases {
        let (got_line, got_key, message) = error_of(&text);
        assert_eq!((got_line, got_key.as_str()), (line, key), "for {needle}: {message}");
        assert!(message.contains(needle), "expected {needle:?} in {message:?}");
    }
}

#[test]
fn the_error_reads_file_line_key_message() {
    let err = parse("bogus = 1\n", "conf/baton.toml", &env).expect_err("invalid");
    assert!(err.to_string().starts_with("conf/baton.toml:1: bogus: unknown field `bogus`"), "{err}");
}

#[test]
fn defaults_fill_what_is_left_out() {
    let text = "[[providers]]\nname = \"a\"\nkind = \"anthropic\"\nbase_url = \"https://api.anthropic.com\"\n\n\
                [[routes]]\nmodel = \"chat\"\ntargets = [{ provider = \"a\", model = \"claude\" }]\n";
    let config = parse(text, "baton.toml", &env).expect("valid");
    assert_eq!(config.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(config.max_body_bytes, 32 * 1024 * 1024, "what Anthropic accepts");
    assert_eq!(config.max_body_bytes_in_flight, 256 * 1024 * 1024);
    assert_eq!(config.routes[0].targets[0].first_token_timeout, Duration::from_secs(10));
    assert_eq!(config.routes[0].idle_timeout, Duration::from_secs(30));
    assert!(config.providers[0].api_key.is_none());
}

fn checked(text: &str, vars: &[(&str, &str)]) -> Result<(baton::config::Config, Vec<String>), ConfigError> {
    let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    baton::config::parse_with_warnings(text, "t.toml", &move |name| {
        vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    })
}

#[test]
fn a_variable_may_carry_a_default_and_listen_may_name_a_host() {
    let text = "listen = \"localhost:${PORT:-8181}\"\n\n[[providers]]\nname = \"o\"\nkind = \"openai\"\nbase_url = \"${BASE:-http://127.0.0.1:9/v1}\"\n\n[[routes]]\nmodel = \"chat\"\ntargets = [{ provider = \"o\", model = \"m\" }, { provider = \"o\", model = \"n\" }]\n";
    let (config, _) = checked(text, &[("PORT", "")]).expect("defaults fill unset and empty variables");
    assert_eq!(config.listen.port(), 8181);
    assert!(config.listen.ip().is_loopback(), "localhost resolves to a loopback address");
    assert_eq!(config.providers[0].account.base_url, "http://127.0.0.1:9/v1");
    let (config, _) = checked(text, &[("BASE", "http://10.1.1.1/v1")]).expect("a set variable wins");
    assert_eq!(config.providers[0].account.base_url, "http://10.1.1.1/v1");
}

#[test]
fn every_mistake_is_reported_at_once_each_with_its_line_and_key() {
    let text = "[[providers]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://a/v1\"\napi_key = \"${A_KEY}\"\n\n\
                [[providers]]\nname = \"b\"\nkind = \"anthropic\"\nbase_url = \"http://b\"\napi_key = \"${B_KEY}\"\n\n\
                [[providers]]\nname = \"c\"\nkind = \"gemini\"\nbase_url = \"http://c\"\napi_key = \"${C_KEY}\"\n\n\
                [[routes]]\nmodel = \"chat\"\nfirst_token_timeout_ms = 0\ntargets = [{ provider = \"a\", model = \"m\" }]\n";
    let err = checked(text, &[]).expect_err("three missing variables and a zero deadline");
    let report = err.to_string();
    for expected in [
        "t.toml:5: providers[0].api_key: environment variable A_KEY is not set",
        "t.toml:11: providers[1].api_key: environment variable B_KEY is not set",
        "t.toml:17: providers[2].api_key: environment variable C_KEY is not set",
        "t.toml:21: routes[0].first_token_timeout_ms: must be at least 1 ms",
    ] {
        assert!(report.contains(expected), "expected {expected:?} in:\n{report}");
    }
    assert_eq!(report.lines().count(), 4, "one line each, no echo of a broken provider through its routes:\n{report}");
}

#[test]
fn an_empty_config_is_an_error() {
    let err = checked("", &[]).expect_err("nothing to serve");
    assert!(err.to_string().contains("t.toml:1: routes: the config has no [[routes]]"), "{err}");
}

#[test]
fn likely_mistakes_are_warned_about_without_failing() {
    let text = "[[providers]]\nname = \"o\"\nkind = \"openai\"\nbase_url = \"https://api.openai.com\"\n\n\
                [[routes]]\nmodel = \"chat\"\nfirst_token_timeout_ms = 3000\ntargets = [{ provider = \"o\", model = \"o3-mini\" }]\n";
    let (_, warnings) = checked(text, &[]).expect("valid");
    let all = warnings.join("\n");
    assert!(
        all.contains("t.toml:4: providers[0].base_url: \"https://api.openai.com\" has no version segment"),
        "{all}"
    );
    assert!(all.contains("t.toml:9: routes[0].targets: every target uses provider \"o\""), "{all}");
    assert!(all.contains("routes[0].targets[0].first_token_timeout_ms: 3000 ms is short for \"o3-mini\""), "{all}");
    let (_, none) = checked(GOOD, &[("GEMINI_API_KEY", "k"), ("OPENAI_API_KEY", "k")]).expect("valid");
    assert!(none.is_empty(), "a good config has nothing to warn about: {none:?}");
}

#[test]
fn a_drill_that_spares_an_ordered_route_s_first_target_is_warned_about() {
    let route = "[[providers]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\n\
                 [[providers]]\nname = \"b\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:8/v1\"\n\n\
                 [[routes]]\nmodel = \"chat\"\ntargets = [{ provider = \"a\", model = \"m\" }, { provider = \"b\", model = \"n\" }]\n\n";
    let drill = |fail: &str| format!("{route}[[drills]]\nroute = \"chat\"\nevery = \"1h\"\nfail = [{fail}]\n");
    let (_, warnings) = checked(&drill("\"b=http_5xx\""), &[]).expect("valid");
    let said = warnings.iter().find(|line| line.contains("drills[0].fail")).cloned().unwrap_or_default();
    assert!(said.contains("tries \"a\" first") && said.contains("without exercising any failover"), "{warnings:?}");
    let (_, warnings) = checked(&drill("\"a=http_5xx\""), &[]).expect("valid");
    assert!(
        !warnings.iter().any(|line| line.contains("drills[0]")),
        "failing the first target is a drill: {warnings:?}"
    );
}

#[test]
fn an_anthropic_or_gemini_base_url_ending_in_a_version_is_warned_about() {
    for (kind, url, adds) in [
        ("anthropic", "https://api.anthropic.com/v1", "/v1/messages"),
        ("gemini", "https://generativelanguage.googleapis.com/v1beta/", "/v1beta/models/"),
    ] {
        let text = format!(
            "[[providers]]\nname = \"p\"\nkind = \"{kind}\"\nbase_url = \"{url}\"\n\n\
             [[routes]]\nmodel = \"chat\"\ntargets = [{{ provider = \"p\", model = \"m\" }}, {{ provider = \"p\", model = \"n\" }}]\n"
        );
        let (_, warnings) = checked(&text, &[]).expect("valid");
        let said = warnings.iter().find(|line| line.contains("providers[0].base_url")).cloned().unwrap_or_default();
        assert!(said.starts_with("t.toml:4: providers[0].base_url:") && said.contains(adds), "{kind}: {warnings:?}");
        assert!(said.contains("upstream_not_found"), "{said}");
        let fine = text.replace(url, url.trim_end_matches('/').rsplit_once('/').map_or(url, |(host, _)| host));
        let (_, warnings) = checked(&fine, &[]).expect("valid");
        assert!(!warnings.iter().any(|line| line.contains("base_url")), "{kind} without the version: {warnings:?}");
    }
}

const ONE_ROUTE: &str = "[[providers]]\nname = \"o\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\n[[routes]]\nmodel = \"chat\"\ntargets = [{ provider = \"o\", model = \"m\" }]\n\n[[routes]]\nmodel = \"cheap\"\ntargets = [{ provider = \"o\", model = \"n\" }]\n";

#[test]
fn client_keys_come_from_the_environment_or_as_hashes_and_name_their_routes() {
    let hash = "2b0e2d5e7f3ad9d6b2c3c53e3e7b5e6d09e4b8f5c51c8f7e2f1b8a9c6d5e4f3a";
    let text = format!(
        "[[keys]]\nname = \"web\"\nkey = \"${{WEB_KEY}}\"\n\n[[keys]]\nname = \"batch\"\nkey_sha256 = \"{hash}\"\nroutes = [\"cheap\"]\n\n{ONE_ROUTE}"
    );
    let (config, _) = checked(&text, &[("WEB_KEY", "sk-web-0123456789abcdef")]).expect("valid keys");
    let keys = config.access.keys.keys();
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0].sha256, baton::access::ClientKey::hash("sk-web-0123456789abcdef"));
    assert_eq!(keys[1].routes.as_deref(), Some(&["cheap".to_owned()][..]));
    let bad = format!(
        "[[keys]]\nname = \"x\"\nkey = \"short\"\nroutes = [\"nope\"]\n\n[[keys]]\nname = \"y\"\n\n{ONE_ROUTE}"
    );
    let report = checked(&bad, &[]).expect_err("two bad keys").to_string();
    assert!(report.contains("t.toml:3: keys[0].key: must be at least 16 characters"), "{report}");
    assert!(report.contains("keys[1]: needs exactly one of `key` and `key_sha256`"), "{report}");
    let drill = format!("[[keys]]\nname = \"drill\"\nkey = \"sk-drill-0123456789ab\"\n\n{ONE_ROUTE}");
    let report = checked(&drill, &[]).expect_err("a reserved name").to_string();
    assert!(report.contains("keys[0].name: \"drill\" is reserved"), "{report}");
}

#[test]
fn a_non_loopback_address_without_keys_is_refused_unless_asked_for() {
    let open = format!("listen = \"0.0.0.0:8080\"\n{ONE_ROUTE}");
    let report = checked(&open, &[]).expect_err("an open relay").to_string();
    assert!(
        report.contains("t.toml:1: listen: 0.0.0.0:8080 is not a loopback address and no [[keys]] are configured"),
        "{report}"
    );
    let asked = format!("listen = \"0.0.0.0:8080\"\nallow_unauthenticated = true\n{ONE_ROUTE}");
    assert!(checked(&asked, &[]).is_ok(), "allow_unauthenticated = true serves it");
    let keyed =
        format!("listen = \"0.0.0.0:8080\"\n[[keys]]\nname = \"k\"\nkey = \"sk-0123456789abcdef\"\n\n{ONE_ROUTE}");
    assert!(checked(&keyed, &[]).is_ok(), "with keys it is no open relay");
}

/// `GOOD` with prices on its targets, a second route, a key with limits,
/// and `budgets` after it all.
fn priced(budgets: &str) -> String {
    let priced = GOOD
        .replace(
            "model = \"gemini-2.5-flash\" }",
            "model = \"gemini-2.5-flash\", price = { input_per_mtok = 0.30, output_per_mtok = 2.50, cached_input_per_mtok = 0.075 } }",
        )
        .replace("model = \"gpt-4o-mini\" }", "model = \"gpt-4o-mini\", price = { input_per_mtok = 0.15, output_per_mtok = 0.60 } }");
    format!(
        "max_usd_per_request = 1\n{priced}\n[[routes]]\nmodel = \"cheap\"\ntargets = [{{ provider = \"openai\", model = \"nano\" }}]\n\n\
         [[keys]]\nname = \"web\"\nkey_sha256 = \"{}\"\nrpm = 600\ntpm = 200000\nbudget = {{ usd_per_hour = 5.0, usd_per_day = 50 }}\n{budgets}",
        "ab".repeat(32)
    )
}

/// The 1-based line of the first line of `text` that contains `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|line| line.contains(needle)).map_or(0, |i| i + 1)
}

#[test]
fn prices_limits_and_budgets_load() {
    let text = priced(
        "\n[[budgets]]\nscope = \"global\"\nwindow = \"1h\"\nusd = 200\naction = \"downgrade\"\ndowngrade_to = \"cheap\"\nmax_usd_per_request = 0.5\n\
         \n[[budgets]]\nscope = \"route:chat\"\nwindow = \"1m\"\nusd = 2.5\naction = \"warn\"\n",
    );
    let config = parse(&text, "baton.toml", &env).expect("valid");
    let price = config.routes[0].targets[0].price.expect("a price");
    assert_eq!((price.input_per_mtok, price.output_per_mtok, price.cached_input_per_mtok), (0.30, 2.50, Some(0.075)));
    assert_eq!(config.routes[1].targets[0].price, None, "a price is optional");
    let key = &config.access.keys.keys()[0];
    assert_eq!((key.rpm, key.tpm), (Some(600), Some(200_000)));
    use baton::config::{BudgetAction, BudgetScope, BudgetWindow};
    let budgets: Vec<_> =
        config.budgets.budgets.iter().map(|b| (b.scope.to_string(), b.window, b.usd, b.action.clone())).collect();
    assert_eq!(
        budgets,
        [
            ("global".to_owned(), BudgetWindow::Hour, 200.0, BudgetAction::Downgrade("cheap".to_owned())),
            ("route:chat".to_owned(), BudgetWindow::Minute, 2.5, BudgetAction::Warn),
            ("key:web".to_owned(), BudgetWindow::Hour, 5.0, BudgetAction::Block),
            ("key:web".to_owned(), BudgetWindow::Day, 50.0, BudgetAction::Block),
        ]
    );
    assert_eq!(config.budgets.max_usd_per_request(Some("web"), "chat"), Some(0.5), "the lowest cap that covers it");
    assert_eq!(config.budgets.caps[0].scope, BudgetScope::Global, "the top-level cap is a global one");
}

#[test]
fn money_mistakes_are_named_with_their_keys() {
    let budget = |body: &str| priced(&format!("\n[[budgets]]\n{body}\n"));
    let cases = [
        (
            priced("").replace("input_per_mtok = 0.15", "input_per_mtok = -0.15"),
            "input_per_mtok = -0.15",
            "routes[0].targets[1].price.input_per_mtok",
            "USD per million tokens",
        ),
        (
            priced("").replace("output_per_mtok = 2.50", "output_per_mtok = nan"),
            "output_per_mtok = nan",
            "routes[0].targets[0].price.output_per_mtok",
            "USD per million tokens",
        ),
        (priced("").replace("rpm = 600", "rpm = 0"), "rpm = 0", "keys[0].rpm", "at least 1 per minute"),
        (
            priced("").replace("usd_per_hour = 5.0", "usd_per_hour = -5.0"),
            "usd_per_hour",
            "keys[0].budget.usd_per_hour",
            "above 0",
        ),
        (budget("scope = \"team:a\"\nwindow = \"1h\"\nusd = 1.0"), "team:a", "budgets[0].scope", "unknown scope"),
        (budget("scope = \"key:nobody\"\nwindow = \"1h\"\nusd = 1.0"), "key:nobody", "budgets[0].scope", "no key"),
        (budget("scope = \"global\"\nwindow = \"1w\"\nusd = 1.0"), "1w", "budgets[0].window", "unknown window"),
        (budget("scope = \"global\"\nwindow = \"1h\"\nusd = 0"), "usd = 0", "budgets[0].usd", "above 0"),
        (
            budget("scope = \"global\"\nwindow = \"1h\"\nusd = 1.0\naction = \"downgrade\""),
            "action = \"downgrade\"",
            "budgets[0].downgrade_to",
            "needs downgrade_to",
        ),
        (
            budget("scope = \"global\"\nwindow = \"1h\"\nusd = 1.0\naction = \"downgrade\"\ndowngrade_to = \"gone\""),
            "downgrade_to = \"gone\"",
            "budgets[0].downgrade_to",
            "no route is named \"gone\"",
        ),
        (
            budget("scope = \"global\"\nwindow = \"1h\"\nusd = 1.0\naction = \"shout\""),
            "shout",
            "budgets[0].action",
            "unknown action",
        ),
        (
            budget("scope = \"global\"\nwindow = \"1h\"\nusd = 1.0\ndowngrade_to = \"cheap\""),
            "downgrade_to",
            "budgets[0].downgrade_to",
            "only action \"downgrade\"",
        ),
        (budget("scope = \"global\"\nusd = 1.0"), "usd = 1.0", "budgets[0].window", "needs a window"),
        (
            budget("scope = \"global\"\nmax_usd_per_request = -1"),
            "max_usd_per_request = -1",
            "budgets[0].max_usd_per_request",
            "above 0",
        ),
        (
            priced("").replace("max_usd_per_request = 1", "max_usd_per_request = inf"),
            "max_usd_per_request",
            "max_usd_per_request",
            "finite",
        ),
    ];
    for (text, at, key, needle) in cases {
        let (line, got_key, message) = error_of(&text);
        assert_eq!((line, got_key.as_str()), (line_of(&text, at), key), "for {needle}: {message}");
        assert!(message.contains(needle), "expected {needle:?} in {message:?}");
    }
}

#[test]
fn every_unknown_key_and_wrong_type_is_reported_at_once_with_what_it_likely_meant() {
    let text = "[[providers]]\nname = \"o\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\napikey = \"k\"\n\n\
                [[routes]]\nmodel = \"chat\"\nfirst_token_timout_ms = 500\nidle_timeout_ms = \"soon\"\n\
                targets = [{ provider = \"o\", model = \"m\" }]\n";
    let err = checked(text, &[]).expect_err("three mistakes").to_string();
    assert!(err.contains("t.toml:5: apikey: unknown field `apikey`"), "{err}");
    assert!(err.contains("did you mean `api_key`?"), "{err}");
    assert!(err.contains("t.toml:9: first_token_timout_ms: unknown field"), "{err}");
    assert!(err.contains("did you mean `first_token_timeout_ms`?"), "{err}");
    assert!(err.contains("t.toml:10: idle_timeout_ms: invalid type"), "{err}");
    let far = checked(&text.replace("apikey", "colour"), &[]).expect_err("unknown").to_string();
    let colour = far.lines().find(|line| line.contains("`colour`")).unwrap_or_default();
    assert!(!colour.is_empty() && !colour.contains("did you mean"), "no suggestion for a key like none: {far}");
}

#[test]
fn every_mistake_of_one_drill_is_reported() {
    let text =
        format!("{ONE_ROUTE}\n[[drills]]\nroute = \"chat\"\nevery = \"often\"\nexpect = \"silence\"\nmax_tokens = 0\n");
    let err = checked(&text, &[]).expect_err("three mistakes in one drill").to_string();
    for key in ["drills[0].every", "drills[0].expect", "drills[0].max_tokens"] {
        assert!(err.contains(key), "{key} is reported: {err}");
    }
}
