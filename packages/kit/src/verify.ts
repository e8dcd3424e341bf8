// Verifying the identity token toolgate sends an app target (docs/kits.md,
// "Identity"),
// by the rules of apptools.Verifier: signed by a key of toolgate's JWKS,
// by toolgate's issuer, for this component, not expired.

import { createRemoteJWKSet, errors, importJWK, jwtVerify } from 'jose';
import type { CryptoKey, JWK, JWTPayload, JWTVerifyGetKey, KeyObject } from 'jose';

import { headerValues, type RequestLike } from './context.js';

/** The iss toolgate signs with unless its identity block names another. */
export const DEFAULT_ISSUER = 'toolgate';

// The algorithms toolgate signs identity tokens with: EdDSA by default,
// ES256 and RS256 for keys of those types. Never HS* (a shared secret
// would let the component sign as toolgate) and never "none".
const ALGORITHMS = ['EdDSA', 'ES256', 'RS256'];

// How far this component's clock may be from toolgate's, in seconds, on
// exp, nbf and iat (apptools' clockSkew).
const CLOCK_TOLERANCE = 30;

// A key set is fetched again on an unknown kid at most this often, in
// milliseconds, as toolgate's own verifier does: a flood of made-up kids
// costs one fetch per window, not one per request.
const JWKS_COOLDOWN = 30_000;

// A JWKS fetch that takes longer fails the token rather than the request
// hanging on a slow gateway, in milliseconds.
const JWKS_TIMEOUT = 5_000;

/** What a verifier checks a token against. */
export type VerifyOptions = (
  | {
      /** toolgate's /.well-known/jwks.json. */
      jwksUrl: string | URL;
      /** Milliseconds between fetches on an unknown kid. Default: 30000. */
      jwksCooldown?: number;
      /** Milliseconds a JWKS fetch may take. Default: 5000. */
      jwksTimeout?: number;
    }
  | {
      /** toolgate's public key: a KeyObject, a CryptoKey or a public JWK. */
      key: KeyObject | CryptoKey | JWK;
    }
) & {
  /** This component's name in toolgate's configuration: the token's aud. Required. */
  audience: string;
  /** toolgate's identity issuer. Default: "toolgate". */
  issuer?: string;
  /** Seconds of clock skew allowed on exp, nbf and iat. Default: 30. */
  clockTolerance?: number;
  /** The time to check against, for tests. Default: now. */
  currentDate?: Date;
};

/** The user a call acts for, as a verified token names them. */
export type Identity = {
  /** The token's sub. */
  user: string;
  /** The installation of the app the call is made in; undefined when the token names none. */
  install: string | undefined;
  /** This component's name: the token's audience, as checked. */
  component: string;
  /** All of the token's claims. */
  claims: JWTPayload;
};

/**
 * Why a token was refused: `no_token` when the request carries none (it
 * did not come through an app target), `invalid_token` when one is
 * present but refused. The message says why and never holds the token.
 */
export class IdentityError extends Error {
  readonly code: 'no_token' | 'invalid_token';
  constructor(code: 'no_token' | 'invalid_token', message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'IdentityError';
    this.code = code;
  }

  /**
   * The WWW-Authenticate challenge to answer with (RFC 6750 §3.1): a
   * bare "Bearer" when there was no token, invalid_token otherwise.
   */
  get challenge(): string {
    return this.code === 'no_token' ? 'Bearer' : 'Bearer error="invalid_token"';
  }
}

/** Checks requests' identity tokens; see identityVerifier. */
export type Verifier = (req: RequestLike) => Promise<Identity>;

/**
 * Returns a verifier of the tokens toolgate signs for the component named
 * `audience`. With `jwksUrl`, the key set is fetched on the first call, not
 * here, so a component may start before toolgate; it is fetched again as
 * it ages (10 minutes) and when an unknown kid appears (at most once per
 * `jwksCooldown`). Keep one verifier for the process: its cache is the key
 * set.
 */
export function identityVerifier(opts: VerifyOptions): Verifier {
  if (typeof opts?.audience !== 'string' || opts.audience === '') {
    // Without an audience any component's token would pass here.
    throw new TypeError("toolgate: identityVerifier needs this component's name as audience");
  }
  const keys = keySource(opts);
  const issuer = opts.issuer || DEFAULT_ISSUER;
  const tolerance = opts.clockTolerance ?? CLOCK_TOLERANCE;
  return async (req) => {
    const token = bearerToken(req);
    let claims: JWTPayload;
    try {
      ({ payload: claims } = await jwtVerify(token, keys, {
        algorithms: ALGORITHMS,
        issuer,
        audience: opts.audience,
        clockTolerance: tolerance,
        requiredClaims: ['exp'],
        ...(opts.currentDate ? { currentDate: opts.currentDate } : {}),
      }));
    } catch (err) {
      throw new IdentityError('invalid_token', refusal(err), { cause: err });
    }
    const now = (opts.currentDate ?? new Date()).getTime() / 1000;
    if (typeof claims.iat === 'number' && claims.iat > now + tolerance) {
      throw new IdentityError('invalid_token', 'the token is not valid yet');
    }
    if (typeof claims.sub !== 'string' || claims.sub === '') {
      throw new IdentityError('invalid_token', 'the token names no user (sub)');
    }
    const install = claims['install'];
    if (install !== undefined && typeof install !== 'string') {
      throw new IdentityError('invalid_token', "the token's install is not a string");
    }
    return { user: claims.sub, install: install || undefined, component: opts.audience, claims };
  };
}

