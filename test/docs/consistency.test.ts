/**
 * The pages say one thing, and the code's thing, wherever they say it:
 * - every markdown table is whole (a blank line inside one leaves rows outside it, shown as text);
 * - every settings table of docs/*.md lists settings the code reads, by their full names, with
 *   configuration.md's defaults; every FAIRVISOR_* name a page mentions is a setting;
 * - a page that speaks of the gRPC listener's transport names its TLS settings (the code has them);
 * - what a key costs in memory is quoted in one place (stores.md#memory-per-key), from the code's
 *   constants, and linked from everywhere else;
 * - the bodies of LLM rejects are quoted as the code builds them;
 * - each proxy README names as calling the decision API has its snippet in integrations.md, read
 *   by a test, passing every RateLimit-* header the gateway sends; none is said unable to call it.
 * Each check fails if the contradiction it names is put back.
 */
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { LLM_REJECTS } from '../../src/algorithms/llm-messages.js'
import { rateLimitHeaders } from '../../src/engine/headers.js'
import { rejectBody } from '../../src/llm/dialects/index.js'
import { ENTRY_OVERHEAD_BYTES } from '../../src/store/memory/store.js'
import { SLOT_BYTES } from '../../src/store/threads/table-layout.js'
import { TEMPLATES } from '../../src/commands/init-templates.js'
import { ROOT } from '../helpers/processes.js'
import { settingsRead } from '../helpers/settings-names.js'

const DOCS = join(ROOT, 'docs')
const PAGES = [
  'README.md',
  ...readdirSync(DOCS)
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
]
const read = (page: string): string => readFileSync(join(ROOT, page), 'utf8')

