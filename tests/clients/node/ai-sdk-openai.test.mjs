// The Vercel AI SDK's default OpenAI provider (`ai` with `@ai-sdk/openai`),
// unmodified: `openai(model)` speaks the Responses API, so it goes through
// baton's Responses door (`POST /v1/responses`) to a simulated provider of
// each kind, which is asked in its own API. `streamText` calls a tool, runs
// it, sends its result back and streams the answer about it.
//
// The SDK stores by default (`providerOptions.openai.store`, true unless
// set) and then sends the first answer back as references to its output
// items (`{"type": "item_reference", "id": "msg_…"}`): baton keeps each turn
// (the gateway here has its default SQLite store) and finds them there.
// With `store: false` the SDK sends the items themselves.

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createOpenAI } from "@ai-sdk/openai";
import { stepCountIs, streamText } from "ai";
import { KINDS, offersWeather, startGateway, toolResultSent, UPSTREAM_PATH } from "./gateway.mjs";
import { weatherTool } from "./ai-sdk-tools.mjs";

let gateway;
let openai;
/** Every request the SDK sent to baton: `{path, body, status, headers}` (baton's `x-baton-*` headers). */
const sent = [];
before(async () => {
  gateway = await startGateway();
  openai = createOpenAI({
    baseURL: gateway.baseURL,
    apiKey: "unused",
    fetch: async (url, init) => {
      const response = await fetch(url, init);
      const headers = Object.fromEntries([...response.headers].filter(([name]) => name.startsWith("x-baton-")));
      sent.push({ path: new URL(url).pathname, method: init.method, body: JSON.parse(init.body), status: response.status, headers });
      return response;
    },
  });
});
after(() => gateway?.stop());

/**
 * Runs `streamText` with `get_weather` over up to four steps through
 * `route`, and checks the steps, the answer, what baton was sent and what
 * the provider behind it received.
 */
async function toolOverTwoSteps(route, providerOptions) {
  const kind = KINDS[route];
  const fromMock = (await gateway.records(route)).length;
  const fromSdk = sent.length;
  const calls = [];
  const errors = [];
  const result = streamText({
    model: openai(route),
    maxRetries: 0,
    prompt: "What is the weather in Paris?",
    tools: { get_weather: weatherTool(calls) },
    stopWhen: stepCountIs(4),
    providerOptions,
    onError: ({ error }) => errors.push(error),
  });
  let streamed = "";
  for await (const delta of result.textStream) streamed += delta;
  assert.deepEqual(errors.map((e) => e.responseBody ?? e.message), [], "the SDK met no error");

  const requests = sent.slice(fromSdk);
  for (const { path, method, status, headers } of requests) {
    assert.deepEqual([method, path], ["POST", "/v1/responses"], "the SDK asked baton at the Responses API");
    assert.equal(status, 200, `baton answered it; got ${status}`);
    assert.equal(headers["x-baton-provider"], kind, "from the provider behind the route");
  }
  const steps = await result.steps;
  assert.equal(steps.length, 2, "a step that calls the tool, then one that answers");
  assert.equal(steps[0].finishReason, "tool-calls", "the first step ends in a tool call");
  assert.equal(steps[0].text, `${kind}0 ${kind}1 ${kind}2`, "the first step's words came through");
  assert.deepEqual(steps[0].toolCalls.map((c) => [c.toolName, c.input]), [["get_weather", { city: "Paris" }]],
    "the model asked for get_weather in Paris");
  assert.deepEqual(calls, ["Paris"], "the SDK ran the tool once");
  assert.equal(steps[1].finishReason, "stop", "the second step ends the answer");
  assert.equal(steps[1].text, "the tool said: 18C and sunny in Paris", "the last step answers the tool's result");
  assert.equal(streamed, steps[0].text + steps[1].text, "both steps' text was streamed");
  const usage = await result.totalUsage;
  assert.ok(usage.inputTokens > 0 && usage.outputTokens > 0, `usage came through: ${JSON.stringify(usage)}`);

  assert.equal(requests.length, 2, "the SDK sent baton two requests");
  const [, second] = requests.map((request) => request.body);
  const output = second.input.find((item) => item.type === "function_call_output");
  assert.equal(output?.output, "18C and sunny in Paris", "the second sends the tool's output back");
  const call = second.input.find((item) => item.type === "function_call" || item.type === "item_reference");
  assert.ok(call, "and the call it answers, itself or by reference");

  const records = (await gateway.records(route)).slice(fromMock);
  assert.equal(records.length, 2, "two requests reached the provider");
  for (const { path } of records) assert.match(path, UPSTREAM_PATH[kind], `asked at ${kind}'s own API`);
  const [first, last] = records.map((record) => record.body);
  assert.ok(offersWeather(kind, first), "the first request offers get_weather");
  assert.equal(toolResultSent(route, last), "18C and sunny in Paris", "the second carries the tool's result");
  return { requests, records };
}

for (const route of Object.keys(KINDS)) {
  const kind = KINDS[route];
  test(`@ai-sdk/openai (Responses) streamText runs a tool over two steps through ${kind}`, { timeout: 30000 }, async () => {
    const { requests, records } = await toolOverTwoSteps(route, { openai: { store: false } });
    assert.equal(requests[0].body.store, false, "the SDK asked for nothing to be stored");
    const assistant = requests[1].body.input.find((item) => item.role === "assistant");
    assert.deepEqual(assistant?.content, [{ type: "output_text", text: `${kind}0 ${kind}1 ${kind}2` }],
      "with store: false the first answer's text goes back whole, not as a reference");
    if (kind === "openai") assert.equal(records[0].body.model, `${route}-sim`, "the target's model");
  });

  test(`@ai-sdk/openai (Responses) with the SDK's default store: true, its references found, through ${kind}`, {
    timeout: 30000,
  }, async () => {
    const { requests, records } = await toolOverTwoSteps(route, {});
    assert.notEqual(requests[0].body.store, false, "the SDK let the first turn be kept");
    const references = requests[1].body.input.filter((item) => item.type === "item_reference");
    assert.ok(references.some((item) => item.id.startsWith("msg_")),
      `the SDK sent the first answer's message back by reference: ${JSON.stringify(references)}`);
    const last = JSON.stringify(records[1].body);
    assert.ok(last.includes(`${kind}0 ${kind}1 ${kind}2`), `the referenced answer's text reached the provider: ${last}`);
  });
}
