// Parity of `toolgate-tools build --check` with the gateway's load: each
// tools.ts in test/fixtures/load goes to `toolgate validate`, in a
// Caddyfile that lists it as a manifest, and to `--check --caddyfile`
// with that same Caddyfile. Both accept good.ts, and both refuse every
// other one with the same words. Approvals and limits are loaded by both
// (fixtures/governance.ts), or refused by both, each in its own words;
// every row of the limit and timeout tables (fixtures/governance) is read
// alike by the kit and by internal/quota's Parse and internal/manifest's
// ParseTimeout. Then the patterns of
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
import { parseLimit, parseTimeout } from '../compiler/governance.mjs';

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
  'ref_root.ts': 'unknown reference ${inputs.name}: the root must be input, env or connection',
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

// Approvals and limits the compiler and the gateway both refuse: the
// tool's members, the compiler's words, then the gateway's. The gateway
// gets the tool as a JSON manifest (given tools.ts, it would hear the
// compiler's refusal).
const governance = {
  'an approval on a client tool': [
    { target: { type: 'kazzle', name: 'pay' }, approval: { title: 'Pay?' } },
    "approval: a client tool runs in the user's own page, so there is no call to hold for approval",
    "approval: a client tool runs in the user's own page, so there is no call to hold for approval",
  ],
  'an approval without a title': [{ approval: { title: ' ' } }, "approval.title: required: a non-empty string, the card's title", 'approval: a title is required'],
  'one window spelt two ways': [
    { limits: ['20/1h per user', '10/60m per user'] },
    'limits[1]: "10/60m per user" counts the same calls as limits[0] ("20/1h per user")',
    'limits "20/1h per user" and "10/60m per user" count the same calls',
  ],
  'concurrent twice': [
    { limits: ['5 concurrent per install', '3 concurrent per install'] },
    'limits[1]: "3 concurrent per install" counts the same calls as limits[0] ("5 concurrent per install")',
    'limits "5 concurrent per install" and "3 concurrent per install" count the same calls',
  ],
  'days and hours': [{ approval: { title: 'Pay?', timeout: '1d12h' } }, 'approval.timeout: "1d12h": whole days (2d) or a duration (24h, 90m)', '"1d12h": whole days (2d) or a duration (24h, 90m)'],
  'under a second': [{ approval: { title: 'Pay?', timeout: '500ms' } }, 'approval.timeout: "500ms": at least 1s', '"500ms": at least 1s'],
  'over 30d': [{ approval: { title: 'Pay?', timeout: '31d' } }, 'approval.timeout: "31d": at most 30d', '"31d": at most 30d'],
  'a leading zero': [{ limits: ['020/1h per user'] }, 'limits[0]: "020/1h per user": the count 020 has a leading zero', 'limit "020/1h per user"'],
  'a window over 30d': [{ limits: ['1/31d per install'] }, 'limits[0]: "1/31d per install": the window 31d is longer than 30d', 'window "31d": at most 30d'],
};

