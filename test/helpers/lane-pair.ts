/**
 * Two gateway processes on the same bundle, one with the client lane
 * (src/http/lane.ts, the default) and one without it (FAIRVISOR_ACCESS_LOG=true
 * makes node:http read every request), each in front of its own copy of the
 * same recording backend; raw request bytes sent to both on `net` sockets, the
 * responses read back with Node's own response parser. The lane tests
 * (test/e2e/lane-*.test.ts) compare what each side answered, what each
 * backend received and which counter keys each gateway charged.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { dropPrefix, PG_URL, sql, uniquePrefix } from './postgres-db.js'
import { startBackend, startGateways, type Backend, type GatewayProcess } from './processes.js'

type Parser = { initialize(t: number, r: object): void; execute(b: Buffer): unknown; finish(): unknown; [k: number]: unknown }
const { HTTPParser } = createRequire(import.meta.url)('_http_common') as {
  HTTPParser: (new () => Parser) & Record<'RESPONSE' | 'kOnHeadersComplete' | 'kOnHeaders' | 'kOnBody' | 'kOnMessageComplete', number>
}

/** A request as the backend got it. */
export interface Seen {
  method: string
  url: string
  version: string
  rawHeaders: string[]
  body: string
}

export interface Side {
  name: 'lane' | 'node'
  gw: GatewayProcess
  backend: Backend
  seen: Seen[]
  /** The PostgreSQL table prefix its counters are kept under. */
  prefix: string
}

/** A recording backend: `chunk` in the path answers without a length (chunked), `nolen` with neither (to the close). */
async function recordingBackend(seen: Seen[]): Promise<Backend> {
  const b: Backend = await startBackend((req, res) => {
    let body = ''
    req.setEncoding('latin1')
    req.on('data', (d: string) => (body += d))
    req.on('end', () => {
      // The Host the gateway adds is its backend's address, which differs by side: named alike.
      const rawHeaders = req.rawHeaders.map((v) => (v === `127.0.0.1:${b.port}` ? 'backend' : v))
      // A body the client sent chunked reaches the backend chunked, or with its length when the gateway had
      // all of it by the time it forwarded the request (undici frames a stream that has ended by its length):
      // when its last bytes came, not a difference; the framing is named alike, the body compared as it came.
      for (let i = 0; i < rawHeaders.length; i += 2)
        if (/^(content-length|transfer-encoding)$/i.test(rawHeaders[i]!)) [rawHeaders[i], rawHeaders[i + 1]] = ['framing', '*']
      seen.push({ method: req.method!, url: req.url!, version: req.httpVersion, rawHeaders, body })
      const text = `ok ${req.method} ${req.url}`
      if (req.url!.includes('chunk')) return void res.writeHead(200, { 'x-b': '1' }).end(text)
      if (req.url!.includes('nolen')) {
        res.writeHead(200, { 'x-b': '1', connection: 'close' })
        return void res.end(text)
      }
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(text), 'x-b': '1' }).end(text)
    })
  })
  // Every header the gateway sends is kept (node:http's default stops counting at 2000).
  b.server.maxHeadersCount = 0
  return b
}

export interface Pair {
  lane: Side
  node: Side
  sides: Side[]
  close(): Promise<void>
}

