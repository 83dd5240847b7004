/**
 * The gateway's listeners by name: `main` (FAIRVISOR_PORT), `admin`
 * (FAIRVISOR_ADMIN_PORT: /livez /readyz /metrics apart) and `grpc`
 * (FAIRVISOR_GRPC_PORT), each listening when its port is set. Start-up binds
 * them one after the other, in this order (the settings have made sure no two
 * share a port); a listener that cannot listen (its port in use, a port below
 * 1024 without the right, an address not of this machine) stops start-up: a
 * SettingError naming its setting (exit 2), with the listeners opened before
 * it closed again. A gateway never runs with one of its listeners missing.
 *
 * A leaf module (settings.ts reads it): node:net and the error catalogue only.
 */
import { isIP, type AddressInfo, type ListenOptions, type Server } from 'node:net'
import { SettingError } from './errors.js'

export type ListenerName = 'main' | 'admin' | 'grpc'
export type PortSetting = 'FAIRVISOR_PORT' | 'FAIRVISOR_ADMIN_PORT' | 'FAIRVISOR_GRPC_PORT'

/** The settings that say where the listeners listen. */
export interface ListenerPorts {
  port: number
  adminPort: number | undefined
  grpcPort: number | undefined
}

export const LISTENERS: Readonly<Record<ListenerName, { setting: PortSetting; port(s: ListenerPorts): number | undefined }>> = {
  main: { setting: 'FAIRVISOR_PORT', port: (s) => s.port },
  admin: { setting: 'FAIRVISOR_ADMIN_PORT', port: (s) => s.adminPort },
  grpc: { setting: 'FAIRVISOR_GRPC_PORT', port: (s) => s.grpcPort },
}

/** The listeners the settings ask for, in binding order, with their port (0: a free one). */
export function wantedListeners(s: ListenerPorts): [ListenerName, number][] {
  return Object.entries(LISTENERS).flatMap(([name, l]) => {
    const port = l.port(s)
    return port === undefined ? [] : [[name as ListenerName, port] as [ListenerName, number]]
  })
}

/** Two listeners cannot share a port: the second would never bind. */
export function distinctPorts(s: ListenerPorts): void {
  const ports = wantedListeners(s)
  for (const [i, [name, port]] of ports.entries()) {
    const other = ports.slice(0, i).find(([, p]) => p === port && port !== 0)
    if (other)
      throw new SettingError(
        LISTENERS[name].setting,
        `${port} is also ${LISTENERS[other[0]].setting}; give each listener a port of its own`,
      )
  }
}

const WHY: Record<string, string> = {
  EADDRINUSE: 'the port is in use',
  EACCES: 'not permitted (a port below 1024 needs the right to bind it)',
  EADDRNOTAVAIL: "the address is not one of this machine's",
  ENOTFOUND: 'the host name does not resolve',
  EAI_AGAIN: 'the host name does not resolve',
}

/** The SettingError a failed listen is reported as; an error without a system code (a bug) is passed on as it is. */
export function listenError(name: ListenerName, host: string, port: number, err: unknown): Error {
  const setting = LISTENERS[name].setting
  const code = (err as NodeJS.ErrnoException).code
  if (code === undefined) return err as Error
  // Worker threads on Node < 22.12 bind by address (workers/listen-handle.ts): a host name is EINVAL there.
  const notAnAddress = code === 'EINVAL' && isIP(host) === 0
  const hostsFault = notAnAddress || code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code === 'EAI_AGAIN'
  const why = notAnAddress ? 'with FAIRVISOR_WORKERS above 1 the host must be an IP address' : (WHY[code] ?? code)
  const what = hostsFault ? ` (${setting})` : ''
  return new SettingError(hostsFault ? 'FAIRVISOR_HOST' : setting, `cannot listen on ${host}:${port}${what}: ${why} (${code})`)
}

/**
 * Where a server listens: a host and port (`reusePort`: shared with other sockets of the process, Node ≥ 22.12),
 * or a descriptor of a socket already bound.
 */
export type ListenOn = { host: string; port?: number; reusePort?: boolean } | { fd: number }

/** `server` listening at `at`. */
export function listenAt(server: Server, at: ListenOn): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    // ListenOptions of @types/node 20 know neither `fd` nor `reusePort`; Node reads both from the options object.
    server.listen(at as ListenOptions, () => {
      server.off('error', reject)
      resolve(server.address() as AddressInfo)
    })
  })
}

/** Stop listening and drop whatever connected meanwhile. */
export function closeServer(server: Server & { closeAllConnections?(): void }): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve())
    server.closeAllConnections?.()
  })
}

export type Named<T> = Partial<Record<ListenerName, T>>

/**
 * Each server listening where `at` says, in binding order; on a failure the ones already listening are closed
 * again and the failure is thrown as listenError says, naming `host` and the port the settings give.
 */
export async function listenAll(
  servers: Named<Server>,
  at: (name: ListenerName) => ListenOn,
  settings: ListenerPorts & { host: string },
): Promise<Named<AddressInfo>> {
  const out: Named<AddressInfo> = {}
  const opened: Server[] = []
  for (const name of Object.keys(LISTENERS) as ListenerName[]) {
    const server = servers[name]
    if (server === undefined) continue
    try {
      out[name] = await listenAt(server, at(name))
      opened.push(server)
    } catch (err) {
      await Promise.allSettled(opened.reverse().map(closeServer))
      throw listenError(name, settings.host, LISTENERS[name].port(settings) ?? 0, err)
    }
  }
  return out
}
