// A running `baton serve` in front of one simulated provider of each kind
// (`baton mock`): route "gpt" answers from an OpenAI-kind provider, "claude"
// from an Anthropic one, "gemini" from a Gemini one. Each provider serves
// what it received at `GET /__requests`.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

const here = new URL(".", import.meta.url).pathname;
const BATON = process.env.BATON_BIN ?? `${here}../../../target/debug/baton`;
const START_TIMEOUT_MS = 30000;

/** The provider kind behind each route. */
export const KINDS = { gpt: "openai", claude: "anthropic", gemini: "gemini" };

/** Starts `baton args...`; resolves with the process and its address once it serves. */
export function start(args) {
  const proc = spawn(BATON, args, { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, RUST_LOG: "info" } });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`baton ${args.join(" ")} did not start`)), START_TIMEOUT_MS);
    createInterface({ input: proc.stderr }).on("line", (line) => {
      const match = /is serving.*listen=(\S+)/.exec(line);
      if (match) {
        clearTimeout(timer);
        resolve({ proc, addr: match[1] });
      }
    });
    proc.on("exit", (code) => reject(new Error(`baton ${args[0]} exited with ${code}`)));
  });
}

/** Starts a simulated provider of `kind` whose words are `marker0 marker1 …`;
 * `args` are more `baton mock` flags (`["--fault", "http_5xx"]`). */
export async function startMock(kind, { marker = kind, args = [] } = {}) {
  const { proc, addr } = await start(["mock", "--kind", kind, "--listen", "127.0.0.1:0", "--marker", marker,
    "--tokens", "3", "--first-token-ms", "5", "--gap-ms", "2", ...args]);
  return { proc, addr, kind };
}

/** A `[[providers]]` entry named `name` for a started mock. */
export function providerToml(name, mock) {
  // The simulated Responses API is an openai-kind provider that speaks it.
  const [kind, api] = mock.kind === "openai-responses" ? ["openai", 'api = "responses"\n'] : [mock.kind, ""];
  const suffix = kind === "openai" ? "/v1" : "";
  return `\n[[providers]]\nname = "${name}"\nkind = "${kind}"\n${api}base_url = "http://${mock.addr}${suffix}"\n`;
}

/** Starts `baton serve` on this config (TOML); resolves with the process and its address. */
export function serve(config) {
  const path = join(mkdtempSync(join(tmpdir(), "baton-node-")), "baton.toml");
  writeFileSync(path, config);
  return start(["serve", "--config", path]);
}

/**
 * Starts baton with the client key `key` (named "agent") and one route
 * `route` to these targets ([name, mock] pairs, each asked for
 * `<name>-sim`); resolves with its process and address.
 */
export function serveRoute(key, route, targets, routeExtra = "") {
  let config = `listen = "127.0.0.1:0"\n\n[[keys]]\nname = "agent"\nkey = "${key}"\n`;
  for (const [name, target] of targets) config += providerToml(name, target);
  const list = targets.map(([name]) => `{ provider = "${name}", model = "${name}-sim" }`).join(", ");
  config += `\n[[routes]]\nmodel = "${route}"\n${routeExtra}targets = [${list}]\n`;
  return serve(config);
}

/** Every request a started mock received, in order: `{path, headers, body, fault}`. */
export async function recorded(mock) {
  const response = await fetch(`http://${mock.addr}/__requests`);
  return response.json();
}

/**
 * A proxy in front of `upstream` (host:port) that passes every request and
 * answer through as they stream and keeps `{method, path, headers, body,
 * status, answerHeaders}` of each (a JSON body parsed); resolves with its
 * address, the list and `close()`.
 */
export function recordingProxy(upstream) {
  const [host, port] = upstream.split(":");
  const exchanges = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      const raw = Buffer.concat(chunks);
      const exchange = { method: req.method, path: req.url, headers: req.headers, body: parseJson(raw.toString("utf8")) };
      exchanges.push(exchange);
      const forward = request({ host, port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
        exchange.status = answer.statusCode;
        exchange.answerHeaders = answer.headers;
        res.writeHead(answer.statusCode, answer.headers);
        answer.pipe(res);
      });
      forward.on("error", () => res.destroy());
      forward.end(raw);
    });
  });
  const close = () => {
    server.close();
    server.closeAllConnections();
  };
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => resolve({ addr: `127.0.0.1:${server.address().port}`, exchanges, close }));
  });
}

