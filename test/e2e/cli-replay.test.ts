/**
 * `fairvisor test --access-log` through the real CLI process (dist/cli.js):
 * a generated nginx combined log (three clients over two minutes of log time,
 * one bursting past a per-address token bucket, one bursting once, garbage
 * lines, a line logged late) and a JSON-lines log (statuses that count or are
 * given back, an API key shown as its hash) are replayed, and what the
 * command prints is compared with what the test works out on its own from
 * the buckets' parameters: counts per policy/rule/reason, top keys, first and
 * last rejected lines, the skipped rule, the malformed lines.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { gzipSync } from 'node:zlib'
import { CLI, ROOT } from '../helpers/processes.js'

interface Run {
  code: number | null
  stdout: string
  stderr: string
}

function cli(args: string[], input?: string): Run {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    cwd: ROOT,
    input,
    encoding: 'utf8',
    timeout: 60000,
    env: { PATH: process.env.PATH },
  })
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

const tmp = mkdtempSync(join(tmpdir(), 'fv-cli-replay-'))
after(() => rmSync(tmp, { recursive: true, force: true }))
const file = (name: string, text: string | Buffer): string => {
  const path = join(tmp, name)
  writeFileSync(path, text)
  return path
}

/** A bucket as docs/algorithms.md states it: `burst` tokens at first, `rate` more per second up to `burst`, one per request. */
function buckets(rate: number, burst: number): { take(key: string, t: number): boolean; giveBack(key: string): void } {
  const state = new Map<string, { tokens: number; last: number }>()
  return {
    take(key, t) {
      const s = state.get(key) ?? { tokens: burst, last: t }
      s.tokens = Math.min(burst, s.tokens + (t - s.last) * rate)
      s.last = t
      state.set(key, s)
      if (s.tokens < 1) return false
      s.tokens -= 1
      return true
    },
    giveBack(key) {
      state.get(key)!.tokens += 1
    },
  }
}

interface Rejected {
  line: number
  t: number
  method: string
  path: string
  ip: string
  key: string
}

/** count, keys by count (highest first, ties by key), first and last, of a list of rejected requests. */
function group(list: Rejected[]) {
  const perKey = new Map<string, number>()
  for (const r of list) perKey.set(r.key, (perKey.get(r.key) ?? 0) + 1)
  const top = [...perKey].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
  return { count: list.length, top, first: list[0]!, last: list.at(-1)! }
}

