// The example stack for the Node tests: toolgate and the bookmarks
// component, both built from this checkout and started on free loopback
// ports with a generated Caddyfile. Shared by browser/, mcp/, ai-sdk/ and
// notes/ (which adds the notes component and its tools.ts: notes: true);
// startToolgate, toolgate alone with a toolgate block of the caller's, by
// the kit's tests.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

export const root = resolve(import.meta.dirname, "..");

export function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
    s.on("error", fail);
  });
}

function start(procs, bin, args, env = {}) {
  const p = spawn(bin, args, { cwd: root, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  p.stdout.on("data", (d) => (log += d));
  p.stderr.on("data", (d) => (log += d));
  p.log = () => log;
  procs.push(p);
  return p;
}

async function waitFor(url, proc) {
  const deadline = Date.now() + 20000;
  while (Date.now() < deadline) {
    try {
      await fetch(url);
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  throw new Error(`${url} did not answer:\n${proc.log()}`);
}

/**
 * startToolgate builds toolgate and runs it alone on a free loopback port,
 * `block(dir)` the body of its toolgate directive (mounted at /toolgate/),
 * Caddy's storage in a temporary folder `dir` and the admin API off. It
 * returns toolgate's base URL, the folder and stop(), which kills it and
 * removes the folder.
 */
export async function startToolgate({ name, block }) {
  const dir = mkdtempSync(join(tmpdir(), `toolgate-${name}-`));
  const procs = [];
  execFileSync("go", ["build", "-o", join(dir, "toolgate"), "./cmd/toolgate"], { cwd: root, stdio: "inherit" });
  const port = await freePort();
  const gate = `http://127.0.0.1:${port}/toolgate`;
  writeFileSync(join(dir, "Caddyfile"), `{
	admin off
	storage file_system ${dir}/storage
}
http://127.0.0.1:${port} {
	bind 127.0.0.1
	handle_path /toolgate/* {
		toolgate {
${block(dir)}
		}
	}
}
`);
  const stop = await runToolgate(procs, dir, gate);
  return { gate, dir, stop };
}

/**
 * runToolgate starts the toolgate built in dir on dir's Caddyfile, beside
 * procs, and waits for the processes of `before` ([url, process] pairs)
 * and then for toolgate at gate. It returns stop(), which kills every
 * process and removes dir; on a failure it stops them and throws.
 */
async function runToolgate(procs, dir, gate, before = []) {
  const tg = start(procs, join(dir, "toolgate"), ["run", "--config", join(dir, "Caddyfile"), "--adapter", "caddyfile"], {
    XDG_DATA_HOME: dir,
    XDG_CONFIG_HOME: dir,
  });
  const stop = () => {
    for (const p of procs) p.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (const [url, p] of before) await waitFor(url, p);
    await waitFor(`${gate}/tools`, tg);
  } catch (e) {
    stop();
    throw e;
  }
  return stop;
}

/**
 * startStack builds and starts the stack. `toolgate` holds extra lines for
 * the toolgate block, given the component's port; `site` extra lines for
 * the site block (more routes beside /toolgate/ and /app/). With `notes`,
 * the notes component (built beforehand: npm run build -w examples/notes)
 * runs too, and toolgate loads examples/notes/tools.ts, which needs the
 * workspace's compiler (npm ci at the root). It returns the ports,
 * toolgate's base URL and stop().
 */
export async function startStack({ name, toolgate = () => "", site = "", notes = false }) {
  const dir = mkdtempSync(join(tmpdir(), `toolgate-${name}-`));
  const procs = [];
  execFileSync("go", ["build", "-o", join(dir, "toolgate"), "./cmd/toolgate"], { cwd: root, stdio: "inherit" });
  execFileSync("go", ["build", "-o", join(dir, "bookmarks"), "./examples/bookmarks"], { cwd: root, stdio: "inherit" });
  const gatePort = await freePort();
  const appPort = await freePort();
  const notesPort = notes ? await freePort() : 0;
  const gate = `http://127.0.0.1:${gatePort}/toolgate`;
  const notesLines = notes
    ? `\t\t\tmanifest examples/notes/tools.ts\n\t\t\tcomponent notes http://127.0.0.1:${notesPort}\n`
    : "";
  writeFileSync(join(dir, "Caddyfile"), `{
	admin off
	storage file_system ${dir}/storage
}
http://127.0.0.1:${gatePort} {
	bind 127.0.0.1
	handle_path /toolgate/* {
		toolgate {
			manifest examples/bookmarks/tools.json
			component bookmarks http://127.0.0.1:${appPort}
			ledger bolt ${dir}/ledger.db
${notesLines}${toolgate(appPort)}
		}
	}
	handle_path /app/* {
		reverse_proxy 127.0.0.1:${appPort}
	}
${site}
}
`);
  const component = start(procs, join(dir, "bookmarks"), [
    "-addr", `127.0.0.1:${appPort}`,
    "-public", `http://127.0.0.1:${gatePort}/app`,
    "-jwks", `${gate}/.well-known/jwks.json`,
    "-toolgate", gate,
  ]);
  const notesProc = notes
    ? start(procs, process.execPath, [
        "examples/notes/dist/src/main.js",
        "--addr", `127.0.0.1:${notesPort}`,
        "--jwks", `${gate}/.well-known/jwks.json`,
      ])
    : null;
  const before = [[`http://127.0.0.1:${appPort}/ping`, component]];
  if (notesProc) before.push([`http://127.0.0.1:${notesPort}/ping`, notesProc]);
  const stop = await runToolgate(procs, dir, gate, before);
  return { gatePort, appPort, notesPort, gate, stop };
}

/**
 * invoke calls a tool through the Tools API the way an agent runtime does
 * in loopback mode (identity u_1/in_1, a thread context) and returns the
 * answer; any status but 200 is an error.
 */
export async function invoke(gate, tool, { thread, callId, input = {} }) {
  const r = await fetch(`${gate}/tools/${tool}`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({
      input,
      callId,
      context: { source: "thread", threadId: thread },
      identity: { user: "u_1", install: "in_1" },
    }),
  });
  if (r.status !== 200) throw new Error(`invoke ${tool}: ${r.status} ${await r.text()}`);
  return r.json();
}

/**
 * pagesBlock is the toolgate block's pages section for the example page's
 * tokens (the bookmarks component mints them with the example's public
 * secret), allowing the given page origins.
 */
export function pagesBlock(...origins) {
  return `			pages {
				secret toolgate-example-page-secret-not-for-production
				issuer bookmarks
				audience toolgate-pages
				origins ${origins.join(" ")}
			}`;
}
