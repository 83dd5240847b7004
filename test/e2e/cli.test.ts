/**
 * `fairvisor validate | test | init` through the real CLI process (dist/cli.js):
 * exit codes and output on every bundle in policies/, on broken fixtures and on
 * the init templates.
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { SignJWT } from 'jose'
import { CLI, ROOT } from '../helpers/processes.js'

interface Run {
  code: number | null
  stdout: string
  stderr: string
}

function cli(args: string[], input?: string, env: Record<string, string> = {}): Run {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    cwd: ROOT,
    input,
    encoding: 'utf8',
    timeout: 20000,
    env: { PATH: process.env.PATH, ...env },
  })
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

const FIX = 'test/fixtures/cli'
const policies = readdirSync(join(ROOT, 'policies'))
  .filter((n) => n.endsWith('.json'))
  .sort()
const tmp = mkdtempSync(join(tmpdir(), 'fv-cli-'))
after(() => rmSync(tmp, { recursive: true, force: true }))
const sample = join(tmp, 'any.jsonl')
writeFileSync(sample, '{"method":"GET","path":"/","repeat":3}\n{"method":"POST","path":"/v1/x?a=1","headers":{"x-api-key":"k"},"at":1}\n')

describe('fairvisor validate', () => {
  test('policies/ is not empty', () => assert.ok(policies.length >= 1))

  test('every bundle in policies/ passes, text and json (one process for all of them)', () => {
    const files = policies.map((n) => `policies/${n}`)
    const text = cli(['validate', ...files])
    assert.equal(text.code, 0, text.stderr)
    for (const f of files)
      assert.match(text.stdout, new RegExp(`^${f.replace(/\./g, '\\.')}: bundle_version \\d+, \\d+ polic(y|ies), \\d+ rules?`, 'm'), f)
    assert.equal(text.stdout.split('\n').filter((l) => /^ok( \(|$)/.test(l)).length, files.length)
    assert.doesNotMatch(text.stdout, /\[object Object\]/)
    assert.match(
      text.stdout,
      /policy "openai" \(enforce\): 1 rule: openai_tokens_per_key token_bucket_llm$/m,
      'each rule is listed with its algorithm name',
    )
    const json = cli(['validate', ...files, '--format', 'json'])
    assert.equal(json.code, 0, json.stdout)
    const objects = json.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { ok: boolean; file: string; errors: string[]; dropped: string[]; summary: { policies: number } })
    assert.deepEqual(
      objects.map((o) => o.file),
      files,
    )
    for (const o of objects) {
      assert.equal(o.ok, true, o.file)
      assert.deepEqual(o.errors, [])
      assert.deepEqual(o.dropped, [])
      assert.ok(o.summary.policies >= 1)
    }
  })

  test('several files: the exit code is the worst one', () => {
    const r = cli(['validate', `policies/${policies[0]}`, `${FIX}/dropped-policy.json`, '--format', 'json'])
    assert.equal(r.code, 1)
    assert.deepEqual(
      r.stdout
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { ok: boolean }).ok),
      [true, false],
    )
  })

  test('a file that is not JSON: exit 1, file and pointer on stderr, nothing on stdout', () => {
    const r = cli(['validate', `${FIX}/truncated.json`])
    assert.equal(r.code, 1)
    assert.equal(r.stdout, '')
    assert.match(r.stderr, /^error: test\/fixtures\/cli\/truncated\.json: \/: .*not valid JSON/m)
  })

  test('every error is printed, each with its pointer', () => {
    const r = cli(['validate', `${FIX}/two-errors.json`])
    assert.equal(r.code, 1)
    const errors = r.stderr.split('\n').filter((l) => l.startsWith('error: '))
    assert.equal(errors.length, 2, r.stderr)
    assert.match(errors.join('\n'), /two-errors\.json: \/bundle_version: /)
    assert.match(errors.join('\n'), /two-errors\.json: \/policies: /)
    const json = cli(['validate', `${FIX}/two-errors.json`, '--format', 'json'])
    assert.equal(json.code, 1)
    const o = JSON.parse(json.stdout) as { ok: boolean; errors: string[]; summary: unknown }
    assert.equal(o.ok, false)
    assert.equal(o.errors.length, 2)
    assert.equal(o.summary, null)
  })

  test('a dropped policy fails validation (exit 1) and names the policy, rule and pointer', () => {
    const r = cli(['validate', `${FIX}/dropped-policy.json`])
    assert.equal(r.code, 1)
    assert.match(
      r.stderr,
      /error: test\/fixtures\/cli\/dropped-policy\.json: \/policies\/1\/spec\/rules\/0\/algorithm_config\/burst: policy "bad", rule "too_small": /,
    )
    assert.match(r.stdout, /1 policy, 1 rule/)
    const o = JSON.parse(cli(['validate', `${FIX}/dropped-policy.json`, '--format', 'json']).stdout) as {
      ok: boolean
      dropped: string[]
      summary: { policies: number }
    }
    assert.equal(o.ok, false)
    assert.equal(o.dropped.length, 1)
    assert.equal(o.summary.policies, 1)
  })

  test('warnings alone pass (exit 0) and are printed', () => {
    const r = cli(['validate', `${FIX}/warnings-only.json`])
    assert.equal(r.code, 0, r.stderr)
    assert.match(r.stdout, /warning: .*fixed_cost \(3\) is above burst \(2\)/)
    assert.match(r.stdout, /^ok \(1 warning\)$/m)
  })

  test('a lease of burst tokens or more is a warning', () => {
    const doc = {
      bundle_version: 1,
      policies: [
        {
          id: 'p',
          spec: {
            selector: { pathPrefix: '/' },
            rules: [
              {
                name: 'r',
                limit_keys: ['ip:address'],
                algorithm: 'token_bucket',
                algorithm_config: { tokens_per_second: 10, burst: 20, lease: { tokens: 20, ttl_ms: 100 } },
              },
            ],
          },
        },
      ],
    }
    const r = cli(['validate', '-'], JSON.stringify(doc))
    assert.equal(r.code, 0, r.stderr)
    assert.match(r.stdout, /warning: .*lease\.tokens \(20\) is not below burst \(20\)/)
  })

  test('reads standard input for -', () => {
    const ok = cli(['validate', '-'], readFileSync(join(ROOT, 'policies', policies[0]!), 'utf8'))
    assert.equal(ok.code, 0, ok.stderr)
    assert.match(ok.stdout, /^<stdin>: bundle_version/)
    const bad = cli(['validate', '-'], '{"bundle_version": 1}')
    assert.equal(bad.code, 1)
    assert.match(bad.stderr, /<stdin>: \/policies: /)
  })

  test('every fixture in test/fixtures/invalid fails (exit 1, each reported)', () => {
    const dir = join(ROOT, 'test/fixtures/invalid')
    const names = readdirSync(dir)
      .filter((n) => n.endsWith('.json'))
      .sort()
    assert.ok(names.length > 0)
    const r = cli(['validate', ...names.map((n) => join(dir, n)), '--format', 'json'])
    assert.equal(r.code, 1)
    const objects = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { ok: boolean; file: string; errors: string[]; dropped: string[] })
    assert.equal(objects.length, names.length)
    for (const o of objects) {
      assert.equal(o.ok, false, o.file)
      assert.ok(o.errors.length + o.dropped.length >= 1, o.file)
    }
  })

  test('usage errors exit 2', () => {
    assert.equal(cli(['validate']).code, 2)
    assert.equal(cli(['validate', 'a.json', '--format', 'xml']).code, 2)
    assert.equal(cli(['validate', 'a.json', '--bogus']).code, 2)
  })

  test('a missing file: exit 1 naming it', () => {
    const r = cli(['validate', `${FIX}/does-not-exist.json`])
    assert.equal(r.code, 1)
    assert.match(r.stderr, /does-not-exist\.json: .*ENOENT/)
  })
})

interface Report {
  n: number
  line: number
  matched_policies: string[]
  limits: {
    policy: string
    rule: string
    key: string
    composite: string
    cost: number
    shadow: boolean
    outcome: string
    charged: boolean
    tokens_left?: number
  }[]
  skipped: { policy: string; rule: string; missing_key: string }[]
  shadow_rejects: { rule: string }[]
  decision: string
  status: number
  reason: string
  rule?: string
  headers: Record<string, string>
}

describe('fairvisor test', () => {
  const run = (): Report[] => {
    const r = cli([
      'test',
      `${FIX}/tenants.json`,
      '--requests',
      `${FIX}/tenants.jsonl`,
      '--format',
      'json',
      '--start',
      '2026-01-01T00:00:00Z',
    ])
    assert.equal(r.code, 0, r.stderr)
    return r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Report)
  }

  test('json: one object per (repeated) request with rules, keys, costs, decision and headers', () => {
    const out = run()
    assert.equal(out.length, 8)
    assert.deepEqual(
      out.map((o) => o.n),
      [1, 2, 3, 4, 5, 6, 7, 8],
    )
    const [first, second, region, missing, later, anon1, anon2, other] = out as [
      Report,
      Report,
      Report,
      Report,
      Report,
      Report,
      Report,
      Report,
    ]

    assert.deepEqual(first.matched_policies, ['api', 'watch'])
    assert.deepEqual(
      first.limits.map((l) => [l.rule, l.key, l.cost, l.shadow, l.outcome]),
      [
        ['per_tenant', 'tb:per_tenant:acme|eu', 2, false, 'allowed'],
        ['shadow_per_ip', 'shadow:tb:shadow_per_ip:10.0.0.1', 1, true, 'allowed'],
      ],
    )
    assert.equal(first.decision, 'allow')
    assert.equal(first.headers['RateLimit-Limit'], '3')
    assert.equal(first.headers['RateLimit-Remaining'], '1')

    assert.equal(second.decision, 'reject')
    assert.equal(second.status, 429)
    assert.equal(second.reason, 'token_bucket_exceeded')
    assert.equal(second.rule, 'per_tenant')
    assert.equal(second.headers['X-Fairvisor-Reason'], 'token_bucket_exceeded')
    assert.ok(Number(second.headers['Retry-After']) >= 1)

    // The query object is merged into the query string: another composite key, another bucket.
    assert.equal(region.limits[0]!.composite, 'acme|us')
    assert.equal(region.decision, 'allow')
    assert.equal(region.shadow_rejects.length, 1, 'the shadow bucket of 10.0.0.1 (burst 2) is empty on its third request')

    assert.deepEqual(missing.skipped, [{ policy: 'api', rule: 'per_tenant', missing_key: 'header:x-tenant' }])
    assert.deepEqual(
      missing.limits.filter((l) => !l.shadow).map((l) => l.rule),
      ['anon'],
      'no rule could be applied: the fallback limits the request',
    )

    // Time comes from the file: two seconds refilled the bucket.
    assert.equal(later.decision, 'allow')
    assert.equal(later.limits[0]!.tokens_left, 1)

    assert.equal(anon1.limits[0]!.rule, 'anon')
    assert.equal(anon1.decision, 'allow')
    assert.equal(anon2.decision, 'reject')
    assert.equal(anon2.limits[1]!.charged, true, 'the shadow group is charged even when an enforce limit rejects')
    assert.equal(anon2.limits[0]!.charged, false)

    assert.deepEqual(other.matched_policies, ['watch'])
    assert.deepEqual(other.headers, {})
  })

  test('table: readable lines and a total', () => {
    const r = cli(['test', `${FIX}/tenants.json`, '--requests', `${FIX}/tenants.jsonl`])
    assert.equal(r.code, 0, r.stderr)
    assert.match(r.stdout, /^#2 line 2 t\+0\.000s GET \/v1\/items\?region=eu host=api\.example\.com ip=10\.0\.0\.1$/m)
    assert.match(r.stdout, /limit api\/per_tenant key=tb:per_tenant:acme\|eu cost=2 → rejected/)
    assert.match(r.stdout, /→ REJECT 429 token_bucket_exceeded \(api\/per_tenant\)/)
    assert.match(r.stdout, /skipped api\/per_tenant: header:x-tenant is missing/)
    assert.match(r.stdout, /Retry-After: \d+ \| X-Fairvisor-Reason: token_bucket_exceeded/)
    assert.match(r.stdout, /^8 requests: 6 allowed, 2 rejected$/m)
  })

  for (const [file, msg] of [
    ['bad-repeat.jsonl', /bad-repeat\.jsonl:3: "repeat" must be an integer/],
    ['backwards.jsonl', /backwards\.jsonl:2: "at" \(1\) is earlier than the previous request's \(5\)/],
    ['unknown-field.jsonl', /unknown-field\.jsonl:2: unknown field "heders"/],
    ['not-json.jsonl', /not-json\.jsonl:2: is not valid JSON/],
  ] as const) {
    test(`a bad request file (${file}) exits 1 naming the line, before any output`, () => {
      const r = cli(['test', `${FIX}/tenants.json`, '--requests', `${FIX}/${file}`])
      assert.equal(r.code, 1)
      assert.equal(r.stdout, '')
      assert.match(r.stderr, msg)
    })
  }

  test('an invalid bundle exits 1 with its errors; usage errors exit 2', () => {
    const r = cli(['test', `${FIX}/two-errors.json`, '--requests', `${FIX}/tenants.jsonl`])
    assert.equal(r.code, 1)
    assert.match(r.stderr, /two-errors\.json: \/policies: /)
    assert.equal(cli(['test', `${FIX}/tenants.json`]).code, 2)
    assert.equal(cli(['test', `${FIX}/tenants.json`, '--requests', `${FIX}/tenants.jsonl`, '--format', 'yaml']).code, 2)
  })

  test('bearer tokens are verified with the JWT settings at the sample time; without a key source, claims not verified', async () => {
    const secret = 'a-test-secret-that-is-at-least-32-characters-long'
    const startS = Date.UTC(2026, 0, 1) / 1000
    const sign = (claims: Record<string, unknown>, key = secret) =>
      new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).sign(new TextEncoder().encode(key))
    const bundle = join(tmp, 'jwt.json')
    const rule = {
      name: 'per_sub',
      limit_keys: ['jwt:sub'],
      algorithm: 'token_bucket',
      algorithm_config: { tokens_per_second: 1, burst: 5 },
    }
    writeFileSync(
      bundle,
      JSON.stringify({ bundle_version: 1, policies: [{ id: 'users', spec: { selector: { pathPrefix: '/' }, rules: [rule] } }] }),
    )
    const bearer = (t: string) => JSON.stringify({ path: '/x', headers: { authorization: `Bearer ${t}` } })
    const requests = join(tmp, 'jwt.jsonl')
    writeFileSync(
      requests,
      [
        bearer(await sign({ sub: 'alice', exp: startS + 3600 })),
        bearer(await sign({ sub: 'paid-tier' }, 'another-secret-that-is-also-at-least-32-chars')),
        // Valid now, expired at the sample's time: the time checked is the file's.
        bearer(await sign({ sub: 'bob', exp: startS - 60 })),
        JSON.stringify({ path: '/x' }),
      ].join('\n'),
    )
    const args = ['test', bundle, '--requests', requests, '--format', 'json', '--start', '2026-01-01T00:00:00Z']
    const reports = (r: Run) => {
      assert.equal(r.code, 0, r.stderr)
      return r.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Report & { jwt?: string })
    }
    const verified = reports(cli(args, undefined, { FAIRVISOR_JWT_HMAC_SECRET: secret }))
    assert.deepEqual(
      verified.map((o) => o.jwt),
      ['verified', 'rejected: signature, its claims are not read', 'rejected: expired, its claims are not read', undefined],
    )
    assert.deepEqual(
      verified.map((o) => o.limits.map((l) => l.key)),
      [['tb:per_sub:alice'], [], [], []],
      'a forged or expired token counts no claim',
    )
    assert.deepEqual(verified[1]!.skipped, [{ policy: 'users', rule: 'per_sub', missing_key: 'jwt:sub' }])

    const decoded = cli(args, undefined, {})
    const plain = reports(decoded)
    assert.match(plain[1]!.jwt ?? '', /^claims not verified/)
    assert.deepEqual(
      plain[1]!.limits.map((l) => l.key),
      ['tb:per_sub:paid-tier'],
      'decoded, as the gateway without a key source decodes it',
    )
    assert.match(decoded.stderr, /warning: claims not verified \(no FAIRVISOR_JWT_HMAC_SECRET, FAIRVISOR_JWKS_FILE or FAIRVISOR_JWKS_URL\)/)
    const table = cli(args.slice(0, 4), undefined, {})
    assert.match(table.stdout, /^ {4}jwt: claims not verified/m)

    const bad = cli(args, undefined, { FAIRVISOR_JWT_HMAC_SECRET: 'short' })
    assert.equal(bad.code, 2)
    assert.match(bad.stderr, /FAIRVISOR_JWT_HMAC_SECRET: must be at least 32 characters/)
  })

  for (const name of policies) {
    test(`policies/${name} runs sample requests`, () => {
      const r = cli(['test', `policies/${name}`, '--requests', sample, '--format', 'json'])
      assert.equal(r.code, 0, r.stderr)
      const lines = r.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Report)
      assert.equal(lines.length, 4)
      for (const l of lines) assert.ok(['allow', 'reject'].includes(l.decision), JSON.stringify(l))
    })
  }
})

describe('fairvisor init', () => {
  for (const template of ['api', 'llm', 'webhook', 'budget', 'agent']) {
    test(`template ${template} passes validate and runs under test`, () => {
      const file = join(tmp, `${template}.json`)
      const r = cli(['init', '--template', template, '--out', file])
      assert.equal(r.code, 0, r.stderr)
      const doc = JSON.parse(readFileSync(file, 'utf8')) as { _comment: unknown; policies: unknown[] }
      assert.ok(Array.isArray(doc._comment), 'commented')
      const v = cli(['validate', file])
      assert.equal(v.code, 0, v.stderr + v.stdout)
      assert.equal(cli(['test', file, '--requests', sample]).code, 0)
    })
  }

  test('refuses to overwrite a file without --force', () => {
    const file = join(tmp, 'api.json')
    const again = cli(['init', '--out', file])
    assert.equal(again.code, 1)
    assert.match(again.stderr, /exists; add --force/)
    assert.equal(cli(['init', '--out', file, '--force']).code, 0)
  })

  test('stdout by default (api), piped into validate -', () => {
    const r = cli(['init'])
    assert.equal(r.code, 0)
    const v = cli(['validate', '-'], r.stdout)
    assert.equal(v.code, 0, v.stderr)
    assert.equal(cli(['init', '--template', 'graphql']).code, 2)
  })
})
