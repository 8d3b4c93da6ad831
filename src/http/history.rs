//! `GET /admin/history?range=&days=`: what the page's charts draw, summed
//! from the request log — requests, failovers and mean time to first token
//! per provider over `range`; spend per key, route and provider per day
//! over `days`; and what the requests that failed over cost against what
//! their route's first target would have charged for the same usage.
//! Aggregates only, never a row or a prompt, so it is authorized as
//! `/admin/status` is: open on loopback without an `admin_token`, else
//! behind it, and the page on a developer's machine draws without one.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use serde_json::{Value, json};

use super::AppState;
use super::admin::authorize;
use super::records::{Params, bad, database, params_of, read, unknown};
use crate::config::{Config, add_usd};
use crate::dialect::ApiError;
use crate::store::history::{self, Activity, FailedOver, RouteFailovers, Spend, Window};
use crate::store::query::{GroupBy, failover_rate};
use crate::store::time::rfc3339;
use crate::store::{DbError, now_ms};

/// Milliseconds in a day: spend and failover cost are summed per UTC day.
const DAY_MS: i64 = 86_400_000;
/// Days of spend when the request does not say.
const DEFAULT_DAYS: i64 = 30;
/// The most days of spend one request may ask for.
const MAX_DAYS: i64 = 365;

/// How far back the activity charts look, and the bucket each is cut into:
/// about thirty to sixty bars, whatever the span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Range {
    Hour,
    Day,
    Week,
    Month,
}

impl Range {
    fn from_name(name: &str) -> Option<Range> {
        match name {
            "1h" => Some(Range::Hour),
            "24h" => Some(Range::Day),
            "7d" => Some(Range::Week),
            "30d" => Some(Range::Month),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Range::Hour => "1h",
            Range::Day => "24h",
            Range::Week => "7d",
            Range::Month => "30d",
        }
    }

    /// A minute a bucket for the last hour, an hour for the last day, six
    /// hours for the last week, a day for the last month.
    fn window(self, now_ms: i64) -> Window {
        let (bucket_ms, buckets) = match self {
            Range::Hour => (60_000, 60),
            Range::Day => (3_600_000, 24),
            Range::Week => (6 * 3_600_000, 28),
            Range::Month => (DAY_MS, 30),
        };
        Window::ending(now_ms, bucket_ms, buckets)
    }
}

/// `GET /admin/history?range=1h|24h|7d|30d&days=1..365`: the charts' data,
/// `range` (24h) for the activity per provider and `days` (30) for spend
/// and the cost of failovers.
pub(super) async fn history(
    State(state): State<AppState>,
    headers: HeaderMap,
    params: Params,
) -> Result<Json<Value>, ApiError> {
    let config = state.config();
    authorize(&headers, &config, "history charts", false)?;
    let (range, days) = parameters(&params_of(params)?)?;
    let db = database(&state)?;
    let now = now_ms();
    let (recent, daily) = (range.window(now), Window::ending(now, DAY_MS, days));
    let reading = async {
        let activity = history::activity(&db, &recent).await?;
        let by_key = history::spend(&db, GroupBy::Key, &daily).await?;
        let by_route = history::spend(&db, GroupBy::Route, &daily).await?;
        let by_provider = history::spend(&db, GroupBy::Provider, &daily).await?;
        let failed = history::failed_over(&db, &daily).await?;
        let routes = history::route_failovers(&db, &daily).await?;
        Ok::<_, DbError>((activity, [by_key, by_route, by_provider], failed, routes))
    };
    let (activity, [by_key, by_route, by_provider], failed, routes) = read(reading).await?;
    Ok(Json(json!({
        "activity": {
            "range": range.name(),
            "since": rfc3339(recent.since_ms),
            "bucket_ms": recent.bucket_ms,
            "buckets": recent.buckets,
            "data": activity.iter().map(activity_row).collect::<Vec<_>>(),
        },
        "spend": {
            "days": days,
            "since": rfc3339(daily.since_ms),
            "bucket_ms": daily.bucket_ms,
            "buckets": daily.buckets,
            "by_key": spend_rows(&by_key),
            "by_route": spend_rows(&by_route),
            "by_provider": spend_rows(&by_provider),
        },
        "failover_cost": failover_cost(&config, &failed),
        "failover_rate": { "data": routes.iter().map(route_failovers_row).collect::<Vec<_>>() },
    })))
}

