/**
 * docs/architecture.md names only what exists, so a newcomer who follows it
 * lands on real code:
 * - every file it names (`src/…`, `test/…`, or a path under src/ such as
 *   `store/remote.ts`, a bare `cli.ts`) exists, and every folder it names in
 *   code (`store/memory/`) is a folder of src/ (or of the repository);
 * - every symbol it names in code is declared: a call (`bundleSchema()`,
 *   `apply(checks, now, done)`), a type or class (`RuleAlgorithm`), a
 *   camelCase member (`keyPrefix`) in src/ or test/ (or a `$defs` name of
 *   schemas/), a CONSTANT in src/;
 *   a symbol written after its file (`respond.ts writeDecision`,
 *   `` `src/main.ts` `createStore` ``) is declared in that file.
 * Placeholders (`<name>`) and plain words (`lease`, a bundle field) are not checked.
 */
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import { describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const DOC = readFileSync(join(ROOT, 'docs/architecture.md'), 'utf8')

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  )
}
const SRC = tsFiles(join(ROOT, 'src'))
const TESTS = tsFiles(join(ROOT, 'test'))
/** The JSON Schemas in schemas/: the page names some of their `$defs`. */
const SCHEMAS = readdirSync(join(ROOT, 'schemas'))
  .filter((f) => f.endsWith('.json'))
  .map((f) => readFileSync(join(ROOT, 'schemas', f), 'utf8'))
const text = new Map<string, string>()
const read = (file: string): string => {
  let t = text.get(file)
  if (t === undefined) text.set(file, (t = readFileSync(file, 'utf8')))
  return t
}

/** The fenced code blocks, and the inline code spans of the rest. */
const FENCED = /^```[^\n]*\n([\s\S]*?)^```$/gm
const blocks = [...DOC.matchAll(FENCED)].map((m) => m[1]!)
const prose = DOC.replace(FENCED, '')
// A span may wrap onto the next line.
const spans = [...prose.matchAll(/`([^`]+)`/g)].map((m) => m[1]!.replace(/\s*\n\s*/g, ' '))

const PATH = /(?<![\w/.$<>*-])((?:[\w-]+\/)*[\w.-]+\.ts)\b/g
const FOLDER = /^(?:[\w-]+\/)+$/
const IDENT = '[A-Za-z_$][\\w$]*'

/** Where a named file is: from the repository root (`src/…`, `test/…`), else under src/, else (a bare name) any src file of that name. */
function resolveFile(path: string): string | undefined {
  if (path.startsWith('src/') || path.startsWith('test/')) return existsSync(join(ROOT, path)) ? join(ROOT, path) : undefined
  if (path.includes('/')) return existsSync(join(ROOT, 'src', path)) ? join(ROOT, 'src', path) : undefined
  const found = SRC.filter((f) => f.endsWith(`/${path}`))
  return found.length === 1 ? found[0] : undefined
}

/** `name` is declared in `file`: a function, class, interface, type, enum or variable, or a member (method, property). */
function declares(file: string, name: string): boolean {
  const n = name.replace(/\$/g, '\\$')
  const decl = new RegExp(`\\b(?:function\\*?|class|interface|type|enum|const|let|var|namespace)\\s+${n}\\b`)
  const member = new RegExp(
    `^\\s*(?:(?:export|readonly|private|protected|public|static|async|get|set|abstract|declare|override)\\s+)*${n}\\??\\s*[(<:=]`,
    'm',
  )
  const t = read(file)
  return decl.test(t) || member.test(t)
}

const declaredIn = (files: string[], name: string): boolean => files.some((f) => declares(f, name))

interface Named {
  path?: string
  symbol?: string
  kind: 'file' | 'folder' | 'symbol'
  name: string
}

/** Everything the page names that the test checks. */
function named(): Named[] {
  const out: Named[] = []
  const texts = [...blocks, ...spans]
  for (const t of texts) for (const m of t.matchAll(PATH)) out.push({ kind: 'file', name: m[1]! })
  for (const s of spans) if (FOLDER.test(s)) out.push({ kind: 'folder', name: s })
  // Folders in the drawings, e.g. "(llm/dialects/)": a word, a slash, …, a slash, then a space or a bracket.
  for (const b of blocks) for (const m of b.matchAll(/(?<=[\s(])((?:[a-z][\w-]*\/)+)(?=[\s),])/g)) out.push({ kind: 'folder', name: m[1]! })
  // `file.ts symbol` in a span, `(file.ts symbol)` in a drawing, and a span of a file followed by a span of a symbol.
  const pairs = [
    ...spans.flatMap((s) => [...s.matchAll(new RegExp(`^([\\w/.-]+\\.ts) (${IDENT})$`, 'g'))]),
    ...blocks.flatMap((b) => [...b.matchAll(new RegExp(`\\(([\\w/.-]+\\.ts) (${IDENT})\\)`, 'g'))]),
    ...prose.matchAll(new RegExp(`\`([\\w/.-]+\\.ts)\` \`(${IDENT})\``, 'g')),
  ]
  for (const m of pairs) out.push({ kind: 'symbol', path: m[1]!, symbol: m[2]!, name: `${m[1]} ${m[2]}` })
  for (const s of spans) {
    // A call (`apply(checks, now, done)`, `registerAlgorithm(<NAME>)`), or a whole span that is a type, a camelCase or a CONSTANT name.
    const call = new RegExp(`^(${IDENT})\\(`).exec(s)
    const word = new RegExp(`^${IDENT}$`).test(s) ? s : undefined
    const symbol =
      call?.[1] ?? (word && (/^[A-Z][a-z]/.test(word) || /[a-z][A-Z]/.test(word) || /^[A-Z][A-Z0-9_]{2,}$/.test(word)) ? word : undefined)
    if (symbol !== undefined) out.push({ kind: 'symbol', symbol, name: s })
  }
  return out
}

