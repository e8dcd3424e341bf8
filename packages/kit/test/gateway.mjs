// Test helpers shared by the tests that run a real toolgate: a free
// loopback port, and a toolgate built from this checkout running a
// Caddyfile site of its own. Not part of the package (test/ is not packed).
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

/** The repository root. */
export const root = resolve(import.meta.dirname, "..", "..", "..");

/** freePort returns a loopback port nothing listens on now. */
export function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
    s.on("error", fail);
  });
}

/**
 * startToolgate builds ./cmd/toolgate into a temporary folder and runs it
 * on a free loopback port with `block(dir)` as the body of its toolgate
 * directive (mounted at /toolgate/), Caddy's storage in that folder and
 * the admin API off. It returns the gateway's base URL, the folder, and
 * stop, which kills it and removes the folder.
 */
export async function startToolgate(block, prefix = "toolgate-test-") {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const bin = join(dir, "toolgate");
  execFileSync("go", ["build", "-o", bin, "./cmd/toolgate"], { cwd: root, stdio: "inherit" });
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
  const proc = spawn(bin, ["run", "--config", join(dir, "Caddyfile"), "--adapter", "caddyfile"], {
    cwd: dir, env: { ...process.env, XDG_DATA_HOME: dir, XDG_CONFIG_HOME: dir }, stdio: ["ignore", "pipe", "pipe"],
  });
  let log = "";
  proc.stdout.on("data", (d) => (log += d));
  proc.stderr.on("data", (d) => (log += d));
  const stop = () => {
    proc.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 30000;
  for (;;) {
    try {
      const res = await fetch(`${gate}/tools`);
      if (res.ok) break;
    } catch {}
    if (proc.exitCode !== null || Date.now() > deadline) {
      stop();
      throw new Error(`toolgate did not start:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { gate, dir, stop };
}