/// A route's day: its failover rate with drills left out, and its drills apart.
fn route_failovers_row(row: &RouteFailovers) -> Value {
    json!({
        "route": row.route,
        "bucket": rfc3339(row.bucket_ms),
        "requests": row.requests,
        "failovers": row.failovers,
        "rate": failover_rate(row.failovers, row.requests),
        "drills": row.drills,
        "drill_failovers": row.drill_failovers,
    })
}

/// `range` and `days`, each given at most once.
fn parameters(params: &[(String, String)]) -> Result<(Range, i64), ApiError> {
    let (mut range, mut days) = (Range::Day, DEFAULT_DAYS);
    let mut seen: Vec<&str> = Vec::new();
    for (name, value) in params {
        if seen.contains(&name.as_str()) {
            return Err(bad(name, "is given twice"));
        }
        seen.push(name);
        match name.as_str() {
            "range" => range = Range::from_name(value).ok_or_else(|| bad(name, "is 1h, 24h, 7d or 30d"))?,
            "days" => {
                let given = value.parse().ok().filter(|n| (1..=MAX_DAYS).contains(n));
                days = given.ok_or_else(|| bad(name, &format!("is a number of days from 1 to {MAX_DAYS}")))?;
            }
            _ => return Err(unknown(name, "range, days")),
        }
    }
    Ok((range, days))
}

fn activity_row(row: &Activity) -> Value {
    json!({
        "provider": row.provider,
        "bucket": rfc3339(row.bucket_ms),
        "requests": row.requests,
        "failovers": row.failovers,
        "ttft_ms_mean": row.ttft_ms_mean,
    })
}

fn spend_rows(groups: &[Spend]) -> Vec<Value> {
    groups
        .iter()
        .map(|row| {
            json!({
                "group": row.group,
                "bucket": rfc3339(row.bucket_ms),
                "requests": row.requests,
                "cost_usd": row.cost_usd,
            })
        })
        .collect()
}

/// Each route's failed-over requests per day: what the providers that
/// answered them cost, and what the route's first target (in the running
/// config) would have cost at its price for the same usage. A route gone
/// from the config, or whose first target has no price, is not compared;
/// the totals hold only the requests that are.
fn failover_cost(config: &Config, failed: &[FailedOver]) -> Value {
    let (mut requests, mut cost, mut at_first, mut not_compared) = (0_i64, 0.0, 0.0, 0_i64);
    let data: Vec<Value> = failed
        .iter()
        .map(|group| {
            let first = config.route(&group.route).and_then(|route| route.targets.first());
            let first_usd = first.and_then(|target| target.price).map(|price| price.cost(group.usage));
            match first_usd {
                Some(usd) => {
                    requests = requests.saturating_add(group.requests);
                    (cost, at_first) = (add_usd(cost, group.cost_usd), add_usd(at_first, usd));
                }
                None => not_compared = not_compared.saturating_add(group.requests),
            }
            json!({
                "route": group.route,
                "bucket": rfc3339(group.bucket_ms),
                "requests": group.requests,
                "input_tokens": group.usage.input_tokens,
                "cached_tokens": group.usage.cached_input_tokens,
                "output_tokens": group.usage.output_tokens,
                "cost_usd": group.cost_usd,
                "first_target": first.map(|target| json!({ "provider": target.provider.name, "model": target.model })),
                "first_target_usd": first_usd,
            })
        })
        .collect();
    json!({
        "data": data,
        "total": { "requests": requests, "cost_usd": cost, "first_target_usd": at_first },
        "not_compared": not_compared,
    })
}
