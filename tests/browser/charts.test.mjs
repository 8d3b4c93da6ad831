// The page's history charts, in Debian's headless Chromium driven by
// playwright-core: against a running `baton demo` (which records into a
// temporary SQLite file), requests sent with a failover among them are
// drawn — per provider over time, spend per day, each route's failover rate
// per day with the demo's drills apart, and the failovers' cost against the
// route's first target. Every chart and sparkline names its axes' units,
// the time axis ticks at round clock times (chosen by `timeTicks`, tested
// on its own first), and no label overflows its card on a phone or a
// desktop. Without a store the page says no
// records are kept; with the store down, that it is unavailable.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { start } from "../clients/node/gateway.mjs";

const here = new URL(".", import.meta.url).pathname;
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const ARTIFACTS = `${here}artifacts`;
const ROWS_WITHIN_MS = 15000;
const MINUTE = 60000;
const DAY = 1440 * MINUTE;
// The browser's time zone: half an hour off UTC, so ticks of whole hours
// land on the hour only if they are chosen on the local clock.
const ZONE = { id: "Asia/Kolkata", minutes: 330 };

// charts.js as the browser gets it: a module with no package.json to say
// so, so Node is handed its text.
const charts = await import(`data:text/javascript,${encodeURIComponent(readFileSync(`${here}../../src/http/page/charts.js`, "utf8"))}`);

function launch() {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}

// Sends chat requests until at least `least` were sent and one failed over; how many of each.
async function sendWithAFailover(base, least) {
  let [sent, failovers] = [0, 0];
  const providers = new Set();
  while ((sent < least || failovers === 0) && sent < 40) {
    const response = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "chat", messages: [{ role: "user", content: `hello ${sent}` }] }),
      signal: AbortSignal.timeout(20000),
    });
    assert.equal(response.status, 200, "every demo request is answered");
    await response.arrayBuffer();
    sent += 1;
    if (Number(response.headers.get("x-baton-attempts")) > 1) failovers += 1;
    providers.add(response.headers.get("x-baton-provider"));
  }
  assert.ok(failovers > 0, "the flaky primary failed over at least once");
  return { sent, failovers, providers };
}

