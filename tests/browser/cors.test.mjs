// A page on another origin streams from baton with `fetch`, in Debian's
// headless Chromium: baton's `cors_origins` lets that origin through (the
// preflight, the stream, the exposed `x-baton-*` headers) and not another.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { start } from "../clients/node/gateway.mjs";

const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";

// The page: it streams a chat answer from `baton` and reports what it read.
const PAGE = `<!doctype html><meta charset="utf-8"><title>another origin</title>
<script>
async function ask(baton) {
  try {
    const response = await fetch(baton + "/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer not-needed-on-loopback" },
      body: JSON.stringify({ model: "chat", stream: true, messages: [{ role: "user", content: "hi" }] }),
    });
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let raw = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      raw += decoder.decode(value, { stream: true });
    }
    let text = "";
    for (const line of raw.split("\\n")) {
      if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
      text += JSON.parse(line.slice(6)).choices[0]?.delta?.content ?? "";
    }
    return { ok: true, status: response.status, provider: response.headers.get("x-baton-provider"),
      done: raw.includes("data: [DONE]"), text };
  } catch (err) {
    return { ok: false, error: String(err) };
  }
}
</script>`;

function servePage() {
  const server = createServer((_, response) => {
    response.writeHead(200, { "content-type": "text/html" });
    response.end(PAGE);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

test("a page on an allowed origin streams from baton, and one on another origin is refused", { timeout: 90000 }, async () => {
  const [allowed, foreign] = [await servePage(), await servePage()];
  const allowedOrigin = `http://127.0.0.1:${allowed.address().port}`;
  const foreignOrigin = `http://127.0.0.1:${foreign.address().port}`;
  const procs = [];
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  try {
    const mock = await start(["mock", "--kind", "openai", "--listen", "127.0.0.1:0", "--marker", "cors", "--tokens", "4"]);
    procs.push(mock.proc);
    const config = `listen = "127.0.0.1:0"\ncors_origins = ["${allowedOrigin}"]\n\n` +
      `[[providers]]\nname = "sim"\nkind = "openai"\nbase_url = "http://${mock.addr}/v1"\n\n` +
      `[[routes]]\nmodel = "chat"\ntargets = [{ provider = "sim", model = "m" }]\n`;
    const path = join(mkdtempSync(join(tmpdir(), "baton-cors-")), "baton.toml");
    writeFileSync(path, config);
    const baton = await start(["serve", "--config", path]);
    procs.push(baton.proc);
    const batonUrl = `http://${baton.addr}`;

    const page = await browser.newPage();
    await page.goto(`${allowedOrigin}/`);
    const got = await page.evaluate((url) => ask(url), batonUrl);
    assert.equal(got.ok, true, `the allowed origin's fetch works: ${got.error}`);
    assert.equal(got.status, 200);
    assert.equal(got.text, "cors0 cors1 cors2 cors3", "the page read the whole streamed answer");
    assert.equal(got.done, true, "and its end");
    assert.equal(got.provider, "sim", "the exposed x-baton-provider is readable by the page");

    const other = await browser.newPage();
    await other.goto(`${foreignOrigin}/`);
    const refused = await other.evaluate((url) => ask(url), batonUrl);
    assert.equal(refused.ok, false, "another origin's page cannot read baton's answer");
  } finally {
    await browser.close();
    for (const p of procs) p.kill();
    allowed.close();
    foreign.close();
  }
});
