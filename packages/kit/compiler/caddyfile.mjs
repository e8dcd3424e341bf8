// Reads the components a Caddyfile's toolgate blocks declare, for
// `toolgate-tools build --check --caddyfile`: enough of Caddy's lexer
// (quotes, backticks, heredocs, comments, braces) to find each
// `component NAME URL { env KEY VALUE }` line, not a Caddyfile parser.
// Imports are not followed and {$VAR} is not substituted.

import { readFile } from 'node:fs/promises';

// declaredComponents returns the components of every toolgate block in
// the Caddyfile at file, by name, each with the env names it declares. A
// name declared in two blocks has the env names of both: a tool may be
// served by either. It throws an Error naming file when it cannot read
// one, or finds no toolgate block.
export async function declaredComponents(file) {
  let text;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new Error(`${file}: ${err.code === 'ENOENT' ? 'no such file' : err.message}`);
  }
  const components = new Map();
  let blocks = 0;
  const walk = (lines) => {
    for (const line of lines) {
      if (line.args[0] === 'toolgate' && line.block) {
        blocks++;
        for (const sub of line.block) {
          if (sub.args[0] !== 'component' || sub.args.length < 2) continue;
          const env = components.get(sub.args[1]) ?? new Set();
          for (const e of sub.block ?? []) {
            if (e.args[0] === 'env' && e.args.length > 1) env.add(e.args[1]);
          }
          components.set(sub.args[1], env);
        }
      }
      if (line.block) walk(line.block);
    }
  };
  walk(tree(tokens(text)));
  if (blocks === 0) throw new Error(`${file}: no toolgate block; --caddyfile names the Caddyfile whose toolgate block serves these tools`);
  return components;
}

// tokens splits text as Caddy's lexer does: on white space, a token
// starting with " or ` runs to its closing quote, one starting with # is a
// comment to the end of the line, and <<MARKER opens a heredoc. Each token
// has its text, the line it starts on, and whether it was quoted (a quoted
// "{" opens no block).
export function tokens(text) {
  const out = [];
  let i = 0;
  let line = 1;
  while (i < text.length) {
    const c = text[i];
    if (c === '\n') {
      line++;
      i++;
    } else if (/\s/.test(c)) {
      i++;
    } else if (c === '#') {
      while (i < text.length && text[i] !== '\n') i++;
    } else if (c === '"' || c === '`') {
      const start = line;
      let val = '';
      for (i++; i < text.length && text[i] !== c; i++) {
        // In a double-quoted token only \" is an escape; \ before anything
        // else stays.
        if (c === '"' && text[i] === '\\' && text[i + 1] === '"') i++;
        else if (text[i] === '\n') line++;
        val += text[i];
      }
      i++;
      out.push({ text: val, line: start, quoted: true });
    } else {
      const start = i;
      while (i < text.length && !/\s/.test(text[i])) i++;
      const val = text.slice(start, i);
      const heredoc = val.match(/^<<([A-Za-z0-9_-]+)$/);
      if (heredoc) {
        // The heredoc runs from the next line to a line holding only its
        // marker (indented or not).
        const rest = text.slice(i);
        const m = rest.match(new RegExp(`^([\\s\\S]*?)\\n[ \\t]*${heredoc[1]}(?=[ \\t]*(\\n|$))`));
        const from = line;
        const body = m ? m[1] : rest;
        const used = m ? m[0] : rest;
        line += used.split('\n').length - 1;
        i += used.length;
        out.push({ text: body, line: from, quoted: true });
        continue;
      }
      out.push({ text: val, line, quoted: false });
    }
  }
  return out;
}

// tree groups tokens into lines, each with its arguments and the block
// its "{" opens (or null), as Caddy reads directives.
export function tree(toks) {
  let i = 0;
  const block = () => {
    const lines = [];
    while (i < toks.length) {
      if (isBrace(toks[i], '}')) {
        i++;
        return lines;
      }
      const line = { args: [], block: null, line: toks[i].line };
      while (i < toks.length && toks[i].line === line.line && !isBrace(toks[i], '}')) {
        const t = toks[i++];
        if (isBrace(t, '{')) {
          line.block = block();
          break;
        }
        line.args.push(t.text);
      }
      lines.push(line);
    }
    return lines;
  };
  return block();
}

function isBrace(t, brace) {
  return !t.quoted && t.text === brace;
}
