// The page's history: what the store holds, from GET /admin/history, drawn
// as charts — requests, failovers and mean time to first token per provider
// over the chosen range; spend per key, route or provider per day; each
// route's failover rate per day, drills apart; and what the requests that
// failed over cost against their route's first target.
// Without a store it says that no records are kept; while the store is
// down, that it is.

import { groupedBars, legend, lines, stackedBars } from "/page/charts.js";

const $ = (id) => document.getElementById(id);
const HOUR = 3600000;
const DAY = 24 * HOUR;
const REFRESH_MS = 10000;
const PAID = { name: "paid", label: "paid to the providers that answered", color: "#3fb950" };
const FIRST = { name: "first-target", label: "at the route's first target's price", color: "#d29922" };
const NAMES = {
  provider: { "-": "none answered" },
  key: { "-": "no key" },
  route: { "-": "no route" },
};
let last = null;

// Values as the axes and tooltips show them, with their unit (a count's is in its axis's caption).
const count = (v) => (Number.isInteger(v) ? String(v) : v.toFixed(1));
const ms = (v) => `${v === 0 || v >= 10 ? Math.round(v) : v.toFixed(1)} ms`;
const pct = (v) => `${v < 10 ? Number(v.toFixed(1)) : Math.round(v)} %`;
const usd = (v) => (v === 0 ? "$0" : v < 0.01 ? `$${Number(v.toPrecision(2))}` : `$${v.toFixed(2)}`);
// The width a chart is drawn at: its box's, so its text is drawn at the page's size.
const width = (id) => Math.max(240, $(id).clientWidth || 400);
const two = (n) => String(n).padStart(2, "0");

// A label per bucket, for the tooltips: local time within a day, the UTC date for whole days.
function labels(since, bucketMs, buckets) {
  const start = Date.parse(since);
  return Array.from({ length: buckets }, (_, i) => {
    const t = new Date(start + i * bucketMs);
    if (bucketMs >= DAY) return t.toISOString().slice(5, 10);
    if (bucketMs > HOUR) return `${two(t.getMonth() + 1)}-${two(t.getDate())} ${two(t.getHours())}h`;
    return `${two(t.getHours())}:${two(t.getMinutes())}`;
  });
}

// What the time axis of a span needs: its buckets' labels and times, on UTC's clock for whole days.
function axis(span) {
  const time = { start: Date.parse(span.since), bucket: span.bucket_ms, utc: span.bucket_ms >= DAY };
  return { labels: labels(span.since, span.bucket_ms, span.buckets), time };
}

// What one bucket of a span is, for the units of its charts: "minute", "6 hours".
function per(span) {
  const [unit, size] = span.bucket_ms >= DAY ? ["day", DAY] : span.bucket_ms >= HOUR ? ["hour", HOUR] : ["minute", 60000];
  const n = span.bucket_ms / size;
  return n === 1 ? unit : `${n} ${unit}s`;
}

// The place of a bucket's start in a span of buckets, or -1 outside it.
function slot(span, bucket) {
  const i = Math.round((Date.parse(bucket) - Date.parse(span.since)) / span.bucket_ms);
  return i >= 0 && i < span.buckets ? i : -1;
}

// Rows of {bucket, [key], [field]} as one series per `key`, a value per bucket (`empty` where none).
function series(rows, key, field, span, empty, kind) {
  const byName = new Map();
  for (const row of rows) {
    const i = slot(span, row.bucket);
    if (i < 0) continue;
    if (!byName.has(row[key])) byName.set(row[key], Array(span.buckets).fill(empty));
    byName.get(row[key])[i] = row[field];
  }
  const names = [...byName.keys()].sort((a, b) => (a === "(other)") - (b === "(other)") || a.localeCompare(b));
  return names.map((name) => ({ name, label: NAMES[kind][name] || name, values: byName.get(name) }));
}

function drawActivity(activity) {
  const counts = (field) => series(activity.data, "provider", field, activity, 0, "provider");
  const providers = counts("requests");
  const chart = (id, spec) => ({ ...axis(activity), width: width(id), ...spec });
  const requests = chart("chart-requests", { series: providers, format: count, unit: `requests per ${per(activity)}` });
  $("chart-requests").innerHTML = stackedBars("requests", requests);
  const failovers = chart("chart-failovers", { series: counts("failovers"), format: count, unit: `failovers per ${per(activity)}` });
  $("chart-failovers").innerHTML = stackedBars("failovers", failovers);
  const ttft = series(activity.data, "provider", "ttft_ms_mean", activity, null, "provider");
  $("chart-ttft").innerHTML = lines("ttft", chart("chart-ttft", { series: ttft, format: ms, unit: "ms" }));
  $("legend-providers").innerHTML = legend(providers);
}

function drawSpend(spend) {
  const by = $("spend-by").value;
  const groups = series(spend[`by_${by}`], "group", "cost_usd", spend, 0, by);
  const spec = { ...axis(spend), series: groups, format: usd, unit: "USD per day", width: width("chart-spend") };
  $("chart-spend").innerHTML = stackedBars("spend", spec);
  $("legend-spend").innerHTML = legend(groups);
}