export async function startPair(bundle: object, env: Record<string, string> = {}): Promise<Pair> {
  const dir = mkdtempSync(join(tmpdir(), 'fv-lane-pair-'))
  writeFileSync(join(dir, 'bundle.json'), JSON.stringify(bundle))
  const seenLane: Seen[] = []
  const seenNode: Seen[] = []
  const [bl, bn] = await Promise.all([recordingBackend(seenLane), recordingBackend(seenNode)])
  // Counters on PostgreSQL, a table per gateway: the keys each one charged can be listed.
  const common = { FAIRVISOR_CONFIG_FILE: join(dir, 'bundle.json'), FAIRVISOR_STORE: PG_URL, ...env }
  const [pl, pn] = [uniquePrefix('lane'), uniquePrefix('node')]
  const [gl, gn] = await startGateways([
    { ...common, FAIRVISOR_BACKEND_URL: bl!.url, FAIRVISOR_PG_TABLE_PREFIX: pl },
    { ...common, FAIRVISOR_BACKEND_URL: bn!.url, FAIRVISOR_PG_TABLE_PREFIX: pn, FAIRVISOR_ACCESS_LOG: 'true' },
  ])
  const lane: Side = { name: 'lane', gw: gl!, backend: bl!, seen: seenLane, prefix: pl }
  const node: Side = { name: 'node', gw: gn!, backend: bn!, seen: seenNode, prefix: pn }
  return {
    lane,
    node,
    sides: [lane, node],
    async close() {
      await Promise.all([gl!.stop(), gn!.stop()])
      await Promise.all([bl!.close(), bn!.close(), dropPrefix(pl), dropPrefix(pn)])
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** A response as the client read it: Date left out (it is the time). */
export interface Answer {
  status: number
  headers: string[]
  body: string
}

export interface Exchange {
  answers: Answer[]
  /** The bytes the client read after the last whole response, and whether the parser refused them. */
  tail: string
  /** How the connection ended: `closed` by the gateway, `reset` (RST: what it sent last may be lost), or `timeout` (still open after `waitMs`). */
  end: 'closed' | 'reset' | 'timeout'
}

export interface SendOptions {
  /** Each write's bytes, sent one after another as their own TCP writes (a setImmediate apart). */
  parts?: boolean
  /** Every byte its own write. */
  byteByByte?: boolean
  /** The methods of the requests in order, so that a HEAD's answer is read without a body. */
  methods?: string[]
  /** How long the connection may stay open before it is given up on (`end: 'timeout'`). */
  waitMs?: number
}

/** Sends `writes` on a new connection and reads every answer until the gateway closes it. */
export function send(port: number, writes: (string | Buffer)[], o: SendOptions = {}): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    const s = connect({ port, host: '127.0.0.1', noDelay: true })
    const chunks: Buffer[] = []
    let timer: NodeJS.Timeout | undefined
    let end: Exchange['end'] = 'closed'
    // The gateway ended its side (its last answer said close, or node:http closed on a bad request): what is
    // left to send is not sent. Written after that, it only draws a write-after-end error or the RST of a
    // closed socket, which say when the client wrote, not what the gateway did.
    let ended = false
    s.on('data', (d: Buffer) => chunks.push(d))
    s.on('end', () => void (ended = true))
    s.on('error', () => void (end = 'reset'))
    s.on('close', () => {
      clearTimeout(timer)
      resolve({ ...parseAnswers(Buffer.concat(chunks), o.methods ?? []), end })
    })
    s.on('connect', async () => {
      try {
        const bufs = writes.map((w) => (typeof w === 'string' ? Buffer.from(w, 'latin1') : w))
        const pieces = o.byteByByte ? bufs.flatMap((b) => [...b].map((x) => Buffer.from([x]))) : o.parts ? bufs : [Buffer.concat(bufs)]
        for (const p of pieces) {
          if (s.destroyed || ended) break
          s.write(p)
          // A write of its own reaches the gateway as a read of its own only if the loop turns between them.
          if (pieces.length > 1) await new Promise((r) => setImmediate(r))
        }
        timer = setTimeout(() => {
          end = 'timeout'
          s.destroy()
        }, o.waitMs ?? 15_000)
      } catch (err) {
        reject(err)
      }
    })
  })
}

/** The responses in `bytes` (Node's parser, lenient in nothing), Date headers dropped. */
export function parseAnswers(bytes: Buffer, methods: string[]): { answers: Answer[]; tail: string } {
  const answers: Answer[] = []
  const p = new HTTPParser()
  p.initialize(HTTPParser.RESPONSE, {})
  let pending: string[] = []
  let cur: Answer | undefined
  let consumed = 0
  p[HTTPParser.kOnHeaders] = (h: string[]) => void pending.push(...h)
  p[HTTPParser.kOnHeadersComplete] = (_a: number, _b: number, h: string[] | undefined, _m: unknown, _u: unknown, status: number) => {
    const raw = pending.concat(h ?? [])
    pending = []
    const headers: string[] = []
    for (let i = 0; i < raw.length; i += 2) if (raw[i]!.toLowerCase() !== 'date') headers.push(raw[i]!.toLowerCase(), raw[i + 1]!)
    cur = { status, headers, body: '' }
    if (status < 200) return 1
    return methods[answers.length] === 'HEAD' ? 1 : 0
  }
  p[HTTPParser.kOnBody] = (b: Buffer) => void (cur!.body += b.toString('latin1'))
  p[HTTPParser.kOnMessageComplete] = () => {
    if (cur !== undefined && cur.status >= 200) answers.push(cur)
    cur = undefined
  }
  const r = p.execute(bytes)
  if (typeof r === 'number') consumed = r
  // A body read to the close ends at the end of the stream.
  if (!(p.finish() instanceof Error) && cur !== undefined && cur.status >= 200) answers.push(cur)
  return { answers, tail: bytes.subarray(consumed).toString('latin1') }
}

/**
 * The counters a gateway keeps, each as `key=tokens left` (its shadow rules never reject: every key a request
 * carried is charged), in whole tokens: the bundle's refill (0.001 token/s) adds a fraction that depends on
 * when each side charged the key, under half a token in a run shorter than 500 s. Rows as the store reads
 * them: an expired row (the store leaves some as expire_at 0, seen under load on Node 24) is absent, and
 * each gateway's clean-up deletes such rows on its own 10 s clock, so whether one is still there is when
 * that clean-up last ran.
 */
export async function counters(side: Side): Promise<string[]> {
  const rows = await sql<{ key: string; s0: number }>(
    `SELECT key, s0 FROM ${side.prefix}counters WHERE expire_at >= extract(epoch FROM clock_timestamp())::float8 ORDER BY key`,
  )
  return rows.map((r) => `${r.key}=${Math.round(r.s0)}`)
}
