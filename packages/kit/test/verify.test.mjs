// verifyIdentity against tokens signed by keys made here and served from a
// JWKS on loopback, as toolgate serves its /.well-known/jwks.json.

import assert from 'node:assert/strict';
import { createHmac, generateKeyPairSync } from 'node:crypto';
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';

import { exportJWK, generateKeyPair, SignJWT } from 'jose';

import { IdentityError, identityVerifier, verifyIdentity } from '@toolgate/kit';

const ISSUER = 'toolgate';
const AUDIENCE = 'notes';

async function edKey(kid) {
  const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
  // As toolgate publishes its keys (internal/identity.JWKS).
  const jwk = { ...(await exportJWK(publicKey)), kid, alg: 'EdDSA', use: 'sig' };
  return { kid, privateKey, publicKey, jwk };
}

// jwks serves the keys' public halves and counts the fetches.
async function jwks(t, keys) {
  const served = { keys: [...keys], fetches: 0 };
  const server = http.createServer((req, res) => {
    served.fetches++;
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ keys: served.keys.map((k) => k.jwk) }));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  served.url = `http://127.0.0.1:${server.address().port}/.well-known/jwks.json`;
  return served;
}

const now = () => Math.floor(Date.now() / 1000);

// sign makes a token as toolgate's issuer does, claims overridable; a
// claim set to undefined is left out.
function sign(key, claims = {}, header = {}) {
  const body = { iss: ISSUER, sub: 'u1', install: 'i1', aud: AUDIENCE, iat: now(), exp: now() + 300, ...claims };
  for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k];
  return new SignJWT(body).setProtectedHeader({ alg: 'EdDSA', kid: key.kid, typ: 'JWT', ...header }).sign(key.privateKey);
}

function request(token) {
  return new Request('http://component.test/tools/x', { method: 'POST', headers: token === undefined ? {} : { Authorization: `Bearer ${token}` } });
}

async function refused(promise, code, message, token) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof IdentityError, `${err}`);
    assert.equal(err.code, code);
    assert.match(err.message, message);
    if (token) assert.ok(!err.message.includes(token), 'the message never holds the token');
    return true;
  });
}

test('a token signed by a key of the JWKS is accepted', async (t) => {
  const a = await edKey('a');
  const set = await jwks(t, [a]);
  const verify = identityVerifier({ jwksUrl: set.url, issuer: ISSUER, audience: AUDIENCE });
  const id = await verify(request(await sign(a)));
  assert.equal(id.user, 'u1');
  assert.equal(id.install, 'i1');
  assert.equal(id.component, AUDIENCE);
  assert.equal(id.claims.iss, ISSUER);
  // The key set is cached: a second token costs no fetch.
  const id2 = await verify(request(await sign(a, { sub: 'u2', install: undefined })));
  assert.equal(id2.user, 'u2');
  assert.equal(id2.install, undefined);
  assert.equal(set.fetches, 1);
});