// Each route's share of requests that failed over per day, drills left out
// (a drill fails over on purpose), and the drills counted apart.
function drawFailoverRate(rate, spend) {
  const percent = rate.data.map((row) => ({ ...row, percent: row.rate == null ? null : 100 * row.rate }));
  const routes = series(percent, "route", "percent", spend, null, "route");
  const spec = { ...axis(spend), series: routes, format: pct, unit: "% of requests failed over", width: width("chart-failover-rate") };
  $("chart-failover-rate").innerHTML = lines("failover-rate", spec);
  $("legend-failover-rate").innerHTML = legend(routes);
  const sum = (field) => rate.data.reduce((total, row) => total + row[field], 0);
  const [drills, drilled] = [sum("drills"), sum("drill_failovers")];
  $("failover-drills").textContent = drills === 0
    ? `No drill ran in the last ${spend.days} days.`
    : `Drills apart: ${drills} drill request${drills === 1 ? "" : "s"} in the last ${spend.days} days, ` +
      `${drilled} of them failed over, as drills do; they are not in the rate above.`;
}

// Paid against the first target's price per day, summed over the routes that can be compared.
function drawFailoverCost(cost, spend) {
  const compared = cost.data.filter((row) => row.first_target_usd != null);
  const pair = [{ ...PAID, values: Array(spend.buckets).fill(null) }, { ...FIRST, values: Array(spend.buckets).fill(null) }];
  for (const row of compared) {
    const i = slot(spend, row.bucket);
    if (i < 0) continue;
    pair[0].values[i] = (pair[0].values[i] || 0) + row.cost_usd;
    pair[1].values[i] = (pair[1].values[i] || 0) + row.first_target_usd;
  }
  const spec = { ...axis(spend), series: pair, format: usd, unit: "USD per day", width: width("chart-failover-cost") };
  $("chart-failover-cost").innerHTML = groupedBars("failover-cost", spec);
  $("legend-failover-cost").innerHTML = legend([PAID, FIRST]);
  const { requests, cost_usd: paid, first_target_usd: first } = cost.total;
  const firsts = [...new Set(compared.map((row) => `${row.route} → ${row.first_target.provider}`))];
  let text = requests === 0
    ? `No priced request failed over in the last ${spend.days} days.`
    : `${requests} request${requests === 1 ? "" : "s"} failed over in the last ${spend.days} days and cost ${usd(paid)}; ` +
      `at the first target's price (${firsts.join(", ")}) the same usage would have cost ${usd(first)}: ` +
      `${paid <= first ? "failing over saved" : "failing over cost"} ${usd(Math.abs(first - paid))}.`;
  if (cost.not_compared > 0) text += ` ${cost.not_compared} more could not be compared: their route's first target has no price.`;
  $("failover-summary").textContent = text;
}

function draw(history) {
  last = history;
  $("history").dataset.state = "drawn";
  $("history").dataset.range = history.activity.range;
  $("history-note").textContent = "";
  $("history-charts").hidden = false;
  drawActivity(history.activity);
  drawSpend(history.spend);
  drawFailoverRate(history.failover_rate, history.spend);
  drawFailoverCost(history.failover_cost, history.spend);
}

function show(state, message) {
  $("history").dataset.state = state;
  $("history-note").textContent = message;
  $("history-charts").hidden = true;
}

async function refresh() {
  const token = $("token").value;
  let response;
  try {
    response = await fetch(`/admin/history?range=${encodeURIComponent($("history-range").value)}`,
      { headers: token ? { "x-baton-admin-token": token } : {} });
  } catch (err) {
    return show("error", `cannot reach baton: ${err.message}`);
  }
  const body = await response.json().catch(() => ({}));
  const code = body.error && body.error.code;
  if (response.ok) return draw(body);
  if (code === "store_off") {
    return show("off", "No records kept: this baton has no store ([store] backend = \"none\"), so there is no history to draw.");
  }
  if (response.status === 503) {
    return show("down", "The store is unavailable now: requests are still served, and the charts come back when it answers.");
  }
  if (response.status === 403) return show("error", "The history needs the admin token.");
  show("error", body.error ? body.error.message : `HTTP ${response.status}`);
}

$("history-range").addEventListener("change", refresh);
$("spend-by").addEventListener("change", () => last && drawSpend(last.spend));
$("token").addEventListener("change", refresh);
let resizing = 0;
window.addEventListener("resize", () => {
  clearTimeout(resizing);
  resizing = setTimeout(() => last && $("history").dataset.state === "drawn" && draw(last), 150);
});
// A request from the playground is in the store once its batch is written, about 200 ms after it ends.
document.addEventListener("baton:sent", () => setTimeout(refresh, 700));
setInterval(() => document.visibilityState === "visible" && refresh(), REFRESH_MS);
refresh();
