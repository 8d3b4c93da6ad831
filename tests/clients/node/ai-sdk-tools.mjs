// What the Vercel AI SDK tests share: the tool their models are offered.

import { tool } from "ai";
import { z } from "zod";

/** A `get_weather` tool that notes each city it was asked about. */
export function weatherTool(calls) {
  return tool({
    description: "The weather in a city",
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => {
      calls.push(city);
      return `18C and sunny in ${city}`;
    },
  });
}
