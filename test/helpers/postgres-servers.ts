/**
 * A private PostgreSQL cluster owned by one test or benchmark: initdb into a
 * temp dir (trust auth, no fsync), `postgres` on a free port and a socket in
 * that dir. A kill or a pause (SIGSTOP) reaches the postmaster and every
 * backend, as an outage of the machine would (each PostgreSQL child makes
 * its own session, so they are found by parent pid, not by process group).
 * As root (PostgreSQL refuses to run as root) both run as the `postgres` user.
 */
import { execFile, execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { chmodSync, chownSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import pg from 'pg'
import { freePort } from './processes.js'

const run = promisify(execFile)
const BIN = process.env.FAIRVISOR_TEST_PG_BIN ?? '/usr/lib/postgresql/15/bin'
const live = new Set<ChildProcess>()
process.on('exit', () => {
  for (const p of live)
    if (p.pid) send([...childrenOf(spawnSync('pgrep', ['-P', String(p.pid)], { encoding: 'utf8' }).stdout), p.pid], 'SIGKILL')
})

const childrenOf = (pgrep: string): number[] => pgrep.split('\n').filter(Boolean).map(Number)

/**
 * The postmaster and its children (the postmaster frozen first, so none forks
 * meanwhile). pgrep runs asynchronously: the test process also serves the
 * backend, which must not stall while a fault is injected.
 */
async function signalAll(p: ChildProcess, signal: NodeJS.Signals): Promise<number[]> {
  if (p.pid === undefined || p.exitCode !== null || p.signalCode !== null) return []
  if (signal !== 'SIGCONT') process.kill(p.pid, 'SIGSTOP')
  const children = childrenOf((await run('pgrep', ['-P', String(p.pid)]).catch(() => ({ stdout: '' }))).stdout)
  send([...children, p.pid], signal)
  return children
}

function send(pids: number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal)
    } catch {
      // exited meanwhile
    }
  }
}

/** Running (a zombie nobody reaps, as in a container without an init, holds nothing). */
function alive(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]![0] !== 'Z'
  } catch {
    return false
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms))

export interface PgServer {
  port: number
  url: string
  dir: string
  proc: ChildProcess
  /** SIGKILL to the postmaster and every backend (an outage, not a shutdown). */
  kill(): Promise<void>
  pause(): Promise<void>
  resume(): Promise<void>
  /** Start again on the same port and data (after kill). */
  restart(): Promise<void>
  stop(): Promise<void>
}

/** uid/gid to run PostgreSQL as: ourselves, or `postgres` when we are root. */
function owner(): { uid?: number; gid?: number } {
  if (process.getuid?.() !== 0) return {}
  return {
    uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })),
    gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' })),
  }
}

async function waitAccepting(url: string, timeoutMs = 15_000): Promise<void> {
  const end = Date.now() + timeoutMs
  for (;;) {
    const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1000 })
    try {
      await c.connect()
      await c.end()
      return
    } catch (e) {
      c.end().catch(() => undefined)
      if (Date.now() > end) throw new Error(`postgres at ${url} did not accept connections: ${(e as Error).message}`)
      await sleep(50)
    }
  }
}

export async function startPostgres(extraArgs: string[] = []): Promise<PgServer> {
  const dir = mkdtempSync(join(tmpdir(), 'fv-pg-'))
  const who = owner()
  if (who.uid !== undefined) chownSync(dir, who.uid, who.gid!)
  chmodSync(dir, 0o700)
  const data = join(dir, 'data')
  const init = spawnSync(join(BIN, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8'], {
    ...who,
    encoding: 'utf8',
  })
  if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr}`)
  const port = await freePort()
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`
  const args = [
    '-D',
    data,
    '-p',
    String(port),
    '-k',
    dir,
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    'fsync=off',
    '-c',
    'full_page_writes=off',
    '-c',
    'synchronous_commit=off',
    ...extraArgs,
  ]
  const server = { port, url, dir } as PgServer
  const launch = async (): Promise<void> => {
    const proc = spawn(join(BIN, 'postgres'), args, { ...who, stdio: 'ignore' })
    live.add(proc)
    proc.once('exit', () => live.delete(proc))
    server.proc = proc
    await waitAccepting(url)
  }
  server.kill = async () => {
    const p = server.proc
    if (p.exitCode !== null || p.signalCode !== null) return
    const exited = new Promise((r) => p.once('exit', r))
    const children = await signalAll(p, 'SIGKILL')
    await exited
    // Until no backend of the old postmaster holds the shared memory (a restart would refuse to start).
    for (let i = 0; i < 100 && children.some(alive); i++) await sleep(20)
  }
  server.pause = async () => void (await signalAll(server.proc, 'SIGSTOP'))
  server.resume = async () => void (await signalAll(server.proc, 'SIGCONT'))
  server.restart = launch
  server.stop = async () => {
    await server.kill()
    rmSync(dir, { recursive: true, force: true })
  }
  await launch()
  return server
}
