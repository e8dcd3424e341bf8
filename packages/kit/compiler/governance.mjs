// The two grammars of a tool's governance members (docs/kits.md, "Approval
// and limits"): a quota in `limits` ("20/1h per user", "5 concurrent per
// install", as internal/quota's Parse reads it) and an approval's `timeout`
// ("24h", "90m", "2d", as internal/manifest's ParseTimeout reads it). The
// tables in test/fixtures/governance/ hold both for the two sides.

// The bounds of a limit: its count, and its window in seconds.
export const MAX_LIMIT = 1_000_000;
export const MAX_WINDOW = 30 * 86400;

// The bounds of an approval's timeout, in nanoseconds (as Go counts a
// time.Duration): from a second to 30 days.
export const MIN_TIMEOUT = 1_000_000_000n;
export const MAX_TIMEOUT = 30n * 86400n * 1_000_000_000n;

// The scopes a limit counts in: each user of an installation, or the
// installation as a whole.
export const SCOPES = ['user', 'install'];

const WINDOW_UNITS = { s: 1, m: 60, h: 3600, d: 86400 };

// N/WINDOW per SCOPE or N concurrent per SCOPE, single spaces, nothing
// else. The numbers are read as digit runs here and bounded below, so that
// an out-of-range number is named as such rather than as a syntax error.
const LIMIT_RE = /^(\d+)(?:\/(\d*)([smhd])| (concurrent)) per (user|install)$/;

export const LIMIT_FORMS = 'N/WINDOW per SCOPE or N concurrent per SCOPE (N from 1 to 1000000; WINDOW such as 30m, 1h or 1d, or h for 1h, at most 30d; SCOPE user or install)';

// parseLimit reads one limit. It returns {max, window, scope} — window in
// seconds, 0 for a concurrent limit — or {error} saying what is wrong.
export function parseLimit(s) {
  if (typeof s !== 'string') return { error: `not a string: ${LIMIT_FORMS}` };
  const m = LIMIT_RE.exec(s);
  if (m === null) return { error: `not ${LIMIT_FORMS}` };
  const [, n, count, unit, concurrent, scope] = m;
  if (n.startsWith('0') && n !== '0') return { error: `the count ${n} has a leading zero` };
  if (n === '0' || n.length > 7 || Number(n) > MAX_LIMIT) return { error: `the count ${n} is not from 1 to ${MAX_LIMIT}` };
  const max = Number(n);
  if (concurrent !== undefined) return { max, window: 0, scope };
  // A bare unit is one of it: "20/h" is "20/1h".
  const window = `${count}${unit}`;
  if (count.startsWith('0') && count !== '0') return { error: `the window ${window} has a leading zero` };
  if (count === '0') return { error: `the window ${window} is empty: it must be at least 1${unit}` };
  const seconds = (count === '' ? 1 : Number(count)) * WINDOW_UNITS[unit];
  if (count.length > 8 || seconds > MAX_WINDOW) return { error: `the window ${window} is longer than 30d` };
  return { max, window: seconds, scope };
}

// Go's time units.
const DURATION_UNITS = {
  ns: 1n,
  us: 1_000n,
  'µs': 1_000n, // U+00B5 micro sign
  'μs': 1_000n, // U+03BC Greek mu
  ms: 1_000_000n,
  s: 1_000_000_000n,
  m: 60n * 1_000_000_000n,
  h: 3600n * 1_000_000_000n,
};

const DAY = 86400n * 1_000_000_000n;

const MAX_INT64 = (1n << 63n) - 1n;

// parseTimeout reads an approval's timeout: whole days ("2d", the days as
// Go's strconv.Atoi reads them, without a sign) or a Go duration ("24h",
// "90m", "1h30m"), from a second to 30 days. It returns {ns}, the timeout
// in nanoseconds (a bigint), or {error} saying what is wrong.
export function parseTimeout(s) {
  const wrong = { error: 'whole days (2d) or a duration (24h, 90m)' };
  let d;
  if (s.endsWith('d')) {
    const days = s.slice(0, -1);
    if (!/^-?[0-9]+$/.test(days)) return wrong;
    const n = BigInt(days);
    if (n < 1n || n > MAX_INT64) return wrong;
    if (n > MAX_TIMEOUT / DAY) return { error: 'at most 30d' };
    d = n * DAY;
  } else {
    try {
      d = parseDuration(s);
    } catch {
      return wrong;
    }
  }
  if (d < MIN_TIMEOUT) return { error: 'at least 1s' };
  if (d > MAX_TIMEOUT) return { error: 'at most 30d' };
  return { ns: d };
}

// parseDuration reads s as Go's time.ParseDuration does:
// [-+]?([0-9]*(\.[0-9]*)?[a-z]+)+, "1h30m", "1.5h", "300ms".
// It returns the duration in nanoseconds (a bigint, exact as Go's is), or
// throws an Error in Go's words.
export function parseDuration(s) {
  const orig = s;
  const invalid = (what = 'invalid duration') => new Error(`${what} ${JSON.stringify(orig)}`);
  let neg = false;
  if (s !== '' && (s[0] === '-' || s[0] === '+')) {
    neg = s[0] === '-';
    s = s.slice(1);
  }
  if (s === '0') return 0n;
  if (s === '') throw invalid();
  let d = 0n;
  while (s !== '') {
    if (!(s[0] === '.' || isDigit(s[0]))) throw invalid();
    let i = 0;
    while (i < s.length && isDigit(s[i])) i++;
    const pre = i > 0;
    let v = pre ? BigInt(s.slice(0, i)) : 0n;
    if (v > MAX_INT64) throw invalid();
    s = s.slice(i);
    // The fraction, as Go keeps it: its digits while they fit in an
    // int64, and a float64 scale.
    let f = 0n;
    let scale = 1;
    let post = false;
    if (s[0] === '.') {
      s = s.slice(1);
      let overflow = false;
      for (i = 0; i < s.length && isDigit(s[i]); i++) {
        post = true;
        if (overflow) continue;
        if (f > MAX_INT64 / 10n) {
          overflow = true;
          continue;
        }
        const y = f * 10n + BigInt(s[i]);
        if (y > MAX_INT64) {
          overflow = true;
          continue;
        }
        f = y;
        scale *= 10;
      }
      s = s.slice(i);
    }
    if (!pre && !post) throw invalid();
    i = 0;
    while (i < s.length && s[i] !== '.' && !isDigit(s[i])) i++;
    if (i === 0) throw invalid('missing unit in duration');
    const u = s.slice(0, i);
    s = s.slice(i);
    const unit = Object.hasOwn(DURATION_UNITS, u) ? DURATION_UNITS[u] : undefined;
    if (unit === undefined) throw invalid(`unknown unit ${JSON.stringify(u)} in duration`);
    if (v > (1n << 63n) / unit) throw invalid();
    v *= unit;
    if (f > 0n) {
      v += BigInt(Math.trunc(Number(f) * (Number(unit) / scale)));
      if (v > 1n << 63n) throw invalid();
    }
    d += v;
    if (d > 1n << 63n) throw invalid();
  }
  if (neg) return -d;
  if (d > MAX_INT64) throw invalid();
  return d;
}

function isDigit(c) {
  return c >= '0' && c <= '9';
}
