// A tool's approval question and quotas (compiler/governance.mjs and the
// compiler's checks of them): the grammars on their tables, what a tools.ts
// may declare and what it may not, the manifest written, and the bytes of
// tools that declare neither.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { z } from 'zod';
import { toJSONSchema } from 'zod/v4/core';

import { CompileError, manifest } from '../compiler/compile.mjs';
import { parseDuration, parseLimit, parseTimeout } from '../compiler/governance.mjs';
import { toolsSource } from '../compiler/openapi.mjs';

const kit = fileURLToPath(new URL('..', import.meta.url));
const bin = path.join(kit, 'bin', 'toolgate-tools.mjs');
const fixtures = path.join(kit, 'test', 'fixtures');
const table = (name) => JSON.parse(readFileSync(path.join(fixtures, 'governance', name), 'utf8'));

function run(args) {
  const r = spawnSync(process.execPath, [bin, ...args], { cwd: kit, encoding: 'utf8', timeout: 30_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

// compileTools runs the compiler's checks on tools as a tools.ts would
// export them: the manifest, or the CompileError's lines.
function compileTools(tools) {
  try {
    // Through JSON, as compile writes it: undefined members drop out.
    return { doc: JSON.parse(JSON.stringify(manifest('tools.ts', tools, toJSONSchema))) };
  } catch (err) {
    if (!(err instanceof CompileError)) throw err;
    return { lines: err.lines };
  }
}

const base = { name: 'pay', description: 'Pay.', input: z.object({ amount: z.number() }).strict(), target: { type: 'app', component: 'pay', method: 'POST', path: '/pay' } };

test('limits: the grammar on its table (the gateway holds the same table)', () => {
  const rows = table('limits.json');
  assert.ok(rows.length > 50);
  for (const row of rows) {
    const got = parseLimit(row.limit);
    if (row.refused) {
      assert.equal(typeof got.error, 'string', `${row.why}: ${JSON.stringify(row.limit)} must be refused, got ${JSON.stringify(got)}`);
    } else {
      assert.deepEqual(got, { max: row.max, window: row.window, scope: row.scope }, `${row.why}: ${JSON.stringify(row.limit)}`);
    }
  }
});

test('limits: a refusal says what is wrong', () => {
  for (const [limit, want] of [
    ['0/1h per user', 'the count 0 is not from 1 to 1000000'],
    ['1000001/1h per user', 'the count 1000001 is not from 1 to 1000000'],
    ['020/1h per user', 'the count 020 has a leading zero'],
    ['20/0h per user', 'the window 0h is empty: it must be at least 1h'],
    ['20/01h per user', 'the window 01h has a leading zero'],
    ['20/31d per user', 'the window 31d is longer than 30d'],
    ['20/99999999999999999999d per user', 'the window 99999999999999999999d is longer than 30d'],
  ]) {
    assert.equal(parseLimit(limit).error, want, limit);
  }
  assert.match(parseLimit('20/1h per users').error, /^not N\/WINDOW per SCOPE or N concurrent per SCOPE \(N from 1 to 1000000; WINDOW such as 30m, 1h or 1d, or h for 1h, at most 30d; SCOPE user or install\)$/);
  assert.match(parseLimit(20).error, /^not a string: N\/WINDOW per SCOPE/);
});

test('timeouts: whole days or a Go duration, from 1s to 30d, on a table Go printed', () => {
  // timeouts.json was printed by Go: duration is what time.ParseDuration
  // reads, ns what internal/manifest's ParseTimeout reads; each is absent
  // where it refuses.
  const rows = table('timeouts.json');
  assert.ok(rows.length > 50);
  for (const row of rows) {
    const what = `${row.why}: ${JSON.stringify(row.timeout)}`;
    let duration;
    try {
      duration = String(parseDuration(row.timeout));
    } catch (err) {
      assert.match(err.message, /duration/, what);
    }
    assert.equal(duration, row.duration, `time.ParseDuration: ${what}`);
    const got = parseTimeout(row.timeout);
    assert.equal(got.ns === undefined ? undefined : String(got.ns), row.ns, `ParseTimeout: ${what}: ${got.error}`);
    assert.equal(got.error === undefined, row.ns !== undefined, what);
  }
  // Go's words.
  assert.throws(() => parseDuration('1w'), { message: 'unknown unit "w" in duration "1w"' });
  assert.throws(() => parseDuration('1'), { message: 'missing unit in duration "1"' });
  assert.throws(() => parseDuration(''), { message: 'invalid duration ""' });
  assert.deepEqual(parseTimeout('31d'), { error: 'at most 30d' });
  assert.deepEqual(parseTimeout('721h'), { error: 'at most 30d' });
  assert.deepEqual(parseTimeout('999ms'), { error: 'at least 1s' });
  assert.deepEqual(parseTimeout('1d12h'), { error: 'whole days (2d) or a duration (24h, 90m)' });
});

test('declarations the compiler accepts, written as given in the manifest’s order', () => {
  const cases = [
    ['a title alone', { approval: { title: 'Pay?' } }, { approval: { title: 'Pay?' } }],
    [
      'every member, in any order',
      { approval: { assignee: 'claims.device', timeout: '90m', description: 'It pays.', title: 'Pay?', when: 'input.amount > 100' } },
      { approval: { when: 'input.amount > 100', title: 'Pay?', description: 'It pays.', timeout: '90m', assignee: 'claims.device' } },
    ],
    ['the longest timeout', { approval: { title: 'Pay?', timeout: '30d' } }, { approval: { title: 'Pay?', timeout: '30d' } }],
    ['the shortest timeout', { approval: { title: 'Pay?', timeout: '1s' } }, { approval: { title: 'Pay?', timeout: '1s' } }],
    ['limits on a client tool', { target: { type: 'kazzle', name: 'pay' }, limits: ['5 concurrent per user'] }, { limits: ['5 concurrent per user'] }],
    ['a timeout in Go’s spelling, kept as written', { approval: { title: 'Pay?', timeout: '1h30m' } }, { approval: { title: 'Pay?', timeout: '1h30m' } }],
    ['one limit', { limits: ['20/1h per user'] }, { limits: ['20/1h per user'] }],
    [
      'one window in two scopes, two windows in one scope, concurrent beside windows',
      { limits: ['20/1h per user', '20/1h per install', '100/1d per user', '5 concurrent per user', '50 concurrent per install'] },
      { limits: ['20/1h per user', '20/1h per install', '100/1d per user', '5 concurrent per user', '50 concurrent per install'] },
    ],
    ['no limits', { limits: [] }, { limits: [] }],
    ['both', { approval: { title: 'Pay?' }, limits: ['1/h per user'] }, { approval: { title: 'Pay?' }, limits: ['1/h per user'] }],
  ];
  for (const [why, members, want] of cases) {
    const { doc, lines } = compileTools([{ ...base, ...members }]);
    assert.equal(lines, undefined, why);
    const [tool] = doc.tools;
    assert.deepEqual(Object.keys(tool), ['name', 'description', 'input_schema', 'target', ...Object.keys(want)], why);
    for (const [k, v] of Object.entries(want)) {
      assert.deepEqual(tool[k], v, why);
      // Key order is part of the manifest's bytes.
      if (k === 'approval') assert.deepEqual(Object.keys(tool[k]), Object.keys(v), why);
    }
  }
});

test('declarations the compiler refuses: the tool and the member named', () => {
  const cases = [
    ['approval not an object', { approval: 'Pay?' }, ['approval: must be an object: {title, when?, description?, timeout?, assignee?}']],
    ['approval an array', { approval: [{ title: 'Pay?' }] }, ['approval: must be an object: {title, when?, description?, timeout?, assignee?}']],
    ['approval null', { approval: null }, ['approval: must be an object: {title, when?, description?, timeout?, assignee?}']],
    ['no title', { approval: {} }, ["approval.title: required: a non-empty string, the card's title"]],
    ['an empty title', { approval: { title: '' } }, ["approval.title: required: a non-empty string, the card's title"]],
    ['a blank title', { approval: { title: ' \n\t' } }, ["approval.title: required: a non-empty string, the card's title"]],
    ['a title not a string', { approval: { title: ['Pay?'] } }, ["approval.title: required: a non-empty string, the card's title"]],
    ['an unknown member', { approval: { title: 'Pay?', buttons: [] } }, ['approval.buttons: unknown field (an approval has when, title, description, timeout, assignee)']],
    ['the manifest’s spelling of another field', { approval: { title: 'Pay?', expires: '1h' } }, ['approval.expires: unknown field (an approval has when, title, description, timeout, assignee)']],
    ['an empty when', { approval: { title: 'Pay?', when: '' } }, ['approval.when: must be a non-empty expression string (left out: every call is approved first)']],
    ['a when not a string', { approval: { title: 'Pay?', when: true } }, ['approval.when: must be a non-empty expression string (left out: every call is approved first)']],
    ['a blank assignee', { approval: { title: 'Pay?', assignee: '  ' } }, ['approval.assignee: must be a non-empty expression string (left out: the caller decides)']],
    ['an empty description', { approval: { title: 'Pay?', description: '' } }, ['approval.description: must be a non-empty string when given']],
    ['a timeout in seconds as a number', { approval: { title: 'Pay?', timeout: 3600 } }, ['approval.timeout: 3600: whole days (2d) or a duration (24h, 90m), a string']],
    ['a timeout without a unit', { approval: { title: 'Pay?', timeout: '24' } }, ['approval.timeout: "24": whole days (2d) or a duration (24h, 90m)']],
    ['an empty timeout', { approval: { title: 'Pay?', timeout: '' } }, ['approval.timeout: "": whole days (2d) or a duration (24h, 90m)']],
    ['days and hours', { approval: { title: 'Pay?', timeout: '1d12h' } }, ['approval.timeout: "1d12h": whole days (2d) or a duration (24h, 90m)']],
    ['a fraction of a day', { approval: { title: 'Pay?', timeout: '1.5d' } }, ['approval.timeout: "1.5d": whole days (2d) or a duration (24h, 90m)']],
    ['a timeout in weeks', { approval: { title: 'Pay?', timeout: '1w' } }, ['approval.timeout: "1w": whole days (2d) or a duration (24h, 90m)']],
    ['a zero timeout', { approval: { title: 'Pay?', timeout: '0s' } }, ['approval.timeout: "0s": at least 1s']],
    ['a timeout under a second', { approval: { title: 'Pay?', timeout: '500ms' } }, ['approval.timeout: "500ms": at least 1s']],
    ['a negative timeout', { approval: { title: 'Pay?', timeout: '-1h' } }, ['approval.timeout: "-1h": at least 1s']],
    ['negative days', { approval: { title: 'Pay?', timeout: '-1d' } }, ['approval.timeout: "-1d": whole days (2d) or a duration (24h, 90m)']],
    ['a timeout over 30d', { approval: { title: 'Pay?', timeout: '721h' } }, ['approval.timeout: "721h": at most 30d']],
    ['days over 30d', { approval: { title: 'Pay?', timeout: '31d' } }, ['approval.timeout: "31d": at most 30d']],
    [
      'an approval on a client tool',
      { target: { type: 'kazzle', name: 'pay' }, approval: { title: 'Pay?' } },
      ["approval: a client tool runs in the user's own page, so there is no call to hold for approval"],
    ],
    ['limits a string', { limits: '20/1h per user' }, ['limits: must be an array of strings such as "20/1h per user"']],
    ['limits an object', { limits: { user: '20/1h' } }, ['limits: must be an array of strings such as "20/1h per user"']],
    ['a limit not a string', { limits: ['20/1h per user', 20] }, [/^limits\[1\]: not a string: N\/WINDOW per SCOPE/]],
    ['a hole in the array', { limits: [, '20/1h per user'] }, [/^limits\[0\]: not a string: /]], // eslint-disable-line no-sparse-arrays
    ['a bad scope', { limits: ['20/1h per team'] }, [/^limits\[0\]: "20\/1h per team": not N\/WINDOW per SCOPE/]],
    ['a count out of range', { limits: ['0 concurrent per user'] }, ['limits[0]: "0 concurrent per user": the count 0 is not from 1 to 1000000']],
    ['a window out of range', { limits: ['1/31d per install'] }, ['limits[0]: "1/31d per install": the window 31d is longer than 30d']],
    [
      'one window twice in one scope',
      { limits: ['20/1h per user', '10/1h per user'] },
      ['limits[1]: "10/1h per user" counts the same calls as limits[0] ("20/1h per user"): one window, per user'],
    ],
    [
      'one window spelt two ways',
      { limits: ['20/h per install', '5/1d per install', '10/60m per install'] },
      ['limits[2]: "10/60m per install" counts the same calls as limits[0] ("20/h per install"): one window, per install'],
    ],
    [
      'the same limit twice',
      { limits: ['20/1h per user', '20/1h per user'] },
      ['limits[1]: "20/1h per user" counts the same calls as limits[0] ("20/1h per user"): one window, per user'],
    ],
    [
      'concurrent twice in one scope',
      { limits: ['5 concurrent per user', '1/1s per user', '3 concurrent per user'] },
      ['limits[2]: "3 concurrent per user" counts the same calls as limits[0] ("5 concurrent per user"): both concurrent, per user'],
    ],
    [
      'every problem at once',
      { approval: { title: '', timeout: 'soon', extra: 1 }, limits: ['x', '2/1h per user', '3/1h per user'] },
      [
        'approval.extra: unknown field (an approval has when, title, description, timeout, assignee)',
        "approval.title: required: a non-empty string, the card's title",
        'approval.timeout: "soon": whole days (2d) or a duration (24h, 90m)',
        /^limits\[0\]: "x": not N\/WINDOW per SCOPE/,
        'limits[2]: "3/1h per user" counts the same calls as limits[1] ("2/1h per user"): one window, per user',
      ],
    ],
  ];
  for (const [why, members, want] of cases) {
    const { doc, lines } = compileTools([{ ...base, ...members }]);
    assert.equal(doc, undefined, `${why}: compiled`);
    assert.equal(lines.length, want.length, `${why}: ${lines.join('\n')}`);
    lines.forEach((line, i) => {
      const prefix = 'tools.ts: tool "pay": ';
      assert.ok(line.startsWith(prefix), line);
      if (want[i] instanceof RegExp) assert.match(line.slice(prefix.length), want[i], why);
      else assert.equal(line.slice(prefix.length), want[i], why);
    });
  }
});

test('a long limit or timeout is shown cut short, not echoed whole', () => {
  const { lines } = compileTools([{ ...base, approval: { title: 'Pay?', timeout: '1' + 'h'.repeat(10_000) }, limits: ['1/1h per user' + ' '.repeat(10_000) + 'x'] }]);
  assert.equal(lines.length, 2, lines.join('\n'));
  assert.match(lines[0], /approval\.timeout: "1h{79}…": whole days \(2d\) or a duration/);
  assert.match(lines[1], /limits\[0\]: "1\/1h per user {67}…": not N\/WINDOW/);
  for (const line of lines) assert.ok(line.length < 400, `${line.length} characters: ${line.slice(0, 100)}`);
});

test('the manifest of a tools.ts with approvals and limits, byte for byte', () => {
  const r = run(['build', 'test/fixtures/governance.ts']);
  assert.equal(r.stderr, '');
  assert.equal(r.code, 0);
  const tools = Object.fromEntries(JSON.parse(r.stdout).tools.map((t) => [t.name, t]));
  assert.deepEqual(Object.keys(tools), ['plain', 'send_payment', 'delete_all', 'search']);
  assert.deepEqual(Object.keys(tools.send_payment), ['name', 'displayName', 'description', 'input_schema', 'target', 'allow', 'approval', 'limits']);
  assert.ok(
    r.stdout.includes(`      "allow": "user != \\"\\"",
      "approval": {
        "when": "input.amount > 100",
        "title": "Send this payment?",
        "description": "The money leaves the account **at once**.",
        "timeout": "2d",
        "assignee": "claims.manager_device"
      },
      "limits": [
        "20/1h per user",
        "1000/1d per install",
        "5 concurrent per user"
      ]
    },
`),
    r.stdout,
  );
  assert.deepEqual(tools.delete_all.approval, { title: 'Delete everything?' });
  assert.equal('limits' in tools.delete_all, false);
  assert.deepEqual(tools.search.limits, ['30/m per user']);
  assert.equal('approval' in tools.search, false);
  assert.deepEqual(Object.keys(tools.plain), ['name', 'description', 'input_schema', 'target']);
});

test('tools that declare neither compile to the bytes they did before', () => {
  // fixtures/schemas.json is the manifest schemas.ts compiled to before
  // tools had approval and limits.
  const r = run(['build', 'test/fixtures/schemas.ts']);
  assert.equal(r.stderr, '');
  assert.equal(r.stdout, readFileSync(path.join(fixtures, 'schemas.json'), 'utf8'));

  // Members set to undefined are left out too, as tools.ts spreading an
  // optional value writes them.
  const plain = compileTools([base]).doc;
  const undef = compileTools([{ ...base, approval: undefined, limits: undefined }]).doc;
  assert.equal(JSON.stringify(undef, null, 2), JSON.stringify(plain, null, 2));
});

test('the types take approval and limits and refuse what the compiler would', () => {
  const tsc = (file) =>
    spawnSync(
      process.execPath,
      [path.join(path.dirname(fileURLToPath(import.meta.resolve('typescript/package.json'))), 'bin', 'tsc'),
        '--ignoreConfig', '--noEmit', '--strict', '--target', 'es2022', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--types', 'node',
        path.join('test', 'fixtures', file)],
      { cwd: kit, encoding: 'utf8', timeout: 60_000 },
    );
  let r = tsc('governance.ts');
  assert.equal(r.stdout + r.stderr, '');
  assert.equal(r.status, 0);
  r = tsc('governance-types.ts');
  assert.equal(r.status, 1);
  assert.match(r.stdout, /governance-types\.ts\(9,\d+\): error TS\d+: [^\n]*title/);
  assert.match(r.stdout, /governance-types\.ts\(10,\d+\): error TS\d+: [^\n]*number[^\n]*string/);
});

test('a tools.ts written from a manifest keeps approval and limits, and compiles back to them', (t) => {
  // Beside the kit, so that the written tools.ts resolves zod.
  const dir = mkdtempSync(path.join(kit, 'test', '.governance-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const approval = { when: 'input.n > 1', title: 'Go "on"?', description: 'It runs.\nTwice.', timeout: '90m', assignee: 'claims.device' };
  const limits = ['20/h per user', '5 concurrent per install'];
  const tool = { name: 'go', description: 'Go.', input_schema: { type: 'object', properties: { n: { type: 'number' } } }, target: { type: 'app', component: 'c', method: 'POST', path: '/go' } };
  writeFileSync(path.join(dir, 'tools.ts'), toolsSource({ tools: [{ ...tool, approval, limits }, { ...tool, name: 'plain' }] }));
  const r = run(['build', path.join(dir, 'tools.ts')]);
  assert.equal(r.stderr, '');
  const [withThem, without] = JSON.parse(r.stdout).tools;
  assert.deepEqual(withThem.approval, approval);
  assert.deepEqual(Object.keys(withThem.approval), Object.keys(approval));
  assert.deepEqual(withThem.limits, limits);
  assert.deepEqual(Object.keys(without), ['name', 'description', 'input_schema', 'target']);
});
