/**
 * How a worker gets its sockets. The supervisor binds each listener the
 * settings ask for (listeners.ts) once, before any worker starts, so a port
 * that cannot be had stops start-up naming its setting (exit 2), and port 0
 * becomes one port for every worker. Then each worker listens on it, the
 * kernel spreading new connections over the workers. Two ways, chosen once
 * by what the runtime can do (sharedPorts()):
 *
 * - SO_REUSEPORT (Node ≥ 22.12: `listen({ reusePort: true })`): this thread
 *   holds the port with a listener of its own until every worker listens on
 *   the same address and port with reusePort too, then lets it go. A worker
 *   that dies takes its own socket (and the connections queued on it) with
 *   it; the others keep theirs. A connection that reaches the holder in the
 *   start-up moment before the workers listen is closed.
 * - otherwise (Node 20): listen-handle.ts binds the socket without
 *   listening, and each worker listens on its own duplicate descriptor of it.
 */
import { createServer } from 'node:net'
import {
  closeServer,
  listenAt,
  listenError,
  wantedListeners,
  type ListenerName,
  type ListenerPorts,
  type ListenOn,
  type Named,
} from '../listeners.js'
import { bindSocket } from './listen-handle.js'

/** One listener's socket as the supervisor holds it. */
interface Share {
  port: number
  forWorker(): Promise<ListenOn>
  /** No worker is starting now. */
  idle(): void
  /** Every worker listens. */
  settled(): void
  close(): void
}

/** Whether two sockets of this process can listen on one port (reusePort), tried once on the loopback. */
let sharing: Promise<boolean> | undefined
export function sharedPorts(): Promise<boolean> {
  sharing ??= (async () => {
    const [a, b] = [createServer(), createServer()]
    try {
      const { port } = await listenAt(a, { host: '127.0.0.1', port: 0, reusePort: true })
      await listenAt(b, { host: '127.0.0.1', port, reusePort: true }) // EADDRINUSE where the option is unknown
      return true
    } catch {
      return false
    } finally {
      for (const s of [a, b]) if (s.listening) s.close()
    }
  })()
  return sharing
}

async function reusePortShare(host: string, port: number): Promise<Share> {
  // Alone first: a port another process holds is in use even when it shares it (SO_REUSEPORT would let this
  // process join a second gateway started on the same port by mistake, and split its traffic).
  const alone = createServer()
  const free = await listenAt(alone, { host, port })
  await closeServer(alone)
  const holder = createServer((c) => c.destroy())
  const bound = await listenAt(holder, { host: free.address, port: free.port, reusePort: true })
  const at = { host: bound.address, port: bound.port, reusePort: true } as const
  const release = (): void => void (holder.listening && closeServer(holder))
  return { port: bound.port, forWorker: async () => at, idle() {}, settled: release, close: release }
}

async function descriptorShare(host: string, port: number): Promise<Share> {
  const s = bindSocket(host, port)
  return { port: s.port, forWorker: async () => ({ fd: await s.dup() }), idle: () => s.idle(), settled() {}, close: () => s.close() }
}

export class Sockets {
  private constructor(private readonly shares: Named<Share>) {}

  /** Binds every listener the settings ask for; throws a SettingError naming the one that cannot be bound (EADDRINUSE…), with nothing left bound. */
  static async bind(settings: ListenerPorts & { host: string }): Promise<Sockets> {
    const share = (await sharedPorts()) ? reusePortShare : descriptorShare
    const shares: Named<Share> = {}
    for (const [name, port] of wantedListeners(settings)) {
      try {
        shares[name] = await share(settings.host, port)
      } catch (err) {
        for (const s of Object.values(shares)) s.close()
        throw listenError(name, settings.host, port, err)
      }
    }
    return new Sockets(shares)
  }

  port(name: ListenerName): number | undefined {
    return this.shares[name]?.port
  }

  /** Where a worker starting now listens, for every listener. */
  async forWorker(): Promise<Named<ListenOn>> {
    const out: Named<ListenOn> = {}
    for (const [name, s] of this.all()) out[name] = await s.forWorker()
    for (const [, s] of this.all()) s.idle()
    return out
  }

  /** Every worker listens: what only start-up needed goes. */
  settled(): void {
    for (const [, s] of this.all()) s.settled()
  }

  close(): void {
    for (const [, s] of this.all()) s.close()
  }

  private all(): [ListenerName, Share][] {
    return Object.entries(this.shares) as [ListenerName, Share][]
  }
}
