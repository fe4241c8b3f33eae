// The Vercel AI SDK's structured output against Maya: a zod schema, which the SDK sends as JSON Schema
// with "$schema": "http://json-schema.org/draft-07/schema#".
//   node ai_sdk_structured.mjs generateObject|streamObject|outputObject responses|chat   (MAYA_BASE_URL: Maya's /v1)
// It runs from the cached npm tree's directory (node resolves packages next to the script).
// Prints one JSON line: the object the SDK parsed and validated.
import { generateObject, generateText, Output, streamObject } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { z } from "zod";

const maya = createOpenAI({ baseURL: process.env.MAYA_BASE_URL, apiKey: process.env.MAYA_API_KEY ?? "unused" });
const [mode, api] = process.argv.slice(2);
const model = api === "chat" ? maya.chat("glm") : maya.responses("glm");
const schema = z.object({
  city: z.string(),
  temperature: z.number().int(),
  sunny: z.boolean(),
  tags: z.array(z.string()),
  wind: z.object({ speed: z.number(), unit: z.enum(["kmh", "mph"]) }),
  note: z.string().nullable(),
});
const options = {
  model, schema, prompt: "The weather in Paris, as JSON.", maxRetries: 0,
  providerOptions: { openai: { store: false } },
};

let object;
if (mode === "generateObject") {
  object = (await generateObject(options)).object;
} else if (mode === "streamObject") {
  const result = streamObject({ ...options, onError: ({ error }) => { throw error; } });
  for await (const part of result.fullStream) {
    if (part.type === "error") throw part.error;
  }
  object = await result.object;
} else if (mode === "outputObject") {
  const { schema: _, ...rest } = options;
  object = (await generateText({ ...rest, output: Output.object({ schema }) })).output;
} else {
  throw new Error(`unknown mode ${mode}`);
}
console.log(JSON.stringify({ object }));