describe('docs/architecture.md', () => {
  const all = named()

  test('names enough to be checked (the extraction itself works)', () => {
    assert.ok(all.filter((n) => n.kind === 'file').length >= 40)
    assert.ok(all.filter((n) => n.kind === 'folder').length >= 4)
    assert.ok(all.filter((n) => n.kind === 'symbol' && n.path !== undefined).length >= 3)
    assert.ok(all.filter((n) => n.kind === 'symbol' && n.path === undefined).length >= 20)
  })

  test('every file and folder it names exists', () => {
    const missing = all.filter((n) => {
      if (n.kind === 'file') return resolveFile(n.name) === undefined
      if (n.kind === 'folder') {
        const dir = [join(ROOT, 'src', n.name), join(ROOT, n.name)].find((d) => existsSync(d))
        return dir === undefined || !statSync(dir).isDirectory()
      }
      return false
    })
    assert.deepEqual(
      missing.map((n) => n.name),
      [],
      'named by docs/architecture.md but not in the repository',
    )
  })

  test('every symbol it names is declared (in the file it is written after, if any)', () => {
    const missing = all.filter((n) => {
      if (n.kind !== 'symbol') return false
      const symbol = n.symbol!
      if (n.path !== undefined) {
        const file = resolveFile(n.path)
        return file === undefined || !declares(file, symbol)
      }
      // Constants may be string values (FV_ codes, settings); the rest must be declarations.
      if (/^[A-Z][A-Z0-9_]+$/.test(symbol)) return !SRC.some((f) => new RegExp(`\\b${symbol}\\b`).test(read(f)))
      return !declaredIn(SRC, symbol) && !declaredIn(TESTS, symbol) && !SCHEMAS.some((t) => t.includes(`"${symbol}":`))
    })
    assert.deepEqual(
      missing.map((n) => (n.path === undefined ? n.name : `${n.symbol} (in ${relative(ROOT, resolveFile(n.path) ?? n.path)})`)),
      [],
      'named by docs/architecture.md but declared nowhere (or not in the file named)',
    )
  })
})
