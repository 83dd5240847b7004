/**
 * A worker thread's entry: one whole gateway (main.ts's startGateway) on the
 * runtime of a worker thread (runtime/worker-thread.ts): the supervisor's
 * sockets, tables, bundle and data files, driven by its messages.
 */
import { parentPort, workerData } from 'node:worker_threads'
import { SettingError } from '../errors.js'
import { startGateway } from '../main.js'
import { WorkerThread } from '../runtime/worker-thread.js'
import { loadSettings } from '../settings.js'
import type { FromWorker, WorkerData } from './messages.js'

const port = parentPort!
try {
  const settings = loadSettings()
  // Taking the supervisor's messages from now on, before the first await.
  const thread = new WorkerThread(port, workerData as WorkerData, settings)
  thread.serve(await startGateway(settings, thread))
} catch (err) {
  port.postMessage({ type: 'fatal', setting: err instanceof SettingError, message: (err as Error).message } satisfies FromWorker)
  process.exit(1)
}
