/**
 * The supervisor's side of the network data files (request/network-data.ts):
 * it alone reads, checks and watches them, keeps their bytes in shared
 * memory, hands them to each worker at start (workerData) and hands a
 * changed file's new bytes to every live worker once it has accepted them.
 */
import type { Worker } from 'node:worker_threads'
import type { Logger } from '../observe/logger.js'
import { NetworkData, type NetworkFiles, type SharedNetworkBytes } from '../request/network-data.js'
import type { ToWorker } from './messages.js'

export class NetworkShare {
  private readonly data: NetworkData

  /** Throws a SettingError naming the first file that is missing or bad (the CLI exits 2). */
  constructor(files: NetworkFiles, live: () => Worker[]) {
    this.data = new NetworkData(files)
    this.data.onChange((setting, bytes) => {
      for (const w of live()) w.postMessage({ type: 'network-data', setting, bytes } satisfies ToWorker)
    })
  }

  /** For a worker starting now. */
  bytes(): SharedNetworkBytes {
    return this.data.bytes()
  }

  watch(log: Logger): Promise<void> {
    return this.data.watch(log)
  }

  close(): Promise<void> {
    return this.data.close()
  }
}
