// Parity of `toolgate-tools build --check` with the gateway's load: each
// tools.ts in test/fixtures/load goes to `toolgate validate`, in a
// Caddyfile that lists it as a manifest, and to `--check --caddyfile`
// with that same Caddyfile. Both accept good.ts, and both refuse every
// other one with the same words. Then the patterns of
// fixtures/load/patterns.json go to Go's regexp.Compile and to the
// check's goRegexpError, which must agree on each.
//
// Needs go (it builds ./cmd/toolgate) and `npm ci` at the repository root.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { goRegexpError } from '../compiler/check.mjs';

const kit = fileURLToPath(new URL('..', import.meta.url));
const root = path.resolve(kit, '..', '..');
const bin = path.join(kit, 'bin', 'toolgate-tools.mjs');
const fixtures = path.join(kit, 'test', 'fixtures', 'load');

// What each fixture is refused for, in words the gateway and --check
// share; null, accepted.
const cases = {
  'good.ts': null,
  'lookahead.ts': "'^(?!admin$)[a-z]+$' is not valid regex: error parsing regexp: invalid or unsupported Perl syntax: `(?!`",
  'backreference.ts': "is not valid regex: error parsing regexp: invalid escape sequence: `\\1`",
  'emoji.ts': 'is not valid regex: error parsing regexp: invalid or unsupported Perl syntax: `(?=`',
  'record_key.ts': "'(?<=x)y' is not valid regex: error parsing regexp: invalid named capture: `(?<=x)y`",
  'ref_typo.ts': '${input.nmae} can never resolve: input_schema allows no property "nmae"',
  'ref_root.ts': 'unknown reference ${inputs.name}: the root must be input or env',
  'env_no_component.ts': 'url target: ${env.API_KEY} needs a component whose env declares it; name one with component',
  'component.ts': 'app target: component "apii" is not declared',
  'env_undeclared.ts': 'app target: ${env.API_TOKEN}: component "api" declares no env API_TOKEN',
};

let dir, toolgate;

before(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'toolgate-check-'));
  toolgate = path.join(dir, 'toolgate');
  execFileSync('go', ['build', '-o', toolgate, './cmd/toolgate'], { cwd: root, stdio: 'inherit' });
});

after(() => rmSync(dir, { recursive: true, force: true }));

// caddyfile declares the component the fixtures use, with one env name,
// and lists manifest.
function caddyfile(manifest) {
  return `{
	admin off
	storage file_system ${dir}/storage
}
http://127.0.0.1:9 {
	bind 127.0.0.1
	toolgate {
		manifest ${manifest}
		# component apii http://127.0.0.1:9 is a comment, not a component
		component api "http://127.0.0.1:9" {
			env API_KEY \`not-a-secret\`
		}
		ledger off
	}
}
`;
}

// gatewayError is what `toolgate validate` refuses the config for, or
// null when it loads. Caddy logs the error as JSON; its msg is the text.
function gatewayError(config) {
  const r = spawnSync(toolgate, ['validate', '--config', config, '--adapter', 'caddyfile'], {
    cwd: root, encoding: 'utf8', timeout: 60_000, env: { ...process.env, XDG_DATA_HOME: dir, XDG_CONFIG_HOME: dir },
  });
  if (r.status === 0) return null;
  const text = (r.stdout + r.stderr).split('\n').map((l) => {
    try {
      return JSON.parse(l).msg ?? l;
    } catch {
      return l;
    }
  });
  return text.join('\n');
}

test('--check refuses what the gateway refuses at load, in its words', async (t) => {
  for (const [file, want] of Object.entries(cases)) {
    await t.test(file, () => {
      const fixture = path.join(fixtures, file);
      const config = path.join(dir, 'Caddyfile');
      writeFileSync(config, caddyfile(fixture));
      const gateway = gatewayError(config);
      const r = spawnSync(process.execPath, [bin, 'build', fixture, '--check', '--caddyfile', config], { cwd: root, encoding: 'utf8', timeout: 30_000 });
      if (want === null) {
        assert.equal(gateway, null, 'the gateway loads it');
        assert.equal(r.stderr, '');
        assert.equal(r.status, 0);
        return;
      }
      assert.ok(gateway?.includes(want), `the gateway refuses it for ${want}:\n${gateway}`);
      assert.equal(r.status, 1, r.stderr);
      assert.ok(r.stderr.includes(want), `--check refuses it for ${want}:\n${r.stderr}`);
    });
  }
});

test("goRegexpError agrees with Go's regexp.Compile", () => {
  const patterns = JSON.parse(readFileSync(path.join(fixtures, 'patterns.json'), 'utf8')).map(([p]) => p);
  writeFileSync(path.join(dir, 'go.mod'), 'module regexpcheck\n\ngo 1.22\n');
  writeFileSync(path.join(dir, 'main.go'), `package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
)

// Reads a JSON array of patterns; prints each one's error, or "".
func main() {
	var patterns []string
	if err := json.NewDecoder(os.Stdin).Decode(&patterns); err != nil {
		panic(err)
	}
	out := make([]string, len(patterns))
	for i, p := range patterns {
		if _, err := regexp.Compile(p); err != nil {
			out[i] = err.Error()
		}
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}
`);
  const goErrors = JSON.parse(execFileSync('go', ['run', '.'], { cwd: dir, input: JSON.stringify(patterns), encoding: 'utf8' }));
  const differ = patterns
    .map((p, i) => ({ pattern: p, go: goErrors[i], check: goRegexpError(p) }))
    .filter((row) => (row.go === '') !== (row.check === ''));
  assert.deepEqual(differ, []);
});
