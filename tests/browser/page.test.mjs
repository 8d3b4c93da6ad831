// The page at `/`, in Debian's headless Chromium driven by playwright-core,
// against a running `baton demo`: send prompts from the playground, see the
// streamed answer and who answered, and see failovers on the live status.

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

const here = new URL(".", import.meta.url).pathname;
const BATON = process.env.BATON_BIN ?? `${here}../../target/debug/baton`;
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const ARTIFACTS = `${here}artifacts`;

/** Starts `baton args…`; resolves with the process and its address once it serves. */
function startBaton(args) {
  const proc = spawn(BATON, args, {
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, RUST_LOG: "info" },
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`baton ${args[0]} did not start`)), 20000);
    createInterface({ input: proc.stderr }).on("line", (line) => {
      const match = /is serving.*listen=(\S+)/.exec(line);
      if (match) {
        clearTimeout(timer);
        resolve({ proc, addr: match[1], url: `http://${match[1]}/` });
      }
    });
    proc.on("exit", (code) => reject(new Error(`baton ${args[0]} exited with ${code}`)));
  });
}

const startDemo = () => startBaton(["demo", "--listen", "127.0.0.1:0"]);

const CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];

test("the playground streams answers and the live status shows failovers", { timeout: 90000 }, async () => {
  const { proc, url } = await startDemo();
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    await page.goto(url);
    await page.waitForFunction(() => document.querySelectorAll("#route option").length > 0);
    assert.equal(await page.inputValue("#route"), "chat", "the demo's route is offered");

    const providers = new Set();
    for (let i = 0; i < 6; i++) {
      await page.fill("#prompt", `hello from the browser, try ${i}`);
      await page.click("#send");
      await page.waitForFunction(() => ["done", "failed", "cut off"].includes(document.getElementById("state").textContent),
        null, { timeout: 20000 });
      assert.equal(await page.textContent("#state"), "done", "every answer completes");
      const provider = await page.textContent("#provider");
      const answer = await page.textContent("#answer");
      const marker = { "flaky-anthropic": "flaky", "steady-openai": "steady" }[provider];
      assert.ok(marker, `a demo provider answered: ${provider}`);
      const words = Array.from({ length: 24 }, (_, n) => `${marker}${n}`).join(" ");
      assert.equal(answer, words, "the streamed text is exactly the answering provider's");
      providers.add(provider);
    }
    assert.ok(providers.has("steady-openai"), "the flaky primary failed over at least once");

    await page.waitForSelector('[data-provider="flaky-anthropic"]');
    await page.waitForFunction(() => {
      const cells = document.querySelectorAll("#status-routes tbody td");
      return cells.length >= 3 && Number(cells[1].textContent) >= 6 && Number(cells[2].textContent) >= 1;
    }, null, { timeout: 10000 });
    const failedAttempts = await page.textContent('[data-provider="flaky-anthropic"]');
    assert.match(failedAttempts, /last failure/, "the flaky provider's card is shown");
    await page.waitForFunction(() => /^\$0\.0*[1-9]/.test(document.getElementById("status-spend").textContent),
      null, { timeout: 10000 });
    assert.match(await page.textContent('[data-provider="steady-openai"]'), /spend \$0\.\d{4}/, "the demo's priced answers show their spend");

    // The demo's drill (every 30 s, first at a random moment within that)
    // fails the flaky provider on purpose; the page shows the steady one answered.
    await page.waitForSelector('#status-drills tr[data-drill="chat"][data-result="passed"]', { timeout: 45000 });
    assert.match(await page.textContent('#status-drills tr[data-drill="chat"]'), /flaky-anthropic=http_5xx.*steady-openai/,
      "the drill, what it failed and who answered are shown");

    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: `${ARTIFACTS}/page.png`, fullPage: true });
  } finally {
    await browser.close();
    proc.kill();
  }
});

test("with client keys, the playground says it needs one and works with it, on a phone and a desktop", { timeout: 90000 }, async () => {
  const mock = await startBaton(["mock", "--kind", "openai", "--listen", "127.0.0.1:0", "--marker", "keyed",
    "--tokens", "3", "--first-token-ms", "5", "--gap-ms", "2"]);
  const dir = mkdtempSync(join(tmpdir(), "baton-page-"));
  const config = join(dir, "baton.toml");
  const KEY = "sk-page-test-0123456789";
  writeFileSync(config, `listen = "127.0.0.1:0"\n\n[[keys]]\nname = "page"\nkey = "${KEY}"\n\n` +
    `[[providers]]\nname = "gpt"\nkind = "openai"\nbase_url = "http://${mock.addr}/v1"\n\n` +
    `[[routes]]\nmodel = "chat"\ntargets = [{ provider = "gpt", model = "gpt-sim" }]\n`);
  const serve = await startBaton(["serve", "--config", config]);
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  try {
    for (const [name, viewport] of [["phone", { width: 420, height: 860 }], ["desktop", { width: 1280, height: 860 }]]) {
      const page = await browser.newPage({ viewport });
      await page.goto(serve.url);
      await page.waitForFunction(() => document.getElementById("state").textContent === "needs a key");
      assert.match(await page.textContent("#route"), /needs a key/, `${name}: the route list says why it is empty`);
      assert.ok(await page.isDisabled("#send"), `${name}: nothing to send without a key`);

      await page.fill("#key", KEY);
      await page.dispatchEvent("#key", "change");
      await page.waitForFunction(() => document.querySelectorAll("#route option:not([disabled])").length > 0);
      assert.equal(await page.inputValue("#route"), "chat");
      await page.click("#send");
      await page.waitForFunction(() => ["done", "failed", "cut off"].includes(document.getElementById("state").textContent),
        null, { timeout: 20000 });
      assert.equal(await page.textContent("#answer"), "keyed0 keyed1 keyed2", `${name}: the answer came with the key`);
      assert.equal(await page.evaluate(() => sessionStorage.getItem("baton-client-key")), KEY, "kept in the tab's session");
      assert.equal(await page.evaluate(() => localStorage.getItem("baton-client-key")), null, "and nowhere longer-lived");
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 0, `${name}: no sideways scroll (${overflow} px too wide)`);
      const sideways = await page.$$eval("section", (sections) =>
        sections.filter((s) => s.scrollWidth > s.clientWidth).map((s) => s.id));
      assert.deepEqual(sideways, [], `${name}: no section scrolls sideways either (the status tables fit)`);

      mkdirSync(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: `${ARTIFACTS}/page-keyed-${name}.png`, fullPage: true });
      await page.close();
    }
  } finally {
    await browser.close();
    serve.proc.kill();
    mock.proc.kill();
  }
});
