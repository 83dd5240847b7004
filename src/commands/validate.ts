/**
 * `fairvisor validate <file|->... [--format text|json] [--key-file K] [--mode M] [--grpc]`:
 * load a bundle exactly as the gateway would and say what it would do with it. Several
 * files are checked one after the other (json: one object per line, in order);
 * the exit code is the worst of them. With --key-file the files must be in the
 * signed form under that key, as for a gateway run with
 * FAIRVISOR_BUNDLE_SIGNING_KEY. With --mode (default: FAIRVISOR_MODE, else
 * reverse_proxy) as for a gateway in that mode, and --grpc (default:
 * FAIRVISOR_GRPC_PORT set) as for one whose gRPC listener decides on the
 * bundle too: rules that act on the response (count_statuses,
 * refund_statuses) need the reverse proxy, and a `concurrency` rule giving
 * its slot back at the end of a request is refused where no end is seen.
 *
 * Exit 0: it loads whole (warnings such as a fixed_cost above burst are
 * printed and do not fail). Exit 1: it is rejected, or one of its policies fails —
 * a reload refuses such a bundle whole, and at start-up the gateway loads it
 * without those policies; either way an operator wants to see it before
 * shipping. Exit 2: bad command line.
 */
import { loadBundleBytes, loadBundleFile, type LoadOptions, type LoadResult } from '../bundle/load.js'
import { readKeyFile } from '../bundle/signature.js'
import { SettingError } from '../errors.js'
import { modeSetting } from '../settings.js'
import { optional } from '../settings-env.js'
import { parseArgs, readInput, UsageError } from './args.js'

export const USAGE =
  'usage: fairvisor validate <file|->... [--format text|json] [--key-file <file>] [--mode reverse_proxy|decision_service] [--grpc]'

function policyLines(r: Extract<LoadResult, { ok: true }>): string[] {
  return r.bundle.policies.map((p) => {
    const rules = [...p.rules, ...(p.fallback ? [{ ...p.fallback, name: `${p.fallback.name} (fallback)` }] : [])]
    const list = rules.map((x) => `${x.name} ${x.algorithmName}${x.supported ? '' : ' [skipped: not supported yet]'}`).join(', ')
    return `  policy "${p.id}" (${p.shadow ? 'shadow' : 'enforce'}): ${rules.length} rule${rules.length === 1 ? '' : 's'}${list ? `: ${list}` : ''}`
  })
}

export async function run(args: string[]): Promise<number> {
  let paths: string[]
  let format: string
  let keyFile: string | undefined
  let mode: LoadOptions['mode']
  let grpc: boolean
  try {
    const a = parseArgs(args, ['format', 'key-file', 'mode'], ['grpc'])
    keyFile = a.options.get('key-file')
    const m = a.options.get('mode')
    if (m !== undefined && m !== 'reverse_proxy' && m !== 'decision_service')
      throw new UsageError(`--mode must be reverse_proxy or decision_service, not "${m}"`)
    mode = m ?? modeSetting()
    format = a.options.get('format') ?? 'text'
    if (format !== 'text' && format !== 'json') throw new UsageError(`--format must be text or json, not "${format}"`)
    grpc = a.flags.has('grpc') || optional(process.env, 'FAIRVISOR_GRPC_PORT') !== undefined
    if (a.positional.length === 0) throw new UsageError('give a bundle file, or - for standard input')
    if (a.positional.filter((p) => p === '-').length > 1) throw new UsageError('standard input (-) can be read once')
    paths = a.positional
  } catch (err) {
    if (err instanceof SettingError) {
      process.stderr.write(`fairvisor validate: invalid setting ${err.message}\n`)
      return 2
    }
    if (!(err instanceof UsageError)) throw err
    process.stderr.write(`fairvisor validate: ${err.message}\n${USAGE}\n`)
    return 2
  }
  let signingKey: string | undefined
  try {
    signingKey = keyFile === undefined ? undefined : readKeyFile(keyFile)
  } catch (err) {
    process.stderr.write(`fairvisor validate: ${(err as Error).message}\n`)
    return 1
  }
  let code = 0
  for (const path of paths) code = Math.max(code, await validateOne(path, format, { signingKey, mode, grpc }))
  return code
}

async function validateOne(path: string, format: string, opts: LoadOptions): Promise<number> {
  const now = Date.now()
  const signingKey = opts.signingKey
  let r: LoadResult
  if (path === '-') r = loadBundleBytes(await readInput('-'), '<stdin>', now, opts)
  else r = loadBundleFile(path, now, opts)

  const ok = r.ok && r.dropped.length === 0
  if (format === 'json') {
    const out = r.ok
      ? { ok, file: r.file, errors: [], warnings: r.warnings, dropped: r.dropped, summary: r.summary }
      : { ok, file: r.file, errors: r.errors, warnings: [], dropped: [], summary: null }
    process.stdout.write(`${JSON.stringify(out)}\n`)
    return ok ? 0 : 1
  }

  if (!r.ok) {
    for (const e of r.errors) process.stderr.write(`error: ${e}\n`)
    process.stderr.write(
      `${r.file}: invalid: ${r.errors.length} error${r.errors.length === 1 ? '' : 's'}; the gateway would keep its current bundle\n`,
    )
    return 1
  }
  const s = r.summary
  const algos = Object.entries(s.algorithms)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ')
  const lines = [
    `${r.file}: bundle_version ${s.version}, ${s.policies} polic${s.policies === 1 ? 'y' : 'ies'}, ${s.rules} rule${s.rules === 1 ? '' : 's'}${algos ? ` (${algos})` : ''}`,
    ...policyLines(r),
    ...(signingKey === undefined ? [] : ['  signature: valid under the given key']),
    ...r.warnings.map((w) => `warning: ${w}`),
  ]
  process.stdout.write(`${lines.join('\n')}\n`)
  if (r.dropped.length) {
    for (const d of r.dropped) process.stderr.write(`error: ${d}\n`)
    process.stderr.write(
      `${r.file}: ${r.dropped.length} error${r.dropped.length === 1 ? '' : 's'} in policies: as a reload the gateway refuses this bundle whole and keeps the loaded one; at start-up (nothing loaded yet) it loads the bundle without the policies named above\n`,
    )
    return 1
  }
  process.stdout.write(`ok${r.warnings.length ? ` (${r.warnings.length} warning${r.warnings.length === 1 ? '' : 's'})` : ''}\n`)
  return 0
}
