// toolgate-tools build --check's load checks (compiler/check.mjs,
// compiler/caddyfile.mjs): what they refuse and what they pass.
// check-parity.test.mjs holds the same cases against the gateway itself.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { declaredComponents } from '../compiler/caddyfile.mjs';
import { check, goRegexpError } from '../compiler/check.mjs';

const kit = fileURLToPath(new URL('..', import.meta.url));
const bin = path.join(kit, 'bin', 'toolgate-tools.mjs');
const fixtures = path.join(kit, 'test', 'fixtures', 'load');

function run(args) {
  const r = spawnSync(process.execPath, [bin, ...args], { cwd: kit, encoding: 'utf8', timeout: 30_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function tempFile(t, name, text) {
  const dir = mkdtempSync(path.join(tmpdir(), 'toolgate-check-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, name);
  writeFileSync(file, text);
  return file;
}

test('patterns: what Go’s regexp compiles passes, the rest is refused', () => {
  for (const [pattern, want, why] of JSON.parse(readFileSync(path.join(fixtures, 'patterns.json'), 'utf8'))) {
    const err = goRegexpError(pattern);
    assert.equal(err === '' ? 'ok' : 'refused', want, `${why}: ${pattern.slice(0, 60)}: ${err}`);
  }
  // Go's own words, which the gateway's message carries too.
  assert.equal(goRegexpError('(?=a)b'), 'error parsing regexp: invalid or unsupported Perl syntax: `(?=`');
  assert.equal(goRegexpError('\\p{Emoji}+'), 'error parsing regexp: invalid character class range: `\\p{Emoji}`');
});

// tool is a compiled manifest entry: a closed input with a name, an app
// target on component api.
function tool(over = {}) {
  return {
    name: 't',
    description: 'T.',
    input_schema: { type: 'object', properties: { name: { type: 'string' } }, additionalProperties: false, ...over.input_schema },
    target: { type: 'app', component: 'api', method: 'GET', path: '/t', ...over.target },
  };
}

const checkCases = [
  // [what, tool overrides, the lines --check gives (file "tools.ts")]
  ['a pattern with a lookahead', { input_schema: { properties: { name: { type: 'string', pattern: '^(?!x)' } } } },
    ["tools.ts: tool \"t\": input.name: '^(?!x)' is not valid regex: error parsing regexp: invalid or unsupported Perl syntax: `(?!`; the gateway reads patterns with Go's regexp (RE2 syntax): no lookahead or lookbehind, backreferences, possessive or atomic groups, or \\u escapes"]],
  ['a pattern deep in items and anyOf', { input_schema: { properties: { tags: { type: 'array', items: { anyOf: [{ type: 'string', pattern: '(a)\\1' }] } } } } },
    [/^tools\.ts: tool "t": input\.tags\[\]\/anyOf\/0: '\(a\)\\1' is not valid regex: error parsing regexp: invalid escape sequence: `\\1`;/]],
  ['a patternProperties key with a lookbehind', { input_schema: { properties: { m: { type: 'object', patternProperties: { '(?<=x)y': {} } } } } },
    [/^tools\.ts: tool "t": input\.m: patternProperties key '\(\?<=x\)y' is not valid regex: error parsing regexp: invalid named capture: `\(\?<=x\)y`;/]],
  ['"pattern" as a property name and in an enum is data', { input_schema: { properties: { pattern: { enum: ['(?=x)'] } } } }, []],
  ['Go’s (?i) flag', { input_schema: { properties: { name: { type: 'string', pattern: '(?i)^ab$' } } } }, []],
  ['a reference to a property the closed input lacks', { target: { path: '/t/${input.nmae}' } },
    ['tools.ts: tool "t": target.path: ${input.nmae} can never resolve: input_schema allows no property "nmae" (it allows name)']],
  ['in a query, a header and a body', { target: { query: { q: '${input.a}' }, headers: { 'X-B': '${input.b}' }, body: { c: ['x ${input.c}'] } } }, [
    'tools.ts: tool "t": target.query.q: ${input.a} can never resolve: input_schema allows no property "a" (it allows name)',
    'tools.ts: tool "t": target.headers.X-B: ${input.b} can never resolve: input_schema allows no property "b" (it allows name)',
    'tools.ts: tool "t": target.body.c[0]: ${input.c} can never resolve: input_schema allows no property "c" (it allows name)',
  ]],
  ['an open input: the gateway does not refuse it, nor does --check', { input_schema: { additionalProperties: undefined }, target: { path: '/t/${input.nmae}' } }, []],
  ['a property a patternProperties key admits', { input_schema: { patternProperties: { '^x_': {} } }, target: { path: '/t/${input.x_a}' } }, []],
  ['only the first segment is checked, as at the gateway', { target: { path: '/t/${input.name.first}' } }, []],
  ['${input}, a literal $${ and body keys are no references', { target: { path: '/t/$${input.nope}', body: { '${input.key}': '${input}' } } }, []],
  ['an unknown root', { target: { path: '/t/${inptu.name}' } },
    ['tools.ts: tool "t": target.path: app target: unknown reference ${inptu.name}: the root must be input, env or connection']],
  ['a bad segment', { target: { query: { q: '${input.a b}' } } },
    ['tools.ts: tool "t": target.query.q: app target: invalid reference ${input.a b}: bad segment "a b"']],
  ['an unterminated reference', { target: { type: 'url', url: 'https://x.test/${input.name', path: undefined, component: undefined } },
    ['tools.ts: tool "t": target.url: url target: unterminated reference at offset 15 in "https://x.test/${input.name"']],
  ['an env reference with no component', { target: { type: 'url', url: 'https://x.test/', path: undefined, component: undefined, headers: { 'X-K': '${env.K}' } } },
    ['tools.ts: tool "t": target.headers.X-K: url target: ${env.K} needs a component whose env declares it; name one with component']],
  ['${env.A.B}', { target: { headers: { 'X-K': '${env.A.B}' } } },
    ['tools.ts: tool "t": target.headers.X-K: app target: invalid reference ${env.A.B}: want ${env.NAME}']],
  ['an env reference of a component, without the Caddyfile', { target: { headers: { 'X-K': '${env.K}' } } }, []],
  ['a connection in a url target\'s header and query', { target: { type: 'url', url: 'https://x.test/', path: undefined, component: undefined, headers: { Authorization: 'Bearer ${connection.gmail}' }, query: { t: '${connection.gmail}' } } }, []],
  ['a connection in an app target', { target: { headers: { 'X-T': '${connection.gmail}' } } },
    ['tools.ts: tool "t": target.headers.X-T: app target: ${connection.gmail}: a connection\'s token goes only to a url target; a component gets the identity token']],
  ['a connection in a url', { target: { type: 'url', url: 'https://x.test/${connection.gmail}', path: undefined, component: undefined } },
    ['tools.ts: tool "t": target.url: url target: ${connection.gmail}: a connection\'s token goes in a header or a query value of a url target, never in its URL or body']],
  ['${connection}', { target: { type: 'url', url: 'https://x.test/', path: undefined, component: undefined, headers: { A: '${connection}' } } },
    ['tools.ts: tool "t": target.headers.A: url target: invalid reference ${connection}: want ${connection.NAME}']],
];

test('check: references and patterns, as the gateway loads them', async (t) => {
  for (const [what, over, want] of checkCases) {
    await t.test(what, async () => {
      const lines = await check('tools.ts', { tools: [tool(over)] });
      assert.equal(lines.length, want.length, lines.join('\n'));
      want.forEach((w, i) => (typeof w === 'string' ? assert.equal(lines[i], w) : assert.match(lines[i], w)));
    });
  }
});

test('check with a Caddyfile: components and env names must be declared', async (t) => {
  const caddyfile = tempFile(t, 'Caddyfile', `
(shared) {
	toolgate {
		component shared http://127.0.0.1:9003
	}
}
http://127.0.0.1:8080 {
	bind 127.0.0.1
	# component commented http://127.0.0.1:9 is no component
	handle_path /a/* {
		toolgate {
			manifest tools.ts
			component api "http://127.0.0.1:9001" {
				env KEY \`{env.SECRET}\`
			}
			tool ping {
				description "a quoted { and } open and close nothing"
				input_schema <<JSON
					{"type": "object", "properties": {}}
					JSON
				target url GET http://127.0.0.1:9001/ping
			}
		}
	}
	handle_path /b/* {
		toolgate {
			component api http://127.0.0.1:9002 {
				env OTHER x
			}
			component notes http://127.0.0.1:9004
		}
	}
}
`);
  const components = await declaredComponents(caddyfile);
  assert.deepEqual([...components.keys()].sort(), ['api', 'notes', 'shared']);
  assert.deepEqual([...components.get('api')].sort(), ['KEY', 'OTHER'], 'env names of both blocks that declare api');

  const doc = {
    tools: [
      tool({ target: { headers: { 'X-K': '${env.KEY}', 'X-O': '${env.OTHER}' } } }),
      { ...tool({ target: { component: 'apii' } }), name: 'typo' },
      { ...tool({ target: { component: 'notes', headers: { 'X-K': '${env.KEY}' } } }), name: 'env' },
      { ...tool({ target: { type: 'url', url: 'https://x.test/', path: undefined, component: 'nope' } }), name: 'url' },
    ],
  };
  assert.deepEqual(await check('tools.ts', doc, { caddyfile }), [
    `tools.ts: tool "typo": target.component: app target: component "apii" is not declared in ${caddyfile} (its toolgate blocks declare api, notes, shared); declare it there with \`component apii <base_url>\`, or name a declared one`,
    `tools.ts: tool "env": target.headers.X-K: app target: \${env.KEY}: component "notes" declares no env KEY in ${caddyfile}; add \`env KEY <value>\` to its component block`,
    `tools.ts: tool "url": target.component: url target: component "nope" is not declared in ${caddyfile} (its toolgate blocks declare api, notes, shared); declare it there with \`component nope <base_url>\`, or name a declared one`,
  ]);

  const none = tempFile(t, 'Caddyfile', 'http://127.0.0.1:8080 {\n\trespond "toolgate {"\n}\n');
  assert.deepEqual(await check('tools.ts', doc, { caddyfile: none }), [
    `${none}: no toolgate block; --caddyfile names the Caddyfile whose toolgate block serves these tools`,
  ]);
  assert.deepEqual(await check('tools.ts', doc, { caddyfile: '/nonexistent/Caddyfile' }), ['/nonexistent/Caddyfile: no such file']);
});

test('the bin: --check alone runs the checks and writes nothing', () => {
  let r = run(['build', 'test/fixtures/load/good.ts', '--check']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout + r.stderr, '');

  r = run(['build', 'test/fixtures/load/ref_typo.ts', '--check']);
  assert.equal(r.code, 1);
  assert.equal(r.stdout, '');
  assert.equal(r.stderr, 'toolgate-tools: test/fixtures/load/ref_typo.ts: tool "ref_typo": target.path: ${input.nmae} can never resolve: input_schema allows no property "nmae" (it allows name)\n');

  // Without --check the manifest is written as before: the gateway
  // refuses it at load, naming the same tool.
  r = run(['build', 'test/fixtures/load/ref_typo.ts']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /"path": "\/greet\/\$\{input\.nmae\}"/);

  // A component is checked only against a Caddyfile.
  assert.equal(run(['build', 'test/fixtures/load/component.ts', '--check']).code, 0);
});
