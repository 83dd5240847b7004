/**
 * `fairvisor test <bundle> --requests <file.jsonl|-> [--format table|json] [--start <UTC time>]`:
 * run sample requests through the real engine and an in-process store, with
 * time driven by the file, and show for each one the policies matched, the
 * limits applied (rule, counter key, cost, tokens left), the rules skipped,
 * the decision, its reason and the response headers.
 *
 * One JSON object per line:
 *   {"method":"GET","path":"/v1/x?a=1","host":"api.example.com","headers":{"x-api-key":"k"},
 *    "query":{"b":"2"},"ip":"10.0.0.1","repeat":3,"at":1.5,"status":401,"hold":2}
 * every field optional (GET, /, localhost, no headers, 127.0.0.1, 1, the previous `at`, 200, 0);
 * `status` is the response the client gets, which rules with count_statuses /
 * refund_statuses settle on; a request in debt (max_delay_ms) is held, and
 * refused past FAIRVISOR_MAX_DELAYED holds still running (test-response.ts);
 * `hold` is how long each request's exchange lasts, which is how long it
 * holds its concurrency slots (test-slots.ts);
 * `at` is seconds after the start and must not go backwards. Blank lines and lines
 * starting with `#` are skipped. The ASN map, GeoIP databases and Tor exit
 * list are read from the same FAIRVISOR_* variables as the gateway's, and
 * the value of every limit key is shown, so an operator sees what was looked
 * up (e.g. ip:country=DE, ua:bot_category=ai_crawler). Bearer tokens are
 * verified with the gateway's JWT settings, at the sample's time: a forged
 * token's claims count here no more than at the gateway, and without a key
 * source each report says its claims were not verified. Exit 0 when every request ran (whatever the
 * decisions), 1 on a bad bundle or a bad line (named), 2 on a bad command line
 * or a bad data-file setting. With `--access-log` it replays a log instead (test-replay.ts).
 */
import { ALGORITHMS } from '../algorithms/index.js'
import { parseTimestamp } from '../bundle/validate.js'
import { bearerToken } from '../request/jwt-verify.js'
import { rawHeader } from '../request/raw-headers.js'
import { parseArgs, readInput, UsageError } from './args.js'
import { NOT_VERIFIED, OfflineGateway } from './test-engine.js'
import { runReplay } from './test-replay.js'
import { type RequestReport, responseHeaders, table } from './test-report.js'
import { LineError, parseSample, type SampleRequest } from './test-samples.js'

