// Command notes is the quick start's Node/TypeScript component: the app
// targets of ../tools.ts behind toolgate, with @toolgate/kit verifying each
// call's identity token.
//
//	node examples/notes/dist/src/main.js --addr 127.0.0.1:9002 \
//		--jwks http://127.0.0.1:8080/toolgate/.well-known/jwks.json --issuer toolgate --audience notes
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';
import { createNotes } from './notes.js';
import { component } from '../tools.js';

function fail(msg: string): never {
  console.error(`notes: ${msg}`);
  process.exit(2);
}

const options = {
  addr: { type: 'string', default: '127.0.0.1:9002' },
  // The key set is fetched on the first call, not at start: toolgate
  // usually starts after its components.
  jwks: { type: 'string', default: 'http://127.0.0.1:8080/toolgate/.well-known/jwks.json' },
  issuer: { type: 'string', default: 'toolgate' },
  audience: { type: 'string', default: component },
} as const;
function parseFlags() {
  try {
    return parseArgs({ options, strict: true }).values;
  } catch (err) {
    fail(`${err instanceof Error ? err.message : err}; flags: --addr host:port --jwks URL --issuer ISS --audience NAME`);
  }
}
const flags = parseFlags();

const jwks = URL.canParse(flags.jwks) ? new URL(flags.jwks) : undefined;
if (!jwks || (jwks.protocol !== 'http:' && jwks.protocol !== 'https:')) fail(`--jwks ${JSON.stringify(flags.jwks)} must be an absolute http(s) URL`);
if (!flags.issuer || !flags.audience) fail('--issuer and --audience must not be empty');
// host:port, the last colon splitting them ([::1]:9002 too).
const colon = flags.addr.lastIndexOf(':');
const host = flags.addr.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
const portText = flags.addr.slice(colon + 1);
const port = Number(portText);
if (colon < 0 || !host || !/^[0-9]{1,5}$/.test(portText) || port > 65535) fail(`--addr ${JSON.stringify(flags.addr)} must be host:port`);

const handle = createNotes({ jwksUrl: flags.jwks, issuer: flags.issuer, audience: flags.audience });
const server = createServer((req, res) => void handle(req, res));
// As the Go component's ReadHeaderTimeout: a client that never finishes its
// headers does not hold a socket for long.
server.headersTimeout = 10_000;
server.requestTimeout = 30_000;

server.listen(port, host, () => {
  console.log(`notes listening on http://${flags.addr}; tool calls need a token from ${flags.issuer} for aud ${JSON.stringify(flags.audience)}`);
});
server.on('error', (err) => fail(err.message));
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    server.close(() => process.exit(0));
    server.closeIdleConnections();
  });
}