describe('fairvisor test --access-log, nginx combined', () => {
  // Logged at +0100: 12:00:00 local is 11:00:00 UTC.
  const T0 = Date.UTC(2026, 2, 1, 11, 0, 0)
  const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec']
  const two = (n: number): string => String(n).padStart(2, '0')
  const timeLocal = (s: number): string => {
    const d = new Date(T0 + s * 1000 + 3600_000)
    return `${two(d.getUTCDate())}/${MONTHS[d.getUTCMonth()]}/${d.getUTCFullYear()}:${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())} +0100`
  }
  const iso = (s: number): string => new Date(T0 + s * 1000).toISOString()

  interface Req {
    ip: string
    method: string
    path: string
    s: number
  }
  type Entry = Req | { text: string }
  const A = '198.51.100.10'
  const B = '198.51.100.20'
  const C = '203.0.113.9'
  const seconds: Entry[][] = []
  for (let s = 0; s < 120; s++) {
    const here: Entry[] = []
    if (s % 2 === 0) here.push({ ip: A, method: 'GET', path: `/api/items?page=${s / 2}`, s })
    if (s % 10 === 5) here.push({ ip: A, method: 'GET', path: '/static/app.js', s })
    here.push({ ip: B, method: 'GET', path: `/api/items/${s}`, s })
    if (s === 60) for (let j = 0; j < 12; j++) here.push({ ip: B, method: 'POST', path: '/api/orders', s })
    if (s >= 30 && s < 90) for (let j = 0; j < 6; j++) here.push({ ip: C, method: 'GET', path: `/api/search?q=${s}-${j}`, s })
    if (s === 10) here.push({ text: 'garbage' })
    if (s === 50) here.push({ text: `${B} - - [${timeLocal(50)}] "-" 400 0 "-" "-"` })
    if (s === 70) here.push({ text: '' })
    if (s === 100) here.push({ text: `${A} - - [${timeLocal(100)}] "GET /api/items HTTP/1.1" 200 12` })
    seconds.push(here)
  }
  // nginx writes a line when its request ends: A's request of second 40 lands after second 41's lines.
  const late = seconds[40]!.shift()!
  seconds[41]!.push(late)
  const entries = seconds.flat()
  const text = entries
    .map((e) =>
      'text' in e
        ? e.text
        : `${e.ip} - - [${timeLocal(e.s)}] "${e.method} ${e.path} HTTP/1.1" 200 512 "https://app.example.com/" "client/${e.ip}" "-"`,
    )
    .join('\n')
  const log = file('access.log', `${text}\n`)

  // The bundle: api/per_ip enforced on /api/ (2/s, bursts of 10) beside api/per_key on an API key a combined
  // log never has; tighter/per_ip_strict in shadow on /api/search exactly (1/s, bursts of 3).
  const bundle = file(
    'bundle.json',
    JSON.stringify({
      bundle_version: 1,
      issued_at: '2026-01-01T00:00:00Z',
      policies: [
        {
          id: 'api',
          spec: {
            selector: { pathPrefix: '/api/' },
            mode: 'enforce',
            rules: [
              {
                name: 'per_ip',
                limit_keys: ['ip:address'],
                algorithm: 'token_bucket',
                algorithm_config: { tokens_per_second: 2, burst: 10 },
              },
              {
                name: 'per_key',
                limit_keys: ['header:x-api-key'],
                algorithm: 'token_bucket',
                algorithm_config: { tokens_per_second: 100, burst: 100 },
              },
            ],
          },
        },
        {
          id: 'tighter',
          spec: {
            selector: { pathExact: '/api/search' },
            mode: 'shadow',
            rules: [
              {
                name: 'per_ip_strict',
                limit_keys: ['ip:address'],
                algorithm: 'token_bucket',
                algorithm_config: { tokens_per_second: 1, burst: 3 },
              },
            ],
          },
        },
      ],
    }),
  )

  // What the replay must find, worked out here: the clock never goes back, the buckets as documented.
  const enforce = buckets(2, 10)
  const shadow = buckets(1, 3)
  const rejected: Rejected[] = []
  const wouldReject: Rejected[] = []
  const malformed: number[] = []
  let lines = 0
  let requests = 0
  let apiRequests = 0
  let clock = 0
  let lateLines = 0
  for (const [i, e] of entries.entries()) {
    const line = i + 1
    if ('text' in e) {
      if (e.text !== '') {
        lines++
        malformed.push(line)
      }
      continue
    }
    lines++
    requests++
    if (e.s < clock) lateLines++
    clock = Math.max(clock, e.s)
    const at = { line, t: clock, method: e.method, path: e.path, ip: e.ip }
    if (e.path.startsWith('/api/')) {
      apiRequests++
      if (!enforce.take(e.ip, clock)) rejected.push({ ...at, key: `tb:per_ip:${e.ip}` })
    }
    if (e.path.split('?')[0] === '/api/search' && !shadow.take(e.ip, clock))
      wouldReject.push({ ...at, key: `shadow:tb:per_ip_strict:${e.ip}` })
  }
  const rej = group(rejected)
  const would = group(wouldReject)

  test('the traffic is what the test means it to be: the burster is limited most, the one-off burst a little, the steady client never', () => {
    assert.deepEqual(
      rej.top.map(([k]) => k),
      [`tb:per_ip:${C}`, `tb:per_ip:${B}`],
    )
    assert.ok(rej.top[0]![1] > 100 && rej.top[1]![1] > 0 && rej.top[1]![1] < 5, JSON.stringify(rej.top))
    assert.equal(lateLines, 1)
    assert.equal(malformed.length, 3)
  })

  const shown = (r: Rejected): string => `line ${r.line} ${iso(r.t)} ${r.method} ${r.path} ip=${r.ip} key=${r.key}`
  const expected = (name: string): string =>
    [
      `replayed ${name} (nginx-combined) from ${iso(0)} to ${iso(119)} (119 s of log time)`,
      `  ${lines} lines: ${requests} requests, 3 malformed`,
      `  ${requests - rej.count} allowed, ${rej.count} rejected, ${would.count} shadow would-rejects`,
      "  1 line logged up to 1 s before the line above it, replayed at that line's time",
      'malformed lines (3):',
      `  line ${malformed[0]}: is not in nginx's combined format: $remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"`,
      `  line ${malformed[1]}: the request line "-" is not "METHOD /path HTTP/x.y" (nginx logs "-" for a connection closed before any request)`,
      `  line ${malformed[2]}: is not in nginx's combined format: $remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"`,
      'rejected, per policy/rule/reason:',
      `  api/per_ip token_bucket_exceeded (429): ${rej.count} requests, 2 keys`,
      '    top keys:',
      ...rej.top.map(([k, n]) => `      ${n} ${k}`),
      `    first: ${shown(rej.first)}`,
      `    last:  ${shown(rej.last)}`,
      'shadow would-rejects, per policy/rule/reason:',
      `  tighter/per_ip_strict token_bucket_exceeded: ${would.count} requests, 1 key`,
      '    top keys:',
      ...would.top.map(([k, n]) => `      ${n} ${k}`),
      `    first: ${shown(would.first)}`,
      `    last:  ${shown(would.last)}`,
      'rules skipped (limit key missing):',
      `  api/per_key: header:x-api-key missing on ${apiRequests} requests`,
      '',
    ].join('\n')

  test('prints the rejects per policy/rule/reason, the top keys, the first and last rejected lines, exactly', () => {
    const r = cli(['test', bundle, '--access-log', log])
    assert.equal(r.code, 0, r.stderr)
    assert.equal(r.stdout, expected(log))
    assert.equal(r.stderr, '')
  })

  test('--json: the same figures as one object', () => {
    const r = cli(['test', bundle, '--access-log', log, '--format', 'nginx-combined', '--json', '--top', '1'])
    assert.equal(r.code, 0, r.stderr)
    const o = JSON.parse(r.stdout)
    const req = (x: Rejected) => ({ line: x.line, time: iso(x.t), method: x.method, path: x.path, ip: x.ip, key: x.key })
    assert.deepEqual(o, {
      file: log,
      format: 'nginx-combined',
      from: iso(0),
      to: iso(119),
      lines,
      requests,
      allowed: requests - rej.count,
      rejected: rej.count,
      shadow_would_reject: would.count,
      held: 0,
      max_hold_ms: 0,
      malformed: { count: 3, first: o.malformed.first },
      late: { count: 1, max_seconds: 1 },
      rejects: [
        {
          mode: 'enforce',
          policy: 'api',
          rule: 'per_ip',
          reason: 'token_bucket_exceeded',
          status: 429,
          count: rej.count,
          keys: 2,
          keys_saturated: false,
          top_keys: [{ key: rej.top[0]![0], count: rej.top[0]![1], error: 0 }],
          first: req(rej.first),
          last: req(rej.last),
        },
        {
          mode: 'shadow',
          policy: 'tighter',
          rule: 'per_ip_strict',
          reason: 'token_bucket_exceeded',
          status: null,
          count: would.count,
          keys: 1,
          keys_saturated: false,
          top_keys: [{ key: would.top[0]![0], count: would.top[0]![1], error: 0 }],
          first: req(would.first),
          last: req(would.last),
        },
      ],
      skipped: [{ policy: 'api', rule: 'per_key', missing_key: 'header:x-api-key', requests: apiRequests }],
    })
    assert.deepEqual(
      o.malformed.first.map((m: { line: number }) => m.line),
      malformed,
    )
  })

  test('a .gz log is read as it is decompressed, standard input as a file', () => {
    const gz = file('access.log.1.gz', gzipSync(`${text}\n`))
    const r = cli(['test', bundle, '--access-log', gz])
    assert.equal(r.code, 0, r.stderr)
    assert.equal(r.stdout, expected(gz))
    const s = cli(['test', bundle, '--access-log', '-'], `${text}\n`)
    assert.equal(s.code, 0, s.stderr)
    assert.equal(s.stdout, expected('-'))
  })
})

