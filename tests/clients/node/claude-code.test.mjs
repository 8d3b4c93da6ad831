// Claude Code (`@anthropic-ai/claude-code`), unmodified, run as `claude -p`
// against a running baton that holds a client key: its agent loop works
// through baton's Anthropic Messages door — the simulated model calls
// Claude Code's Read tool, Claude Code reads the file and sends the result
// back, and prints the model's answer about it — both from an Anthropic-kind
// target (sent Claude Code's own body and beta headers) and, when that
// target fails, from an OpenAI-kind one; and through a route with baton's
// defaults to a target of every other kind, which goes without the
// Anthropic-only fields that ask nothing of the answer
// (`context_management`, `thinking.display`, `metadata.user_id`), named in
// `x-baton-dropped-params`.
//
// Two things keep the run short and offline:
// * `--tools Read`: a simulated provider calls the first tool offered on
//   every turn, and Claude Code's first default tool (Agent) starts
//   background agents that call tools in turn, so with every tool the run
//   never ends. With Read alone, the model reads `./Paris` (its example
//   argument) and the conversation ends after the tool's result.
// * The main routes are named `claude-sonnet-4-5`, a model Claude Code knows;
//   the last test names one it does not know, for which Claude Code sends a
//   `role: "system"` message inside `messages`.

import { after, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  assertAgentAnswered, assertChatToolRoundTrip, assertMessagesToolRoundTrip, cloudProvider, recorded, recordingProxy,
  runAgent, serve, serveRoute, startMock,
} from "./gateway.mjs";

const here = new URL(".", import.meta.url).pathname;
const CLAUDE = join(here, "node_modules", ".bin", "claude");
const KEY = "sk-agent-test-0123456789abcdef";
const ROUTE = "claude-sonnet-4-5";
/** What `./Paris` holds, so the answer about the tool's result can be recognised. */
const WEATHER = "18C and sunny in Paris";

const procs = [];
after(() => {
  for (const p of procs) p.kill();
});

/** Starts a mock and keeps it to be stopped after the tests. */
async function mock(kind, args = []) {
  const started = await startMock(kind, { args });
  procs.push(started.proc);
  return started;
}

/** Starts baton with the key "agent" and one route to these targets ([name, mock] pairs). */
async function gateway(route, targets, routeExtra = "") {
  const { proc, addr } = await serveRoute(KEY, route, targets, routeExtra);
  procs.push(proc);
  return `http://${addr}`;
}

/**
 * Runs `claude -p "say something" --tools Read` against baton at `baseURL`
 * (no /v1: Claude Code adds it), asking for `model`, in a throwaway HOME and
 * working directory holding `./Paris`; killed after a minute.
 */
