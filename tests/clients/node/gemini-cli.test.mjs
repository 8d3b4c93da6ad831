// The Gemini CLI (`@google/gemini-cli`), unmodified, run as `gemini -p`
// against a running baton that holds a client key, through baton's Gemini
// door (`POST /v1beta/models/{route}:streamGenerateContent?alt=sse`, the key
// in `x-goog-api-key`): the simulated model calls the first tool the CLI
// offers, `read_file`, with `Paris` (its example string); the CLI reads
// `./Paris`, sends its text back as a `functionResponse` and prints both of
// the model's answers — from an OpenAI-kind target, and, when a Gemini-kind
// target fails (503), from an Anthropic-kind one; and when every target
// fails, the CLI prints baton's error, in Google's shape. A recording proxy
// between the CLI and baton keeps what the CLI sent and baton's answer
// headers.
//
// What the CLI needs to talk to baton, and to keep the run short, offline
// and non-interactive:
// * `GOOGLE_GEMINI_BASE_URL=http://<baton>` (the CLI adds
//   `/v1beta/models/...`) and `GEMINI_API_KEY=<the client key>`, which it
//   sends as `x-goog-api-key`.
// * In the throwaway HOME's `.gemini/settings.json`:
//   - `security.auth.selectedType = "gemini-api-key"`: with the base URL set
//     the CLI takes its auth type from the environment as "gateway", which
//     `-p` refuses ("Invalid auth method selected.", exit 41);
//   - `tools.core = ["read_file"]`: a simulated provider calls the first
//     tool offered, and the CLI's first is `update_topic` (its progress
//     narration); with `read_file` alone the model reads `./Paris`, and the
//     conversation ends after the tool's result;
//   - `privacy.usageStatisticsEnabled = false`: otherwise the CLI sends its
//     usage statistics to play.googleapis.com;
//   - `general.maxAttempts = 1`: the CLI retries a failed or unfinished
//     answer up to 10 times with backoff; with one attempt a failure shows
//     at once, and a failover is baton's, not the CLI's retry.
// * `GEMINI_CLI_TRUST_WORKSPACE=true`: `-p` refuses to run in a folder not
//   trusted (exit 55).
// * `TMPDIR` in the throwaway HOME: the CLI writes a report of every failed
//   request to the temporary directory (`gemini-client-error-*.json`).
// * `GEMINI_CLI_NO_RELAUNCH=true`: otherwise the CLI runs itself again as a
//   child process (to raise its heap limit), and the kill after the timeout
//   would end the parent only and leave the child running.
// * `-m <route>`: otherwise it asks for "auto", which is first a classifier
//   model (`gemini-3.5-flash-lite`, a whole answer in a JSON schema), then
//   the model the classifier's score picks (`gemini-3.8-flash` for a simple
//   prompt, `gemini-3.1-pro-preview` for a complex one); one test runs it
//   so, through a route whose aliases are those names.

import { after, test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  assertChatToolRoundTrip, assertMessagesToolRoundTrip, recorded, recordingProxy, runAgent, serveRoute, startMock,
} from "./gateway.mjs";

const here = new URL(".", import.meta.url).pathname;
const GEMINI = join(here, "node_modules", ".bin", "gemini");
const KEY = "sk-agent-test-0123456789abcdef";
const ROUTE = "gemini-cli-sim";
/** What `./Paris` holds, so the answer about the tool's result can be recognised. */
const WEATHER = "18C and sunny in Paris";

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

/**
 * Starts baton with the key "agent" and one route to these targets ([name,
 * mock] pairs), and a recording proxy in front of it; resolves with the proxy.
 */
async function gateway(route, targets, routeExtra = "") {
  const { proc, addr } = await serveRoute(KEY, route, targets, routeExtra);
  stops.push(() => proc.kill());
  const proxy = await recordingProxy(addr);
  stops.push(proxy.close);
  return proxy;
}

/** The CLI's settings.json (see the top of this file). */
const SETTINGS = {
  security: { auth: { selectedType: "gemini-api-key" } },
  tools: { core: ["read_file"] },
  privacy: { usageStatisticsEnabled: false },
  general: { maxAttempts: 1 },
};

/**
 * Runs `gemini -p "say something" -m <route>` (no `-m` when `route` is
 * null: the CLI's "auto") against baton at `addr`, in
 * a throwaway HOME (also its TMPDIR) and working directory holding
 * `./Paris`, stdin closed and only PATH, HOME, TMPDIR and the CLI's
 * settings in its environment; killed after a minute.
 */
