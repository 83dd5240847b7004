/**
 * Load a bundle from a file (or a directory holding one) without throwing:
 * read → (check the signature) → parse → validate → drop bad policies →
 * compile. The result says exactly what was dropped and why, so a reload can
 * log it and keep the old bundle on failure.
 */
import { BundleError } from '../errors.js'
import { createHash } from 'node:crypto'
import { readdirSync, readFileSync, statSync, type Stats } from 'node:fs'
import { join } from 'node:path'
import { compileBundle, type CompiledBundle } from './compile.js'
import type { GatewayMode, RawBundle, RawPolicy } from './types.js'
import { verifySigned } from './signature.js'
import { formatIssue, validateBundle, type BundleIssue } from './validate.js'

export interface LoadOptions {
  /** When set, only bundles in the signed form (see signature.ts) under this key load. */
  signingKey?: string
  /** FAIRVISOR_MODE (default reverse_proxy): rules that act on the response are refused in decision_service mode. */
  mode?: GatewayMode
  /** FAIRVISOR_GRPC_PORT is set: ext_authz and the Rate Limit Service decide on the bundle too (a rule needing a request's end is refused). */
  grpc?: boolean
}

export interface BundleSummary {
  version: number
  policies: number
  rules: number
  algorithms: Record<string, number>
}

export type LoadResult =
  | {
      ok: true
      bundle: CompiledBundle
      summary: BundleSummary
      warnings: string[]
      dropped: string[]
      file: string
      /** What validation found in these bytes (warnings and dropped policies): a thread building them again needs no validator. */
      issues: BundleIssue[]
    }
  | { ok: false; errors: string[]; issues: BundleIssue[]; file: string }

/** A directory is accepted when it holds one bundle: bundle.json, or its only *.json file. */
export function resolveBundleFile(path: string): string {
  let st: Stats
  try {
    st = statSync(path)
  } catch {
    return path
  }
  if (!st.isDirectory()) return path
  const names = readdirSync(path).filter((n) => n.endsWith('.json') && !n.startsWith('.'))
  if (names.includes('bundle.json')) return join(path, 'bundle.json')
  if (names.length === 1) return join(path, names[0]!)
  throw new BundleError(`directory ${path} must hold bundle.json or exactly one .json file (found ${names.length})`)
}

export function bundleHash(bytes: Buffer): string {
  return createHash('sha1').update(bytes).digest('base64')
}

function fail(file: string, message: string, pointer = ''): LoadResult {
  const issue = { pointer, message }
  return { ok: false, errors: [formatIssue(file, issue)], issues: [issue], file }
}

/**
 * Parse and compile bytes already read (the CLI's `validate -` reads stdin). `now` is epoch ms.
 * The bundle's hash is always that of the exact bytes given, signature line included.
 * `validated`: the issues another thread's validation of the same bytes, `now` and options found
 * (a worker building what its supervisor accepted): validation is pure, so it is not run again,
 * and a worker never loads or compiles the JSON Schema validator (several MiB per thread).
 */
export function loadBundleBytes(
  bytes: Buffer,
  file: string,
  now: number,
  opts: LoadOptions = {},
  validated?: readonly BundleIssue[],
): LoadResult {
  let json = bytes
  if (opts.signingKey !== undefined) {
    const v = verifySigned(bytes, opts.signingKey)
    if (!v.ok) return fail(file, v.message)
    json = v.body
  }
  let doc: unknown
  try {
    // A UTF-8 byte-order mark (editors on Windows add one) is not part of the JSON text.
    doc = JSON.parse(json.toString('utf8').replace(/^\uFEFF/, ''))
  } catch (err) {
    return fail(file, `the file is not valid JSON (${(err as Error).message.replace(/\s+/g, ' ').trim()})`)
  }
  const issues = validated ?? validateBundle(doc, now, opts.mode, opts.grpc)
  const fatal = issues.filter((i) => i.policyIndex === undefined && !i.warning)
  if (fatal.length) {
    // Report every error, the policies' too, so one round of fixes is enough.
    const errors = issues.filter((i) => !i.warning)
    return { ok: false, errors: errors.map((i) => formatIssue(file, i)), issues: errors, file }
  }

  const raw = doc as RawBundle
  const dropIndexes = new Set(issues.filter((i) => !i.warning && i.policyIndex !== undefined).map((i) => i.policyIndex))
  const dropped = issues.filter((i) => !i.warning).map((i) => formatIssue(file, i))
  const warnings = issues.filter((i) => i.warning).map((i) => formatIssue(file, i))

  // Duplicate ids: the last one wins (docs/behaviour.md §2).
  const byId = new Map<string, { policy: RawPolicy; index: number }>()
  raw.policies.forEach((policy, index) => {
    if (dropIndexes.has(index)) return
    const prev = byId.get(policy.id)
    if (prev)
      warnings.push(
        formatIssue(file, {
          pointer: `/policies/${index}`,
          policyId: policy.id,
          message: `duplicate policy id; it replaces the policy at /policies/${prev.index}`,
        }),
      )
    byId.set(policy.id, { policy, index })
  })
  const policies = [...byId.values()].map((v) => v.policy)

  // Rule names are global: same-named rules share counters (kept from Fairvisor), so say so.
  const owner = new Map<string, string>()
  for (const p of policies) {
    for (const r of p.spec.rules) {
      const first = owner.get(r.name!)
      if (first !== undefined && first !== p.id)
        warnings.push(`${file}: rule name "${r.name}" is used by policies "${first}" and "${p.id}"; they share counters`)
      else owner.set(r.name!, p.id)
    }
  }

  const bundle = compileBundle(raw, policies, { hash: bundleHash(bytes), loadedAt: Math.floor(now / 1000), source: file })
  const algorithms: Record<string, number> = {}
  let rules = 0
  for (const p of policies) {
    for (const r of [...p.spec.rules, ...(p.spec.fallback_limit ? [p.spec.fallback_limit] : [])]) {
      rules++
      algorithms[r.algorithm] = (algorithms[r.algorithm] ?? 0) + 1
    }
  }
  return {
    ok: true,
    bundle,
    summary: { version: raw.bundle_version, policies: policies.length, rules, algorithms },
    warnings,
    dropped,
    file,
    issues: [...issues],
  }
}

export function loadBundleFile(path: string, now: number, opts: LoadOptions = {}): LoadResult {
  let file = path
  let bytes: Buffer
  try {
    file = resolveBundleFile(path)
    bytes = readFileSync(file)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    return fail(file, code === 'ENOENT' ? 'the file does not exist (ENOENT)' : `cannot be read (${code ?? (err as Error).message})`)
  }
  return loadBundleBytes(bytes, file, now, opts)
}
