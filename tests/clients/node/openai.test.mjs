// The official OpenAI Node SDK, unmodified, through a running baton to a
// simulated provider of each kind: `chat.completions.runTools` calls the
// tool the model asks for, sends its result back and ends with the
// model's answer, whole and streamed.

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { KINDS, startGateway, toolResultSent } from "./gateway.mjs";

let gateway;
before(async () => {
  gateway = await startGateway();
});
after(() => gateway?.stop());

function weatherTool(calls) {
  return {
    type: "function",
    function: {
      name: "get_weather",
      description: "The weather in a city",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
      parse: JSON.parse,
      function: ({ city }) => {
        calls.push(city);
        return `18C and sunny in ${city}`;
      },
    },
  };
}

for (const route of Object.keys(KINDS)) {
  for (const stream of [false, true]) {
    test(`runTools through ${KINDS[route]} (stream: ${stream})`, { timeout: 30000 }, async () => {
      const client = new OpenAI({ baseURL: gateway.baseURL, apiKey: "unused", maxRetries: 0, timeout: 20000 });
      const before = (await gateway.received(route)).length;
      const calls = [];
      const runner = client.chat.completions.runTools({
        model: route,
        stream,
        messages: [{ role: "user", content: "What is the weather in Paris?" }],
        tools: [weatherTool(calls)],
      });
      const content = await runner.finalContent();
      assert.equal(content, "the tool said: 18C and sunny in Paris", "the second turn answers the tool's result");
      assert.deepEqual(calls, ["Paris"], "the SDK ran the tool once, with the model's arguments");
      const roles = runner.messages.map((m) => m.role);
      assert.deepEqual(roles, ["user", "assistant", "tool", "assistant"], "two turns with a tool result between");
      assert.equal(runner.messages[1].tool_calls[0].function.name, "get_weather");

      const bodies = (await gateway.received(route)).slice(before);
      assert.equal(bodies.length, 2, "two requests reached the provider");
      assert.equal(toolResultSent(route, bodies[0]), undefined, "the first carries no result");
      assert.equal(toolResultSent(route, bodies[1]), "18C and sunny in Paris", "the second carries the result");
    });
  }
}