// One verifier per distinct options, so verifyIdentity called on every
// request keeps one key set cache rather than fetching the JWKS each time.
const verifiers = new Map<string, Verifier>();

/**
 * Checks the request's bearer token and returns the identity it names; it
 * throws an IdentityError when there is none or it is refused. The
 * verifier for a given jwksUrl (and options) is made once and kept.
 */
export function verifyIdentity(req: RequestLike, opts: VerifyOptions): Promise<Identity> {
  if (!('jwksUrl' in opts)) return identityVerifier(opts)(req);
  const id = JSON.stringify([String(opts.jwksUrl), opts.audience, opts.issuer, opts.clockTolerance, opts.jwksCooldown, opts.jwksTimeout, opts.currentDate]);
  let v = verifiers.get(id);
  if (v === undefined) {
    v = identityVerifier(opts);
    verifiers.set(id, v);
  }
  return v(req);
}

/**
 * jwksURL parses a JWKS URL and refuses one that is not https, but to a
 * loopback host (localhost, 127.0.0.0/8, [::1]): keys fetched in the clear
 * can be swapped on the way, and then any token verifies.
 */
export function jwksURL(raw: string | URL): URL {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new TypeError(`toolgate: jwksUrl ${JSON.stringify(String(raw))} is not a URL`);
  }
  if (u.username || u.password) {
    throw new TypeError('toolgate: jwksUrl must not carry a user or password');
  }
  if (u.protocol === 'https:') return u;
  if (u.protocol === 'http:' && isLoopbackHost(u.hostname)) return u;
  throw new TypeError(
    `toolgate: jwksUrl ${JSON.stringify(u.href)} must be https (http only to a loopback host): keys fetched in the clear can be replaced on the way`,
  );
}

function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase();
  if (h === 'localhost') return true;
  if (h === '[::1]') return true;
  const m = /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(h);
  return m !== null && m.slice(1).every((n) => Number(n) <= 255);
}

function keySource(opts: VerifyOptions): JWTVerifyGetKey | KeyObject | CryptoKey {
  if ('jwksUrl' in opts) {
    return createRemoteJWKSet(jwksURL(opts.jwksUrl), {
      cooldownDuration: opts.jwksCooldown ?? JWKS_COOLDOWN,
      timeoutDuration: opts.jwksTimeout ?? JWKS_TIMEOUT,
    });
  }
  const key = opts.key;
  if (!key || typeof key !== 'object') throw new TypeError('toolgate: identityVerifier needs jwksUrl or key');
  if (isJWK(key)) {
    if ('d' in key) throw new TypeError('toolgate: the key is a private JWK; give toolgate\'s public key');
    // Imported for the token's alg (WebCrypto keys are bound to one), so
    // a key of the wrong type for the alg fails to import.
    return (header) => importJWK(key, header.alg) as Promise<CryptoKey>;
  }
  return key;
}

function isJWK(key: object): key is JWK {
  return typeof (key as JWK).kty === 'string';
}

/**
 * The token of the request's one "Authorization: Bearer <token>" header,
 * by the gateway's rules (RFC 6750 §2.1): the scheme in any case, a
 * b64token, and several Authorization headers refused rather than one
 * picked (a proxy on the way may have read another than we would).
 */
export function bearerToken(req: RequestLike): string {
  const vals = headerValues(req, 'Authorization');
  if (vals.length === 0) throw new IdentityError('no_token', 'no bearer token in the Authorization header');
  if (vals.length > 1) throw new IdentityError('invalid_token', `malformed Authorization header: ${vals.length} Authorization headers`);
  const value = vals[0]!.replace(/^[ \t]+|[ \t]+$/g, '');
  const space = value.indexOf(' ');
  const scheme = space < 0 ? value : value.slice(0, space);
  const token = space < 0 ? '' : value.slice(space + 1).replace(/^ +/, '');
  if (scheme.toLowerCase() !== 'bearer' || token === '') {
    throw new IdentityError('no_token', 'no bearer token in the Authorization header');
  }
  if (!/^[A-Za-z0-9\-._~+/]+=*$/.test(token)) {
    throw new IdentityError('invalid_token', 'malformed Authorization header: the bearer token is not one b64token (RFC 6750 §2.1)');
  }
  return token;
}

// refusal says why jose refused a token in the words apptools uses. The
// cause of a key set failure (its URL, what it answered) stays in the
// error's cause for the component's log, out of the message.
function refusal(err: unknown): string {
  if (err instanceof errors.JWTExpired) return 'the token has expired';
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.reason === 'missing') return `the token lacks a required claim (${err.claim})`;
    switch (err.claim) {
      case 'iss':
        return "the token's issuer is not accepted";
      case 'aud':
        return "the token's audience is not accepted";
      case 'nbf':
      case 'iat':
        return 'the token is not valid yet';
    }
    return `the token's ${err.claim} is not accepted`;
  }
  if (err instanceof errors.JOSEAlgNotAllowed) return "the token's algorithm is not accepted";
  if (err instanceof errors.JWKSNoMatchingKey) return "the token's key is not known";
  if (err instanceof errors.JWSSignatureVerificationFailed) return "the token's signature does not verify";
  if (err instanceof errors.JWSInvalid || err instanceof errors.JWTInvalid) return 'the token is malformed';
  return 'the token could not be verified';
}
