// toolgateTools against a real gateway: ./cmd/toolgate built and run with a
// manifest whose app targets are a component in this process, which counts
// the requests it gets. The model is the AI SDK's scripted mock
// (MockLanguageModelV4 from ai/test): each test says which tool calls it
// makes, and reads what the next step was sent.
//
// Also: the declarations of @toolgate/kit let a TypeScript program pass
// toolgateTools' tools to generateText (test/ai-types, compiled by tsc).
//
// Needs go (it builds ./cmd/toolgate) and `npm ci` at the repository root.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import {
  ToolgateError,
  getToolgateCall,
  pausedToolgateCalls,
  resumeToolgateCall,
  toolgateCallId,
  toolgateTools,
} from "@toolgate/kit";
import { root, startToolgate } from "../../../examples/stack.mjs";

const COMPONENT = "notebook";
const identity = { user: "u_ai", install: "in_ai" };

const echoSchema = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  properties: { text: { type: "string", minLength: 1, description: "What to echo." } },
  required: ["text"],
  additionalProperties: false,
};
const emptySchema = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  properties: {},
  additionalProperties: false,
};
const manifest = {
  tools: [
    {
      name: "echo",
      displayName: "Echo",
      description: "Echo the text back.",
      input_schema: echoSchema,
      target: { type: "app", component: COMPONENT, method: "POST", path: "/echo", body: "${input}" },
    },
    {
      name: "clear",
      displayName: "Clear",
      description: "Clear the notebook, once the user confirms.",
      input_schema: emptySchema,
      target: { type: "app", component: COMPONENT, method: "POST", path: "/clear" },
    },
  ],
};

let gate, component, stopGateway;
const hits = { echo: 0, clear: 0, confirm: 0 };

before(async () => {
  component = await startComponent();
  ({ gate, stop: stopGateway } = await startGateway(component.port));
});

after(() => {
  stopGateway?.();
  component?.close();
});

test("the list maps to AI SDK tools with the tools' JSON Schemas", async () => {
  const tools = await toolgateTools({ url: gate, identity });
  assert.deepEqual(Object.keys(tools).sort(), ["clear", "echo"]);
  assert.equal(tools.echo.description, "Echo the text back.");
  assert.deepEqual(tools.echo.inputSchema.jsonSchema, echoSchema);
  assert.deepEqual(tools.clear.inputSchema.jsonSchema, emptySchema);
  assert.equal(typeof tools.echo.execute, "function");

  // A filter by name, or by a test on each listed tool.
  assert.deepEqual(Object.keys(await toolgateTools({ url: gate, identity, tools: ["echo"] })), ["echo"]);
  assert.deepEqual(Object.keys(await toolgateTools({ url: `${gate}/`, identity, tools: (t) => t.displayName === "Clear" })), ["clear"]);
  await assert.rejects(toolgateTools({ url: gate, identity, tools: ["echo", "nope"] }), { name: "ToolgateError", message: /no tool named "nope"/ });
});

test("generateText runs a tool once through the gateway, and the next step reads its content", async () => {
  const tools = await toolgateTools({ url: gate, identity });
  const before = hits.echo;
  const model = scripted([toolCall("call-echo-1", "echo", { text: "hello" })]);
  const result = await generateText({ model, tools, prompt: "echo hello", stopWhen: stepCountIs(3) });

  assert.equal(hits.echo - before, 1, "the component was called once");
  assert.equal(result.text, "done");
  const [tr] = result.steps[0].toolResults;
  assert.equal(tr.output.status, "done");
  assert.equal(tr.output.callId, "call-echo-1", "the toolCallId is the callId");
  assert.equal(tr.output.content, "echo: hello");
  assert.deepEqual(sentResult(model, "call-echo-1"), { type: "text", value: "echo: hello" });

  // The same toolCallId again (a retried step): the ledger's recorded
  // answer, and the component is not called again.
  const again = scripted([toolCall("call-echo-1", "echo", { text: "hello" })]);
  await generateText({ model: again, tools, prompt: "echo hello", stopWhen: stepCountIs(3) });
  assert.equal(hits.echo - before, 1, "the same toolCallId ran once");
  assert.deepEqual(sentResult(again, "call-echo-1"), { type: "text", value: "echo: hello" });

  // The same toolCallId with another input is the caller's mistake (422):
  // the tool throws a ToolgateError, which the model reads as an error.
  const reused = scripted([toolCall("call-echo-1", "echo", { text: "other" })]);
  const r3 = await generateText({ model: reused, tools, prompt: "echo other", stopWhen: stepCountIs(3) });
  assert.equal(hits.echo - before, 1);
  const err = r3.steps[0].content.find((p) => p.type === "tool-error");
  assert.ok(err instanceof Object && err.error instanceof ToolgateError, `no ToolgateError: ${JSON.stringify(r3.steps[0].content)}`);
  assert.equal(err.error.status, 422);
  assert.equal(err.error.code, "idempotency_key_reuse");
  const sent = sentResult(reused, "call-echo-1");
  assert.equal(sent.type, "error-text");
  assert.match(sent.value, /422 idempotency_key_reuse/);
});

