/**
 * `fairvisor test <bundle> --access-log <file|-> [--format nginx-combined|json-lines] [--host <name>] [--top <n>] [--json]`:
 * replay an access log (test-access-log.ts reads its lines) through the same
 * offline gateway as sample requests (test-engine.ts) and print what the
 * bundle would have rejected (test-replay-report.ts), so a limit is sized on
 * last week's traffic before it ships, even in shadow.
 *
 * The engine's clock is the log's: each request is decided at the time it was
 * logged, never at the wall clock's, so a week of log replays in as long as
 * the machine takes to read it and decides as it would have in real time
 * (there is no pacing to choose: nothing but the logged times reaches the
 * engine). A line logged earlier than the line above it (nginx writes a line
 * when its request ends, so a slow request lands behind faster ones) is
 * replayed at that line's time: the clock never goes back. The file is read
 * line by line (a `.gz` one decompressed as it is read), so memory stays
 * bounded whatever its length. A line that cannot be read is counted, the
 * first few are shown with their numbers, and the replay goes on.
 *
 * Exit 0 when the log was replayed (whatever it would have rejected), 1 on a
 * bad bundle, a file that cannot be read or a log without one readable
 * request, 2 on a bad command line or setting.
 */
import { open } from 'node:fs/promises'
import { createInterface } from 'node:readline'
import type { Readable } from 'node:stream'
import { createGunzip } from 'node:zlib'
import { clock } from '../clock.js'
import { bearerToken } from '../request/jwt-verify.js'
import { rawHeader } from '../request/raw-headers.js'
import { size } from '../settings-env.js'
import { parseArgs, UsageError } from './args.js'
import { LOG_FORMATS, type LogFormat, parseLogLine } from './test-access-log.js'
import { NOT_VERIFIED, OfflineGateway } from './test-engine.js'
import { ReplayReport, replayText } from './test-replay-report.js'
import { LineError, sampleOf } from './test-samples.js'

const USAGE =
  'usage: fairvisor test <bundle> --access-log <file|-> [--format nginx-combined|json-lines] [--host <name>] [--top <n>] [--json]'

interface Options {
  bundle: string
  log: string
  format: LogFormat
  host: string
  top: number
  json: boolean
}

function options(args: string[]): Options {
  const a = parseArgs(args, ['access-log', 'format', 'host', 'top', 'requests', 'start', 'speed'], ['json'])
  if (a.options.has('requests')) throw new UsageError('give --access-log or --requests, not both')
  if (a.options.has('start')) throw new UsageError('--start does not go with --access-log: a replay runs on the times the log gives')
  if (a.options.has('speed'))
    throw new UsageError('--speed: a replay runs as fast as it can on the times the log gives, which is all the engine sees')
  if (a.positional.length !== 1) throw new UsageError('give exactly one bundle file')
  const format = a.options.get('format') ?? 'nginx-combined'
  if (!(LOG_FORMATS as readonly string[]).includes(format))
    throw new UsageError(`--format must be ${LOG_FORMATS.join(' or ')} with --access-log, not "${format}"`)
  const top = a.options.get('top') ?? '10'
  if (!/^\d+$/.test(top) || Number(top) < 1 || Number(top) > 1000)
    throw new UsageError(`--top must be an integer from 1 to 1000, not "${top}"`)
  return {
    bundle: a.positional[0]!,
    log: a.options.get('access-log')!,
    format: format as LogFormat,
    host: a.options.get('host') ?? 'localhost',
    top: Number(top),
    json: a.flags.has('json'),
  }
}

/** The streams the log is read through (standard input for `-`), the lines' last; rejects when the file cannot be opened. */
async function input(path: string): Promise<Readable[]> {
  const raw = path === '-' ? process.stdin : (await open(path)).createReadStream()
  return path.endsWith('.gz') ? [raw, raw.pipe(createGunzip())] : [raw]
}

/** Replays one line of the log (`n`: its number): counted, decided on the log's clock, reported. */
function replayer(gw: OfflineGateway, o: Options, report: ReplayReport): (text: string, n: number) => Promise<void> {
  let start: number | undefined
  /** The log's clock: the latest time a line gave (epoch ms). */
  let logClock = Number.NEGATIVE_INFINITY
  let warned = gw.verifiesJwt
  return async (text, n) => {
    const raw = text.trim()
    if (raw === '') return
    report.line()
    try {
      const logged = parseLogLine(o.format, raw, o.host)
      start ??= logged.time
      if (logged.time < logClock) report.lateLine((logClock - logged.time) / 1000)
      logClock = Math.max(logClock, logged.time)
      const at = (logClock - start) / 1000
      const s = sampleOf({ ...logged.fields, at }, n, at, gw.paths.encodedSlashes)
      if (!warned && bearerToken(rawHeader(s.input.rawHeaders, 'authorization')) !== undefined) {
        warned = true
        process.stderr.write(`warning: ${NOT_VERIFIED}: bearer tokens are decoded, as the gateway would decode them\n`)
      }
      report.request(s, logClock, await gw.run(s, start))
    } catch (err) {
      if (!(err instanceof LineError)) throw err
      report.malformedLine(n, err.message)
    }
  }
}

export async function runReplay(args: string[]): Promise<number> {
  let o: Options
  try {
    o = options(args)
  } catch (err) {
    if (!(err instanceof UsageError)) throw err
    process.stderr.write(`fairvisor test: ${err.message}\n${USAGE}\n`)
    return 2
  }
  // The bundle is loaded (its expiry checked) now, as validate loads it: it is the one about to ship.
  // The in-process store the gateway would run with (FAIRVISOR_SHARED_DICT_SIZE): a log whose live counters fill it shows store_full.
  const gw = OfflineGateway.open(o.bundle, clock(), () => size(process.env, 'FAIRVISOR_SHARED_DICT_SIZE', '128m'))
  if (typeof gw === 'number') return gw
  let streams: Readable[]
  try {
    streams = await input(o.log)
  } catch (err) {
    process.stderr.write(`fairvisor test: cannot read ${o.log} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})\n`)
    await gw.close()
    return 1
  }
  const lines = createInterface({ input: streams.at(-1)!, crlfDelay: Number.POSITIVE_INFINITY })
  let failure: Error | undefined
  for (const s of streams)
    s.on('error', (err: Error) => {
      failure ??= err
      lines.close()
    })

  const report = new ReplayReport(o.log, o.format, o.top)
  const replay = replayer(gw, o, report)
  let n = 0
  try {
    for await (const text of lines) await replay(text, ++n)
  } catch (err) {
    if (failure === undefined) throw err // a stream's error ends the loop; it is reported below
  }
  await gw.close()
  if (failure !== undefined) {
    process.stderr.write(
      `fairvisor test: cannot read ${o.log} past line ${n} (${(failure as NodeJS.ErrnoException).code ?? failure.message})\n`,
    )
    return 1
  }
  const summary = report.summary()
  process.stdout.write(o.json ? `${JSON.stringify(summary)}\n` : replayText(summary))
  if (summary.requests > 0) return 0
  process.stderr.write(`fairvisor test: ${o.log} holds no request that could be read as ${o.format}; is --format right?\n`)
  return 1
}