// The history once the store holds `sent` requests of the last hour.
async function historyHolding(base, sent) {
  const deadline = Date.now() + ROWS_WITHIN_MS;
  for (;;) {
    const history = await (await fetch(`${base}/admin/history?range=1h`)).json();
    const requests = history.activity.data.reduce((sum, group) => sum + group.requests, 0);
    if (requests >= sent) return history;
    assert.ok(Date.now() < deadline, `the store holds ${sent} requests within ${ROWS_WITHIN_MS} ms, not ${requests}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

// The requests the history holds in the last hour, and of them the demo's
// own drills (charged to the key `drill`), recorded beside those sent.
const held = (history) => history.activity.data.reduce((sum, group) => sum + group.requests, 0);
const drillsIn = (history) =>
  history.spend.by_key.filter((group) => group.group === "drill").reduce((sum, group) => sum + group.requests, 0);

// Runs `read` between two reads of the history that hold as many requests,
// so whatever `read` saw of the store held exactly those (rows are only
// ever added): a drill recorded meanwhile makes it read again.
async function steadyHistory(base, read) {
  const history = async () => (await fetch(`${base}/admin/history?range=1h`)).json();
  for (let tries = 0; tries < 5; tries += 1) {
    const before = await history();
    const result = await read();
    const after = await history();
    if (held(after) === held(before)) return { result, history: after };
  }
  assert.fail("a request was recorded during each of five reads");
}

// A new page that collects its script errors and failed answers (the
// page names its own icon, so the browser asks for no /favicon.ico).
async function watchedPage(browser, options) {
  const page = await browser.newPage(options);
  const errors = [];
  page.on("pageerror", (err) => errors.push(err.message));
  page.on("response", (response) => response.status() >= 400 &&
    errors.push(`${response.status()} ${new URL(response.url()).pathname}`));
  return { page, errors };
}

// What a chart drew: its points' series and values.
function drawn(page, chart) {
  return page.$$eval(`svg[data-chart="${chart}"] [data-value]`, (points) =>
    points.map((p) => ({ series: p.dataset.series, bucket: Number(p.dataset.bucket), value: Number(p.dataset.value) })));
}

const sum = (points) => points.reduce((total, p) => total + p.value, 0);
const close = (a, b) => Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b));

// Checks that `ticks` of a span from `start` to `end` are round on a clock
// `offset` minutes ahead of UTC: one step of the list apart, each a whole
// number of steps into the day (or a whole day), and no more than `most`,
// where the step before would have given more.
function assertRound(ticks, { start, end, most, offset }, what) {
  const { TICK_STEPS } = charts;
  const step = ticks.minutes * MINUTE;
  assert.ok(TICK_STEPS.includes(ticks.minutes), `${what}: the step, ${ticks.minutes} minutes, is one of the list`);
  assert.ok(ticks.times.length <= most || ticks.minutes === TICK_STEPS.at(-1), `${what}: at most ${most} ticks`);
  ticks.times.forEach((t, i) => {
    assert.ok(t >= start && t <= end, `${what}: tick ${i} within the span`);
    const local = t + offset * MINUTE;
    const round = ticks.minutes < 1440 ? (local % DAY) % step === 0 : local % DAY === 0;
    assert.ok(round, `${what}: tick ${i} (${new Date(local).toISOString()}) is a whole ${ticks.minutes} minutes`);
    if (i > 0) assert.equal(t - ticks.times[i - 1], step, `${what}: ticks one step apart`);
  });
  const before = TICK_STEPS[TICK_STEPS.indexOf(ticks.minutes) - 1];
  if (before) {
    const [from, to, finer] = [start + offset * MINUTE, end + offset * MINUTE, before * MINUTE];
    const count = Math.floor(to / finer) - Math.ceil(from / finer) + 1;
    assert.ok(count > most, `${what}: ${before} minutes would have given ${count} ticks, more than ${most}`);
  }
}

test("time ticks take a step from the list and land on round clock times", () => {
  const { timeTicks, clock } = charts;
  const at = (iso) => Date.parse(iso);

  const hour = timeTicks(at("2026-12-07T17:02:00Z"), at("2026-12-07T18:02:00Z"), 5);
  assert.equal(hour.minutes, 15, "an hour in at most 5 ticks: every 15 minutes, not every 12");
  assert.deepEqual(hour.times.map((t) => clock(t, 0, { time: true })), ["17:15", "17:30", "17:45", "18:00"]);
  const odd = timeTicks(at("2026-12-07T16:59:00Z"), at("2026-12-07T17:59:00Z"), 7);
  assert.deepEqual(odd.times.map((t) => clock(t, 0, { time: true })), ["17:00", "17:10", "17:20", "17:30", "17:40", "17:50"],
    "an hour starting at :59 ticks at :00, :10…, not at :59, :09…");

  const day = timeTicks(at("2026-12-06T18:00:00Z"), at("2026-12-07T18:00:00Z"), 8, ZONE.minutes);
  assert.equal(day.minutes, 180, "a day in at most 8 ticks: every 3 hours");
  assert.deepEqual(day.times.map((t) => clock(t, ZONE.minutes, { time: true })).slice(0, 3), ["00:00", "03:00", "06:00"],
    "on the local clock, half an hour off UTC");

  const month = timeTicks(at("2026-11-08T00:00:00Z"), at("2026-12-07T00:00:00Z"), 5);
  assert.equal(month.minutes, 10080, "30 days in at most 5 ticks: a week");
  assert.ok(month.times.every((t) => new Date(t).getUTCDay() === 1), "weeks start on Mondays");
  assert.deepEqual(month.times.map((t) => clock(t, 0, { date: true })), ["11-09", "11-16", "11-23", "11-30", "12-07"]);

  for (const minutes of [10, 60, 1440, 6 * 1440, 30 * 1440]) {
    for (const most of [2, 3, 4, 5, 7, 9, 12, 16]) {
      for (const offset of [0, 60, 330, -300, 345]) {
        const start = at("2026-12-07T17:02:00Z") - 9 * MINUTE * most;
        const span = { start, end: start + minutes * MINUTE, most, offset };
        assertRound(timeTicks(span.start, span.end, most, offset), span, `${minutes} minutes, ${most} ticks, UTC${offset / 60}`);
      }
    }
  }
});

test("the history charts draw the requests the demo recorded, a failover among them", { timeout: 120000 }, async () => {
  const demo = await start(["demo", "--listen", "127.0.0.1:0"]);
  const base = `http://${demo.addr}`;
  const browser = await launch();
  try {
    const { sent, failovers, providers } = await sendWithAFailover(base, 8);
    await historyHolding(base, sent);
    const { page, errors } = await watchedPage(browser, { viewport: { width: 1280, height: 1100 } });
    const { history } = await steadyHistory(base, async () => {
      await page.goto(`${base}/`);
      await page.waitForSelector('#history[data-state="drawn"]', { timeout: 15000 });
    });
    const drills = drillsIn(history);
    const recordedFailovers = history.activity.data.reduce((sum, group) => sum + group.failovers, 0);

    const requests = await drawn(page, "requests");
    assert.equal(held(history), sent + drills, "the store holds every request sent, and the demo's drills");
    assert.equal(sum(requests), sent + drills, "every request sent, and each drill, is a bar's worth in the last hour");
    const series = new Set(requests.map((p) => p.series));
    assert.ok([...providers].every((provider) => series.has(provider)), "a series per provider that answered");
    assert.deepEqual(series, new Set(history.activity.data.map((group) => group.provider)), "and no other");
    assert.equal(recordedFailovers, failovers, "a failover recorded for each sent, the drills' left out");
    assert.equal(sum(await drawn(page, "failovers")), recordedFailovers, "each failover is drawn");
    const ttft = await drawn(page, "ttft");
    assert.ok(ttft.length >= 1 && ttft.every((p) => p.value > 0), "the mean first token is a point per provider and minute");
    assert.equal(await page.$$eval('svg[data-chart="ttft"] path', (paths) => paths.length), new Set(ttft.map((p) => p.series)).size, "a line each");

    const spend = await drawn(page, "spend");
    const recorded = history.spend.by_key.reduce((total, group) => total + group.cost_usd, 0);
    assert.ok(spend.length >= 1 && recorded > 0 && close(sum(spend), recorded), `spend per key: ${sum(spend)} against ${recorded}`);
    await page.selectOption("#spend-by", "provider");
    const byProvider = await drawn(page, "spend");
    assert.ok(new Set(byProvider.map((p) => p.series)).has("steady-openai"), "spend per provider, when chosen");
    assert.ok(close(sum(byProvider), recorded), "the same spend, grouped otherwise");

    const today = history.failover_rate.data.filter((row) => row.route === "chat").at(-1);
    assert.deepEqual([today.requests, today.failovers, today.drills], [sent, failovers, drills],
      "the route's day: the requests sent and their failovers, the drills apart");
    const rate = await drawn(page, "failover-rate");
    assert.deepEqual(new Set(rate.map((p) => p.series)), new Set(["chat"]), "a line per route");
    assert.ok(close(rate.at(-1).value, (100 * failovers) / sent), `today's rate: ${rate.at(-1).value} %`);
    const drillNote = await page.textContent("#failover-drills");
    assert.match(drillNote, drills === 0 ? /No drill ran/ : new RegExp(`Drills apart: ${drills} drill request`), drillNote);

    const cost = await drawn(page, "failover-cost");
    const paid = cost.filter((p) => p.series === "paid");
    const first = cost.filter((p) => p.series === "first-target");
    assert.ok(paid.length >= 1 && first.length === paid.length, "paid and the first target's price, side by side per day");
    assert.ok(close(sum(paid), history.failover_cost.total.cost_usd), "what the failovers paid");
    assert.ok(sum(first) > sum(paid), "the flaky primary is the dearer: failing over to the steady one saved money");
    assert.match(await page.textContent("#failover-summary"), /failed over in the last 30 days and cost \$.*flaky-anthropic.*saved/);
    assert.ok((await page.textContent("#legend-providers")).includes("steady-openai"), "a legend names the providers");

    const { result: lastDay, history: byThen } = await steadyHistory(base, async () => {
      await page.goto(`${base}/`);
      await page.waitForSelector('#history[data-state="drawn"]', { timeout: 15000 });
      await page.selectOption("#history-range", "24h");
      await page.waitForSelector('#history[data-range="24h"]', { timeout: 15000 });
      return drawn(page, "requests");
    });
    assert.equal(sum(lastDay), sent + drillsIn(byThen), "the last 24 hours hold them too");
    await page.selectOption("#history-range", "1h");
    await page.selectOption("#spend-by", "key");
    await page.waitForSelector('#history[data-range="1h"]', { timeout: 15000 });

    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: `${ARTIFACTS}/charts.png`, fullPage: true });
    assert.deepEqual(errors, [], "no script errors, every answer a success");
  } finally {
    await browser.close();
    demo.proc.kill();
  }
});

