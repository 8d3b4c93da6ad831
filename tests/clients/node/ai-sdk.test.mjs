// The Vercel AI SDK (`ai` with `@ai-sdk/openai-compatible`), unmodified,
// through a running baton to a simulated provider of each kind:
// `streamText` running tools over several steps, and `generateObject`
// with a zod schema.

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateObject, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";
import { KINDS, schemaSent, startGateway, toolResultSent } from "./gateway.mjs";

let gateway;
let provider;
before(async () => {
  gateway = await startGateway();
  provider = createOpenAICompatible({
    name: "baton",
    baseURL: gateway.baseURL,
    apiKey: "unused",
    includeUsage: true,
    supportsStructuredOutputs: true,
  });
});
after(() => gateway?.stop());

for (const route of Object.keys(KINDS)) {
  test(`streamText runs tools over steps through ${KINDS[route]}`, { timeout: 30000 }, async () => {
    const before = (await gateway.received(route)).length;
    const calls = [];
    const result = streamText({
      model: provider(route),
      maxRetries: 0,
      prompt: "What is the weather in Paris?",
      tools: {
        get_weather: tool({
          description: "The weather in a city",
          inputSchema: z.object({ city: z.string() }),
          execute: async ({ city }) => {
            calls.push(city);
            return `18C and sunny in ${city}`;
          },
        }),
      },
      stopWhen: stepCountIs(4),
    });
    let streamed = "";
    for await (const delta of result.textStream) streamed += delta;
    const steps = await result.steps;
    assert.equal(steps.length, 2, "a step that calls the tool, then one that answers");
    assert.equal(steps[0].finishReason, "tool-calls");
    assert.deepEqual(steps[0].toolCalls.map((c) => [c.toolName, c.input]), [["get_weather", { city: "Paris" }]]);
    assert.deepEqual(calls, ["Paris"], "the SDK ran the tool once");
    assert.equal(steps[1].finishReason, "stop");
    assert.match(steps[1].text, /^the tool said: .*18C and sunny in Paris/, "the last step answers the result");
    assert.ok(streamed.endsWith(steps[1].text), "the text was streamed");
    const usage = await result.totalUsage;
    assert.ok(usage.outputTokens > 0, "usage came through");

    const bodies = (await gateway.received(route)).slice(before);
    assert.equal(bodies.length, 2, "two requests reached the provider");
    assert.match(toolResultSent(route, bodies[1]), /18C and sunny in Paris/, "the second carries the result");
  });

  test(`generateObject with a zod schema through ${KINDS[route]}`, { timeout: 30000 }, async () => {
    const { object } = await generateObject({
      model: provider(route),
      maxRetries: 0,
      schema: z.object({ city: z.string(), days: z.number().int(), rain: z.boolean(), unit: z.enum(["c", "f"]) }),
      prompt: "The forecast for Paris",
    });
    assert.deepEqual(object, { city: "x", days: 1, rain: true, unit: "c" });
    const schema = schemaSent(route, (await gateway.received(route)).at(-1));
    assert.deepEqual([...schema.required].sort(), ["city", "days", "rain", "unit"]);
  });
}