const USAGE = 'usage: fairvisor test <bundle> --requests <file.jsonl|-> [--format table|json] [--start 2026-01-01T00:00:00Z]'
export async function run(args: string[]): Promise<number> {
  if (args.some((a) => a === '--access-log' || a.startsWith('--access-log='))) return runReplay(args)
  let bundlePath: string, requestsPath: string, format: string, start: number
  try {
    const a = parseArgs(args, ['requests', 'format', 'start'])
    if (a.positional.length !== 1) throw new UsageError('give exactly one bundle file')
    bundlePath = a.positional[0]!
    const rq = a.options.get('requests')
    if (rq === undefined) throw new UsageError('--requests <file.jsonl> is required')
    requestsPath = rq
    format = a.options.get('format') ?? 'table'
    if (format !== 'table' && format !== 'json') throw new UsageError(`--format must be table or json, not "${format}"`)
    const s = a.options.get('start')
    if (s === undefined) start = Date.now()
    else {
      const t = parseTimestamp(s)
      if (t === undefined) throw new UsageError(`--start must be a UTC time like 2026-01-01T00:00:00Z, not "${s}"`)
      start = t
    }
  } catch (err) {
    if (!(err instanceof UsageError)) throw err
    process.stderr.write(`fairvisor test: ${err.message}\n${USAGE}\n`)
    return 2
  }

  const gw = OfflineGateway.open(bundlePath, start, () => 64 * 1024 * 1024)
  if (typeof gw === 'number') return gw

  // Parse the whole file first, so a bad line fails before any output.
  let text: string
  try {
    text = (await readInput(requestsPath)).toString('utf8')
  } catch (err) {
    process.stderr.write(`fairvisor test: cannot read ${requestsPath} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})\n`)
    return 1
  }
  const samples: SampleRequest[] = []
  const lines = text.split('\n')
  let prevAt = 0
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!.trim()
    if (raw === '' || raw.startsWith('#')) continue
    try {
      const s = parseSample(raw, i + 1, prevAt, gw.paths.encodedSlashes)
      prevAt = s.at
      samples.push(s)
    } catch (err) {
      if (!(err instanceof LineError)) throw err
      process.stderr.write(`fairvisor test: ${requestsPath}:${i + 1}: ${err.message}\n`)
      return 1
    }
  }
  if (samples.length === 0) {
    process.stderr.write(`fairvisor test: ${requestsPath} holds no requests\n`)
    return 1
  }
  if (!gw.verifiesJwt && samples.some((s) => bearerToken(rawHeader(s.input.rawHeaders, 'authorization')) !== undefined))
    process.stderr.write(`warning: ${NOT_VERIFIED}: bearer tokens are decoded, as the gateway would decode them\n`)

  let n = 0
  let allowed = 0
  const out: string[] = []
  const flush = (): void => {
    if (out.length) process.stdout.write(`${out.join('\n')}\n`)
    out.length = 0
  }
  for (const s of samples) {
    for (let k = 0; k < s.repeat; k++) {
      const { decision: d, refused, planned, outcomes, details, skipped, shadowRejects, jwtNote, llm, settled } = await gw.run(s, start)
      n++
      if (d.allowed) allowed++
      const hold = d.delayMs ? { delay_ms: d.delayMs, ...(d.debt ? { debt: true } : {}) } : refused ? { hold_refused: true } : {}
      const slotsHeld = d.allowed && d.held !== undefined ? { slots_held_s: s.hold } : {}
      const report: RequestReport = {
        n,
        line: s.line,
        at: s.at,
        method: s.input.method,
        path: s.target,
        host: s.input.host,
        ip: s.input.peer,
        ...(jwtNote === undefined ? {} : { jwt: jwtNote }),
        matched_policies: d.matchedPolicies,
        limits: planned.map(({ policyId, ruleName, ...l }, i) => {
          const o = outcomes[i]
          const groupRejected = planned.some((p, j) => p.shadow === l.shadow && outcomes[j]?.allowed === false)
          return {
            policy: policyId,
            rule: ruleName,
            ...l,
            outcome: o === undefined ? 'not_evaluated' : o.allowed ? 'allowed' : 'rejected',
            charged: o?.allowed === true && !groupRejected && !(refused && !l.shadow),
            tokens_left: ALGORITHMS.get(l.algorithm)?.testFigure === 'tokens_left' ? o?.value : undefined,
            detail: details[i],
          }
        }),
        descriptors: Object.fromEntries([...(d.descriptors ?? [])].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))),
        skipped,
        shadow_rejects: shadowRejects.map((r) => ({ policy: r.policyId, rule: r.ruleName, key: r.key })),
        decision: d.allowed ? 'allow' : d.status === 503 ? 'error' : 'reject',
        status: d.status,
        reason: d.reason,
        policy: d.policyId,
        rule: d.ruleName,
        headers: Object.fromEntries(responseHeaders(d)),
        ...hold,
        ...slotsHeld,
        ...(llm ? { llm } : {}),
        ...(settled ? { response_status: s.status, status_settlement: settled } : {}),
      }
      out.push(format === 'json' ? JSON.stringify(report) : table(report))
      if (out.length >= 256) flush()
    }
  }
  if (format === 'table') out.push(`${n} request${n === 1 ? '' : 's'}: ${allowed} allowed, ${n - allowed} rejected`)
  flush()
  await gw.close()
  return 0
}
