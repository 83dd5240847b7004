/**
 * Real processes for end-to-end tests: the gateway (dist/cli.js, port 0,
 * port read back from its start-up log line) and backend HTTP servers on
 * port 0 in this process.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { createServer as createNetServer, type AddressInfo } from 'node:net'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

export const ROOT = fileURLToPath(new URL('../../', import.meta.url))
export const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url))

export interface LogLine {
  level: string
  msg: string
  [k: string]: unknown
}

export interface GatewayProcess {
  proc: ChildProcess
  port: number
  adminPort: number | undefined
  url: string
  logs: LogLine[]
  stderr: string[]
  /** Resolves with the first log line (past or future) that satisfies `pred`. */
  waitForLog(pred: (l: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>
  /** Send `signal` (default SIGTERM) and resolve with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>
  exited: Promise<number | null>
}

export async function startGateway(
  env: Record<string, string | undefined>,
  /** onSpawn: called at once with the process (to signal it or write its files while it starts); nodeArgs: node options before the script (worker threads inherit them). */
  opts: { cwd?: string; timeoutMs?: number; onSpawn?: (proc: ChildProcess) => void; nodeArgs?: string[] } = {},
): Promise<GatewayProcess> {
  const proc = spawn(process.execPath, [...(opts.nodeArgs ?? []), CLI], {
    cwd: opts.cwd ?? ROOT,
    // One thread unless a test asks for workers: the start-up bounds here are set for one.
    env: {
      PATH: process.env.PATH,
      FAIRVISOR_HOST: '127.0.0.1',
      FAIRVISOR_PORT: '0',
      FAIRVISOR_LOG_LEVEL: 'info',
      FAIRVISOR_WORKERS: '1',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  opts.onSpawn?.(proc)
  const logs: LogLine[] = []
  const stderr: string[] = []
  const waiters: { pred: (l: LogLine) => boolean; resolve: (l: LogLine) => void; fail: (why: string) => void }[] = []
  createInterface({ input: proc.stdout! }).on('line', (line) => {
    let parsed: LogLine
    try {
      parsed = JSON.parse(line) as LogLine
    } catch {
      parsed = { level: 'raw', msg: line }
    }
    logs.push(parsed)
    for (let i = waiters.length - 1; i >= 0; i--) {
      if (waiters[i]!.pred(parsed)) waiters.splice(i, 1)[0]!.resolve(parsed)
    }
  })
  createInterface({ input: proc.stderr! }).on('line', (line) => stderr.push(line))
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)))
  // 'close' comes after the last stdout line: a line still awaited then will never come. Failing its
  // waiter at once also clears its timer, which would otherwise keep the test file's process alive for
  // the whole bound after the test (a 60 s wait after each start-up that is refused).
  let closed = false
  proc.once('close', (code, signal) => {
    closed = true
    for (const w of waiters.splice(0)) w.fail(`the gateway exited (${signal ?? code}) first`)
  })

  // Generous by default: a loaded machine makes a line late, and only a missing line should fail a test.
  const waitForLog = (pred: (l: LogLine) => boolean, timeoutMs = 20_000): Promise<LogLine> => {
    const found = logs.find(pred)
    if (found) return Promise.resolve(found)
    const failure = (why: string) =>
      new Error(
        `log line not seen: ${why}; stderr: ${stderr.join('\n')}; logs: ${logs
          .slice(-5)
          .map((l) => JSON.stringify(l))
          .join('\n')}`,
      )
    if (closed) return Promise.reject(failure('the gateway had exited'))
    return new Promise((resolve, reject) => {
      const waiter = {
        pred,
        resolve: (l: LogLine) => {
          clearTimeout(t)
          resolve(l)
        },
        fail: (why: string) => {
          clearTimeout(t)
          reject(failure(why))
        },
      }
      const t = setTimeout(() => {
        waiters.splice(waiters.indexOf(waiter), 1)
        reject(failure(`not within ${timeoutMs} ms`))
      }, timeoutMs)
      waiters.push(waiter)
    })
  }
  // A start-up that never ends is what this bound catches, not a slow one: a loaded 2-core
  // machine has taken over 10 s to start a gateway with two worker threads.
  const listening = await Promise.race([
    waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('fairvisor listening'), opts.timeoutMs ?? 60_000),
    exited.then((code) => {
      throw new Error(`gateway exited with ${code} before listening: ${stderr.join('\n')}`)
    }),
  ]).catch((err: unknown) => {
    // Nobody holds this process to stop it: left running, it would keep the test file from ever exiting.
    proc.kill('SIGKILL')
    // An exit fails the awaited line too, and may do so first: the exit is the reason to report.
    if (closed) throw new Error(`gateway exited with ${proc.exitCode} before listening: ${stderr.join('\n')}`)
    throw err
  })
  const port = listening.port as number
  return {
    proc,
    port,
    adminPort: listening.adminPort as number | undefined,
    url: `http://127.0.0.1:${port}`,
    logs,
    stderr,
    waitForLog,
    exited,
    stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal)
      return exited
    },
  }
}

