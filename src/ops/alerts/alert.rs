//! One alert: what happened, to what, and the body a webhook gets —
//! `{"event", "time", "summary", "text", ...the event's fields}`, where
//! `text` is the same news as Slack's incoming webhooks show it. Fields are
//! names from the config, numbers and failure classes: never a provider's
//! own words, a URL or a secret.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::config::AlertEvent;
use crate::core::ProxyError;
use crate::store::{now_ms, time::rfc3339};

/// Something a person should hear of.
#[derive(Debug, Clone, PartialEq)]
pub struct Alert {
    /// What kind of news it is.
    pub event: AlertEvent,
    /// What it is about (a provider, a route, a budget): the same event for
    /// the same subject is sent at most once a minute.
    pub subject: String,
    /// One line, plain text.
    pub summary: String,
    /// When it happened, in Unix milliseconds.
    pub time_ms: i64,
    /// The event's own fields.
    pub fields: Map<String, Value>,
}

impl Alert {
    fn new(event: AlertEvent, subject: &str, summary: String, fields: Value) -> Alert {
        let fields = match fields {
            Value::Object(fields) => fields,
            _ => Map::new(),
        };
        Alert { event, subject: subject.to_owned(), summary, time_ms: now_ms(), fields }
    }

    /// `provider`'s breaker opened for `cooldown`, after a failure of `class`.
    pub fn breaker_open(provider: &str, cooldown: Duration, class: Option<&str>) -> Alert {
        let cause = class.map(|class| format!(" after {class}")).unwrap_or_default();
        let seconds = cooldown.as_secs_f64();
        let summary = format!("breaker open for provider {provider}{cause}: skipped for {seconds:.0} s");
        let fields = json!({ "provider": provider, "cooldown_s": seconds, "class": class });
        Alert::new(AlertEvent::BreakerOpen, provider, summary, fields)
    }

    /// `provider`'s breaker closed: it answers again.
    pub fn breaker_closed(provider: &str) -> Alert {
        let summary = format!("breaker closed for provider {provider}: it answers again");
        Alert::new(AlertEvent::BreakerClosed, provider, summary, json!({ "provider": provider }))
    }

    /// Every target of `route` failed a request, as `error` tells: each
    /// attempt by provider, model and failure class, never its message.
    pub fn route_exhausted(route: &str, error: &ProxyError) -> Alert {
        let attempts: Vec<Value> = error
            .attempts()
            .iter()
            .map(|attempt| {
                json!({
                    "provider": attempt.provider,
                    "model": attempt.model,
                    "class": attempt.failure.kind(),
                    "elapsed_ms": u64::try_from(attempt.elapsed.as_millis()).unwrap_or(u64::MAX),
                })
            })
            .collect();
        let classes: Vec<String> =
            error.attempts().iter().map(|a| format!("{} {}", a.provider, a.failure.kind())).collect();
        let summary = format!("route {route} exhausted: every target failed ({})", classes.join(", "));
        let fields = json!({ "route": route, "status": error.status(), "outcome": error.kind(), "attempts": attempts });
        Alert::new(AlertEvent::RouteExhausted, route, summary, fields)
    }

    /// The budget of `scope` over `window` reached `percent` (80 or 100) of
    /// its `usd`, having spent `spent_usd`; it then acts as `action`.
    pub fn budget_threshold(scope: &str, window: &str, percent: u8, usd: f64, spent_usd: f64, action: &str) -> Alert {
        let summary = format!(
            "budget {scope} over {window} at {percent} %: ${spent_usd:.4} of ${usd:.2} spent (action {action})"
        );
        let fields = json!({
            "scope": scope, "window": window, "percent": percent, "usd": usd, "spent_usd": spent_usd, "action": action,
        });
        Alert::new(AlertEvent::BudgetThreshold, &format!("{scope}/{window}/{percent}"), summary, fields)
    }

