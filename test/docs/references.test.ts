/**
 * The reference pages cannot drift from the code:
 * - docs/configuration.md lists exactly the FAIRVISOR_* settings the code
 *   reads (src/settings.ts, any other process.env read) and the ones
 *   `fairvisor --help` prints, with the same defaults;
 * - docs/reject-reasons.md lists exactly the decision reasons of the
 *   engine's Reason type (the algorithms' RejectReason among the refused);
 * - docs/metrics.md lists exactly the metrics a running gateway's /metrics
 *   exports, with their types and label names.
 * A new setting, reason or metric fails here until it is documented.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { before, describe, test } from 'node:test'
import ts from 'typescript'
import { LLM_REJECTS } from '../../src/algorithms/llm-messages.js'
import { createMetrics } from '../../src/observe/metrics.js'
import { ROOT } from '../helpers/processes.js'
import { scrapeBusyGateway, type Scrape } from '../helpers/scrape-gateway.js'
import { settingsHelp, settingsRead } from '../helpers/settings-names.js'

const doc = (name: string): string => readFileSync(join(ROOT, 'docs', name), 'utf8')

/** Table rows whose first cell is a code span: first cell (no backticks) → the other cells. */
function rows(markdown: string): Map<string, string[]> {
  const out = new Map<string, string[]>()
  for (const line of markdown.split('\n')) {
    const m = /^\| `([^`]+)` \|(.*)\|$/.exec(line)
    if (!m) continue
    assert.ok(!out.has(m[1]!), `${m[1]} is listed twice`)
    out.set(
      m[1]!,
      m[2]!.split(' | ').map((c) => c.trim()),
    )
  }
  return out
}

function sameSet(documented: Iterable<string>, actual: Iterable<string>, what: string): void {
  const d = new Set(documented)
  const a = new Set(actual)
  const missing = [...a].filter((x) => !d.has(x))
  const unknown = [...d].filter((x) => !a.has(x))
  assert.deepEqual(
    { missing, unknown },
    { missing: [], unknown: [] },
    `${what}: "missing" are not documented, "unknown" are documented but not in the code`,
  )
}

// index.ts imports every rule algorithm, the guards are compiled apart: each file adds its reject reasons to RejectReasons by declaration merging.
const TYPE_FILES = [
  'src/engine/decision.ts',
  'src/algorithms/algorithm.ts',
  'src/algorithms/index.ts',
  'src/request/target.ts',
  'src/algorithms/loop-detection.ts',
  'src/algorithms/circuit-breaker.ts',
  'src/algorithms/rls-limit.ts',
]
let program: ts.Program | undefined

/** String literal members of a union type alias, as the TypeScript checker resolves it. */
function unionMembers(file: string, alias: string): string[] {
  const path = join(ROOT, file)
  // One program for both files: building it is the slow part.
  program ??= ts.createProgram(
    TYPE_FILES.map((f) => join(ROOT, f)),
    {
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      strict: true,
      noEmit: true,
    },
  )
  const checker = program.getTypeChecker()
  const source = program.getSourceFile(path)!
  const decl = source.statements.find((s): s is ts.TypeAliasDeclaration => ts.isTypeAliasDeclaration(s) && s.name.text === alias)
  assert.ok(decl, `no type ${alias} in ${file}`)
  const type = checker.getTypeAtLocation(decl.name)
  const members = type.isUnion() ? type.types : [type]
  return members.map((t) => {
    assert.ok(t.isStringLiteral(), `${alias} has a member that is not a string literal: ${checker.typeToString(t)}`)
    return t.value
  })
}

describe('docs/configuration.md', () => {
  const table = rows(doc('configuration.md'))

  test('documents every setting the code reads, and no other', () => {
    sameSet(table.keys(), settingsRead(), 'settings')
  })

  test('agrees with `fairvisor --help`: same settings, same defaults', () => {
    const help = settingsHelp()
    sameSet(table.keys(), help.keys(), 'settings in --help')
    for (const [name, [dflt]] of table) assert.equal(dflt!.replaceAll('`', ''), help.get(name), `${name}: default`)
  })
})

describe('docs/reject-reasons.md', () => {
  const text = doc('reject-reasons.md')
  const table = rows(text)
  const refused = rows(text.slice(text.indexOf('## Refused'), text.indexOf('## Allowed')))

  test('lists every reason a decision can carry, and no other', () => {
    sameSet(table.keys(), unionMembers('src/engine/decision.ts', 'Reason'), 'reasons')
  })

  test('every reason a limit can reject with is among the refused, with status 429 (an LLM request too large for its rule 400, a counter past the retry bound also 403); a refused target with 400', () => {
    const limits = unionMembers('src/algorithms/algorithm.ts', 'RejectReason')
    assert.ok(limits.length >= 8)
    const llm = LLM_REJECTS as Readonly<Record<string, { tooLarge: boolean }>>
    for (const r of limits) {
      // budget_exceeded: a budget in money past the retry bound is also a 403 (engine/llm-reject.ts).
      const want = r === 'budget_exceeded' ? '429, 403' : llm[r] === undefined ? '429' : llm[r].tooLarge ? '400' : '429, 403'
      assert.equal(refused.get(r)?.[0], want, `${r} is not a documented ${want}`)
    }
    for (const r of unionMembers('src/request/target.ts', 'TargetRefusal'))
      assert.equal(refused.get(r)?.[0], '400', `${r} is not a documented 400`)
    for (const [r, [status]] of table) assert.ok(['200', '400', '429', '429, 403', '503'].includes(status!), `${r}: status ${status}`)
  })
})

describe('docs/metrics.md against a running gateway', () => {
  const table = rows(doc('metrics.md'))
  let scrape: Scrape
  before(async () => {
    scrape = await scrapeBusyGateway()
  })

  test('lists every metric /metrics exports, and no other, with its type', () => {
    sameSet(table.keys(), scrape.families.keys(), 'metrics')
    for (const [name, type] of scrape.families) assert.equal(table.get(name)?.[0], type, `${name}: type`)
  })

  test("lists each metric's labels", () => {
    const documented = (name: string): string[] => {
      const cell = table.get(name)?.[1] ?? ''
      return cell === '—' ? [] : [...cell.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]!)
    }
    for (const m of createMetrics().registry.getMetricsAsArray()) {
      const own = (m as unknown as { labelNames?: string[] }).labelNames ?? []
      assert.deepEqual(documented(m.name), [...own], `${m.name}: labels`)
    }
    // And the scrape itself carries no label the page does not name (le of histograms aside).
    for (const line of scrape.text.split('\n')) {
      const m = /^(fairvisor_[a-z0-9_]+?)(?:_bucket|_sum|_count)?\{(.*)\} /.exec(line)
      if (!m) continue
      const family = scrape.families.has(m[1]!) ? m[1]! : line.slice(0, line.indexOf('{')).replace(/_(bucket|sum|count)$/, '')
      for (const [, label] of m[2]!.matchAll(/([a-z_]+)="/g)) {
        if (label !== 'le') assert.ok(documented(family).includes(label!), `${family}: label ${label} is not documented`)
      }
    }
  })
})
