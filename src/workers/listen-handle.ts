/**
 * One listening socket for every worker thread where Node has no public way
 * to share a port (Node < 22.12: no `reusePort`; sockets.ts picks this path
 * only then). Worker threads cannot each bind the port (EADDRINUSE), and a
 * listening handle cannot be transferred to a worker thread. What works: the
 * main thread binds the socket (without accepting on it), and each worker
 * listens on a descriptor of it (`server.listen({ fd })`); the kernel hands
 * each new connection to one of them. Each worker gets its own duplicate
 * descriptor (made by passing the socket to a child process and back, ECHO),
 * so a worker that dies closes only its own and the others keep accepting.
 * Binding without listening takes the TCP handle binding, which only
 * `process.binding` reaches: this file is the one place that does.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { isIP } from 'node:net'
import { getSystemErrorName } from 'node:util'

interface TcpHandle {
  readonly fd: number
  bind(host: string, port: number): number
  bind6(host: string, port: number, flags: number): number
  getsockname(out: { address?: string; port?: number }): number
  close(): void
}
interface TcpWrap {
  TCP: new (type: number) => TcpHandle
  constants: { SERVER: number }
}

export interface BoundSocket {
  host: string
  port: number
  /** A new descriptor of the socket for one worker (closed when that worker's server closes). */
  dup(): Promise<number>
  /** End the helper process until the next dup() (it is only needed while duplicating). */
  idle(): void
  close(): void
}

/** The child: sends every handle it receives straight back (passing a socket over IPC duplicates its descriptor). */
const ECHO = `
process.on('message', (msg, handle) => process.send(msg, handle, () => handle && handle.close()))
process.on('disconnect', () => process.exit(0))`

/** Bind `host:port` (0: a free port) without listening; throws an Error with the errno name on failure (EADDRINUSE…). */
export function bindSocket(host: string, port: number): BoundSocket {
  // The TCP handle binding: the one way to bind a socket without accepting on it in this thread.
  const { TCP, constants } = (process as unknown as { binding(name: string): TcpWrap }).binding('tcp_wrap')
  const handle = new TCP(constants.SERVER)
  const err = isIP(host) === 6 ? handle.bind6(host, port, 0) : handle.bind(host, port)
  const name: { port?: number } = {}
  if (err === 0) handle.getsockname(name)
  // libuv keeps EADDRINUSE from bind() for listen() to report: the socket is then left unbound (no port), and a
  // worker listening on it would get a random free port instead of the one asked for.
  const code = err !== 0 ? getSystemErrorName(err) : name.port ? undefined : 'EADDRINUSE'
  if (code !== undefined) {
    handle.close()
    throw Object.assign(new Error(`listen ${code}: ${host}:${port}`), { code })
  }
  // The duplicates stay referenced but are never closed here: each belongs to the worker listening on it.
  const handed: TcpHandle[] = []
  let echo: ChildProcess | undefined
  let chain: Promise<unknown> = Promise.resolve()
  const dupOnce = async (): Promise<number> => {
    if (!echo || echo.exitCode !== null || !echo.connected) {
      echo = spawn(process.execPath, ['-e', ECHO], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] })
      echo.on('error', () => {}) // a helper that cannot start or send shows as a failed dup() (no message)
      echo.unref()
      echo.channel?.unref()
    }
    const got = once(echo, 'message') as Promise<[unknown, TcpHandle]>
    echo.channel?.ref() // keep the loop alive while the copy is on its way, not after
    echo.send('dup', handle as never, { keepOpen: true })
    const [, copy] = await got.finally(() => echo?.channel?.unref())
    handed.push(copy)
    return copy.fd
  }
  return {
    host,
    port: name.port!,
    dup() {
      const next = chain.then(dupOnce)
      chain = next.catch(() => undefined)
      return next
    },
    idle() {
      void chain.then(() => {
        if (echo?.connected) echo.disconnect()
      })
    },
    close() {
      echo?.kill()
      handle.close()
    },
  }
}