// What each chart's axes must say, for a range whose buckets are `per`.
const AXES = {
  requests: (per) => ({ unit: `requests per ${per}`, top: /^\d+(\.\d)?$/ }),
  failovers: (per) => ({ unit: `failovers per ${per}`, top: /^\d+(\.\d)?$/ }),
  ttft: () => ({ unit: "ms", top: /^\d+(\.\d)? ms$/ }),
  spend: () => ({ unit: "USD per day", top: /^\$\d/ }),
  "failover-rate": () => ({ unit: "% of requests failed over", top: /^\d+(\.\d)? %$/ }),
  "failover-cost": () => ({ unit: "USD per day", top: /^\$\d/ }),
};
const PER = { "1h": "minute", "24h": "hour", "7d": "6 hours", "30d": "day" };
const SPAN = /^(\d\d-\d\d )?\d\d:\d\d – (\d\d-\d\d )?\d\d:\d\d local time$|^\d\d-\d\d – \d\d-\d\d UTC$/;

// Each chart's axes as drawn: its unit, value labels, span and time ticks.
function axes(page) {
  return page.$$eval("svg[data-chart]", (svgs) => svgs.map((svg) => ({
    chart: svg.dataset.chart,
    label: svg.getAttribute("aria-label"),
    role: svg.getAttribute("role"),
    unit: svg.querySelector(".y-unit")?.textContent,
    values: [...svg.querySelectorAll(".y-tick")].map((t) => t.textContent),
    span: svg.querySelector(".x-span")?.textContent,
    minutes: Number(svg.dataset.tickMinutes),
    ticks: [...svg.querySelectorAll(".x-tick")].map((t) => ({ time: Number(t.dataset.time), label: t.textContent })),
  })));
}

