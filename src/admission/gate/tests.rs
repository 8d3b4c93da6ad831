//! The gate on paused time: key limits, each budget action and window,
//! and the per-request cost cap.

use std::time::Duration;

use super::*;
use crate::event::{Message, Role, Usage};
use crate::observe::{Ended, Settle};

const PROVIDERS: &str = "[[providers]]\nname = \"big\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n\n\
     [[providers]]\nname = \"small\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:2/v1\"\n\n\
     [[routes]]\nmodel = \"chat\"\ntargets = [\n\
       { provider = \"big\", model = \"b\", price = { input_per_mtok = 10.0, output_per_mtok = 30.0 } },\n\
       { provider = \"small\", model = \"s\", price = { input_per_mtok = 1.0, output_per_mtok = 2.0 } },\n]\n\n\
     [[routes]]\nmodel = \"cheap\"\ntargets = [{ provider = \"small\", model = \"s\" }]\n\n";

fn config(extra: &str) -> Config {
    let key =
        "[[keys]]\nname = \"web\"\nkey_sha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"\n";
    let text = format!("{PROVIDERS}{key}{extra}\n");
    match crate::config::parse(&text, "test.toml", &|_| None) {
        Ok(config) => config,
        Err(err) => panic!("test config: {err}\n{text}"),
    }
}

fn request(max_tokens: u32) -> ChatRequest {
    let messages = vec![Message::text(Role::User, "x".repeat(400))];
    ChatRequest { messages, max_tokens: Some(max_tokens), ..ChatRequest::default() }
}

struct Fixture {
    gate: RequestGate,
    config: Config,
}

impl Fixture {
    fn new(extra: &str) -> Self {
        Fixture { gate: RequestGate::new(Arc::new(Metrics::new())), config: config(extra) }
    }

    fn key(&self) -> &ClientKey {
        &self.config.access.keys.keys()[0]
    }

    fn admit_as(&self, key: Option<&ClientKey>, max_tokens: u32) -> Result<Admitted, Refusal> {
        let route = self.config.route("chat").map(Arc::clone).unwrap_or_else(|| panic!("route chat"));
        self.gate.admit(&self.config, key, &route, &request(max_tokens))
    }

    fn admit(&self, max_tokens: u32) -> Result<Admitted, Refusal> {
        self.admit_as(Some(self.key()), max_tokens)
    }

    /// Admits a request and ends it having cost `usd` with `usage`.
    fn spend(&self, usd: f64, usage: Usage) {
        let admitted = self.admit(10).unwrap_or_else(|refusal| panic!("refused: {refusal}"));
        end(admitted, Some(usd), usage, true);
    }
}

fn end(admitted: Admitted, cost_usd: Option<f64>, usage: Usage, committed: bool) {
    let ended =
        Ended { key: Some("web"), route: &admitted.route.model, provider: Some("big"), usage, committed, cost_usd };
    Box::new(admitted.ticket).settle(&ended);
}

fn used(input: u64, output: u64) -> Usage {
    Usage { input_tokens: Some(input), output_tokens: Some(output), ..Usage::default() }
}

#[tokio::test(start_paused = true)]
async fn a_key_over_its_rpm_waits_what_the_gcra_says() {
    let fixture = Fixture::new("rpm = 3\n");
    for i in 0..3 {
        assert!(fixture.admit(10).is_ok(), "request {i} of the burst");
    }
    let refusal = fixture.admit(10).err();
    assert!(matches!(refusal, Some(Refusal::RateLimited { unit: "requests", per_minute: 3, .. })), "{refusal:?}");
    assert_eq!(refusal.and_then(|r| r.retry_after()), Some(Duration::from_secs(20)), "one interval of 60 s / 3");
    tokio::time::advance(Duration::from_secs(20)).await;
    assert!(fixture.admit(10).is_ok(), "an interval later there is room for one");
    assert!(fixture.admit(10).is_err());
    assert!(fixture.admit_as(None, 10).is_ok(), "a request without a key is not held to the key's limits");
}

#[tokio::test(start_paused = true)]
async fn no_edge_of_a_minute_lets_a_key_twice_its_rpm() {
    let fixture = Fixture::new("rpm = 60\n");
    tokio::time::advance(Duration::from_millis(59_900)).await;
    let before = (0..120).filter(|_| fixture.admit(10).is_ok()).count();
    tokio::time::advance(Duration::from_millis(200)).await;
    let after = (0..120).filter(|_| fixture.admit(10).is_ok()).count();
    assert_eq!((before, after), (60, 0), "a fixed window would admit 60 more after its edge");
}

#[tokio::test(start_paused = true)]
async fn a_tpm_reservation_is_settled_to_the_usage_or_given_back() {
    // Each request reserves 100 input tokens (400 characters) + 900 output.
    let fixture = Fixture::new("tpm = 2500\n");
    let first = fixture.admit(900).unwrap_or_else(|r| panic!("{r}"));
    let second = fixture.admit(900).unwrap_or_else(|r| panic!("{r}"));
    let third = fixture.admit(900);
    assert!(matches!(third, Err(Refusal::RateLimited { unit: "tokens", .. })), "3,000 would pass 2,500");
    end(first, None, used(100, 20), true);
    assert_eq!(fixture.gate.key_use(fixture.key()).tokens_available, Some(2500 - 1000 - 120));
    let third = fixture.admit(900).unwrap_or_else(|r| panic!("settled to 120 used: {r}"));
    end(second, None, Usage::default(), false);
    end(third, None, Usage::default(), true);
    assert_eq!(
        fixture.gate.key_use(fixture.key()).tokens_available,
        Some(2500 - 120 - 1000),
        "a request that never committed gave its reservation back; one that did without usage keeps it"
    );
}

