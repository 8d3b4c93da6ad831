// The Codex CLI (`@openai/codex`), unmodified, run as `codex exec` against
// a running baton that holds a client key, through baton's Responses door
// (`POST /v1/responses`, `wire_api = "responses"`): the simulated model
// calls the first tool Codex offers, `exec_command`, with the command
// `Paris` (its example string); Codex runs it in its read-only sandbox in a
// throwaway directory, where bash answers "Paris: command not found"; Codex
// sends that back and prints the model's answer about it: from a target of
// every provider kind (OpenAI's two APIs, Anthropic, Gemini, Azure OpenAI,
// Bedrock through Converse, Gemini on Vertex AI), each with a route's
// defaults.
//
// Codex sends one thing no target but a Responses API can take: a
// `namespace` tool (`multi_agent_v1`, its sub-agent functions grouped). It
// asks nothing of the answer (Codex itself runs without it, `--disable
// multi_agent`), so with a route's defaults (`unsupported_params =
// "drop_safe"`) a target of another kind goes without it and baton answers
// with `x-baton-dropped-params: tools (namespace multi_agent_v1)` (only the
// namespace tool goes: the function tools stay). Its `client_metadata` (its
// ids for the session and turn) asks nothing of the answer and is left out.
// A recording proxy between Codex and baton keeps what Codex sent and
// baton's answer headers.
//
// What keeps the run offline, non-interactive and harmless, in the throwaway
// CODEX_HOME's config.toml (checked with `--strict-config`):
// * `approval_policy = "never"`: nobody is there to approve a command;
// * `sandbox_mode = "read-only"`: the model's commands may read, not write;
// * `check_for_update_on_startup = false`, `[analytics]`, `[feedback]`
//   disabled, `[history] persistence = "none"`, `web_search = "disabled"`;
// * `[features] plugins = false`: otherwise Codex syncs its curated plugins
//   from GitHub at start (a DNS lookup of api.github.com);
// * `request_max_retries = 0`, `stream_max_retries = 0`: a refusal fails at once.

import { after, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  assertAgentAnswered, assertChatToolRoundTrip, assertMessagesToolRoundTrip, recorded, recordingProxy as sharedRecordingProxy,
  cloudProvider, runAgent, serve, serveRoute, startMock, textOf,
} from "./gateway.mjs";

const here = new URL(".", import.meta.url).pathname;
const CODEX = join(here, "node_modules", ".bin", "codex");
const KEY = "sk-agent-test-0123456789abcdef";
/** What bash answers to the command the simulated model asks for. */
const RAN = "Paris: command not found";

const stops = [];
after(() => {
  for (const stop of stops) stop();
});

/** Starts a mock and keeps it to be stopped after the tests. */
async function mock(kind, args = []) {
  const started = await startMock(kind, { args });
  stops.push(() => started.proc.kill());
  return started;
}

/** Starts baton with the key "agent" and one route to these targets ([name, mock] pairs); resolves with its address. */
async function gateway(route, targets, routeExtra = "") {
  const { proc, addr } = await serveRoute(KEY, route, targets, routeExtra);
  stops.push(() => proc.kill());
  return addr;
}

/** The shared recording proxy in front of `upstream`, stopped after the tests. */
async function recordingProxy(upstream) {
  const proxy = await sharedRecordingProxy(upstream);
  stops.push(proxy.close);
  return proxy;
}

/** Codex's config.toml: `model` from a provider "baton" at `addr`, with `provider` more of its settings. */
function codexConfig(model, addr, provider = "") {
  return `model = "${model}"
model_provider = "baton"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false
web_search = "disabled"

[analytics]
enabled = false

[feedback]
enabled = false

[history]
persistence = "none"

[features]
plugins = false

[model_providers.baton]
name = "baton"
base_url = "http://${addr}/v1"
env_key = "BATON_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
${provider}`;
}