describe('fairvisor test --access-log, JSON lines', () => {
  const T0 = Date.UTC(2026, 2, 2, 0, 0, 0)
  const rows: Record<string, unknown>[] = []
  // Failed logins count (401), successful ones are given back; the API gives back what its backend failed (5xx).
  for (let s = 0; s < 8; s++)
    rows.push({ time: new Date(T0 + s * 1000).toISOString(), ip: '192.0.2.66', method: 'POST', path: '/login', status: 401 })
  for (let s = 0; s < 8; s++) rows.push({ time: (T0 + s * 1000) / 1000, ip: '192.0.2.77', method: 'POST', path: '/login', status: 200 })
  for (let j = 0; j < 50; j++)
    rows.push({ time: T0 / 1000 + 10, ip: '192.0.2.5', path: '/api/v1/x', headers: { 'x-api-key': 'k-beta' }, status: 503 })
  for (let j = 0; j < 110; j++)
    rows.push({
      time: T0 / 1000 + 10,
      ip: '192.0.2.5',
      request: `GET /api/v1/y?n=${j} HTTP/1.1`,
      headers: { 'X-Api-Key': j < 60 ? 'k-beta' : 'k-alpha' },
      status: '200',
      extra: { any: 'thing' },
    })
  for (let j = 0; j < 70; j++)
    rows.push({ time: T0 / 1000 + 10, ip: '192.0.2.6', path: `/api/v1/z/${j}`, headers: { 'x-api-key': 'k-alpha' }, status: 200 })
  const log = file('access.jsonl', `${rows.map((r) => JSON.stringify(r)).join('\n')}\n`)
  const hash = (v: string): string => `sha256:${createHash('sha256').update(v).digest('hex').slice(0, 12)}`

  test('statuses settle as logged, a credential key is shown as its hash; each group counted as the buckets say', () => {
    const logins = buckets(0.0167, 5)
    const api = buckets(10, 100)
    const rejected = new Map<string, Rejected[]>()
    for (const [i, r] of rows.entries()) {
      const t = (typeof r.time === 'number' ? r.time * 1000 : Date.parse(r.time as string)) / 1000
      const status = Number(r.status)
      const path = (r.path as string | undefined) ?? (r.request as string).split(' ')[1]!
      const at = { line: i + 1, t, method: (r.method as string | undefined) ?? 'GET', path, ip: r.ip as string }
      let rule: string
      let key: string
      let b: ReturnType<typeof buckets>
      let giveBack: boolean
      if (path === '/login') {
        ;[rule, key, b, giveBack] = ['login/failed_logins', r.ip as string, logins, status !== 401 && status !== 403]
      } else {
        const k = Object.values(r.headers as Record<string, string>)[0]!
        ;[rule, key, b, giveBack] = ['api/api_calls', hash(k), api, status >= 500]
      }
      if (!b.take(key, t)) rejected.set(rule, [...(rejected.get(rule) ?? []), { ...at, key: `tb:${rule.split('/')[1]}:${key}` }])
      else if (giveBack) b.giveBack(key)
    }
    const r = cli(['test', 'policies/status-counting.json', '--access-log', log, '--format', 'json-lines', '--json'])
    assert.equal(r.code, 0, r.stderr)
    const o = JSON.parse(r.stdout)
    assert.equal(o.requests, rows.length)
    assert.equal(o.malformed.count, 0)
    const shownAt = (x: Rejected) => ({
      line: x.line,
      time: new Date(x.t * 1000).toISOString(),
      method: x.method,
      path: x.path,
      ip: x.ip,
      key: x.key,
    })
    assert.deepEqual(
      o.rejects.map((g: Record<string, unknown>) => [`${g.policy}/${g.rule}`, g.reason, g.count, g.top_keys, g.first, g.last]),
      [...rejected]
        .sort((a, b) => b[1].length - a[1].length)
        .map(([rule, list]) => {
          const g = group(list)
          return [
            rule,
            'token_bucket_exceeded',
            g.count,
            g.top.map(([key, count]) => ({ key, count, error: 0 })),
            shownAt(g.first),
            shownAt(g.last),
          ]
        }),
    )
    // What the test means: 3 failed logins refused, k-alpha over its bucket, k-beta (its 503s given back) never.
    assert.deepEqual(
      o.rejects.map((g: { count: number; top_keys: { key: string }[] }) => [g.count, g.top_keys.map((k) => k.key)]),
      [
        [20, [`tb:api_calls:${hash('k-alpha')}`]],
        [3, ['tb:failed_logins:192.0.2.66']],
      ],
    )
    assert.equal(o.allowed, rows.length - 23)
  })
})

