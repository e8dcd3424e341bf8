// main.mjs against a real toolgate and the bookmarks component, both built
// from this repository and started on free ports, as the quick start runs
// them: the example saves a bookmark, pauses on clear_bookmarks' card and
// resumes it, and the bookmarks are where it says they are.
//
// Needs go (it builds ./cmd/toolgate and ./examples/bookmarks) and `npm ci`
// at the repository root.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { root, startStack } from "../../stack.mjs";

const main = join(import.meta.dirname, "..", "main.mjs");
let gate, stop;

before(async () => {
  ({ gate, stop } = await startStack({ name: "ai-sdk" }));
});

after(() => stop?.());

test("the example saves a bookmark, pauses on a card and resumes it", async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [main, "--url", gate], { cwd: root });
  const has = (re) => assert.match(stdout, re, stdout);
  has(/^tools from .*: clear_bookmarks, list_bookmarks, save_bookmark$/m);
  has(/step 1: call save_bookmark \{"url":"https:\/\/ai-sdk.dev","title":"AI SDK","tags":\["ai"\]\}/);
  has(/step 1: save_bookmark answered Saved bookmark b1: AI SDK \(https:\/\/ai-sdk.dev\)/);
  has(/step 2: model: The tool said: Saved bookmark b1/);
  has(/step 1: clear_bookmarks answered action_required: Delete the only bookmark\?/);
  has(/step 2: model: The tool said: Waiting for the user/);
  has(/card for clear_bookmarks \(call_[0-9a-f-]+\): Delete the only bookmark\? \[Delete all\] \(delete\) \[Keep them\] \(keep\)/);
  has(/clear_bookmarks finished: Kept all bookmarks\./);
  has(/model: Noted\./);

  // Kept: the bookmark is there, for the identity the example acts for.
  const res = await fetch(`${gate}/tools/list_bookmarks`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ input: {}, identity: { user: "u_1", install: "in_1" } }),
  });
  const list = await res.json();
  assert.equal(list.isError, false, list.content);
  assert.match(list.content, /^b1 AI SDK https:\/\/ai-sdk.dev$/m);
});
