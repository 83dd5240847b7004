/**
 * Start-up binds the listeners one after the other (the settings have made
 * sure no two share a port); a listener that cannot listen (its port in use,
 * a port below 1024 without the right, an address not of this machine) stops
 * start-up: a SettingError naming its setting (exit 2), with the listeners
 * opened before it closed again. A gateway never runs with one of its
 * listeners missing.
 */
import { isIP, type Server } from 'node:net'
import { SettingError } from './errors.js'
import type { Settings } from './settings.js'

export type PortSetting = 'FAIRVISOR_PORT' | 'FAIRVISOR_ADMIN_PORT' | 'FAIRVISOR_GRPC_PORT'

const WHY: Record<string, string> = {
  EADDRINUSE: 'the port is in use',
  EACCES: 'not permitted (a port below 1024 needs the right to bind it)',
  EADDRNOTAVAIL: "the address is not one of this machine's",
  ENOTFOUND: 'the host name does not resolve',
  EAI_AGAIN: 'the host name does not resolve',
}

/** The SettingError a failed listen is reported as; an error without a system code (a bug) is passed on as it is. */
export function listenError(setting: PortSetting, host: string, port: number, err: unknown): Error {
  const code = (err as NodeJS.ErrnoException).code
  if (code === undefined) return err as Error
  // Worker threads bind by address (workers/listen-handle.ts): a host name is EINVAL there.
  const notAnAddress = code === 'EINVAL' && isIP(host) === 0
  const hostsFault = notAnAddress || code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code === 'EAI_AGAIN'
  const why = notAnAddress ? 'with FAIRVISOR_WORKERS above 1 the host must be an IP address' : (WHY[code] ?? code)
  const what = hostsFault ? ` (${setting})` : ''
  return new SettingError(hostsFault ? 'FAIRVISOR_HOST' : setting, `cannot listen on ${host}:${port}${what}: ${why} (${code})`)
}

/**
 * The two callbacks of each listener's listen promise: `opened(close)` remembers how to close what listened,
 * `failed(setting, port)` closes what listened before, runs `cleanup` (the store, the backend pool) and throws the
 * failure as listenError says.
 */
export interface Binder {
  opened<T>(close: (listening: T) => unknown): (listening: T) => T
  failed(setting: PortSetting, port: number): (err: unknown) => Promise<never>
}

export function binder(host: string, cleanup: () => Promise<unknown>): Binder {
  const opened: (() => unknown)[] = []
  return {
    opened: (close) => (listening) => {
      opened.push(() => close(listening))
      return listening
    },
    failed: (setting, port) => async (err) => {
      await Promise.allSettled(opened.reverse().map(async (close) => close()))
      await cleanup().catch(() => undefined)
      throw listenError(setting, host, port, err)
    },
  }
}

/** Stop listening and drop whatever connected meanwhile. */
export function closeServer(server: Server & { closeAllConnections?(): void }): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve())
    server.closeAllConnections?.()
  })
}

/** Two listeners cannot share a port: the second would never bind. */
export function distinctPorts(s: Pick<Settings, 'port' | 'adminPort' | 'grpcPort'>): void {
  const ports: [PortSetting, number | undefined][] = [
    ['FAIRVISOR_PORT', s.port],
    ['FAIRVISOR_ADMIN_PORT', s.adminPort],
    ['FAIRVISOR_GRPC_PORT', s.grpcPort],
  ]
  for (const [i, [name, port]] of ports.entries()) {
    const other = ports.slice(0, i).find(([, p]) => p === port && port !== undefined && port !== 0)
    if (other) throw new SettingError(name, `${port} is also ${other[0]}; give each listener a port of its own`)
  }
}
