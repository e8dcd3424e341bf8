// The quick start's bookmarks tools in an AI SDK agent loop, with a
// scripted model, so that it runs without a model key. With the quick start
// running (examples/quickstart.sh), from the repository root:
//
//   node examples/ai-sdk/main.mjs [--url http://127.0.0.1:8080/toolgate]
//
// (or TOOLGATE_URL=...). It asks the model to save a bookmark, then to
// clear all bookmarks: clear_bookmarks pauses on a card, and the script
// presses "Keep them" for the user (--press delete presses "Delete all").
// Each step the model takes is printed.
//
// For a real model, replace `model` with one from a provider package, e.g.
// `openai("gpt-5-mini")` from @ai-sdk/openai; the rest stays the same.
import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { pausedToolgateCalls, resumeToolgateCall, toolgateTools } from "@toolgate/kit";

const { values: args } = parseArgs({
  options: {
    url: { type: "string", default: process.env.TOOLGATE_URL ?? "http://127.0.0.1:8080/toolgate" },
    press: { type: "string", default: "keep" },
  },
});

// Who the calls act for (the quick start's demo user), and the
// conversation: a thread, so that a tool may ask the user on a card.
const conn = { url: args.url, identity: { user: "u_1", install: "in_1" } };
const tools = await toolgateTools({
  ...conn,
  threadId: "th_ai_sdk",
  tools: ["save_bookmark", "list_bookmarks", "clear_bookmarks"],
});
console.log(`tools from ${args.url}: ${Object.keys(tools).join(", ")}\n`);

const model = scriptedModel();
const messages = [];

// Turn 1: save a bookmark. The model calls save_bookmark, reads what the
// gateway answered, and replies.
await turn("Bookmark https://ai-sdk.dev as \"AI SDK\", tagged ai.");

// Turn 2: clear them all. clear_bookmarks answers a card and the call
// pauses; the model is told it waits for the user. The app shows the card,
// the user presses a button, and the app resumes the call.
const result = await turn("Delete all my bookmarks.");
for (const paused of pausedToolgateCalls(result.steps)) {
  const buttons = paused.card.elements.map((b) => `[${b.label}] (${b.id})`).join(" ");
  console.log(`card for ${paused.tool} (${paused.callId}): ${paused.card.title} ${buttons}`);
  console.log(`the user presses ${args.press}`);
  const done = await resumeToolgateCall({ ...conn, callId: paused.callId, buttonId: args.press });
  console.log(`${paused.tool} finished: ${done.status === "done" ? done.content : done.status}\n`);
  // Tell the model what happened, so the conversation goes on from there.
  await turn(`(${paused.tool} finished: ${done.status === "done" ? done.content : done.status})`);
}

async function turn(prompt) {
  console.log(`user: ${prompt}`);
  messages.push({ role: "user", content: prompt });
  const result = await generateText({ model, tools, messages, stopWhen: stepCountIs(5) });
  result.steps.forEach((step, i) => {
    for (const c of step.toolCalls) console.log(`  step ${i + 1}: call ${c.toolName} ${JSON.stringify(c.input)}`);
    for (const r of step.toolResults) {
      const out = r.output;
      const said = out.status === "done" ? `${out.isError ? "error: " : ""}${out.content}` : `${out.status}: ${out.card?.title ?? ""}`;
      console.log(`  step ${i + 1}: ${r.toolName} answered ${said}`);
    }
    if (step.text) console.log(`  step ${i + 1}: model: ${step.text}`);
  });
  console.log();
  messages.push(...result.response.messages);
  return result;
}

// scriptedModel stands in for a language model: when the last message is
// the user's, it calls the tool the request asks for (with a fresh tool
// call id, as a model would); when it is a tool result, it replies with
// the result's text.
function scriptedModel() {
  const usage = {
    inputTokens: { total: 0, noCache: 0, cacheRead: 0, cacheWrite: 0 },
    outputTokens: { total: 0, text: 0, reasoning: 0 },
  };
  const reply = (content, unified) => ({ content, finishReason: { unified, raw: undefined }, usage, warnings: [] });
  const call = (toolName, input) =>
    reply([{ type: "tool-call", toolCallId: `call_${randomUUID()}`, toolName, input: JSON.stringify(input) }], "tool-calls");
  return new MockLanguageModelV4({
    doGenerate: async ({ prompt }) => {
      const last = prompt.at(-1);
      if (last.role === "tool") {
        const out = last.content.find((p) => p.type === "tool-result")?.output;
        return reply([{ type: "text", text: `The tool said: ${out?.value ?? "nothing"}` }], "stop");
      }
      const text = last.content.map((p) => p.text ?? "").join(" ");
      if (/^\(.* finished: /.test(text)) return reply([{ type: "text", text: "Noted." }], "stop");
      if (/delete all/i.test(text)) return call("clear_bookmarks", {});
      if (/bookmark/i.test(text)) return call("save_bookmark", { url: "https://ai-sdk.dev", title: "AI SDK", tags: ["ai"] });
      return reply([{ type: "text", text: "I can only save and clear bookmarks." }], "stop");
    },
  });
}
