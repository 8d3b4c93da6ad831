import { test } from "node:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runAgent, serveRoute, startMock, recordingProxy } from "/work/main/tests/clients/node/gateway.mjs";
const here = "/work/main/tests/clients/node/";
const KEY = "sk-agent-test-0123456789abcdef";
const CLAUDE = join(here, "node_modules", ".bin", "claude");
const CODEX = join(here, "node_modules", ".bin", "codex");
const procs = [];
function runClaude(baseURL, model) {
  const home = mkdtempSync(join(tmpdir(), "x-")); const cwd = mkdtempSync(join(tmpdir(), "x-"));
  writeFileSync(join(cwd, "Paris"), `18C\n`);
  const env = { PATH: process.env.PATH, HOME: home, ANTHROPIC_BASE_URL: baseURL, ANTHROPIC_API_KEY: KEY, ANTHROPIC_MODEL: model,
    ANTHROPIC_DEFAULT_HAIKU_MODEL: model, ANTHROPIC_SMALL_FAST_MODEL: model, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1", DISABLE_AUTOUPDATER: "1", DISABLE_TELEMETRY: "1" };
  return runAgent(CLAUDE, ["-p", "say something", "--tools", "Read"], { cwd, env, dirs: [home, cwd] });
}
function runCodex(addr, model) {
  const codexHome = mkdtempSync(join(tmpdir(), "x-")); const home = mkdtempSync(join(tmpdir(), "x-")); const cwd = mkdtempSync(join(tmpdir(), "x-"));
  writeFileSync(join(codexHome, "config.toml"), `model = "${model}"\nmodel_provider = "baton"\napproval_policy = "never"\nsandbox_mode = "read-only"\ncheck_for_update_on_startup = false\nweb_search = "disabled"\n[analytics]\nenabled = false\n[feedback]\nenabled = false\n[history]\npersistence = "none"\n[features]\nplugins = false\n[model_providers.baton]\nname = "baton"\nbase_url = "http://${addr}/v1"\nenv_key = "BATON_KEY"\nwire_api = "responses"\nrequest_max_retries = 0\nstream_max_retries = 0\n`);
  const env = { PATH: process.env.PATH, HOME: home, CODEX_HOME: codexHome, BATON_KEY: KEY };
  return runAgent(CODEX, ["exec", "--skip-git-repo-check", "say something"], { cwd, env, dirs: [codexHome, home, cwd] });
}
for (const kind of ["openai", "gemini"]) {
  test(`agents through ${kind}`, { timeout: 200000 }, async () => {
    const m = await startMock(kind); procs.push(m.proc);
    const mm = m;
    const extra = kind === "openai-responses" ? "" : "";
    const { proc, addr } = await serveRoute(KEY, "claude-sonnet-4-5", [[kind.replace("-", "_"), mm]]); procs.push(proc);
    const proxy = await recordingProxy(addr);
    const c = await runClaude(`http://${proxy.addr}`, "claude-sonnet-4-5");
    console.log("CLAUDE", kind, c.code, JSON.stringify(proxy.exchanges.map((e) => [e.status, e.answerHeaders?.["x-baton-dropped-params"]])), c.stdout.slice(0, 300), c.stderr.slice(0, 300));
    for (const e of proxy.exchanges) console.log("REQ", e.status, JSON.stringify(Object.keys(e.body)), JSON.stringify(e.body.thinking), JSON.stringify(e.body.output_config), JSON.stringify(e.body.context_management)?.slice(0,200), e.path);
    proxy.exchanges.length = 0;
    if (true) return;
    const x = await runCodex(proxy.addr, "claude-sonnet-4-5");
    console.log("CODEX", kind, x.code, JSON.stringify(proxy.exchanges.map((e) => [e.status, e.answerHeaders?.["x-baton-dropped-params"]])), x.stdout.slice(0, 200), (x.stderr.match(/ERROR.*/) ?? [""])[0].slice(0, 400));
    proxy.close();
  });
}
process.on("exit", () => procs.forEach((p) => p.kill()));