/**
 * Runs `codex exec --skip-git-repo-check "say something"` against baton
 * at `addr`, asking for `model`, with a throwaway CODEX_HOME, HOME and
 * working directory, stdin closed and only PATH, HOME, CODEX_HOME and
 * BATON_KEY in its environment; killed after a minute.
 */
function runCodex(addr, model, args = [], provider = "") {
  const codexHome = mkdtempSync(join(tmpdir(), "baton-codex-home-"));
  const home = mkdtempSync(join(tmpdir(), "baton-codex-user-"));
  const cwd = mkdtempSync(join(tmpdir(), "baton-codex-cwd-"));
  writeFileSync(join(codexHome, "config.toml"), codexConfig(model, addr, provider));
  const env = { PATH: process.env.PATH, HOME: home, CODEX_HOME: codexHome, BATON_KEY: KEY };
  const argv = ["exec", "--strict-config", "--skip-git-repo-check", ...args, "say something"];
  return runAgent(CODEX, argv, { cwd, env, dirs: [codexHome, home, cwd] });
}

/** Asserts Codex exited 0 and printed the model's answer about the command's output. */
function assertAnswered(run) {
  assertAgentAnswered("Codex", run, RAN);
}

/** The dropped-params header of an answer from a target that is not a Responses API. */
const NAMESPACE_DROPPED = "tools (namespace multi_agent_v1)";

/**
 * Asserts what Codex sent baton (two turns of one conversation) and what
 * baton answered: `dropped`, what it said it left out (null: nothing).
 */
function assertCodexAsked(exchanges, route, provider, dropped = NAMESPACE_DROPPED) {
  assert.equal(exchanges.length, 2, `Codex asked twice, before and after the command; got ${exchanges.map((e) => `${e.method} ${e.path}`)}`);
  for (const { method, path, headers, body, status, answerHeaders } of exchanges) {
    assert.deepEqual([method, path], ["POST", "/v1/responses"], "at the Responses API");
    assert.equal(headers.authorization, `Bearer ${KEY}`, "with the client key from env_key");
    assert.equal(headers.accept, "text/event-stream");
    assert.equal(headers.originator, "codex_exec");
    assert.match(headers["user-agent"], /^codex_exec\/0\.169\.0 /);
    assert.equal(body.model, route);
    assert.equal(body.stream, true, "Codex streams");
    assert.equal(body.store, false, "Codex asks for nothing to be stored");
    assert.deepEqual(body.include, ["reasoning.encrypted_content"]);
    assert.deepEqual(body.reasoning, { summary: "auto" });
    assert.equal(typeof body.prompt_cache_key, "string");
    assert.equal(typeof body.client_metadata, "object", "Codex sends its client_metadata");
    assert.equal(body.tools[0].name, "exec_command", "Codex's first tool is exec_command");
    assert.deepEqual([...new Set(body.tools.map((t) => t.type))].sort(), ["function", "namespace"],
      "function tools and a namespace tool");
    assert.equal(status, 200, `baton answered ${JSON.stringify(answerHeaders)}`);
    assert.equal(answerHeaders["content-type"], "text/event-stream");
    assert.equal(answerHeaders["x-baton-provider"], provider);
    assert.equal(answerHeaders["x-baton-dropped-params"] ?? null, dropped,
      "what no target but a Responses API takes, and asks nothing of the answer, was left out");
  }
  const input = exchanges[1].body.input;
  const call = input.find((item) => item.type === "function_call");
  assert.deepEqual([call?.name, JSON.parse(call?.arguments ?? "null")], ["exec_command", { cmd: "Paris" }],
    "the second turn sends back the call the first answered with");
  const output = input.find((item) => item.type === "function_call_output");
  assert.equal(output?.call_id, call.call_id, "and its output, for that call");
  assert.ok(output.output.includes(RAN), `which is what the sandboxed command printed: ${output.output}`);
}