// Asserts that every chart names its units and span, and ticks its time
// axis at round steps of the list: labels read on the clock they name.
function assertAxes(drawn, range, what) {
  assert.deepEqual(drawn.map((c) => c.chart).sort(), Object.keys(AXES).sort(), `${what}: every chart is drawn`);
  for (const c of drawn) {
    const expected = AXES[c.chart](c.chart === "requests" || c.chart === "failovers" ? PER[range] : "day");
    const name = `${what}, ${c.chart}`;
    assert.equal(c.unit, expected.unit, `${name}: the value axis names its unit`);
    assert.ok(c.values.length >= 2 && /^\$?0( ms| %)?$/.test(c.values[0]), `${name}: the value axis starts at 0: ${c.values}`);
    assert.match(c.values.at(-1), expected.top, `${name}: its top is labelled with the unit`);
    assert.match(c.span, SPAN, `${name}: the time axis names its first and last time and its clock`);
    assert.equal(c.role, "img", `${name}: an image to assistive technology`);
    assert.ok(c.label.includes(c.unit) && c.label.includes(c.span), `${name}: named with its unit and span: ${c.label}`);

    assert.ok(charts.TICK_STEPS.includes(c.minutes), `${name}: a tick step of the list, not ${c.minutes} minutes`);
    assert.ok(c.ticks.length >= 2, `${name}: at least two time ticks`);
    const offset = c.span.endsWith("UTC") ? 0 : ZONE.minutes;
    c.ticks.forEach(({ time, label }, i) => {
      const local = new Date(time + offset * MINUTE).toISOString();
      if (c.minutes < 1440) {
        const [hours, minutes] = label.split(":").map(Number);
        assert.equal(label, local.slice(11, 16), `${name}: tick ${i} is its time on the chart's clock`);
        assert.equal((hours * 60 + minutes) % c.minutes, 0, `${name}: ${label} is a whole ${c.minutes} minutes`);
      } else {
        assert.equal(label, local.slice(5, 10), `${name}: tick ${i} is its date on the chart's clock`);
        assert.equal(local.slice(11, 16), "00:00", `${name}: ${label} ticks at midnight`);
      }
      if (i > 0) assert.equal(time - c.ticks[i - 1].time, c.minutes * MINUTE, `${name}: ticks one step apart`);
    });
  }
}

