//! Config text for a test: one route "chat", built a target at a time, and
//! written to a file of its own where the process under test reads one.

use baton::mock::MockHandle;
use baton::providers::ProviderKind;

use super::raw::RawProvider;

/// Writes config `text` to a fresh temporary directory named after the test
/// process and `name`, so parallel tests never share a file.
pub fn config_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("baton-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("baton.toml");
    std::fs::write(&path, text).expect("write config");
    path
}

/// One `[[providers]]` entry for a provider at `base_url`.
pub fn provider_toml(name: &str, kind: ProviderKind, base_url: &str) -> String {
    // The simulated provider's address, for the keys that name it (Vertex's key file).
    let authority = base_url.split("://").nth(1).unwrap_or_default().split('/').next().unwrap_or_default();
    let addr = authority.parse().unwrap_or_else(|_| std::net::SocketAddr::from(([127, 0, 0, 1], 9)));
    let extra = kind.simulated().config_keys(addr);
    let extra = if extra.is_empty() { String::new() } else { format!("{extra}\n") };
    let kind = kind.config_keys();
    format!("[[providers]]\nname = \"{name}\"\n{kind}\nbase_url = \"{base_url}\"\n{extra}\n")
}

/// One target of the route and the provider it names.
struct Target {
    kind: ProviderKind,
    provider: String,
    provider_keys: Vec<String>,
    name: String,
    model: String,
    keys: Vec<String>,
}

/// A config whose route "chat" tries its targets in order. Each target's
/// provider is declared with it; `provider_keys`, `model` and `target_keys`
/// amend the target added last. Empty keys add nothing.
#[derive(Default)]
pub struct ChatConfig {
    top: Vec<String>,
    keys: Vec<String>,
    targets: Vec<Target>,
}

impl ChatConfig {
    pub fn new() -> ChatConfig {
        ChatConfig::default()
    }

    /// Top-level keys, written above every table.
    pub fn top(mut self, keys: &str) -> ChatConfig {
        if !keys.is_empty() {
            self.top.push(keys.to_owned());
        }
        self
    }

    /// Keys of the route itself.
    pub fn keys(mut self, keys: &str) -> ChatConfig {
        if !keys.is_empty() {
            self.keys.push(keys.to_owned());
        }
        self
    }

    /// The route's first-token and idle deadlines.
    pub fn deadlines(self, first_token_ms: u64, idle_ms: u64) -> ChatConfig {
        self.keys(&format!("first_token_timeout_ms = {first_token_ms}\nidle_timeout_ms = {idle_ms}"))
    }

    /// A target on a provider `name` of `kind` at `base_url`, asking for model `{name}-model`.
    pub fn provider(mut self, name: &str, kind: ProviderKind, base_url: &str) -> ChatConfig {
        self.targets.push(Target {
            kind,
            provider: provider_toml(name, kind, base_url).trim_end().to_owned(),
            provider_keys: Vec::new(),
            name: name.to_owned(),
            model: kind.simulated().model_named(&format!("{name}-model")),
            keys: Vec::new(),
        });
        self
    }

    /// A target on the simulated provider `mock`, named `name`.
    pub fn mock(self, name: &str, mock: &MockHandle) -> ChatConfig {
        self.provider(name, mock.provider_kind(), &mock.base_url())
    }

    /// A target on the raw provider `raw`, an OpenAI-kind provider named `name`.
    pub fn raw(self, name: &str, raw: &RawProvider) -> ChatConfig {
        self.provider(name, ProviderKind::OpenAi, &raw.base_url())
    }

    /// Keys of the last target's provider.
    pub fn provider_keys(mut self, keys: &str) -> ChatConfig {
        if !keys.is_empty() {
            self.last().provider_keys.push(keys.to_owned());
        }
        self
    }

    /// The model the last target asks for, in its kind's form (Bedrock's
    /// ids are `anthropic.…`).
    pub fn model(mut self, model: &str) -> ChatConfig {
        let target = self.last();
        target.model = target.kind.simulated().model_named(model);
        self
    }

    /// Keys inside the last target's `{ … }`.
    pub fn target_keys(mut self, keys: &str) -> ChatConfig {
        if !keys.is_empty() {
            self.last().keys.push(keys.to_owned());
        }
        self
    }

    fn last(&mut self) -> &mut Target {
        self.targets.last_mut().expect("a target to amend")
    }

    pub fn toml(&self) -> String {
        let mut text: String = self.top.iter().map(|keys| format!("{keys}\n")).collect();
        for target in &self.targets {
            // A key the test gives the provider replaces the one its kind's
            // simulated provider needs (Bedrock's `api_key`).
            let given = |line: &str| {
                let key = line.split('=').next().unwrap_or_default().trim();
                target
                    .provider_keys
                    .iter()
                    .flat_map(|keys| keys.lines())
                    .any(|given| given.split('=').next().unwrap_or_default().trim() == key && line.contains('='))
            };
            let provider: Vec<&str> = target.provider.lines().filter(|line| !given(line)).collect();
            text.push_str(&provider.join("\n"));
            for keys in &target.provider_keys {
                text.push_str(&format!("\n{keys}"));
            }
            text.push_str("\n\n");
        }
        let targets: Vec<String> = self
            .targets
            .iter()
            .map(|target| {
                let keys: String = target.keys.iter().map(|keys| format!(", {keys}")).collect();
                format!("{{ provider = \"{}\", model = \"{}\"{keys} }}", target.name, target.model)
            })
            .collect();
        let keys: String = self.keys.iter().map(|keys| format!("{keys}\n")).collect();
        text.push_str(&format!("[[routes]]\nmodel = \"chat\"\n{keys}targets = [{}]\n", targets.join(", ")));
        text
    }
}

/// A config with one provider per `(name, kind, base_url)` and one route
/// "chat" trying them in order.
pub fn route_toml(providers: &[(&str, ProviderKind, String)], first_token_ms: u64, idle_ms: u64) -> String {
    let route = providers.iter().fold(ChatConfig::new(), |route, (name, kind, url)| route.provider(name, *kind, url));
    route.deadlines(first_token_ms, idle_ms).toml()
}

/// A config naming the simulated providers in order, each as `{name}`.
pub fn mocks_toml(mocks: &[(&str, &MockHandle)], first_token_ms: u64, idle_ms: u64) -> String {
    let route = mocks.iter().fold(ChatConfig::new(), |route, (name, mock)| route.mock(name, mock));
    route.deadlines(first_token_ms, idle_ms).toml()
}
