/**
 * docs/envoy-grpc.md's migration tables, row by row: every test a row names
 * exists and names what the row is about (one of its settings or keys), and
 * every setting a row says is not read is read nowhere in src/ (so the table
 * cannot claim a switch the code ignores, nor ignore one the code reads).
 */
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { ROOT } from '../helpers/processes.js'

const doc = readFileSync(join(ROOT, 'docs/envoy-grpc.md'), 'utf8')
const section = doc.slice(doc.indexOf('## Migrating from envoyproxy/ratelimit'))

interface Row {
  cells: string[]
  line: string
}

/** The rows of every three-column table of the section whose last column is "tested in". */
function rows(): Row[] {
  const out: Row[] = []
  let inTable = false
  for (const line of section.split('\n')) {
    if (!line.startsWith('|')) {
      inTable = false
      continue
    }
    const cells = line
      .slice(1, -1)
      .split(' | ')
      .map((c) => c.trim())
    if (cells[2] === 'tested in') inTable = true
    else if (inTable && !/^-+$/.test(cells[0]!.replace(/\|/g, ''))) out.push({ cells, line })
  }
  return out
}

const ticked = (cell: string): string[] => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!)

/** Names a row is about: settings (upper case) and configuration keys (their last segment), not values. */
function names(row: Row): string[] {
  const of = [...ticked(row.cells[0]!), ...ticked(row.cells[1]!)].map((t) => t.split('=')[0]!)
  return of
    .filter((t) => /^[A-Za-z_][A-Za-z0-9_.]*$/.test(t) && !['true', 'false', 'memory', 'OK', 'UNKNOWN'].includes(t))
    .flatMap((t) => [t, t.split('.').at(-1)!])
    .filter((t) => t.length >= 5)
}

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f)
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : []
  })
}
const src = sources(join(ROOT, 'src'))
  .map((f) => readFileSync(f, 'utf8'))
  .join('\n')

describe('docs/envoy-grpc.md migration tables', () => {
  const all = rows()
  test('has its setting and key tables', () => {
    assert.ok(all.length >= 30, `only ${all.length} rows`)
    for (const must of [
      'RUNTIME_ROOT',
      'STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT',
      'SHADOW_MODE',
      'USE_STATSD',
      'share_threshold',
      'metadata',
    ])
      assert.ok(
        all.some((r) => r.cells[0]!.includes(`\`${must}`)),
        must,
      )
  })
  for (const row of all) {
    const [what, , testedIn] = row.cells
    if (testedIn === 'not read')
      test(`not read: ${what}`, () => {
        const settings = ticked(what!).filter((t) => /^[A-Z][A-Z0-9_]+$/.test(t))
        assert.ok(settings.length > 0, row.line)
        for (const s of settings) assert.ok(!src.includes(`'${s}'`) && !src.includes(`"${s}"`), `${s} is read in src/`)
      })
    else
      test(`tested: ${what}`, () => {
        const files = ticked(testedIn!)
        assert.ok(files.length > 0, `no test named: ${row.line}`)
        const texts = files.map((f) => {
          assert.ok(f.startsWith('test/') && existsSync(join(ROOT, f)), `${f} does not exist`)
          return readFileSync(join(ROOT, f), 'utf8')
        })
        const wanted = names(row)
        // A row about a behaviour rather than a name (a rejected call's counts) is held by its tests alone.
        if (wanted.length > 0)
          assert.ok(
            wanted.some((n) => texts.some((t) => t.includes(n))),
            `none of ${files.join(', ')} names any of ${wanted.join(', ')}`,
          )
      })
  }
})