test('refused: expired, wrong audience, wrong issuer, missing claims, bad header', async (t) => {
  const a = await edKey('a');
  const set = await jwks(t, [a]);
  const verify = identityVerifier({ jwksUrl: set.url, audience: AUDIENCE });
  const cases = [
    ['expired', await sign(a, { exp: now() - 60 }), /^the token has expired$/],
    ['wrong audience', await sign(a, { aud: 'bookmarks' }), /^the token's audience is not accepted$/],
    ['wrong issuer', await sign(a, { iss: 'someone-else' }), /^the token's issuer is not accepted$/],
    ['no exp', await sign(a, { exp: undefined }), /^the token lacks a required claim \(exp\)$/],
    ['no sub', await sign(a, { sub: undefined }), /^the token names no user \(sub\)$/],
    ['install not a string', await sign(a, { install: 7 }), /^the token's install is not a string$/],
    ['iat in the future', await sign(a, { iat: now() + 600 }), /^the token is not valid yet$/],
    ['nbf in the future', await sign(a, { nbf: now() + 600 }), /^the token is not valid yet$/],
    ['not a JWT', 'abc.def.ghi', /^the token is malformed$/],
  ];
  for (const [name, token, message] of cases) {
    await t.test(name, () => refused(verify(request(token)), 'invalid_token', message, token));
  }
  // Within the 30 s of clock skew allowed, an expired token still passes.
  assert.equal((await verify(request(await sign(a, { exp: now() - 10 })))).user, 'u1');
});

test('the Authorization header is read by the gateway\'s rules', async (t) => {
  const a = await edKey('a');
  const set = await jwks(t, [a]);
  const verify = identityVerifier({ jwksUrl: set.url, audience: AUDIENCE });
  const token = await sign(a);
  const withAuth = (...values) => {
    const headers = new Headers();
    for (const v of values) headers.append('Authorization', v);
    return new Request('http://component.test/', { headers });
  };
  assert.equal((await verify(withAuth(`bearer   ${token}`))).user, 'u1', 'the scheme in any case, spaces after it');
  await refused(verify(request(undefined)), 'no_token', /^no bearer token in the Authorization header$/);
  await refused(verify(withAuth(`Basic ${token}`)), 'no_token', /no bearer token/);
  await refused(verify(withAuth('Bearer')), 'no_token', /no bearer token/);
  await refused(verify(withAuth(`Bearer ${token} extra`)), 'invalid_token', /not one b64token/, token);
  await refused(verify(withAuth(`Bearer "${token}"`)), 'invalid_token', /not one b64token/, token);
  // Two headers: a Fetch Request joins them, node:http keeps them apart.
  await refused(verify(withAuth(`Bearer ${token}`, `Bearer ${token}`)), 'invalid_token', /malformed Authorization header/, token);
  await refused(verify({ headers: { authorization: `Bearer ${token}` }, headersDistinct: { authorization: [`Bearer ${token}`, 'Bearer x'] } }), 'invalid_token', /2 Authorization headers/, token);
  assert.equal(new IdentityError('no_token', 'x').challenge, 'Bearer');
  assert.equal(new IdentityError('invalid_token', 'x').challenge, 'Bearer error="invalid_token"');
});

test('an unknown kid: one refetch after the cooldown, none within it', async (t) => {
  const a = await edKey('a');
  const b = await edKey('b');
  const set = await jwks(t, [a]);
  const verify = identityVerifier({ jwksUrl: set.url, audience: AUDIENCE, jwksCooldown: 300 });
  await verify(request(await sign(a)));
  assert.equal(set.fetches, 1);

  // Another key under a's kid: no fetch, the signature does not verify.
  const forged = await sign({ ...b, kid: 'a' });
  await refused(verify(request(forged)), 'invalid_token', /^the token's signature does not verify$/, forged);
  assert.equal(set.fetches, 1);

  // Within the cooldown of the first fetch, an unknown kid is refused
  // without a fetch.
  await refused(verify(request(await sign(b))), 'invalid_token', /^the token's key is not known$/);
  assert.equal(set.fetches, 1);

  await sleep(350);
  await refused(verify(request(await sign(b))), 'invalid_token', /^the token's key is not known$/);
  assert.equal(set.fetches, 2, 'one refetch once the cooldown has passed');
  const c = await edKey('c');
  await refused(verify(request(await sign(c))), 'invalid_token', /^the token's key is not known$/);
  assert.equal(set.fetches, 2, 'a second unknown kid within the cooldown fetches nothing');

  // Rotation: toolgate publishes b; after the cooldown b's tokens pass.
  set.keys.push(b);
  await sleep(350);
  assert.equal((await verify(request(await sign(b)))).user, 'u1');
  assert.equal(set.fetches, 3);
});

test('alg none and HS256 are refused', async (t) => {
  const a = await edKey('a');
  const set = await jwks(t, [a]);
  const verify = identityVerifier({ jwksUrl: set.url, audience: AUDIENCE });
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const payload = b64({ iss: ISSUER, sub: 'u1', aud: AUDIENCE, iat: now(), exp: now() + 300 });
  const none = `${b64({ alg: 'none', kid: 'a' })}.${payload}.`;
  // A trailing "." alone is no b64token end, so also try it with a dummy signature.
  await refused(verify(request(none + 'x')), 'invalid_token', /^the token's algorithm is not accepted$|^the token is malformed$/);
  // HS256 keyed with the public key's bytes: the classic RS/HS confusion.
  const input = `${b64({ alg: 'HS256', kid: 'a' })}.${payload}`;
  const mac = createHmac('sha256', Buffer.from(a.jwk.x, 'base64url')).update(input).digest('base64url');
  await refused(verify(request(`${input}.${mac}`)), 'invalid_token', /^the token's algorithm is not accepted$/);
});

test('a given key: KeyObject or public JWK; ES256 and RS256 too', async () => {
  for (const [alg, type, opts] of [['EdDSA', 'ed25519', {}], ['ES256', 'ec', { namedCurve: 'P-256' }], ['RS256', 'rsa', { modulusLength: 2048 }]]) {
    const { privateKey, publicKey } = generateKeyPairSync(type, opts);
    const token = await new SignJWT({ iss: ISSUER, sub: 'u1', aud: AUDIENCE, exp: now() + 60 }).setProtectedHeader({ alg }).sign(privateKey);
    assert.equal((await verifyIdentity(request(token), { key: publicKey, audience: AUDIENCE })).user, 'u1', `${alg} KeyObject`);
    const jwk = publicKey.export({ format: 'jwk' });
    assert.equal((await verifyIdentity(request(token), { key: jwk, audience: AUDIENCE })).user, 'u1', `${alg} JWK`);
  }
  const { privateKey } = generateKeyPairSync('ed25519');
  assert.throws(() => identityVerifier({ key: privateKey.export({ format: 'jwk' }), audience: AUDIENCE }), /private JWK/);
});

test('verifyIdentity keeps one key set per JWKS URL', async (t) => {
  const a = await edKey('a');
  const set = await jwks(t, [a]);
  for (let i = 0; i < 3; i++) {
    const id = await verifyIdentity(request(await sign(a)), { jwksUrl: set.url, issuer: ISSUER, audience: AUDIENCE });
    assert.equal(id.user, 'u1');
  }
  assert.equal(set.fetches, 1);
});

test('an unreachable JWKS refuses the token without naming the URL', async () => {
  const a = await edKey('a');
  const url = 'http://127.0.0.1:1/.well-known/jwks.json';
  await assert.rejects(verifyIdentity(request(await sign(a)), { jwksUrl: url, audience: AUDIENCE, jwksTimeout: 1000 }), (err) => {
    assert.equal(err.code, 'invalid_token');
    assert.equal(err.message, 'the token could not be verified');
    assert.ok(err.cause, 'the cause is kept for the log');
    return true;
  });
});

test('no audience is a programming error', () => {
  assert.throws(() => identityVerifier({ jwksUrl: 'http://127.0.0.1/jwks' }), /needs this component's name as audience/);
  assert.throws(() => identityVerifier({ jwksUrl: 'http://127.0.0.1/jwks', audience: '' }), TypeError);
});

test('a JWKS URL must be https, but to a loopback host', () => {
  for (const url of ['http://toolgate.internal/.well-known/jwks.json', 'http://10.0.0.5/jwks', 'http://127.0.0.1.nip.io/jwks',
    'ftp://127.0.0.1/jwks', 'https://user:pw@toolgate.example/jwks', 'not a url']) {
    assert.throws(() => identityVerifier({ jwksUrl: url, audience: AUDIENCE }), TypeError, url);
  }
  for (const url of ['https://toolgate.example/.well-known/jwks.json', 'http://127.0.0.1:8080/toolgate/.well-known/jwks.json',
    'http://localhost/jwks', 'http://[::1]:9/jwks', 'http://127.1.2.3/jwks']) {
    assert.doesNotThrow(() => identityVerifier({ jwksUrl: url, audience: AUDIENCE }), url);
  }
});