    /// A drill of `route` failing `fail` did not pass: it ended as `outcome`.
    pub fn drill_failed(route: &str, fail: &str, outcome: &str, attempts: u32, elapsed: Duration) -> Alert {
        let ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        let summary = format!("drill of route {route} ({fail}) failed: {outcome} after {attempts} attempts in {ms} ms");
        let fields = json!({ "route": route, "fail": fail, "outcome": outcome, "attempts": attempts, "ms": ms });
        Alert::new(AlertEvent::DrillFailed, route, summary, fields)
    }

    /// A drill of `route` passed after a failure: `provider` answered.
    pub fn drill_recovered(route: &str, fail: &str, provider: &str, attempts: u32, elapsed: Duration) -> Alert {
        let ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        let summary = format!("drill of route {route} ({fail}) passes again: answered by {provider} in {ms} ms");
        let fields = json!({ "route": route, "fail": fail, "provider": provider, "attempts": attempts, "ms": ms });
        Alert::new(AlertEvent::DrillRecovered, route, summary, fields)
    }

    /// The shared state store (`backend`) was lost, or never answered since start.
    pub fn state_down(backend: &str, since_start: bool) -> Alert {
        let how = if since_start { "has not answered since start" } else { "was lost" };
        let summary = format!("shared state ({backend}) {how}: each replica uses its local limits and breakers");
        let fields = json!({ "backend": backend, "since_start": since_start });
        Alert::new(AlertEvent::StateDown, backend, summary, fields)
    }

    /// The database store (`backend`) went down: request rows are dropped.
    pub fn store_down(backend: &str) -> Alert {
        let summary = format!("store ({backend}) down: request rows are dropped and counted until it is back");
        Alert::new(AlertEvent::StoreDown, backend, summary, json!({ "backend": backend }))
    }

    /// The JSON body every webhook of this alert gets, byte for byte.
    pub fn body(&self) -> Bytes {
        let mut body = Map::new();
        body.insert("event".into(), json!(self.event.name()));
        body.insert("time".into(), json!(rfc3339(self.time_ms)));
        body.insert("summary".into(), json!(self.summary));
        body.insert("text".into(), json!(slack_text(self.event, &self.summary)));
        for (name, value) in &self.fields {
            body.entry(name.clone()).or_insert_with(|| value.clone());
        }
        Bytes::from(Value::Object(body).to_string())
    }
}

/// The summary as Slack's `text`: a mark for how bad it is, the name in
/// bold, and `&`, `<` and `>` escaped as Slack asks.
fn slack_text(event: AlertEvent, summary: &str) -> String {
    let mark = match event {
        AlertEvent::BreakerClosed | AlertEvent::DrillRecovered => ":large_green_circle:",
        AlertEvent::BudgetThreshold => ":warning:",
        _ => ":red_circle:",
    };
    let escaped = summary.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    format!("{mark} *baton* {escaped}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_holds_the_common_fields_then_the_event_s_own() {
        let alert = Alert::breaker_open("openai", Duration::from_secs(30), Some("http_5xx"));
        let body: Value = serde_json::from_slice(&alert.body()).unwrap_or_default();
        assert_eq!(body["event"], "breaker_open");
        assert_eq!(body["provider"], "openai");
        assert_eq!(body["class"], "http_5xx");
        assert_eq!(body["cooldown_s"], 30.0);
        assert!(body["time"].as_str().is_some_and(|time| time.ends_with('Z')), "{body}");
        assert_eq!(body["summary"], "breaker open for provider openai after http_5xx: skipped for 30 s");
        assert!(body["text"].as_str().is_some_and(|text| text.contains("*baton* breaker open")), "{body}");
    }

    #[test]
    fn slack_text_escapes_what_slack_reads_as_markup() {
        let text = slack_text(AlertEvent::StoreDown, "a <b> & c");
        assert_eq!(text, ":red_circle: *baton* a &lt;b&gt; &amp; c");
    }
}