describe('fairvisor test --access-log: the command line and the file', () => {
  test('--help names the replay and its flags', () => {
    const help = cli(['--help'])
    assert.match(help.stdout, /^ {2}test <bundle> --access-log <file\|->$/m)
    for (const flag of ['--access-log <file>', '--format nginx-combined|json-lines', '--host <name>', '--top <n>', '--json'])
      assert.ok(help.stdout.includes(`      ${flag}`), flag)
  })

  const log = file('one.log', '10.0.0.1 - - [01/Jan/2026:00:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "-"\n')
  test('a bad command line exits 2 and says why', () => {
    const cases: [string[], RegExp][] = [
      [['--speed', '10'], /--speed: a replay runs as fast as it can on the times the log gives/],
      [['--requests', log], /give --access-log or --requests, not both/],
      [['--start', '2026-01-01T00:00:00Z'], /--start does not go with --access-log/],
      [['--format', 'json'], /--format must be nginx-combined or json-lines with --access-log, not "json"/],
      [['--top', '0'], /--top must be an integer from 1 to 1000/],
      [['--nope'], /unknown option --nope/],
    ]
    for (const [extra, message] of cases) {
      const r = cli(['test', 'policies/per-ip.json', '--access-log', log, ...extra])
      assert.equal(r.code, 2, extra.join(' '))
      assert.match(r.stderr, message)
      assert.match(r.stderr, /usage: fairvisor test <bundle> --access-log/)
      assert.equal(r.stdout, '')
    }
  })

  test('a file that cannot be read, or holds no readable request (the wrong --format), exits 1', () => {
    const missing = cli(['test', 'policies/per-ip.json', '--access-log', join(tmp, 'nope.log')])
    assert.equal(missing.code, 1)
    assert.match(missing.stderr, /cannot read .*nope\.log \(ENOENT\)/)
    const broken = cli([
      'test',
      'policies/per-ip.json',
      '--access-log',
      file('broken.log.gz', gzipSync('x\n'.repeat(1000)).subarray(0, 30)),
    ])
    assert.equal(broken.code, 1)
    assert.match(broken.stderr, /cannot read .*broken\.log\.gz past line \d+/)
    const wrong = cli(['test', 'policies/per-ip.json', '--access-log', log, '--format', 'json-lines'])
    assert.equal(wrong.code, 1)
    assert.match(wrong.stdout, /1 line: 0 requests, 1 malformed/)
    assert.match(wrong.stderr, /holds no request that could be read as json-lines; is --format right\?/)
    const bundle = cli(['test', 'test/fixtures/cli/truncated.json', '--access-log', log])
    assert.equal(bundle.code, 1)
    assert.match(bundle.stderr, /the bundle is invalid/)
  })
})
