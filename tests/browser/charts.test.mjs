// The page's history charts, in Debian's headless Chromium driven by
// playwright-core: against a running `baton demo` (which records into a
// temporary SQLite file), requests sent with a failover among them are
// drawn — per provider over time, spend per day, each route's failover rate
// per day with the demo's drills apart, and the failovers' cost against the
// route's first target. Without a store the page says no
// records are kept; with the store down, that it is unavailable.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { start } from "../clients/node/gateway.mjs";

const here = new URL(".", import.meta.url).pathname;
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const ARTIFACTS = `${here}artifacts`;
const ROWS_WITHIN_MS = 15000;

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