test("invalid input: the model reads the gateway's error result, and nothing reaches the component", async () => {
  const tools = await toolgateTools({ url: gate, identity });
  const before = hits.echo;
  const model = scripted([toolCall("call-bad-1", "echo", { text: 5 })]);
  const result = await generateText({ model, tools, prompt: "echo a number", stopWhen: stepCountIs(3) });

  assert.equal(hits.echo, before, "nothing was sent to the component");
  const [tr] = result.steps[0].toolResults;
  assert.equal(tr.output.status, "done");
  assert.equal(tr.output.isError, true);
  const sent = sentResult(model, "call-bad-1");
  assert.equal(sent.type, "error-text", "an error result reaches the model as an error");
  assert.match(sent.value, /^invalid input/);
  assert.equal(sent.value, tr.output.content);
});

test("an action-required card pauses the call, and resumeToolgateCall finishes it", async () => {
  const conn = { url: gate, identity };
  const tools = await toolgateTools({ ...conn, threadId: "th_ai" });
  const model = scripted([toolCall("call-clear-1", "clear", {})]);
  const result = await generateText({ model, tools, prompt: "clear my notebook", stopWhen: stepCountIs(3) });

  assert.equal(hits.clear, 1);
  assert.equal(hits.confirm, 0, "nothing is cleared before the user answers");
  const paused = pausedToolgateCalls(result.steps);
  assert.equal(paused.length, 1);
  const [p] = paused;
  assert.equal(p.status, "action_required");
  assert.equal(p.callId, "call-clear-1");
  assert.equal(p.tool, "clear");
  assert.equal(p.card.title, "Clear the notebook?");
  assert.deepEqual(p.card.elements.map((b) => b.id), ["delete", "keep"]);

  // The model is told the call waits for the user, and which buttons there are.
  const sent = sentResult(model, "call-clear-1");
  assert.equal(sent.type, "text");
  assert.match(sent.value, /^Waiting for the user/);
  assert.match(sent.value, /"Delete all" \(delete\), "Keep it" \(keep\)/);

  assert.equal((await getToolgateCall({ ...conn, callId: p.callId })).status, "action_required");

  // The user presses "Delete all": the button's target runs, once.
  const done = await resumeToolgateCall({ ...conn, callId: p.callId, buttonId: "delete" });
  assert.equal(done.status, "done");
  assert.equal(done.isError, false);
  assert.equal(done.content, "Cleared the notebook.");
  assert.equal(hits.confirm, 1);
  const read = await getToolgateCall({ ...conn, callId: p.callId });
  assert.equal(read.status, "done");
  assert.equal(read.content, "Cleared the notebook.");

  // The same step retried: the recorded answer, nothing runs again.
  const again = scripted([toolCall("call-clear-1", "clear", {})]);
  const r2 = await generateText({ model: again, tools, prompt: "clear my notebook", stopWhen: stepCountIs(3) });
  assert.equal(hits.clear, 1);
  assert.equal(hits.confirm, 1);
  assert.equal(r2.steps[0].toolResults[0].output.content, "Cleared the notebook.");
  assert.deepEqual(pausedToolgateCalls(r2.steps), []);
});

test("a card outside a thread is an error result; a button without a target gives its input", async () => {
  const conn = { url: gate, identity };
  const api = await toolgateTools(conn);
  const a = await api.clear.execute({}, { toolCallId: "api-clear-1" });
  assert.equal(a.status, "done");
  assert.equal(a.isError, true, JSON.stringify(a));

  const tools = await toolgateTools({ ...conn, threadId: "th_ai" });
  const paused = await tools.clear.execute({}, { toolCallId: "call-clear-2" });
  assert.equal(paused.status, "action_required");
  const kept = await resumeToolgateCall({ ...conn, callId: "call-clear-2", buttonId: "keep" });
  assert.equal(kept.status, "done");
  assert.equal(kept.content, "Kept the notebook.");

  await assert.rejects(resumeToolgateCall({ ...conn, callId: "call-clear-2" }), TypeError);
  await assert.rejects(resumeToolgateCall({ ...conn, callId: "no-such-call", buttonId: "keep" }), { name: "ToolgateError", status: 404 });
});

