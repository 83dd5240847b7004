/**
 * The listening sockets of a process with worker threads: the main port, and
 * the admin and gRPC ports when they are set, each bound once here and handed
 * to every worker as its own duplicate descriptor (listen-handle.ts).
 */
import { listenError, type PortSetting } from '../bind-listeners.js'
import type { Settings } from '../settings.js'
import { bindSocket, type BoundSocket } from './listen-handle.js'
import type { WorkerData } from './messages.js'

export class Sockets {
  private constructor(
    readonly main: BoundSocket,
    readonly admin: BoundSocket | undefined,
    readonly grpc: BoundSocket | undefined,
  ) {}

  /** Binds every port the settings name; throws a SettingError naming the one that cannot be bound (EADDRINUSE…), with nothing left bound. */
  static bind(settings: Readonly<Settings>, separateAdmin: boolean): Sockets {
    const bound: BoundSocket[] = []
    const one = (setting: PortSetting, port: number): BoundSocket => {
      try {
        const s = bindSocket(settings.host, port)
        bound.push(s)
        return s
      } catch (err) {
        for (const s of bound) s.close()
        throw listenError(setting, settings.host, port, err)
      }
    }
    const main = one('FAIRVISOR_PORT', settings.port)
    const admin = separateAdmin ? one('FAIRVISOR_ADMIN_PORT', settings.adminPort!) : undefined
    const grpc = settings.grpcPort === undefined ? undefined : one('FAIRVISOR_GRPC_PORT', settings.grpcPort)
    return new Sockets(main, admin, grpc)
  }

  /** One worker's descriptors of every socket. */
  async dup(): Promise<Pick<WorkerData, 'listenFd' | 'adminFd' | 'grpcFd'>> {
    const fds = { listenFd: await this.main.dup(), adminFd: await this.admin?.dup(), grpcFd: await this.grpc?.dup() }
    for (const s of this.all()) s.idle()
    return fds
  }

  close(): void {
    for (const s of this.all()) s.close()
  }

  private all(): BoundSocket[] {
    return [this.main, this.admin, this.grpc].filter((s): s is BoundSocket => s !== undefined)
  }
}
