/**
 * Redis servers owned by one test: a standalone redis-server or a 3-master
 * cluster on free ports in a temp dir, no persistence. Every process is
 * tracked and killed by stop() (and on process exit, so a failing test does
 * not leak servers).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'

const live = new Set<ChildProcess>()
process.on('exit', () => {
  for (const p of live) p.kill('SIGKILL')
})

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer()
    s.once('error', () => resolve(false))
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)))
  })
}

/** A free port whose cluster bus port (+10000) is free too. */
export async function freePort(): Promise<number> {
  for (;;) {
    const p = 20000 + Math.floor(Math.random() * 30000)
    if ((await portFree(p)) && (await portFree(p + 10000))) return p
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms))

export interface RedisServer {
  port: number
  dir: string
  url: string
  unixSocket: string
  proc: ChildProcess
  /** Kill with SIGKILL (an outage, not a shutdown). */
  kill(): Promise<void>
  /** Start again on the same port (after kill). */
  restart(): Promise<void>
  cli(...args: string[]): string
  stop(): Promise<void>
}

async function waitPing(port: number, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs
  while (Date.now() < end) {
    const r = spawnSync('redis-cli', ['-p', String(port), 'ping'], { encoding: 'utf8' })
    if (r.stdout.trim() === 'PONG') return
    await sleep(30)
  }
  throw new Error(`redis on ${port} did not answer PING within ${timeoutMs} ms`)
}

function spawnRedis(port: number, dir: string, extra: string[]): ChildProcess {
  const proc = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--dir', dir, ...extra],
    { stdio: 'ignore' },
  )
  live.add(proc)
  proc.once('exit', () => live.delete(proc))
  return proc
}

function killed(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve()
  return new Promise((r) => {
    proc.once('exit', () => r())
    proc.kill('SIGKILL')
  })
}

export async function startRedis(): Promise<RedisServer> {
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'fv-redis-'))
  const unixSocket = join(dir, 'redis.sock')
  const extra = ['--unixsocket', unixSocket, '--unixsocketperm', '700']
  const s: RedisServer = {
    port,
    dir,
    url: `redis://127.0.0.1:${port}`,
    unixSocket,
    proc: spawnRedis(port, dir, extra),
    async kill() {
      await killed(s.proc)
    },
    async restart() {
      s.proc = spawnRedis(port, dir, extra)
      await waitPing(port)
    },
    cli: (...args) => spawnSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8' }).stdout.trim(),
    async stop() {
      await killed(s.proc)
      rmSync(dir, { recursive: true, force: true })
    },
  }
  await waitPing(port)
  return s
}

export interface RedisCluster {
  ports: number[]
  url: string
  stop(): Promise<void>
  cli(port: number, ...args: string[]): string
}

/** Three masters, no replicas, cluster_state:ok before it resolves. */
export async function startCluster(): Promise<RedisCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'fv-cluster-'))
  const ports: number[] = []
  while (ports.length < 3) {
    const p = await freePort()
    if (!ports.includes(p)) ports.push(p)
  }
  const procs = ports.map((p) =>
    spawnRedis(p, dir, [
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      join(dir, `nodes-${p}.conf`),
      '--cluster-node-timeout',
      '2000',
    ]),
  )
  const stop = async (): Promise<void> => {
    await Promise.all(procs.map(killed))
    rmSync(dir, { recursive: true, force: true })
  }
  try {
    await Promise.all(ports.map((p) => waitPing(p)))
    const r = spawnSync(
      'redis-cli',
      ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'],
      { encoding: 'utf8', timeout: 20000 },
    )
    if (r.status !== 0) throw new Error(`redis-cli --cluster create failed: ${r.stdout}${r.stderr}`)
    const end = Date.now() + 15000
    for (;;) {
      const states = ports.map((p) => spawnSync('redis-cli', ['-p', String(p), 'cluster', 'info'], { encoding: 'utf8' }).stdout)
      if (states.every((s) => s.includes('cluster_state:ok'))) break
      if (Date.now() > end) throw new Error('cluster did not reach cluster_state:ok within 15 s')
      await sleep(100)
    }
  } catch (err) {
    await stop()
    throw err
  }
  return {
    ports,
    url: `redis+cluster://${ports.map((p) => `127.0.0.1:${p}`).join(',')}`,
    stop,
    cli: (port, ...args) => spawnSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8' }).stdout.trim(),
  }
}

/** Delete every key matching `pattern` on a standalone Redis (test clean-up). */
export async function deleteKeys(url: string, pattern: string): Promise<void> {
  const r = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 })
  try {
    await r.connect()
    let cursor = '0'
    do {
      const [next, keys] = await r.scan(cursor, 'MATCH', pattern, 'COUNT', 1000)
      cursor = next
      if (keys.length) await r.del(...keys)
    } while (cursor !== '0')
  } finally {
    r.disconnect()
  }
}

/** Reads a bucket (two packed doubles, src/store/redis/script.ts) as "<tokens> <last µs>", or '' when absent — the one-liner of docs/stores.md. */
const READ_BUCKET_LUA =
  "local v = redis.call('GET', KEYS[1]) if not v then return '' end local t, l = struct.unpack('<dd', v) return string.format('%.17g %.17g', t, l)"
/** Writes a bucket: ARGV = tokens, last µs, ttl ms. */
export const WRITE_BUCKET_LUA = "return redis.call('PSETEX', KEYS[1], ARGV[3], struct.pack('<dd', tonumber(ARGV[1]), tonumber(ARGV[2])))"

/** `cli` = a redis-cli runner (optionally with -n db first): the bucket at `key` as numbers, undefined when absent. */
export function readBucket(
  cli: (...args: string[]) => string,
  key: string,
  ...before: string[]
): { tokens: number; last: number } | undefined {
  const text = cli(...before, 'eval', READ_BUCKET_LUA, '1', key)
  if (text === '') return undefined
  const [tokens, last] = text.split(' ')
  return { tokens: Number(tokens), last: Number(last) }
}