/** The lines of a page with fenced code blocks blanked (kept as empty lines, so line numbers hold). */
function proseLines(page: string): string[] {
  let fence: string | undefined
  return read(page)
    .split('\n')
    .map((line) => {
      const m = /^(```|~~~)/.exec(line)
      if (m && (fence === undefined || fence === m[1])) {
        fence = fence === undefined ? m[1] : undefined
        return ''
      }
      return fence === undefined ? line : ''
    })
}

const cells = (row: string): string[] =>
  row
    .trim()
    .replace(/^\||\|$/g, '')
    .split(/(?<!\\)\|/)
    .map((c) => c.trim())

interface Table {
  page: string
  /** 1-based line of the header. */
  line: number
  header: string[]
  rows: string[][]
}

/** Every table of a page: a header row, a separator row, then rows, up to the first line that is not a row. */
function tables(page: string): { tables: Table[]; strays: string[] } {
  const lines = proseLines(page)
  const out: Table[] = []
  const strays: string[] = []
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i]!.startsWith('|')) continue
    if (/^\|[\s:|-]+\|$/.test(lines[i + 1] ?? '') && lines[i + 1]!.includes('-')) {
      const t: Table = { page, line: i + 1, header: cells(lines[i]!), rows: [] }
      for (i += 2; i < lines.length && lines[i]!.startsWith('|'); i++) t.rows.push(cells(lines[i]!))
      out.push(t)
    } else strays.push(`${page}:${i + 1}: ${lines[i]!.slice(0, 80)}`)
  }
  return { tables: out, strays }
}

describe('markdown tables', () => {
  test('every row is inside a table: no blank line or stray text splits one', () => {
    const strays = PAGES.flatMap((p) => tables(p).strays)
    assert.deepEqual(strays, [], 'rows that follow no header and separator (GitHub shows them as text)')
  })
})

/** The code spans of a cell. */
const spans = (cell: string): string[] => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!)

describe('settings', () => {
  const known = settingsRead()
  const configuration = tables('docs/configuration.md').tables.flatMap((t) => t.rows)
  const defaults = new Map(configuration.map((r) => [spans(r[0]!)[0]!, r[1]!]))

  test('each settings table of docs/*.md lists settings the code reads, one per row by its full name, with the default configuration.md gives', () => {
    const settingsTables = PAGES.flatMap((p) => tables(p).tables).filter((t) => /^(variable|setting)$/i.test(t.header[0]!))
    assert.ok(settingsTables.length >= 10, 'the settings tables are found')
    const problems: string[] = []
    for (const t of settingsTables) {
      const withDefault = /^default$/i.test(t.header[1] ?? '')
      for (const row of t.rows) {
        const names = spans(row[0]!)
        const where = `${t.page} (table at line ${t.line}): ${row[0]}`
        if (!names[0]?.startsWith('FAIRVISOR_')) problems.push(`${where}: the first cell names no FAIRVISOR_ setting`)
        for (const n of names) {
          if (n.startsWith('_')) problems.push(`${where}: write the full name, not ${n}`)
          else if (n.startsWith('FAIRVISOR_') && !known.has(n)) problems.push(`${where}: ${n} is not read by src/`)
        }
        if (withDefault && t.page !== 'docs/configuration.md' && names[0] && defaults.get(names[0]) !== row[1])
          problems.push(`${where}: default ${row[1]}, configuration.md says ${defaults.get(names[0])}`)
      }
    }
    assert.deepEqual(problems, [])
  })

  test('every FAIRVISOR_* name a page mentions is a setting (or one configuration.md lists as not being one)', () => {
    const config = read('docs/configuration.md')
    const start = config.indexOf('**A `FAIRVISOR_*` variable that is not on this page**')
    assert.ok(start > 0, 'configuration.md says which FAIRVISOR_* variables are not settings')
    const notSettings = new Set(config.slice(start, config.indexOf('\n', start)).match(/FAIRVISOR_[A-Z0-9_]*[A-Z0-9]/g))
    const problems: string[] = []
    for (const page of PAGES) {
      for (const m of read(page).matchAll(/FAIRVISOR_[A-Z0-9_]*[A-Z0-9](_\*)?/g)) {
        const name = m[0]
        const ok = name.endsWith('_*') ? [...known].some((k) => k.startsWith(name.slice(0, -1))) : known.has(name) || notSettings.has(name)
        if (!ok) problems.push(`${page}: ${name}`)
      }
    }
    assert.deepEqual([...new Set(problems)], [], 'names that src/ does not read')
  })
})

/** Paragraphs of a page: runs of lines between blank lines (a table or a list item's lines are one). */
function paragraphs(page: string): string[] {
  return proseLines(page)
    .join('\n')
    .split(/\n\s*\n|\n(?=\s*- )/)
    .map((p) => p.replace(/\s+/g, ' '))
}

test('gRPC listener: a page that says how it is spoken (TLS, h2c, plaintext) names FAIRVISOR_GRPC_TLS_CERT_FILE, which the code reads', () => {
  assert.ok(settingsRead().has('FAIRVISOR_GRPC_TLS_CERT_FILE'), 'src/ reads the gRPC TLS settings')
  const problems: string[] = []
  for (const page of PAGES) {
    for (const p of paragraphs(page)) {
      if (!/FAIRVISOR_GRPC_PORT|gRPC listener/.test(p) || !/\bTLS\b|\bh2c\b|plaintext|plain HTTP\/2/i.test(p)) continue
      if (!p.includes('FAIRVISOR_GRPC_TLS_CERT_FILE')) problems.push(`${page}: ${p.slice(0, 160)}`)
    }
  }
  assert.deepEqual(problems, [], 'said of the gRPC listener without its TLS settings')
})

describe('memory per key', () => {
  const stores = read('docs/stores.md')
  const start = stores.indexOf('\n## Memory per key\n')
  const section = stores.slice(start, stores.indexOf('\n## ', start + 1))
  /** "170 bytes per key", "a 48-byte slot", "85 bytes of RSS per key", "188 bytes each" said of keys or counters. */
  const FIGURE =
    /\b\d[\d,.]*[ -](?:bytes?)\b(?: of RSS)? (?:per|a|each|for each) (?:counter|key|slot)\b|\bkeys?\b[^.|\n]{0,60}\b\d[\d,.]* bytes each\b/gi

  test('is one section of stores.md, with the figures the code sets', () => {
    assert.ok(start > 0, 'stores.md has a "Memory per key" section')
    assert.ok(section.includes(`${ENTRY_OVERHEAD_BYTES} bytes plus the key's length`), 'the single-thread charge per counter')
    assert.ok(section.includes(`one ${SLOT_BYTES}-byte slot`), "the shared table's slot")
  })

  test('no other page quotes a figure: they link to it', () => {
    const problems: string[] = []
    for (const page of PAGES.filter((p) => p !== 'docs/benchmarks.md')) {
      const text = page === 'docs/stores.md' ? stores.replace(section, '') : read(page)
      for (const m of text.matchAll(FIGURE)) problems.push(`${page}: "${m[0]}"`)
    }
    assert.deepEqual(problems, [], 'quote it in stores.md#memory-per-key only (benchmarks.md keeps the runs)')
    for (const page of ['README.md', 'docs/configuration.md', 'docs/security.md'])
      assert.match(read(page), /stores\.md#memory-per-key/, `${page} links to it`)
  })
})

describe('the bodies of LLM rejects', () => {
  const bodies = [
    rejectBody('/v1/messages', '…'),
    rejectBody('/v1/chat/completions', '…'),
    rejectBody('/v1/chat/completions', '…', true),
    rejectBody('/v1/messages', '…', true),
    // A request too large for its rule: its reason is the OpenAI code.
    ...Object.entries(LLM_REJECTS)
      .filter(([, r]) => r.tooLarge)
      .map(([reason]) => rejectBody('/v1/chat/completions', '…', true, reason)),
  ]

  test('every JSON error body a page quotes is one the code builds (any message)', () => {
    const quoted: string[] = []
    for (const page of PAGES) {
      for (const m of read(page).matchAll(/`(\{[^`]*"(?:rate_limit_error|invalid_request_error)"[^`]*\})`/g)) {
        quoted.push(m[1]!)
        let body: { error?: { message?: string }; message?: string }
        try {
          body = JSON.parse(m[1]!)
        } catch {
          assert.fail(`${page}: ${m[1]} is not JSON`)
        }
        if (body.error?.message !== undefined) body.error.message = '…'
        assert.ok(bodies.includes(JSON.stringify(body)), `${page}: ${m[1]} is no body the gateway sends; it sends ${bodies.join(' or ')}`)
      }
    }
    assert.ok(quoted.length >= 2, 'llm.md quotes both shapes')
  })

  test("llm.md gives each reason's message and retry header as the code does", () => {
    const rows = new Map(
      tables('docs/llm.md')
        .tables.filter((t) => t.header[0] === 'reason')
        .flatMap((t) => t.rows)
        .map((r) => [spans(r[0]!)[0]!, r]),
    )
    assert.deepEqual([...rows.keys()].sort(), Object.keys(LLM_REJECTS).sort())
    for (const [reason, { message, tooLarge }] of Object.entries(LLM_REJECTS)) {
      assert.equal(rows.get(reason)![1], message, reason)
      assert.equal(
        rows.get(reason)![2],
        tooLarge
          ? '`400`, `x-should-retry: false`'
          : '`429`, `Retry-After` (at most the bound); past the bound `403`, `x-should-retry: false`',
        reason,
      )
    }
  })

  test('reject-reasons.md names no one shape for them: it links to llm.md', () => {
    const rows = tables('docs/reject-reasons.md').tables.flatMap((t) => t.rows)
    for (const reason of Object.keys(LLM_REJECTS)) {
      const row = rows.find((r) => r[0] === `\`${reason}\``)
      assert.ok(row, reason)
      assert.match(row[2]!, /\(llm\.md(#[a-z-]+)?\)/, `${reason} links to llm.md`)
      assert.doesNotMatch(row[2]!, /OpenAI error shape|Anthropic error shape/, `${reason}: the shape follows the path`)
    }
  })
})

describe('proxies calling the decision API (README, integrations.md)', () => {
  const readme = read('README.md')
  const integrations = read('docs/integrations.md')
  const line = /\*\*decides\*\* for an existing proxy[\s\S]*?\n\n/.exec(readme)?.[0] ?? ''
  const PROXIES = ['nginx', 'Traefik', 'Caddy', 'Envoy', 'Kong']
  /** What the gateway sends with an allowed request that a limit applied to. */
  const headers = rateLimitHeaders({ policyId: 'p', limit: 10, remaining: 9, resetS: 1, windowS: 2 }).filter((_, i) => i % 2 === 0)

  /** The snippet block under the integrations.md heading that names `proxy`. */
  function snippet(proxy: string): { marker: string; text: string } {
    const at = integrations.search(new RegExp(`^### ${proxy}\\b`, 'm'))
    assert.ok(at > 0, `integrations.md has a section for ${proxy}`)
    const section = integrations.slice(at, integrations.indexOf('\n### ', at + 1))
    const m = /<!-- ([a-z-]+):begin -->\s*```[a-z]*\n([\s\S]*?)```\s*<!-- \1:end -->/.exec(section)
    assert.ok(m, `the ${proxy} section has a snippet between markers`)
    return { marker: m[1]!, text: m[2]! }
  }

  test('README says each calls /v1/decision, and each has a snippet in integrations.md that passes every RateLimit-* header', () => {
    assert.match(line, /\/v1\/decision/)
    for (const proxy of PROXIES) {
      assert.ok(line.includes(proxy), `README's decision-service line names ${proxy}`)
      const { text } = snippet(proxy)
      for (const h of headers)
        assert.match(text, new RegExp(`\\b${h}\\b|${h.toLowerCase().replaceAll('-', '_')}|prefix: ratelimit`, 'i'), `${proxy}: ${h}`)
    }
  })

  test('each snippet but Kong is read by an end-to-end test; how each hands RateLimit-* to the client is in the table', () => {
    const tests = readdirSync(join(ROOT, 'test/e2e'))
      .concat(readdirSync(join(ROOT, 'test/helpers')).map((f) => `../helpers/${f}`))
      .map((f) => readFileSync(join(ROOT, 'test/e2e', f), 'utf8'))
      .join('\n')
    for (const proxy of PROXIES.filter((p) => p !== 'Kong')) {
      const { marker } = snippet(proxy)
      assert.ok(tests.includes(`'${marker}'`), `the ${proxy} snippet (marker ${marker}) is read by a test under test/e2e or test/helpers`)
    }
    const table = tables('docs/integrations.md').tables.find((t) => t.header.some((h) => /RateLimit-\*.*allowed/.test(h)))
    assert.ok(table, 'integrations.md says how each proxy hands an allowed request its RateLimit-* headers')
    assert.deepEqual(table.rows.map((r) => r[0]).sort(), [...PROXIES].sort())
  })

  test('the Kong snippet makes the X-Original-* call and hands back what a reject and an allow carry', () => {
    const { text } = snippet('Kong')
    for (const h of ['x-original-method', 'x-original-uri', 'x-original-host']) assert.ok(text.includes(`h["${h}"]`), h)
    assert.match(text, /request_uri\("http:\/\/[^"]+\/v1\/decision", \{ method = "POST"/)
    const list = /for _, n in ipairs\(\{([^}]*)\}\)/.exec(text)?.[1] ?? ''
    for (const h of [...headers, 'Retry-After', 'X-Fairvisor-Reason']) assert.ok(list.includes(`"${h}"`), `Kong passes ${h}`)
    assert.match(text, /header_filter:[\s\S]*set_headers/, "an allowed request's headers are set on the answer")
  })

  test('no page says Traefik or Caddy cannot call the decision API', () => {
    for (const page of PAGES)
      for (const p of paragraphs(page))
        assert.doesNotMatch(
          p,
          /(Traefik|Caddy|forward_?auth)[^.]*\b(cannot|can't|can not|unable to)\b[^.]*(decision|call)/i,
          `${page}: ${p.slice(0, 160)}`,
        )
  })
})

describe('docs/policies.md', () => {
  const page = read('docs/policies.md')

  test('its index of sample bundles lists every file of policies/, once', () => {
    const files = readdirSync(join(ROOT, 'policies')).sort()
    const start = page.indexOf('\n## Sample bundles\n')
    assert.ok(start > 0, 'policies.md has a "Sample bundles" section')
    const listed = [...page.slice(start, page.indexOf('\n## ', start + 1)).matchAll(/\]\(\.\.\/policies\/([^)]+)\)/g)].map((m) => m[1]!)
    assert.deepEqual([...listed].sort(), files)
  })

  test('names `fairvisor init` with its templates, and links the tutorial', () => {
    const templates = [
      ...(/`npx fairvisor init --template[^`]*`[^.]*\./.exec(page.replace(/\s+/g, ' '))?.[0] ?? '').matchAll(/\(`([a-z]+)`\)/g),
    ].map((m) => m[1]!)
    assert.deepEqual(templates.sort(), Object.keys(TEMPLATES).sort())
    assert.match(page, /\(tutorial-first-policy\.md\)/)
  })
})

/** Names of the code's classes (`FairvisorError`), which pages name too and are no alerts. */
const CLASSES = new Set([...read('src/errors.ts').matchAll(/\bclass (Fairvisor\w+)/g)].map((m) => m[1]!))

test('every metric and alert a page names exists: metrics.md lists it (and references.test.ts holds that to /metrics), alerts.yml defines it', () => {
  const metrics = new Set(tables('docs/metrics.md').tables.flatMap((t) => t.rows.map((r) => spans(r[0]!)[0]!)))
  const alerts = new Set([...read('deploy/prometheus/alerts.yml').matchAll(/^\s+- alert: (\w+)$/gm)].map((m) => m[1]!))
  assert.ok(metrics.size >= 30 && alerts.size >= 5)
  const problems: string[] = []
  for (const page of PAGES) {
    const text = read(page).replace(/Replaces `[a-z_]+`/g, '') // a metric's former name
    for (const [name] of text.matchAll(
      /\bfairvisor_[a-z0-9_]+_(?:total|seconds|ratio|active|state|info|bytes|held|remaining|reachable)\b/g,
    )) {
      if (!metrics.has(name.replace(/_(bucket|sum|count)$/, ''))) problems.push(`${page}: ${name}`)
    }
    for (const [name] of text.matchAll(/\bFairvisor[A-Z][A-Za-z]+\b/g))
      if (!alerts.has(name) && !CLASSES.has(name)) problems.push(`${page}: alert ${name}`)
  }
  assert.deepEqual([...new Set(problems)], [])
})