/**
 * Runs Codex through a recording baton whose route `model` has one `kind`
 * target and baton's defaults: it answered, asked as Codex does, and the
 * target was asked twice. Resolves with the recording proxy and the
 * target's records.
 */
async function codexThrough(kind, model, dropped = NAMESPACE_DROPPED) {
  const target = await mock(kind);
  const proxy = await recordingProxy(await gateway(model, [[kind, target]]));

  const run = await runCodex(proxy.addr, model);
  assertAnswered(run);
  assertCodexAsked(proxy.exchanges, model, kind, dropped);

  const records = await recorded(target);
  assert.equal(records.length, 2, "the target was asked twice");
  return { proxy, records };
}

test("codex exec works through baton to an OpenAI-kind target", { timeout: 90000 }, async () => {
  const { proxy, records } = await codexThrough("openai", "codex-gpt");
  for (const { path, headers, body } of records) {
    assert.equal(path, "/v1/chat/completions", "asked at Chat Completions");
    assert.equal(headers.authorization, undefined, "the client's key is not sent on to the provider");
    assert.equal(body.model, "openai-sim", "the target's model");
    assert.equal(body.stream, true);
    assert.equal(body.client_metadata, undefined, "client_metadata was dropped");
    assert.ok(body.tools.every((t) => t.type === "function"), "only function tools reached the target");
    assert.equal(body.tools[0].function.name, "exec_command", "Codex's first tool, as a function");
    assert.equal(body.prompt_cache_key, proxy.exchanges[0].body.prompt_cache_key, "Codex's prompt_cache_key was sent on");
    assert.equal(body.messages[0].role, "system", "Codex's developer instructions, as a system message");
    assert.match(textOf(body.messages[0].content), /Codex CLI/);
  }
  assertChatToolRoundTrip(records[1].body.messages, "exec_command", { cmd: "Paris" }, RAN);
});

test("codex exec works through baton to an Anthropic-kind target", { timeout: 90000 }, async () => {
  const { proxy, records } = await codexThrough("anthropic", "codex-claude");
  for (const { path, headers, body } of records) {
    assert.equal(path, "/v1/messages", "asked at the Messages API");
    assert.equal(headers["anthropic-version"], "2023-06-01");
    assert.equal(headers.authorization, undefined, "the client's key is not sent on to the provider");
    assert.equal(body.model, "anthropic-sim", "the target's model");
    assert.equal(body.stream, true);
    assert.equal(body.client_metadata, undefined, "client_metadata was dropped");
    assert.equal(body.tools[0].name, "exec_command", "Codex's first tool");
    assert.ok(body.tools.every((t) => t.input_schema), "only function tools reached the target");
    assert.match(textOf(body.system), /Codex CLI/, "Codex's developer instructions, as the system prompt");
  }
  const words = "anthropic0 anthropic1 anthropic2";
  assertMessagesToolRoundTrip(records[1].body.messages, words, "exec_command", { cmd: "Paris" }, RAN);
});

// Every other kind, with a route's defaults: a Responses API takes Codex's
// body as sent, namespace tool and all; Gemini and Azure OpenAI go without
// the namespace tool.
test("codex exec works through baton to a Responses API target, its body as sent", { timeout: 90000 }, async () => {
  const { records } = await codexThrough("openai-responses", "codex-responses", null);
  for (const { path, body } of records) {
    assert.equal(path, "/v1/responses", "asked at the Responses API");
    assert.ok(body.tools.some((t) => t.type === "namespace"), "the namespace tool went along");
    assert.equal(body.store, false);
  }
});

for (const kind of ["gemini", "azure"]) {
  test(`codex exec works through baton to the ${kind} kind with a route's defaults`, { timeout: 90000 }, async () => {
    const { records } = await codexThrough(kind, `codex-${kind}`);
    assert.ok(records.every((r) => !JSON.stringify(r.body).includes("multi_agent_v1")), "the namespace tool was left out");
    assert.ok(JSON.stringify(records[0].body).includes("exec_command"), "Codex's functions went along");
  });
}