// Every label of the page that sits in a card (a provider's, a chart's,
// the history's legends) and anything that overflows: a label sticking out
// of its card, cut short without an ellipsis and its full text in a title,
// or wrapped onto a second line; and each section that scrolls sideways.
function overflows(page) {
  return page.evaluate(() => {
    const found = [];
    const name = (el) => `${el.closest("[data-provider]")?.dataset.provider ??
      el.closest("figure")?.querySelector("[data-chart]")?.dataset.chart ?? el.closest("section").id}: "${el.textContent.trim()}"`;
    const labels = document.querySelectorAll(".card h3 > *, .card .row > *, .spark .fit, .chart h3, .legend span, .chart-svg text, .history-head label");
    for (const el of labels) {
      const box = el.getBoundingClientRect();
      const card = el.closest(".card, .chart, section").getBoundingClientRect();
      const frame = el.closest("svg")?.getBoundingClientRect() ?? card;
      if (box.left < Math.max(card.left, frame.left) - 0.5 || box.right > Math.min(card.right, frame.right) + 0.5) {
        found.push(`${name(el)} sticks out of its card`);
      }
      if (el instanceof HTMLElement && el.scrollWidth > el.clientWidth) {
        const style = getComputedStyle(el);
        if (style.textOverflow !== "ellipsis" || !el.title) found.push(`${name(el)} is cut without an ellipsis and a title`);
      }
      if (el instanceof HTMLElement && el.classList.contains("fit") && el.children.length === 0 && el.title !== el.textContent) {
        found.push(`${name(el)}'s title is not its full text`);
      }
      for (const node of el.childNodes) {
        if (node.nodeType !== Node.TEXT_NODE || !node.textContent.trim()) continue;
        const range = document.createRange();
        range.selectNodeContents(node);
        if (range.getClientRects().length > 1) found.push(`${name(el)} wraps`);
      }
    }
    for (const section of document.querySelectorAll("section")) {
      if (section.scrollWidth > section.clientWidth) found.push(`section ${section.id} scrolls sideways`);
    }
    if (document.documentElement.scrollWidth > window.innerWidth) found.push("the page scrolls sideways");
    return { found, labels: labels.length };
  });
}

// Each provider card's sparkline as drawn: its value labels, times and name.
function sparklines(page) {
  return page.$$eval("[data-provider] .spark", (sparks) => sparks.map((spark) => ({
    provider: spark.closest("[data-provider]").dataset.provider,
    left: [...spark.querySelectorAll(".left")].map((l) => l.textContent),
    right: [...spark.querySelectorAll(".right")].map((l) => l.textContent),
    times: [...spark.querySelectorAll(".times > *")].map((l) => l.textContent),
    role: spark.querySelector("svg").getAttribute("role"),
    label: spark.querySelector("svg").getAttribute("aria-label"),
  })));
}

