// The Vercel AI SDK's Anthropic provider (`ai` with `@ai-sdk/anthropic`),
// unmodified, through baton's Anthropic Messages door (`POST /v1/messages`)
// to a simulated provider of each kind: `streamText` calls a tool, runs it,
// sends its result back and streams the answer about it. An Anthropic-kind
// target gets the SDK's own body; an OpenAI or Gemini one gets it translated.

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createAnthropic } from "@ai-sdk/anthropic";
import { stepCountIs, streamText } from "ai";
import { KINDS, offersWeather, startGateway, toolResultSent, UPSTREAM_PATH } from "./gateway.mjs";
import { weatherTool } from "./ai-sdk-tools.mjs";

let gateway;
let anthropic;
before(async () => {
  gateway = await startGateway();
  anthropic = createAnthropic({ baseURL: gateway.baseURL, apiKey: "unused" });
});
after(() => gateway?.stop());

for (const route of Object.keys(KINDS)) {
  const kind = KINDS[route];
  test(`@ai-sdk/anthropic streamText runs a tool over two steps through ${kind}`, { timeout: 30000 }, async () => {
    const before = (await gateway.records(route)).length;
    const calls = [];
    const result = streamText({
      model: anthropic(route),
      maxRetries: 0,
      maxOutputTokens: 1000,
      prompt: "What is the weather in Paris?",
      tools: { get_weather: weatherTool(calls) },
      stopWhen: stepCountIs(4),
    });
    let streamed = "";
    for await (const delta of result.textStream) streamed += delta;

    const steps = await result.steps;
    assert.equal(steps.length, 2, "a step that calls the tool, then one that answers");
    assert.equal(steps[0].finishReason, "tool-calls", "the first step ends in a tool call");
    assert.deepEqual(steps[0].toolCalls.map((c) => [c.toolName, c.input]), [["get_weather", { city: "Paris" }]],
      "the model asked for get_weather in Paris");
    assert.deepEqual(calls, ["Paris"], "the SDK ran the tool once");
    assert.equal(steps[1].finishReason, "stop", "the second step ends the answer");
    assert.equal(steps[1].text, "the tool said: 18C and sunny in Paris", "the last step answers the tool's result");
    assert.ok(streamed.endsWith(steps[1].text), `the answer was streamed, got ${JSON.stringify(streamed)}`);
    assert.match(steps[0].text, new RegExp(`^${kind}0 ${kind}1 ${kind}2$`), "the first step's words came through");
    const usage = await result.totalUsage;
    assert.ok(usage.outputTokens > 0, "usage came through");

    const records = (await gateway.records(route)).slice(before);
    assert.equal(records.length, 2, "two requests reached the provider");
    for (const { path } of records) assert.match(path, UPSTREAM_PATH[kind], `asked at ${kind}'s own path`);
    const [first, second] = records.map((record) => record.body);
    assert.ok(offersWeather(kind, first), "the first request offers get_weather");
    assert.equal(maxTokensSent(kind, first), 1000, "maxOutputTokens reached the provider in its own field");
    assert.equal(toolResultSent(route, second), "18C and sunny in Paris", "the second carries the tool's result");
    if (kind === "anthropic") {
      assert.equal(first.model, `${route}-sim`, "the target's model");
      assert.equal(records[0].headers["anthropic-version"], "2023-06-01", "the SDK's anthropic-version was sent on");
      assert.equal(records[0].headers["x-api-key"], undefined, "the client's key is not sent on");
    }
  });
}

/** The answer's length limit in a provider's request body. */
function maxTokensSent(kind, body) {
  if (kind === "openai") return body.max_completion_tokens ?? body.max_tokens;
  if (kind === "anthropic") return body.max_tokens;
  return body.generationConfig.maxOutputTokens;
}