test("toolgateCallId keeps a valid toolCallId and hashes any other the same way each time", () => {
  assert.equal(toolgateCallId("call_AbC-1.2:3"), "call_AbC-1.2:3");
  const odd = toolgateCallId("call/with spaces");
  assert.match(odd, /^ai:[A-Za-z0-9_-]{43}$/);
  assert.equal(toolgateCallId("call/with spaces"), odd);
  assert.notEqual(toolgateCallId("call/with space"), odd);
  assert.match(toolgateCallId("x".repeat(129)), /^ai:/);
  assert.match(toolgateCallId(".."), /^ai:/);
});

test("TypeScript: toolgateTools' tools pass to generateText as a ToolSet", () => {
  const tsc = join(root, "node_modules", ".bin", "tsc");
  try {
    execFileSync(tsc, ["-p", join(import.meta.dirname, "ai-types", "tsconfig.json")], { encoding: "utf8", stdio: "pipe" });
  } catch (err) {
    assert.fail(`tsc test/ai-types:\n${err.stdout}${err.stderr}`);
  }
});

// scripted is a model that makes the given tool calls in its first step and
// answers "done" in the next.
function scripted(calls) {
  const usage = {
    inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
    outputTokens: { total: 1, text: 1, reasoning: 0 },
  };
  return new MockLanguageModelV4({
    doGenerate: [
      { content: calls, finishReason: { unified: "tool-calls", raw: undefined }, usage, warnings: [] },
      { content: [{ type: "text", text: "done" }], finishReason: { unified: "stop", raw: undefined }, usage, warnings: [] },
    ],
  });
}

function toolCall(toolCallId, toolName, input) {
  return { type: "tool-call", toolCallId, toolName, input: JSON.stringify(input) };
}

// sentResult is the tool result the model's second step was sent for a call.
function sentResult(model, toolCallId) {
  assert.equal(model.doGenerateCalls.length, 2, "the model was called for a second step");
  for (const m of model.doGenerateCalls[1].prompt) {
    if (m.role !== "tool") continue;
    for (const part of m.content) {
      if (part.type === "tool-result" && part.toolCallId === toolCallId) return part.output;
    }
  }
  assert.fail(`the second step was sent no result for ${toolCallId}`);
}

// startComponent is the app's component: /echo answers the text back;
// /clear answers an action-required card (on any call: the gateway turns
// a card on an api call into an error result) whose "delete" button runs
// /clear/confirm and whose "keep" button's input is the result.
function startComponent() {
  return new Promise((ok) => {
    const srv = createServer((req, res) => {
      let body = "";
      req.on("data", (d) => (body += d));
      req.on("end", () => {
        const answer = (status, v) => {
          res.writeHead(status, { "content-type": "application/json" });
          res.end(JSON.stringify(v));
        };
        switch (`${req.method} ${req.url}`) {
          case "POST /echo":
            hits.echo++;
            return answer(200, { content: `echo: ${JSON.parse(body).text}` });
          case "POST /clear":
            hits.clear++;
            return answer(200, {
              type: "action_required",
              title: "Clear the notebook?",
              description: "This deletes every page.",
              elements: [
                { type: "button", id: "delete", label: "Delete all", variant: "danger", target: { type: "app", component: COMPONENT, method: "POST", path: "/clear/confirm" } },
                { type: "button", id: "keep", label: "Keep it", input: { content: "Kept the notebook." } },
              ],
            });
          case "POST /clear/confirm":
            hits.confirm++;
            return answer(200, { content: "Cleared the notebook." });
          default:
            return answer(404, { code: "not_found", error: `${req.method} ${req.url}` });
        }
      });
    });
    srv.listen(0, "127.0.0.1", () => ok({ port: srv.address().port, close: () => srv.close() }));
  });
}

// startGateway runs toolgate on a free port with the manifest above,
// loopback trust (no callers block) and the default bolt ledger in a
// temporary directory.
function startGateway(componentPort) {
  return startToolgate({
    name: "ai",
    block: (dir) => {
      writeFileSync(join(dir, "tools.json"), JSON.stringify(manifest));
      return `			manifest ${join(dir, "tools.json")}
			component ${COMPONENT} http://127.0.0.1:${componentPort}
			identity {
				issuer https://ai.test
			}`;
    },
  });
}