test("every chart names its axes and units, ticks at round times and fits its card, on a phone and a desktop", { timeout: 150000 }, async () => {
  const demo = await start(["demo", "--listen", "127.0.0.1:0"]);
  const base = `http://${demo.addr}`;
  const browser = await launch();
  try {
    const { sent } = await sendWithAFailover(base, 4);
    await historyHolding(base, sent);
    for (const [device, width] of [["phone", 420], ["desktop", 1280]]) {
      const { page, errors } = await watchedPage(browser, { viewport: { width, height: 900 }, timezoneId: ZONE.id });
      await page.goto(`${base}/`);
      await page.waitForSelector('#history[data-state="drawn"]', { timeout: 15000 });
      await page.waitForFunction(() => document.querySelectorAll("[data-provider] .spark").length === 2);
      for (const range of ["30d", "7d", "24h", "1h"]) {
        await page.selectOption("#history-range", range);
        await page.waitForSelector(`#history[data-range="${range}"]`, { timeout: 15000 });
        assertAxes(await axes(page), range, `${device}, ${range}`);
        const { found, labels } = await overflows(page);
        assert.ok(labels > 100, `${device}, ${range}: the labels are found (${labels})`);
        assert.deepEqual(found, [], `${device}, ${range}: no label overflows its card, none wraps, nothing scrolls sideways`);
      }

      const sparks = await sparklines(page);
      assert.deepEqual(sparks.map((s) => s.provider).sort(), ["flaky-anthropic", "steady-openai"], `${device}: a sparkline per provider`);
      for (const s of sparks) {
        const what = `${device}, ${s.provider}'s sparkline`;
        assert.equal(s.left.length, 2, `${what}: the first token's top and bottom`);
        assert.ok(s.left.every((l) => / ms$/.test(l)) && s.left[1] === "0 ms", `${what}: in ms, from 0: ${s.left}`);
        assert.ok(s.right.every((l) => / failed$/.test(l)) && s.right[1] === "0 failed", `${what}: failed attempts, from 0: ${s.right}`);
        assert.ok(s.times.length === 2 && s.times.every((t) => /^\d\d:\d\d:\d\d$/.test(t)), `${what}: its first and last time: ${s.times}`);
        assert.equal(s.role, "img", `${what}: an image to assistive technology`);
        assert.match(s.label, /^first token up to .* ms and failed attempts .* from \d\d:\d\d:\d\d to \d\d:\d\d:\d\d$/, what);
      }

      mkdirSync(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: `${ARTIFACTS}/charts-${device}.png`, fullPage: true });
      assert.deepEqual(errors, [], `${device}: no script errors, every answer a success`);
      await page.close();
    }
  } finally {
    await browser.close();
    demo.proc.kill();
  }
});

// `baton serve` on a config with this `[store]`, with a provider nobody calls.
async function serveWithStore(store) {
  const dir = mkdtempSync(join(tmpdir(), "baton-charts-"));
  const config = `listen = "127.0.0.1:0"\n\n[[providers]]\nname = "idle"\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n\n` +
    `[[routes]]\nmodel = "chat"\ntargets = [{ provider = "idle", model = "m" }]\n\n${store(dir)}`;
  writeFileSync(join(dir, "baton.toml"), config);
  return { dir, ...(await start(["serve", "--config", join(dir, "baton.toml")])) };
}

test("without a store the page says no records are kept; with it down, that it is unavailable", { timeout: 90000 }, async () => {
  const off = await serveWithStore(() => '[store]\nbackend = "none"\n');
  const down = await serveWithStore((dir) => {
    writeFileSync(join(dir, "not-a-dir"), "");
    return `[store]\npath = "${join(dir, "not-a-dir", "baton.db")}"\n`;
  });
  const browser = await launch();
  try {
    const { page, errors } = await watchedPage(browser);
    await page.goto(`http://${off.addr}/`);
    await page.waitForSelector('#history[data-state="off"]', { timeout: 15000 });
    assert.match(await page.textContent("#history-note"), /^No records kept/);
    assert.equal(await page.isHidden("#history-charts"), true, "no charts without records");
    assert.equal(await page.$$eval("svg[data-chart]", (charts) => charts.length), 0);

    await page.goto(`http://${down.addr}/`);
    await page.waitForSelector('#history[data-state="down"]', { timeout: 15000 });
    assert.match(await page.textContent("#history-note"), /store is unavailable/);
    assert.equal(await page.isHidden("#history-charts"), true);
    const expected = ["404 /admin/history", "503 /admin/history"];
    assert.deepEqual([...new Set(errors)], expected, "no script errors, and no failed answer but the history's");
  } finally {
    await browser.close();
    for (const baton of [off, down]) {
      baton.proc.kill();
      rmSync(baton.dir, { recursive: true, force: true });
    }
  }
});
