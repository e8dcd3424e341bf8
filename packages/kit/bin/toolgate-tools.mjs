#!/usr/bin/env node
// toolgate-tools build <tools.ts> [-o <manifest.json>] [--check [--caddyfile <Caddyfile>]]
// toolgate-tools openapi <document> (--component NAME | --server URL) [--prefix P]
//                [--operations a,b] [--loose] [--toolgate PATH] [-o <tools.ts>]
//
// Compiles a tools.ts file into toolgate's JSON manifest: to stdout, or to
// the -o file. --check, for CI, writes nothing: it runs the checks the
// gateway makes when it loads the manifest (patterns are Go regular
// expressions, references parse and can resolve; with --caddyfile, every
// component and env name a target uses is declared in that Caddyfile's
// toolgate blocks), and with -o also compares the file with the manifest.
//
// openapi writes a tools.ts (to stdout, or to the -o file) declaring the
// tools an OpenAPI document makes, as `toolgate openapi --json` reads it:
// the toolgate binary (--toolgate, default toolgate on PATH) is the one
// reader of OpenAPI documents. Zod cannot say everything JSON Schema can:
// what it cannot is an error naming the tool and the schema's path, or with
// --loose, kept as JSON Schema that the gateway checks and Zod does not.
//
// Exit status: 0 done (or up to date), 1 a compile error, a load check
// failed or drift, 2 a usage error.

import { readFile, rename, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';

import { compile, CompileError } from '../compiler/compile.mjs';

const USAGE =
  'usage: toolgate-tools build <tools.ts> [-o <manifest.json>] [--check [--caddyfile <Caddyfile>]]\n' +
  '       toolgate-tools openapi <document> (--component NAME | --server URL) [--prefix P] [--operations a,b] [--loose] [--toolgate PATH] [-o <tools.ts>]';

// Stack traces of a throw in tools.ts name its own lines, not the bundle's.
process.setSourceMapsEnabled(true);

// exit leaves once stdout and stderr are flushed (process.exit alone can
// cut a piped manifest short), even if tools.ts left a timer running.
function exit(code, out = '', err = '') {
  let pending = 2;
  const done = () => {
    if (--pending === 0) process.exit(code);
  };
  process.stdout.write(out, done);
  process.stderr.write(err, done);
}

function lines(msgs) {
  return msgs.map((m) => `toolgate-tools: ${m}\n`).join('');
}

async function main(argv) {
  let args;
  try {
    args = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        output: { type: 'string', short: 'o' },
        check: { type: 'boolean' },
        caddyfile: { type: 'string' },
        component: { type: 'string' },
        server: { type: 'string' },
        prefix: { type: 'string' },
        operations: { type: 'string' },
        loose: { type: 'boolean' },
        toolgate: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    return exit(2, '', lines([err.message]) + USAGE + '\n');
  }
  const { values, positionals } = args;
  if (values.help) return exit(0, USAGE + '\n');
  if (positionals[0] === 'openapi') return openapi(values, positionals);
  for (const k of ['component', 'server', 'prefix', 'operations', 'loose', 'toolgate']) {
    if (values[k] !== undefined) return exit(2, '', lines([`--${k} is read by openapi`]) + USAGE + '\n');
  }
  if (positionals[0] !== 'build' || positionals.length !== 2) return exit(2, '', USAGE + '\n');
  if (values.caddyfile !== undefined && !values.check) return exit(2, '', lines(['--caddyfile is read by --check']) + USAGE + '\n');
  const file = positionals[1];

  let text;
  try {
    text = await compile(file);
  } catch (err) {
    if (err instanceof CompileError) return exit(1, '', lines(err.lines));
    return exit(1, '', lines([`${file}: ${err?.stack ?? err}`]));
  }

  const out = values.output;
  if (values.check) {
    // The checks (and re2js) load only for --check: the gateway runs this
    // compiler on every config load, where they are not needed.
    const { check } = await import('../compiler/check.mjs');
    const problems = await check(file, JSON.parse(text), { caddyfile: values.caddyfile });
    if (problems.length > 0) return exit(1, '', lines(problems));
    if (out === undefined) return exit(0);
    let have;
    try {
      have = await readFile(out, 'utf8');
    } catch (err) {
      return exit(1, '', lines([`${out}: ${err.code === 'ENOENT' ? 'does not exist' : err.message}; run: toolgate-tools build ${file} -o ${out}`]));
    }
    if (have === text) return exit(0);
    return exit(1, '', lines([`${out} is out of date with ${file} (${drift(have, text)}); run: toolgate-tools build ${file} -o ${out}`]));
  }
  if (out === undefined) return exit(0, text);
  return writeOut(out, text);
}

// openapi writes the tools.ts of an OpenAPI document.
async function openapi(values, positionals) {
  if (positionals.length !== 2) return exit(2, '', USAGE + '\n');
  if (values.check || values.caddyfile !== undefined) return exit(2, '', lines(['--check and --caddyfile are read by build']) + USAGE + '\n');
  if ((values.component === undefined) === (values.server === undefined)) {
    return exit(2, '', lines(['openapi: give one of --component NAME (app targets) and --server URL (url targets)']) + USAGE + '\n');
  }
  const doc = positionals[1];
  const args = [];
  for (const k of ['component', 'server', 'prefix', 'operations']) {
    if (values[k] !== undefined) args.push(`--${k}`, values[k]);
  }
  args.push(doc);
  const { runToolgate, toolsSource } = await import('../compiler/openapi.mjs');
  let text;
  try {
    const m = await runToolgate(values.toolgate ?? 'toolgate', args);
    text = toolsSource(m, { loose: values.loose, source: path.basename(doc) });
  } catch (err) {
    if (err instanceof CompileError) return exit(1, '', lines(err.lines));
    return exit(1, '', lines([`${doc}: ${err?.stack ?? err}`]));
  }
  if (values.output === undefined) return exit(0, text);
  return writeOut(values.output, text);
}

// writeOut writes text to the file out.
async function writeOut(out, text) {
  // Written beside and renamed over, so a reader (a gateway reloading)
  // never sees half a manifest.
  const tmp = path.join(path.dirname(out), `.${path.basename(out)}.${process.pid}.tmp`);
  try {
    await writeFile(tmp, text, { flag: 'wx' });
    await rename(tmp, out);
  } catch (err) {
    await unlink(tmp).catch(() => {});
    return exit(1, '', lines([`${out}: ${err.message}`]));
  }
  return exit(0);
}

// drift names the first line where the file and the compiled manifest
// part, enough to see what changed without a diff tool.
function drift(have, want) {
  const a = have.split('\n');
  const b = want.split('\n');
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (a[i] !== b[i]) {
      const show = (s) => (s === undefined ? 'end of file' : JSON.stringify(s.trim()));
      return `line ${i + 1}: the file has ${show(a[i])}, tools.ts gives ${show(b[i])}`;
    }
  }
  return 'they differ';
}

main(process.argv.slice(2));