#[tokio::test(start_paused = true)]
async fn a_request_larger_than_the_tpm_is_refused_without_a_wait() {
    let fixture = Fixture::new("tpm = 500\n");
    let refusal = fixture.admit(900).err();
    assert!(matches!(refusal, Some(Refusal::RateLimited { unit: "tokens", retry_after: None, .. })), "{refusal:?}");
}

#[tokio::test(start_paused = true)]
async fn a_spent_budget_blocks_across_the_edge_a_fixed_window_resets_at() {
    for (window, length) in [("1m", 60), ("1h", 3600), ("1d", 86_400)] {
        let fixture = Fixture::new(&format!("\n[[budgets]]\nscope = \"key:web\"\nwindow = \"{window}\"\nusd = 1.0\n"));
        let length = Duration::from_secs(length);
        tokio::time::advance(length - Duration::from_millis(100)).await;
        fixture.spend(0.6, used(1, 1));
        assert!(fixture.admit(10).is_ok(), "{window}: 0.6 of 1.0 spent");
        fixture.spend(0.6, used(1, 1));
        tokio::time::advance(Duration::from_millis(200)).await;
        let refusal = fixture.admit(10).err();
        let Some(Refusal::BudgetExceeded { scope, window: named, retry_after: Some(wait), .. }) = refusal else {
            panic!("{window}: past a fixed window's edge the budget is still spent: {refusal:?}");
        };
        assert_eq!((scope.as_str(), named), ("key:web", window));
        assert!(wait <= length + length / 60 && wait >= length - length / 30, "{window}: wait {wait:?}");
        tokio::time::advance(wait).await;
        assert!(fixture.admit(10).is_ok(), "{window}: free again after the wait it gave");
    }
}

#[tokio::test(start_paused = true)]
async fn a_keys_own_budget_blocks_it_alone() {
    let fixture = Fixture::new("budget = { usd_per_hour = 2.0 }\n");
    fixture.spend(2.5, used(1, 1));
    assert!(matches!(fixture.admit(10), Err(Refusal::BudgetExceeded { window: "1h", .. })));
    assert!(fixture.admit_as(None, 10).is_ok(), "another caller is not held to this key's budget");
    let spend = fixture.gate.key_use(fixture.key()).spend;
    assert_eq!((spend.total_usd, spend.windows), (2.5, [2.5, 2.5, 2.5]));
    assert_eq!(fixture.gate.provider_spend("big"), 2.5);
    assert_eq!(fixture.gate.spend(&BudgetScope::Route("chat".into())).total_usd, 2.5);
}

#[tokio::test(start_paused = true)]
async fn a_downgrade_serves_the_other_route_and_a_warning_serves_this_one() {
    let fixture = Fixture::new(
        "\n[[budgets]]\nscope = \"route:chat\"\nwindow = \"1h\"\nusd = 1.0\naction = \"downgrade\"\ndowngrade_to = \"cheap\"\n\
         \n[[budgets]]\nscope = \"global\"\nwindow = \"1m\"\nusd = 0.5\naction = \"warn\"\n",
    );
    let admitted = fixture.admit(10).unwrap_or_else(|r| panic!("{r}"));
    assert_eq!((admitted.route.model.as_str(), admitted.downgraded_from), ("chat", None));
    fixture.spend(0.7, used(1, 1));
    let warned = fixture.admit(10).unwrap_or_else(|r| panic!("a warning refuses nothing: {r}"));
    assert_eq!(warned.route.model, "chat", "0.7 of the global 0.5 only warns");
    fixture.spend(0.7, used(1, 1));
    let downgraded = fixture.admit(10).unwrap_or_else(|r| panic!("{r}"));
    assert_eq!(downgraded.route.model, "cheap", "1.4 of chat's 1.0: served by cheap");
    assert_eq!(downgraded.downgraded_from.as_deref(), Some("chat"));
}

#[tokio::test(start_paused = true)]
async fn a_cost_cap_skips_the_targets_it_cannot_afford_and_refuses_when_none_fits() {
    // 100 input + 1,000 output tokens: big costs $0.031, small $0.0021.
    let fixture = Fixture::new("\n[[budgets]]\nscope = \"key:web\"\nmax_usd_per_request = 0.01\n");
    let admitted = fixture.admit(1000).unwrap_or_else(|r| panic!("{r}"));
    let targets: Vec<&str> = admitted.route.targets.iter().map(|t| t.provider.name.as_str()).collect();
    assert_eq!(targets, ["small"], "big's estimate is over the cap");
    let refusal = fixture.admit(10_000).err();
    assert!(matches!(refusal, Some(Refusal::OverCostCap { .. })), "no target fits 10,000 tokens: {refusal:?}");
    assert!(fixture.admit_as(None, 10_000).is_ok(), "the cap is the key's only");
}