function runClaude(baseURL, model) {
  const home = mkdtempSync(join(tmpdir(), "baton-claude-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "baton-claude-cwd-"));
  writeFileSync(join(cwd, "Paris"), `${WEATHER}\n`);
  const env = {
    PATH: process.env.PATH,
    HOME: home,
    ANTHROPIC_BASE_URL: baseURL,
    ANTHROPIC_API_KEY: KEY,
    ANTHROPIC_MODEL: model,
    ANTHROPIC_DEFAULT_HAIKU_MODEL: model,
    ANTHROPIC_SMALL_FAST_MODEL: model,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    DISABLE_AUTOUPDATER: "1",
    DISABLE_TELEMETRY: "1",
  };
  return runAgent(CLAUDE, ["-p", "say something", "--tools", "Read"], { cwd, env, dirs: [home, cwd] });
}

/** Asserts Claude Code exited 0 and printed the model's answer about a
 * tool's result: by default Read's, of `./Paris`. */
function assertAnswered(run, result = WEATHER) {
  assertAgentAnswered("Claude Code", run, result);
}

test("claude -p works through baton to an Anthropic-kind target", { timeout: 90000 }, async () => {
  const anthropic = await mock("anthropic");
  const baseURL = await gateway(ROUTE, [["anthropic", anthropic]]);

  const run = await runClaude(baseURL, ROUTE);
  assertAnswered(run);

  const records = await recorded(anthropic);
  assert.equal(records.length, 2, `the model was asked twice: before and after the tool; got ${records.map((r) => r.path)}`);
  for (const { path, headers } of records) {
    assert.match(path, /^\/v1\/messages(\?beta=true)?$/, "asked at the Messages API");
    assert.match(headers["anthropic-beta"] ?? "", /claude-code-20250219/, "Claude Code's beta header was sent on");
    assert.equal(headers["anthropic-version"], "2023-06-01", "Claude Code's anthropic-version was sent on");
    assert.equal(headers["x-api-key"], undefined, "the client's key is not sent on to the provider");
  }
  const [first, second] = records.map((r) => r.body);
  assert.equal(first.model, "anthropic-sim", "the target's model");
  assert.equal(first.stream, true, "Claude Code streams");
  assert.deepEqual(first.tools.map((t) => t.name), ["Read"], "Claude Code offered its Read tool");
  assert.ok(first.system, "Claude Code's system prompt came through");

  assertMessagesToolRoundTrip(second.messages, "anthropic0 anthropic1 anthropic2", "Read", { file_path: "Paris" }, WEATHER);
});

test("claude -p fails over from a failing Anthropic target to an OpenAI-kind one", { timeout: 90000 }, async () => {
  const failing = await mock("anthropic", ["--fault", "http_5xx"]);
  const openai = await mock("openai");
  const baseURL = await gateway(ROUTE, [["anthropic", failing], ["openai", openai]]);

  const run = await runClaude(baseURL, ROUTE);
  assertAnswered(run);

  const tried = await recorded(failing);
  assert.equal(tried.length, 2, "each of the two requests was tried on the Anthropic target first");
  for (const { path, fault, body } of tried) {
    assert.equal(path, "/v1/messages", "asked at the Messages API");
    assert.equal(fault, "http_5xx", "and failed there");
    assert.ok(body.context_management, "the Anthropic target was sent Claude Code's context_management as it was");
  }

  const records = await recorded(openai);
  assert.equal(records.length, 2, "the OpenAI target answered both requests");
  for (const { path, body } of records) {
    assert.equal(path, "/v1/chat/completions", "asked at Chat Completions");
    assert.equal(body.context_management, undefined, "the field an OpenAI target cannot take was dropped");
    assert.equal(body.model, "openai-sim", "the target's model");
  }
  const [first, second] = records.map((r) => r.body);
  assert.deepEqual(first.tools.map((t) => t.function.name), ["Read"], "Claude Code's Read tool, as a function");
  assert.equal(first.messages[0].role, "system", "Claude Code's system prompt, as a system message");
  assertChatToolRoundTrip(second.messages, "Read", { file_path: "Paris" }, WEATHER);
});

// With a route's defaults (`unsupported_params = "drop_safe"`), every kind
// answers Claude Code: what of its body only Anthropic's API takes and asks
// nothing of the answer is left out, and the answer names it.
for (const kind of ["openai", "openai-responses", "gemini", "azure"]) {
  test(`claude -p through a route with baton's defaults to the ${kind} kind`, { timeout: 90000 }, async () => {
    const target = await mock(kind);
    const proxy = await recordingProxy((await gateway(ROUTE, [[kind, target]])).replace("http://", ""));
    procs.push({ kill: proxy.close });
    const run = await runClaude(`http://${proxy.addr}`, ROUTE);
    assertAnswered(run);
    const statuses = proxy.exchanges.map((e) => e.status);
    assert.ok(statuses.length >= 2 && statuses.every((status) => status === 200), `every request answered: ${statuses}`);
    const dropped = proxy.exchanges.map((e) => e.answerHeaders["x-baton-dropped-params"] ?? "");
    assert.ok(dropped.every((names) => names.includes("context_management")), `named what was left out: ${dropped}`);
    assert.equal((await recorded(target)).length, statuses.length, "the target answered every request");
  });
}

// Claude Code takes a model name it does not know for one of the newest
// models and sends part of its prompt as a `role: "system"` message after
// the user's turn: baton takes it as an instruction in its place. For such
// a model Claude Code also offers a placeholder tool first, which the
// simulated model calls, and Claude Code answers that it has no such tool.
test("claude -p with a route name Claude Code does not know", { timeout: 90000 }, async () => {
  const anthropic = await mock("anthropic");
  const baseURL = await gateway("coder", [["anthropic", anthropic]]);
  const run = await runClaude(baseURL, "coder");
  assertAnswered(run, "No such tool available: DeferredToolPlaceholder");
  const roles = (await recorded(anthropic)).flatMap((r) => r.body.messages.map((m) => m.role));
  assert.ok(roles.includes("system"), `the mid-conversation system message went to the target as sent: ${roles}`);
});

/**
 * The same model on three clouds: Claude Code's request, rate-limited by
 * Anthropic and by Bedrock (429), is answered by Vertex AI; each of the
 * three got its body as Claude Code wrote it — system prompt with its cache
 * hints, tools, messages, metadata and any thinking — but for what each API
 * sets itself (`model`, `stream`, `anthropic_version`, Bedrock's
 * `anthropic_beta`). Vertex's token is fetched with the test-only service
 * account's key, its `token_uri` the simulated Vertex's own.
 */
test("claude -p fails over from Anthropic to Bedrock to Vertex with its body unchanged", { timeout: 90000 }, async () => {
  const anthropic = await mock("anthropic", ["--fault", "http_429"]);
  const bedrock = await mock("bedrock", ["--fault", "http_429"]);
  const vertex = await mock("vertex", ["--api-key", "ya29.issued"]);
  const config = `listen = "127.0.0.1:0"

[[keys]]
name = "agent"
key = "${KEY}"

[[providers]]
name = "anthropic"
kind = "anthropic"
base_url = "http://${anthropic.addr}"

${cloudProvider("bedrock", bedrock)}
${cloudProvider("vertex", vertex)}
[[routes]]
model = "${ROUTE}"
max_retry_wait_ms = 0
targets = [
  { provider = "anthropic", model = "claude-sonnet-4-5" },
  { provider = "bedrock", model = "anthropic.claude-sonnet-4-5-20250929-v1:0" },
  { provider = "vertex", model = "claude-sonnet-4-5@20250929" },
]
`;
  const { proc, addr } = await serve(config);
  procs.push(proc);

  const run = await runClaude(`http://${addr}`, ROUTE);
  assertAnswered(run);

  const [first] = await recorded(anthropic);
  const [signed] = await recorded(bedrock);
  const answered = (await recorded(vertex)).filter((r) => r.path !== "/token");
  assert.ok(first && signed && answered.length === 2, "Anthropic and Bedrock were tried, and Vertex answered both turns");
  const own = ["model", "stream", "anthropic_version", "anthropic_beta"];
  const asWritten = (body) => Object.fromEntries(Object.entries(body).filter(([name]) => !own.includes(name)));
  assert.ok(first.body.system.some((block) => block.cache_control), "Claude Code marks its system prompt for the cache");
  assert.deepEqual(asWritten(signed.body), asWritten(first.body), "Bedrock got Claude Code's body as written");
  assert.deepEqual(asWritten(answered[0].body), asWritten(first.body), "and so did Vertex");
  assert.equal(signed.body.anthropic_version, "bedrock-2023-05-31");
  assert.match(signed.headers.authorization, /^AWS4-HMAC-SHA256 Credential=AKIDCONFIG\//, "signed with SigV4");
  assert.equal(answered[0].headers.authorization, "Bearer ya29.issued", "with the exchanged token");
  assert.match(answered[0].headers["anthropic-beta"] ?? "", /claude-code-20250219/, "the betas in Vertex's header");
  assertMessagesToolRoundTrip(answered[1].body.messages, "vertex0 vertex1 vertex2", "Read", { file_path: "Paris" }, WEATHER);
});

