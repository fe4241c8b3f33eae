// The Vercel AI SDK's two-step tool loop against Maya, as the README recipe writes it.
//   node ai_sdk_tool_loop.mjs generateText|streamText   (MAYA_BASE_URL: Maya's /v1 URL)
// It runs from the cached npm tree's directory (node resolves packages next to the script).
// Prints one JSON line: the final text, the steps' finish reasons and the tool results.
import { generateText, jsonSchema, stepCountIs, streamText, tool } from "ai";
import { createOpenAI } from "@ai-sdk/openai";

const maya = createOpenAI({ baseURL: process.env.MAYA_BASE_URL, apiKey: process.env.MAYA_API_KEY ?? "unused" });

const getWeather = tool({
  description: "The weather in a city.",
  inputSchema: jsonSchema({
    type: "object",
    properties: { city: { type: "string" } },
    required: ["city"],
    additionalProperties: false,
  }),
  execute: async ({ city }) => `sunny in ${city} (tool result)`,
});

const options = {
  model: maya.responses("glm"),
  prompt: "What is the weather in Paris?",
  tools: { get_weather: getWeather },
  stopWhen: stepCountIs(2),
  maxRetries: 0,
  // Maya stores nothing unless asked; with store:false the SDK sends whole items, not item_reference.
  providerOptions: { openai: { store: false } },
};
if (process.env.AI_SDK_DEFAULT_STORE === "1") delete options.providerOptions; // shows Maya's 400 (a test)

const mode = process.argv[2];
let result;
if (mode === "generateText") {
  result = await generateText(options);
} else if (mode === "streamText") {
  const stream = streamText({ ...options, onError: ({ error }) => { throw error; } });
  let deltas = 0;
  for await (const part of stream.fullStream) {
    if (part.type === "text-delta") deltas += 1;
    if (part.type === "error") throw part.error;
  }
  result = { text: await stream.text, steps: await stream.steps, deltas };
} else {
  throw new Error(`unknown mode ${mode}`);
}
console.log(JSON.stringify({
  text: result.text,
  finishReasons: result.steps.map((step) => step.finishReason),
  toolResults: result.steps.flatMap((step) => step.toolResults.map((r) => r.output)),
  deltas: result.deltas ?? null,
}));