test('approval and limits: the gateway loads what the compiler writes, and refuses what it refuses', async (t) => {
  await t.test('governance.ts', () => {
    const fixture = path.join(kit, 'test', 'fixtures', 'governance.ts');
    const r = spawnSync(process.execPath, [bin, 'build', fixture], { cwd: root, encoding: 'utf8', timeout: 30_000 });
    assert.equal(r.stderr, '');
    const manifest = path.join(dir, 'governance.json');
    writeFileSync(manifest, r.stdout);
    const config = path.join(dir, 'Caddyfile');
    writeFileSync(config, caddyfile(manifest));
    assert.equal(gatewayError(config), null, 'the gateway loads it');
  });
  for (const [why, [members, kitWords, gatewayWords]] of Object.entries(governance)) {
    await t.test(why, (t) => {
      const tool = { name: 'pay', description: 'Pay.', target: { type: 'app', component: 'api', method: 'POST', path: '/pay' }, ...members };
      // Beside the kit, so that it resolves zod.
      const inside = mkdtempSync(path.join(kit, 'test', '.parity-'));
      t.after(() => rmSync(inside, { recursive: true, force: true }));
      const ts = path.join(inside, 'tools.ts');
      writeFileSync(ts, `import { z } from 'zod';\nexport const tools = [{ ...${JSON.stringify(tool)}, input: z.object({}).strict() }];\n`);
      const r = spawnSync(process.execPath, [bin, 'build', ts], { cwd: kit, encoding: 'utf8', timeout: 30_000 });
      assert.equal(r.status, 1, r.stderr);
      assert.ok(r.stderr.includes(`tool "pay": ${kitWords}`), `the compiler refuses it for ${kitWords}:\n${r.stderr}`);

      const manifest = path.join(dir, 'tools.json');
      writeFileSync(manifest, JSON.stringify({ tools: [{ ...tool, input_schema: { type: 'object' } }] }));
      const config = path.join(dir, 'Caddyfile');
      writeFileSync(config, caddyfile(manifest));
      const gateway = gatewayError(config);
      assert.ok(gateway?.includes('"pay"') && gateway.includes(gatewayWords), `the gateway refuses it for ${gatewayWords}:\n${gateway}`);
    });
  }
});

test('the limit and timeout tables: the kit reads each row as the gateway’s own parsers do', (t) => {
  const table = (name) => JSON.parse(readFileSync(path.join(kit, 'test', 'fixtures', 'governance', name), 'utf8'));
  const limits = table('limits.json').map((row) => row.limit);
  const timeouts = table('timeouts.json').map((row) => row.timeout);
  // Inside the module, so that it may import its internal packages.
  const inside = mkdtempSync(path.join(kit, 'test', '.parity-'));
  t.after(() => rmSync(inside, { recursive: true, force: true }));
  writeFileSync(path.join(inside, 'main.go'), `package main

import (
	"os"
	"strconv"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/quota"
)

type limit struct {
	Max    int    \`json:"max"\`
	Window int64  \`json:"window"\`
	Scope  string \`json:"scope"\`
}

// Reads {limits, timeouts}; writes each limit as read (null when refused)
// and each timeout in nanoseconds as a string ("" when refused).
func main() {
	var in struct {
		Limits   []string \`json:"limits"\`
		Timeouts []string \`json:"timeouts"\`
	}
	if err := json.UnmarshalRead(os.Stdin, &in); err != nil {
		panic(err)
	}
	var out struct {
		Limits   []*limit \`json:"limits"\`
		Timeouts []string \`json:"timeouts"\`
	}
	for _, s := range in.Limits {
		var l *limit
		if r, err := quota.Parse(s); err == nil {
			l = &limit{r.Max, int64(r.Window / time.Second), r.Scope}
		}
		out.Limits = append(out.Limits, l)
	}
	for _, s := range in.Timeouts {
		var ns string
		if d, err := manifest.ParseTimeout(s); err == nil {
			ns = strconv.FormatInt(int64(d), 10)
		}
		out.Timeouts = append(out.Timeouts, ns)
	}
	if err := json.MarshalWrite(os.Stdout, &out); err != nil {
		panic(err)
	}
}
`);
  const go = JSON.parse(execFileSync('go', ['run', path.join(inside, 'main.go')], { cwd: root, input: JSON.stringify({ limits, timeouts }), encoding: 'utf8' }));
  const kitLimits = limits.map((s) => {
    const l = parseLimit(s);
    return l.error === undefined ? l : null;
  });
  assert.deepEqual(kitLimits, go.limits);
  const kitTimeouts = timeouts.map((s) => {
    const d = parseTimeout(s);
    return d.error === undefined ? String(d.ns) : '';
  });
  assert.deepEqual(kitTimeouts, go.timeouts);
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