function runGemini(addr, route) {
  const home = mkdtempSync(join(tmpdir(), "baton-gemini-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "baton-gemini-cwd-"));
  mkdirSync(join(home, ".gemini"));
  writeFileSync(join(home, ".gemini", "settings.json"), JSON.stringify(SETTINGS));
  writeFileSync(join(cwd, "Paris"), `${WEATHER}\n`);
  const env = {
    PATH: process.env.PATH,
    HOME: home,
    TMPDIR: home,
    GOOGLE_GEMINI_BASE_URL: `http://${addr}`,
    GEMINI_API_KEY: KEY,
    GEMINI_CLI_TRUST_WORKSPACE: "true",
    GEMINI_CLI_NO_RELAUNCH: "true",
  };
  const model = route === null ? [] : ["-m", route];
  return runAgent(GEMINI, ["-p", "say something", ...model], { cwd, env, dirs: [home, cwd] });
}

/** How a run ended and what it printed, for a failed assertion's message. */
function told(run) {
  return `exit ${run.code}${run.timedOut ? " (killed after the timeout)" : ""}\nstdout: ${run.stdout}\nstderr: ${run.stderr}`;
}

/** Asserts the CLI exited 0 and printed the model's two answers: `words`, then the one about `./Paris`. */
function assertAnswered(run, words) {
  const said = told(run);
  assert.equal(run.code, 0, `the Gemini CLI exits 0; got ${said}`);
  assert.deepEqual(run.stdout.trimEnd().split("\n"), [words, `the tool said: ${WEATHER}`],
    `it prints the model's first words, then its answer about the tool's result; got ${said}`);
}

/**
 * Asserts what the CLI sent baton (two turns of one conversation, the second
 * with the model's `words` and call of read_file, then the file's text) and
 * that baton answered both from `provider` after `attempts` attempts.
 */
function assertGeminiAsked(exchanges, route, words, provider, attempts) {
  assert.equal(exchanges.length, 2,
    `the CLI asked twice, before and after the tool; got ${exchanges.map((e) => `${e.method} ${e.path} ${e.status}`)}`);
  for (const { method, path, headers, body, status, answerHeaders } of exchanges) {
    assert.deepEqual([method, path], ["POST", `/v1beta/models/${route}:streamGenerateContent?alt=sse`],
      "at the Gemini door, streamed");
    assert.equal(headers["x-goog-api-key"], KEY, "with the client key from GEMINI_API_KEY");
    assert.match(headers["user-agent"], /^GeminiCLI[^/]*\/0\.61\.0\//);
    assert.deepEqual(body.tools.flatMap((t) => t.functionDeclarations.map((d) => d.name)), ["read_file"],
      "the CLI offered read_file alone");
    assert.ok(body.systemInstruction, "with its system instruction");
    assert.equal(status, 200, `baton answered ${JSON.stringify(answerHeaders)}`);
    assert.equal(answerHeaders["content-type"], "text/event-stream");
    assert.equal(answerHeaders["x-baton-provider"], provider);
    assert.equal(answerHeaders["x-baton-attempts"], String(attempts));
  }
  const [model, user] = exchanges[1].body.contents.slice(-2);
  assert.equal(model.role, "model");
  assert.equal(model.parts.filter((p) => p.text).map((p) => p.text).join(""), words, "the first answer's words came back whole");
  const call = model.parts.find((p) => p.functionCall)?.functionCall;
  assert.deepEqual([call?.name, call?.args], ["read_file", { file_path: "Paris" }], "the tool call came back as streamed");
  const response = user.parts.find((p) => p.functionResponse)?.functionResponse;
  assert.deepEqual([response?.name, response?.id], ["read_file", call.id], "the file's text answers that call");
  assert.ok(response.response.output.includes(WEATHER), `and is what ./Paris holds: ${JSON.stringify(response)}`);
}

test("gemini -p works through baton to an OpenAI-kind target", { timeout: 90000 }, async () => {
  const openai = await mock("openai");
  const proxy = await gateway(ROUTE, [["openai", openai]]);

  const run = await runGemini(proxy.addr, ROUTE);
  const words = "openai0 openai1 openai2";
  assertAnswered(run, words);
  assertGeminiAsked(proxy.exchanges, ROUTE, words, "openai", 1);

  const records = await recorded(openai);
  assert.equal(records.length, 2, "the target was asked twice");
  for (const { path, headers, body } of records) {
    assert.equal(path, "/v1/chat/completions", "asked at Chat Completions");
    assert.equal(headers["x-goog-api-key"], undefined, "the client's key is not sent on to the provider");
    assert.equal(body.model, "openai-sim", "the target's model");
    assert.equal(body.stream, true);
    assert.deepEqual(body.tools.map((t) => t.function.name), ["read_file"], "read_file, as a function");
    assert.equal(body.messages[0].role, "system", "the CLI's system instruction, as a system message");
  }
  assertChatToolRoundTrip(records[1].body.messages, "read_file", { file_path: "Paris" }, WEATHER);
});

test("gemini -p fails over from a failing Gemini target to an Anthropic-kind one", { timeout: 90000 }, async () => {
  const failing = await mock("gemini", ["--fault", "http_5xx"]);
  const anthropic = await mock("anthropic");
  const proxy = await gateway(ROUTE, [["gemini", failing], ["anthropic", anthropic]]);

  const run = await runGemini(proxy.addr, ROUTE);
  const words = "anthropic0 anthropic1 anthropic2";
  assertAnswered(run, words);
  assertGeminiAsked(proxy.exchanges, ROUTE, words, "anthropic", 2);

  const tried = await recorded(failing);
  assert.equal(tried.length, 2, "each of the two requests was tried on the Gemini target first");
  tried.forEach(({ path, fault, headers, body }, i) => {
    assert.equal(path, "/v1beta/models/gemini-sim:streamGenerateContent?alt=sse", "asked for the target's model, streamed");
    assert.equal(fault, "http_5xx", "and failed there");
    assert.equal(headers["x-goog-api-key"], undefined, "the client's key is not sent on to the provider");
    assert.deepEqual(body, proxy.exchanges[i].body, "the Gemini target was sent the CLI's body as it was");
  });

  const records = await recorded(anthropic);
  assert.equal(records.length, 2, "the Anthropic target answered both requests");
  for (const { path, headers, body } of records) {
    assert.equal(path, "/v1/messages", "asked at the Messages API");
    assert.equal(headers["x-goog-api-key"], undefined, "the client's key is not sent on to the provider");
    assert.equal(body.model, "anthropic-sim", "the target's model");
    assert.equal(body.stream, true);
    assert.deepEqual(body.tools.map((t) => t.name), ["read_file"], "read_file, as a tool");
    assert.ok(body.system, "the CLI's system instruction, as the system prompt");
  }
  assertMessagesToolRoundTrip(records[1].body.messages, words, "read_file", { file_path: "Paris" }, WEATHER);
});

test("gemini -p prints baton's error, in Google's shape, when every target fails", { timeout: 90000 }, async () => {
  const failing = await mock("gemini", ["--fault", "http_5xx"]);
  const proxy = await gateway(ROUTE, [["gemini", failing]]);

  const run = await runGemini(proxy.addr, ROUTE);
  const said = told(run);
  assert.ok(!run.timedOut && run.code !== 0, `the Gemini CLI fails at once; got ${said}`);
  assert.equal(run.stdout, "", "and prints no answer");

  assert.deepEqual(proxy.exchanges.map((e) => [e.path, e.status]),
    [[`/v1beta/models/${ROUTE}:streamGenerateContent?alt=sse`, 502]], "the CLI asked once, and baton answered 502");
  assert.equal(proxy.exchanges[0].answerHeaders["content-type"], "application/json");
  const printed = /ApiError: (\{.*\})$/m.exec(run.stderr)?.[1];
  assert.ok(printed, `the CLI printed the error it was answered; got ${said}`);
  const { error } = JSON.parse(printed);
  assert.deepEqual([error.code, error.status], [502, "UNAVAILABLE"], "Google's error shape, with Google's status name");
  assert.match(error.message, /gemini \(gemini-sim\): http_5xx/, "naming the target that failed and how");

  const tried = await recorded(failing);
  assert.deepEqual(tried.map((r) => r.fault), ["http_5xx"], "the target was tried once, and failed");
});

// Without `-m` the CLI picks its own model ("auto"): a classifier model
// scores the prompt, then the model it picks answers. A route whose aliases
// are the CLI's model names serves all of them.
test("gemini -p with the CLI's own model choice, through a route named by its models", { timeout: 90000 }, async () => {
  const openai = await mock("openai");
  const aliases = 'aliases = ["gemini-3.5-flash-lite", "gemini-3.8-flash", "gemini-3.1-pro-preview"]\n';
  const proxy = await gateway("gemini-auto", [["openai", openai]], aliases);
  const run = await runGemini(proxy.addr, null);
  assertAnswered(run, "openai0 openai1 openai2");
  const [classifier, ...turns] = proxy.exchanges;
  assert.equal(classifier.path, "/v1beta/models/gemini-3.5-flash-lite:generateContent", "the classifier asked first, whole");
  assert.ok(classifier.body.generationConfig.responseJsonSchema, "for a score in a JSON schema");
  assert.equal(turns.length, 2, "then the two turns");
  for (const turn of turns) {
    assert.match(turn.path, /^\/v1beta\/models\/gemini-3\.(8-flash|1-pro-preview):streamGenerateContent\?alt=sse$/,
      "at the model the classifier picked");
  }
  assert.ok(proxy.exchanges.every((e) => e.status === 200), `every request answered: ${proxy.exchanges.map((e) => e.status)}`);
  assert.equal((await recorded(openai)).length, 3, "the one route's target answered all three");
});
