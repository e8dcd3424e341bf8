// The toolgate-tools compiler, run as the gateway and CI run it: the bin in
// a child process, its exit status, stdout and stderr.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const kit = fileURLToPath(new URL('..', import.meta.url));
const bin = path.join(kit, 'bin', 'toolgate-tools.mjs');
const fixtures = path.join(kit, 'test', 'fixtures');

function run(args, opts = {}) {
  const r = spawnSync(process.execPath, [bin, ...args], { cwd: kit, encoding: 'utf8', timeout: 30_000, ...opts });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

// The example of fixtures/seed-tools.ts, as toolgate's manifest: byte for
// byte, so key order, indentation and the trailing newline are part of the
// contract.
const seedManifest = `{
  "tools": [
    {
      "name": "save_bookmark",
      "displayName": "Save bookmark",
      "description": "Save a bookmark URL and return a confirmation.",
      "input_schema": {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
          "url": {
            "type": "string",
            "format": "uri",
            "description": "URL to save."
          },
          "title": {
            "description": "Optional human-readable title.",
            "type": "string"
          }
        },
        "required": [
          "url"
        ],
        "additionalProperties": false
      },
      "target": {
        "type": "app",
        "component": "api",
        "method": "POST",
        "path": "/tools/save-bookmark",
        "body": "\${input}"
      }
    }
  ]
}
`;

test('the example tools.ts compiles to its manifest', () => {
  const r = run(['build', 'test/fixtures/seed-tools.ts']);
  assert.equal(r.stderr, '');
  assert.equal(r.code, 0);
  assert.equal(r.stdout, seedManifest);
});

test('Zod features reach the schema as the gateway must read them', () => {
  const r = run(['build', 'test/fixtures/schemas.ts']);
  assert.equal(r.code, 0, r.stderr);
  const tools = Object.fromEntries(JSON.parse(r.stdout).tools.map((t) => [t.name, t]));

  // .strict() closes the object; .describe() is the field's description.
  assert.equal(tools.strict.input_schema.additionalProperties, false);
  assert.equal(tools.strict.input_schema.properties.q.description, 'What to look for.');
  assert.deepEqual(tools.strict.input_schema.required, ['q']);

  // A plain object is open, as Zod (which strips unknown keys) accepts
  // them; a defaulted field may be left out.
  assert.equal('additionalProperties' in tools.loose.input_schema, false);
  assert.equal(tools.loose.input_schema.required, undefined);
  assert.equal(tools.loose.input_schema.properties.n.default, 3);

  // A transform is described by what it reads.
  assert.deepEqual(tools.nested.input_schema.properties.when, { type: 'string' });
  assert.equal(tools.nested.input_schema.properties.items.items.properties.id.format, 'uuid');

  // Fields in the manifest's order, whatever order tools.ts used.
  assert.deepEqual(Object.keys(tools.nested), ['name', 'displayName', 'description', 'input_schema', 'target', 'annotations']);
  assert.deepEqual(Object.keys(tools.nested.target), ['type', 'component', 'method', 'url', 'headers', 'body']);
  assert.deepEqual(tools.nested.annotations, { readOnlyHint: false, openWorldHint: true });
  assert.deepEqual(tools.nested.target.body, { items: '${input.items}', literal: 1 });

  // "ui" passes through as written, last; unset, it is left out.
  assert.deepEqual(Object.keys(tools.strict), ['name', 'displayName', 'description', 'input_schema', 'target', 'ui']);
  assert.equal(tools.strict.ui, false);
  assert.equal('ui' in tools.loose, false);
});

test('-o writes the manifest; --check passes when equal, fails on drift', (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'toolgate-tools-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const out = path.join(dir, 'tools.json');
  const seed = 'test/fixtures/seed-tools.ts';

  let r = run(['build', seed, '--check', '-o', out]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /tools\.json: does not exist; run: toolgate-tools build test\/fixtures\/seed-tools\.ts -o /);

  r = run(['build', seed, '-o', out]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, '');
  assert.equal(readFileSync(out, 'utf8'), seedManifest);
  assert.deepEqual(readdirSync(dir), ['tools.json'], 'no temporary file is left beside the manifest');

  r = run(['build', seed, '-o', out, '--check']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stderr, '');

  writeFileSync(out, seedManifest.replace('Save a bookmark URL', 'Save a URL'));
  r = run(['build', seed, '-o', out, '--check']);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /tools\.json is out of date with test\/fixtures\/seed-tools\.ts \(line 6: the file has "\\"description\\": \\"Save a URL/);
  assert.match(r.stderr, /run: toolgate-tools build test\/fixtures\/seed-tools\.ts -o /);
  assert.equal(readFileSync(out, 'utf8'), seedManifest.replace('Save a bookmark URL', 'Save a URL'), '--check never writes');

  // A missing trailing newline is drift too: the file is compared byte for byte.
  writeFileSync(out, seedManifest.trimEnd());
  assert.equal(run(['build', seed, '-o', out, '--check']).code, 1);
});

test('displayName is optional, as in a JSON manifest: left out, the gateway labels the tool with its name', () => {
  const r = run(['build', 'test/fixtures/no-display-name.ts']);
  assert.equal(r.code, 0, r.stderr);
  const [tool] = JSON.parse(r.stdout).tools;
  assert.equal(tool.name, 'ping');
  assert.ok(!('displayName' in tool), JSON.stringify(tool));
  assert.deepEqual(Object.keys(tool), ['name', 'description', 'input_schema', 'target']);
});

test('bad tools.ts files: exit 1, the file, the tool and the field named', async (t) => {
  const cases = [
    ['bad-date.ts', ['test/fixtures/bad-date.ts: tool "remind": input.when.at: Date cannot be represented in JSON Schema']],
    ['bad-duplicate.ts', ['test/fixtures/bad-duplicate.ts: tool "twice": name: used twice (tools[0] and tools[1])']],
    ['bad-no-export.ts', ['test/fixtures/bad-no-export.ts: no export named "tools" and no default export: export const tools = [...] as const satisfies readonly KazzleTool[]']],
    ['bad-syntax.ts', ['test/fixtures/bad-syntax.ts:6:85: Expected "}" but found "name"']],
    ['bad-throws.ts', ['test/fixtures/bad-throws.ts:4:9: DESCRIPTION is not set']],
    ['bad-fields.ts', [
      'test/fixtures/bad-fields.ts: tools[0]: name: "bad name" must match ^[a-zA-Z0-9_-]{1,64}$',
      'test/fixtures/bad-fields.ts: tool "not_object": input: a Zod string schema: the input must be z.object({...})',
      'test/fixtures/bad-fields.ts: tool "ftp": target.type: "ftp" is not "app", "url", "kazzle" or "mcp"',
      'test/fixtures/bad-fields.ts: tool "auth": description: required: a non-empty string',
      'test/fixtures/bad-fields.ts: tool "auth": target.path: required: a string starting with "/"',
      'test/fixtures/bad-fields.ts: tool "auth": target.method: "GETS" is not one of GET, POST, PUT, PATCH, DELETE',
      'test/fixtures/bad-fields.ts: tool "auth": target.headers.authorization: an app target may not set Authorization: toolgate sends the identity token in it',
      'test/fixtures/bad-fields.ts: tool "auth": target.headers.Idempotency-Key: an app target may not set Idempotency-Key: toolgate sends the call\'s idempotency key in it',
      'test/fixtures/bad-fields.ts: tool "auth": target.headers.kazzle-tool-context: an app target may not set Kazzle-Tool-Context: toolgate sends the call\'s context in it',
      'test/fixtures/bad-fields.ts: tool "auth": annotations.title: unknown hint (toolgate has readOnlyHint, destructiveHint, idempotentHint, openWorldHint)',
      'test/fixtures/bad-fields.ts: tool "auth": annotations.readOnlyHint: must be true or false',
      'test/fixtures/bad-fields.ts: tool "bigint": input.n[]: BigInt cannot be represented in JSON Schema',
      'test/fixtures/bad-fields.ts: tool "bigint": target.body.when: is not plain JSON (an object of another class)',
      'test/fixtures/bad-fields.ts: tool "bigint": target.body.n: NaN is not a JSON number',
      'test/fixtures/bad-fields.ts: tool "ui_text": ui: must be true or false',
      'test/fixtures/bad-fields.ts: tool "ui_url": ui: only an app target shows in the MCP Apps view',
      'test/fixtures/bad-fields.ts: tool "toolgate_card_answer": name: "toolgate_card_answer" is reserved: the gateway serves a tool of that name to MCP Apps clients',
      'test/fixtures/bad-fields.ts: tool "transform": inputSchema: unknown field (a tool has name, displayName, description, input, target, annotations, allow, ui, approval, limits)',
    ]],
    ['missing.ts', ['test/fixtures/missing.ts: no such file']],
  ];
  for (const [file, want] of cases) {
    await t.test(file, () => {
      const r = run(['build', `test/fixtures/${file}`]);
      assert.equal(r.code, 1);
      assert.equal(r.stdout, '', 'nothing on stdout: the gateway must not read half a manifest');
      assert.deepEqual(r.stderr.trimEnd().split('\n'), want.map((m) => `toolgate-tools: ${m}`));
    });
  }
  const left = readdirSync(fixtures).filter((f) => f.includes('.toolgate-'));
  assert.deepEqual(left, [], 'nothing is written beside tools.ts, on failures either');
});

test('usage errors exit 2', () => {
  for (const args of [[], ['build'], ['compile', 'tools.ts'], ['build', 'a.ts', 'b.ts'], ['build', 'a.ts', '--caddyfile', 'Caddyfile'], ['build', 'a.ts', '--bogus']]) {
    const r = run(args);
    assert.equal(r.code, 2, `toolgate-tools ${args.join(' ')}`);
    assert.match(r.stderr, /usage: toolgate-tools build <tools\.ts> \[-o <manifest\.json>\] \[--check \[--caddyfile <Caddyfile>\]\]/);
  }
});

test('zod resolves from the folder of tools.ts', (t) => {
  // A project of its own, outside this repository: without zod beside it
  // the compiler says so; with it (linked in) it compiles.
  const dir = mkdtempSync(path.join(tmpdir(), 'toolgate-project-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  copyFileSync(path.join(fixtures, 'seed-tools.ts'), path.join(dir, 'tools.ts'));

  let r = run(['build', 'tools.ts'], { cwd: dir });
  assert.equal(r.code, 1);
  assert.equal(r.stderr, "toolgate-tools: tools.ts: Cannot find package 'zod' imported from tools.ts\n");

  const zod = path.dirname(fileURLToPath(import.meta.resolve('zod/package.json')));
  mkdirSync(path.join(dir, 'node_modules'));
  symlinkSync(zod, path.join(dir, 'node_modules', 'zod'), 'dir');
  r = run(['build', 'tools.ts'], { cwd: dir });
  assert.equal(r.stderr, '');
  assert.equal(r.stdout, seedManifest);
  // The bundle is served from memory: nothing is written beside tools.ts,
  // so a read-only config folder compiles too.
  assert.deepEqual(readdirSync(dir).sort(), ['node_modules', 'tools.ts']);
});

test('the example tools.ts and a handler type-check; a target of an unknown type does not', () => {
  const tsc = (file) =>
    spawnSync(
      process.execPath,
      [path.join(path.dirname(fileURLToPath(import.meta.resolve('typescript/package.json'))), 'bin', 'tsc'),
        '--ignoreConfig', '--noEmit', '--strict', '--target', 'es2022', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--types', 'node',
        path.join('test', 'fixtures', file)],
      { cwd: kit, encoding: 'utf8', timeout: 60_000 },
    );
  for (const file of ['seed-tools.ts', 'schemas.ts', 'handler.ts']) {
    const r = tsc(file);
    assert.equal(r.stdout + r.stderr, '', file);
    assert.equal(r.status, 0, file);
  }
  const r = tsc('type-ftp.ts');
  assert.equal(r.status, 1);
  assert.match(r.stdout, /type-ftp\.ts\(11,15\): error TS2322: Type '"ftp"' is not assignable to type '"app" \| "kazzle" \| "mcp" \| "url"'/);
});

test('a target made from an OpenAPI operation keeps its operation, written last; one that is not an object is an error', () => {
  const dir = mkdtempSync(path.join(kit, 'test', '.operation-'));
  try {
    const operation = "{ params: [{ name: 'id', in: 'path', style: 'simple', explode: false, allowReserved: true, group: 'path' }], body: { mediaType: 'application/json', property: 'body' }, output: 'object' }";
    writeFileSync(path.join(dir, 'tools.ts'), `import { z } from 'zod';
export const tools = [
  { name: 'a', description: 'a', input: z.object({}), target: { operation: ${operation}, type: 'app', path: '/a/{id}', component: 'c', method: 'PUT' } },
  { name: 'b', description: 'b', input: z.object({}), target: { type: 'url', url: 'https://x.example/b', method: 'GET', operation: { output: 'wrapped' } } },
];
`);
    let r = run(['build', path.join(dir, 'tools.ts')]);
    assert.equal(r.stderr, '');
    const [a, b] = JSON.parse(r.stdout).tools;
    assert.deepEqual(Object.keys(a.target), ['type', 'component', 'method', 'path', 'operation']);
    assert.deepEqual(a.target.operation, {
      params: [{ name: 'id', in: 'path', style: 'simple', explode: false, allowReserved: true, group: 'path' }],
      body: { mediaType: 'application/json', property: 'body' },
      output: 'object',
    });
    assert.deepEqual(b.target, { type: 'url', method: 'GET', url: 'https://x.example/b', operation: { output: 'wrapped' } });

    writeFileSync(path.join(dir, 'tools.ts'), `import { z } from 'zod';
export const tools = [{ name: 'a', description: 'a', input: z.object({}), target: { type: 'app', component: 'c', method: 'GET', path: '/a', operation: 'x' } }];
`);
    r = run(['build', path.join(dir, 'tools.ts')]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /tool "a": target\.operation: must be an object/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
