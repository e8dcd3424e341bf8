// main.mjs against a real toolgate and the bookmarks component, both built
// from this repository and started on free ports, as the quick start runs
// them: the example saves a bookmark, pauses on clear_bookmarks' card and
// resumes it, and the bookmarks are where it says they are.
//
// Needs go (it builds ./cmd/toolgate and ./examples/bookmarks) and `npm ci`
// at the repository root.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile, execFileSync, spawn } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { freePort, root, startToolgate } from "../../../packages/kit/test/gateway.mjs";

const main = join(import.meta.dirname, "..", "main.mjs");
let gate, dir, stopGateway, procs = [];

before(async () => {
  const componentPort = await freePort();
  ({ gate, dir, stop: stopGateway } = await startToolgate(() => `\t\t\tmanifest ${join(root, "examples", "bookmarks", "tools.json")}
\t\t\tcomponent bookmarks http://127.0.0.1:${componentPort}`, "toolgate-ai-sdk-"));
  const site = gate.slice(0, -"/toolgate".length);
  const bookmarks = join(dir, "bookmarks");
  execFileSync("go", ["build", "-o", bookmarks, "./examples/bookmarks"], { cwd: root, stdio: "inherit" });
  start(bookmarks, ["-addr", `127.0.0.1:${componentPort}`, "-public", `${site}/app`,
    "-jwks", `${gate}/.well-known/jwks.json`, "-toolgate", gate]);
  await until(async () => (await fetch(`http://127.0.0.1:${componentPort}/ping`)).ok, "the bookmarks component");
});

after(() => {
  for (const p of procs) p.proc.kill("SIGKILL");
  stopGateway?.();
});

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

function start(bin, args) {
  const proc = spawn(bin, args, { cwd: dir, env: { ...process.env, XDG_DATA_HOME: dir, XDG_CONFIG_HOME: dir }, stdio: ["ignore", "pipe", "pipe"] });
  const p = { proc, log: "" };
  proc.stdout.on("data", (d) => (p.log += d));
  proc.stderr.on("data", (d) => (p.log += d));
  procs.push(p);
}

async function until(ok, what) {
  const deadline = Date.now() + 30000;
  for (;;) {
    try {
      if (await ok()) return;
    } catch {}
    const dead = procs.find((p) => p.proc.exitCode !== null);
    if (dead || Date.now() > deadline) {
      throw new Error(`${what} did not start:\n${procs.map((p) => p.log).join("\n")}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
