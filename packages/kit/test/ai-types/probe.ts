// Compiled by ai.test.mjs (tsc -p, no output): @toolgate/kit's
// declarations name no type of `ai`, and its tools must still pass to the
// AI SDK as a ToolSet, as a project that uses both would write.
import { generateText, stepCountIs, type ToolSet } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { isToolgateAnswer, pausedToolgateCalls, resumeToolgateCall, toolgateTools, type ToolgateAnswer } from '@toolgate/kit';

const conn = { url: 'http://127.0.0.1:8080/toolgate', identity: { user: 'u_1', install: 'in_1' } };
const tools = await toolgateTools({ ...conn, threadId: 'th_1' });
const set: ToolSet = tools;
const result = await generateText({ model: new MockLanguageModelV4(), tools, prompt: 'x', stopWhen: stepCountIs(3) });
for (const step of result.steps) {
  for (const r of step.toolResults) {
    if (isToolgateAnswer(r.output)) {
      const a: ToolgateAnswer = r.output;
      console.log(a.status);
    }
  }
}
for (const p of pausedToolgateCalls(result.steps)) {
  const done = await resumeToolgateCall({ ...conn, callId: p.callId, buttonId: p.card.elements[0]!.id });
  if (done.status === 'done') console.log(done.content, done.isError);
}
console.log(set);