function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Starts the providers and the gateway; `stop()` ends them all. */
export async function startGateway() {
  const procs = [];
  const mocks = {};
  try {
    for (const [route, kind] of Object.entries(KINDS)) {
      mocks[route] = await startMock(kind);
      procs.push(mocks[route].proc);
    }
    let config = 'listen = "127.0.0.1:0"\n';
    for (const [route, kind] of Object.entries(KINDS)) config += providerToml(kind, mocks[route]);
    for (const [route, kind] of Object.entries(KINDS)) {
      config += `\n[[routes]]\nmodel = "${route}"\ntargets = [{ provider = "${kind}", model = "${route}-sim" }]\n`;
    }
    const { proc, addr } = await serve(config);
    procs.push(proc);
    return {
      baseURL: `http://${addr}/v1`,
      /** Every request body the provider behind `route` received, in order. */
      async received(route) {
        return (await recorded(mocks[route])).map((record) => record.body);
      },
      /** Every request the provider behind `route` received, with its path and headers. */
      records(route) {
        return recorded(mocks[route]);
      },
      stop() {
        for (const p of procs) p.kill();
      },
    };
  } catch (err) {
    for (const p of procs) p.kill();
    throw err;
  }
}

/** The path each kind of provider is asked at (streamed). */
export const UPSTREAM_PATH = {
  openai: /\/chat\/completions$/,
  anthropic: /^\/v1\/messages$/,
  gemini: /^\/v1beta\/models\/[^/]+:streamGenerateContent\?alt=sse$/,
};

/** Whether a provider's request body offers the `get_weather` function. */
export function offersWeather(kind, body) {
  if (kind === "openai") return body.tools.some((t) => t.function.name === "get_weather");
  if (kind === "anthropic") return body.tools.some((t) => t.name === "get_weather");
  return body.tools.some((t) => t.functionDeclarations.some((d) => d.name === "get_weather"));
}

/** The text of the tool result a provider received, read from its own shape. */
export function toolResultSent(route, body) {
  if (KINDS[route] === "openai") {
    const message = body.messages.at(-1);
    return message.role === "tool" ? message.content : undefined;
  }
  if (KINDS[route] === "anthropic") {
    const content = body.messages.at(-1).content;
    const block = Array.isArray(content) ? content.filter((b) => b.type === "tool_result").at(-1) : undefined;
    if (typeof block?.content === "string") return block.content;
    return block?.content.map((part) => part.text).join("");
  }
  const part = body.contents.at(-1).parts.filter((p) => p.functionResponse).at(-1);
  return part?.functionResponse.response.output;
}

/** The JSON Schema a provider was asked to answer in, read from its own shape. */
export function schemaSent(route, body) {
  if (KINDS[route] === "openai") return body.response_format.json_schema.schema;
  if (KINDS[route] === "anthropic") return body.output_config.format.schema;
  return body.generationConfig.responseJsonSchema;
}

/** The text of a message's content: a string, or its text blocks (and those inside tool results). */
export function textOf(content) {
  if (typeof content === "string") return content;
  return content.map((block) => (block.type === "text" ? block.text : block.content ? textOf(block.content) : "")).join("");
}

/**
 * Checks an Anthropic Messages conversation's last two messages after one
 * tool round trip: the assistant's streamed `words` and its `tool_use` of
 * `name` with `input`, then the `tool_result` answering that call and
 * holding `found`.
 */