/**
 * Several gateways started at once; when one fails to start, the others are
 * stopped before the error is thrown (nobody else holds them to stop them).
 */
export async function startGateways(
  envs: Record<string, string | undefined>[],
  opts?: Parameters<typeof startGateway>[1],
): Promise<GatewayProcess[]> {
  const started = await Promise.allSettled(envs.map((env) => startGateway(env, opts)))
  const failed = started.find((s) => s.status === 'rejected')
  if (failed === undefined) return started.map((s) => (s as PromiseFulfilledResult<GatewayProcess>).value)
  await Promise.all(started.map((s) => (s.status === 'fulfilled' ? s.value.stop('SIGKILL') : undefined)))
  throw failed.reason
}

export interface Backend {
  server: Server
  port: number
  url: string
  /** Requests received so far. */
  count: number
  close(): Promise<void>
}

export async function startBackend(
  handler: (req: IncomingMessage, res: ServerResponse) => void = (_q, s) => s.end('ok'),
): Promise<Backend> {
  const b = { count: 0 } as Backend
  const server = createServer((req, res) => {
    b.count++
    handler(req, res)
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  b.server = server
  b.port = (server.address() as AddressInfo).port
  b.url = `http://127.0.0.1:${b.port}`
  b.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections()
      server.close(() => r())
    })
  return b
}

/**
 * A backend answering `ok` to everything, in a process of its own: a test
 * whose latency bound covers proxying keeps the backend's answers apart from
 * its own event loop (its load clients, a spawnSync) and can read the
 * backend's run-queue wait by its pid.
 */
export async function startBackendProcess(): Promise<{ url: string; pid: number; close(): Promise<void> }> {
  const code = `require('http').createServer((q, s) => { q.resume(); q.on('end', () => s.end('ok')) })
  .listen(0, '127.0.0.1', function () { console.log(this.address().port) })`
  const proc = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] })
  const exited = new Promise<void>((r) => proc.once('exit', () => r()))
  const [line] = (await Promise.race([
    new Promise<string[]>((r) => createInterface({ input: proc.stdout! }).once('line', (l) => r([l]))),
    exited.then(() => {
      throw new Error('the backend process exited before listening')
    }),
  ])) as string[]
  return {
    url: `http://127.0.0.1:${Number(line)}`,
    pid: proc.pid!,
    close: () => {
      proc.kill()
      return exited
    },
  }
}

/** A port that was free a moment ago on 127.0.0.1 (for servers that cannot listen on port 0). */
export async function freePort(): Promise<number> {
  const s = createNetServer()
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r))
  const port = (s.address() as AddressInfo).port
  await new Promise<void>((r) => s.close(() => r()))
  return port
}

/**
 * The value of the first sample of metric `name` on the gateway's /metrics
 * whose labels include `labels` (e.g. `result="invalid"`); undefined when
 * there is none.
 */
/** The CPU time (user + system, ms, 10 ms resolution) a process has used so far, from /proc. */
export function cpuMs(pid: number | undefined): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return (Number(f[11]) + Number(f[12])) * 10 // fields 14 and 15, in clock ticks of 10 ms
}

/** The sum of every sample of metric `name` on the gateway's /metrics (all label sets); 0 when there is none. */
export async function metricSum(gw: GatewayProcess, name: string): Promise<number> {
  const text = await (await fetch(`${gw.url}/metrics`)).text()
  let n = 0
  for (const line of text.split('\n'))
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) n += Number(line.slice(line.lastIndexOf(' ') + 1))
  return n
}

export async function metricValue(gw: GatewayProcess, name: string, labels = ''): Promise<number | undefined> {
  const text = await (await fetch(`${gw.url}/metrics`)).text()
  const line = text.split('\n').find((l) => (l.startsWith(`${name} `) || l.startsWith(`${name}{`)) && l.includes(labels))
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1))
}