// The clouds, with a route's defaults: a model Bedrock serves through
// Converse, and a Gemini model on Vertex AI.
for (const [kind, model, args] of [
  ["bedrock", "amazon.nova-pro-v1:0", []],
  ["vertex", "gemini-2.5-flash", ["--api-key", "ya29.issued"]],
]) {
  test(`codex exec works through baton to ${model} on the ${kind} kind with a route's defaults`, { timeout: 90000 }, async () => {
    const target = await mock(kind, args);
    const route = `codex-${kind}`;
    const config = `listen = "127.0.0.1:0"\n\n[[keys]]\nname = "agent"\nkey = "${KEY}"\n\n${cloudProvider(kind, target)}
[[routes]]\nmodel = "${route}"\ntargets = [{ provider = "${kind}", model = "${model}" }]\n`;
    const { proc, addr } = await serve(config);
    stops.push(() => proc.kill());
    const proxy = await recordingProxy(addr);
    const run = await runCodex(proxy.addr, route);
    assertAnswered(run);
    assertCodexAsked(proxy.exchanges, route, kind);
    const answered = (await recorded(target)).filter((r) => r.path !== "/token");
    assert.equal(answered.length, 2, "the target was asked twice");
    assert.ok(answered.every((r) => !JSON.stringify(r.body).includes("multi_agent_v1")), "without the namespace tool");
  });
}

// `client_metadata` asks nothing of the answer, so a target goes without
// it, as with `store`: with Codex's namespace tool turned off
// (`--disable multi_agent`), Codex works on a route that drops nothing.
test("codex exec through a route that drops nothing, without Codex's namespace tool", { timeout: 90000 }, async () => {
  const openai = await mock("openai");
  const proxy = await recordingProxy(await gateway("codex-strict", [["openai", openai]], 'unsupported_params = "refuse"\n'));
  const run = await runCodex(proxy.addr, "codex-strict", ["--disable", "multi_agent"]);
  assert.deepEqual(proxy.exchanges.map((e) => e.status), [200, 200],
    `baton answered both turns: ${proxy.exchanges.map((e) => e.status)}; Codex said ${run.stderr.match(/ERROR: .*/)?.[0]}`);
  assertAnswered(run);
  const records = await recorded(openai);
  assert.equal(records.length, 2, "the target was asked twice");
  assert.ok(records.every((r) => r.body.client_metadata === undefined), "client_metadata was left out");
});

// Codex tries a WebSocket first when its provider says it supports them
// (`supports_websockets = true`): baton answers the upgrade 426, which
// Codex takes as "use HTTP" at once, where a 405 cost it seven retries,
// about 6 s a turn. Codex talks to baton directly here: the recording
// proxy speaks no upgrades. The bound on the run is generous (a loaded
// machine); the count of knocks is exact.
test("codex exec with WebSockets enabled falls back to HTTP at once on baton's 426", { timeout: 90000 }, async () => {
  const openai = await mock("openai");
  const addr = await gateway("codex-ws", [["openai", openai]]);
  const started = Date.now();
  const run = await runCodex(addr, "codex-ws", [], "supports_websockets = true\n");
  const took = Date.now() - started;
  assertAnswered(run);
  const metrics = await (await fetch(`http://${addr}/metrics`)).text();
  const knocks = Number(/^baton_unknown_endpoint_total\{method="GET"\} (\d+)/m.exec(metrics)?.[1] ?? 0);
  assert.ok(knocks >= 1, `Codex asked for a WebSocket and was answered 426:\n${metrics}`);
  assert.ok(knocks <= 2, `and did not retry it: ${knocks} upgrades for two turns`);
  assert.equal((await recorded(openai)).length, 2, "both turns were answered over HTTP");
  assert.ok(took < 30000, `the run took ${took} ms`);
});