export function assertMessagesToolRoundTrip(messages, words, name, input, found) {
  const [assistant, result] = messages.slice(-2);
  assert.equal(textOf(assistant.content.filter((b) => b.type === "text")), words, "the first answer's words came back whole");
  const call = assistant.content.find((b) => b.type === "tool_use");
  assert.deepEqual([call?.name, call?.input], [name, input], "the tool call came back as streamed");
  const block = result.content.find((b) => b.type === "tool_result");
  assert.equal(block?.tool_use_id, call.id, "the tool's result answers that call");
  assert.ok(textOf(block.content).includes(found), `the tool's result carries ${found}`);
}

/**
 * Checks a Chat Completions conversation's last two messages after one tool
 * round trip: the assistant's streamed words and its call of `name` with
 * `args`, then the tool's result answering that call and holding `found`.
 */
export function assertChatToolRoundTrip(messages, name, args, found) {
  const [assistant, result] = messages.slice(-2);
  assert.equal(assistant.content, "openai0 openai1 openai2", "the first answer's words came back whole");
  assert.deepEqual(assistant.tool_calls?.map((c) => [c.function.name, JSON.parse(c.function.arguments)]),
    [[name, args]], "the tool call came back as streamed");
  assert.equal(result.role, "tool", "the tool's result, as a tool message");
  assert.equal(result.tool_call_id, assistant.tool_calls[0].id, "answering that call");
  assert.ok(textOf(result.content).includes(found), `the tool's result carries ${found}`);
}

/** How long an agent's one run may take before it is killed. */
const AGENT_TIMEOUT_MS = 60000;

/**
 * Runs an agent's CLI `program` with `args` in `cwd` with only `env`,
 * stdin closed, killed after AGENT_TIMEOUT_MS; removes `dirs` once it
 * exits. Resolves with its exit code, signal, output and time taken.
 */
export function runAgent(program, args, { cwd, env, dirs }) {
  const started = Date.now();
  const proc = spawn(program, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  proc.stdout.on("data", (chunk) => (stdout += chunk));
  proc.stderr.on("data", (chunk) => (stderr += chunk));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    proc.kill("SIGKILL");
  }, AGENT_TIMEOUT_MS);
  return new Promise((resolve, reject) => {
    proc.on("error", reject);
    proc.on("close", (code, signal) => {
      clearTimeout(timer);
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
      resolve({ code, signal, timedOut, stdout, stderr, ms: Date.now() - started });
    });
  });
}

/** Asserts agent `name` exited 0 and printed the model's answer quoting the tool's result `result`. */
export function assertAgentAnswered(name, run, result) {
  const said = `exit ${run.code}${run.timedOut ? " (killed after the timeout)" : ""}\nstdout: ${run.stdout}\nstderr: ${run.stderr}`;
  assert.equal(run.code, 0, `${name} exits 0; got ${said}`);
  assert.match(run.stdout, /^the tool said: /, `it prints the model's answer about the tool's result; got ${said}`);
  assert.ok(run.stdout.includes(result), `the answer quotes the tool's result ${result}; got ${said}`);
}

/**
 * The `[[providers]]` entry of a simulated cloud `mock` of `kind`, named
 * after its kind: Bedrock with AWS keys (the simulated one checks no
 * signature unless given one), Vertex with the test-only service account's
 * key file, its `token_uri` the simulated Vertex's own.
 */
export function cloudProvider(kind, mock) {
  if (kind === "bedrock") {
    return `[[providers]]\nname = "bedrock"\nkind = "bedrock"\nregion = "us-east-1"\nbase_url = "http://${mock.addr}"
aws_access_key_id = "AKIDCONFIG"\naws_secret_access_key = "config-secret"\n`;
  }
  const key = JSON.parse(readFileSync(new URL("../../../fixtures/vertex/test-only-service-account.json", import.meta.url), "utf8"));
  key.token_uri = `http://${mock.addr}/token`;
  const keyFile = join(mkdtempSync(join(tmpdir(), "baton-vertex-key-")), "sa.json");
  writeFileSync(keyFile, JSON.stringify(key));
  return `[[providers]]\nname = "vertex"\nkind = "vertex"\nproject = "p"\nregion = "us-east5"
base_url = "http://${mock.addr}"\ncredentials_file = "${keyFile}"\n`;
}
