/**
 * A worker thread's entry: one whole gateway (main.ts's startGateway) on its
 * descriptor of the shared listening socket and on the shared counter table,
 * driven by the supervisor's messages (bundle, metrics, shutdown).
 */
import { parentPort, workerData } from 'node:worker_threads'
import { SettingError } from '../errors.js'
import { startGateway, type Gateway } from '../main.js'
import { loadSettings, type Settings } from '../settings.js'
import { sharedListeners } from './context.js'
import type { FromWorker, ToWorker, WorkerData } from './messages.js'
import { WorkerConfigFeed } from './worker-config.js'

const port = parentPort!
const data = workerData as WorkerData
const send = (m: FromWorker): void => port.postMessage(m)
const asked = new Map<number, { resolve(text: string): void; reject(err: Error): void }>()
let seq = 0
/** The network data's subscription to the supervisor's file changes. */
const netChanged: ((setting: string, bytes: SharedArrayBuffer) => void)[] = []

/** /metrics of this worker's listener: the sum over every worker, which only the supervisor can make. */
function metricsText(): Promise<string> {
  return new Promise((resolve, reject) => {
    const id = ++seq
    asked.set(id, { resolve, reject })
    send({ type: 'metrics', id })
  })
}

function fatal(err: unknown): never {
  send({ type: 'fatal', setting: err instanceof SettingError, message: (err as Error).message })
  process.exit(1)
}

let settings: Readonly<Settings>
let config: WorkerConfigFeed
try {
  settings = loadSettings()
  config = new WorkerConfigFeed(data.workerId, data, { signingKey: settings.bundleSigningKey }, send)
} catch (err) {
  fatal(err)
}

// Listening from now on: a bundle the supervisor applies while this gateway starts is built at once (the
// gateway starts on it); the other messages wait for the gateway.
let gw: Gateway | undefined
const early: ToWorker[] = []
port.on('message', (m: ToWorker) => {
  if (config.onMessage(m)) return
  if (gw === undefined) early.push(m)
  else handle(gw, m)
})

try {
  gw = await startGateway(settings, {
    ...data,
    net: { bytes: data.net, subscribe: (fn) => void netChanged.push(fn) },
    metricsText,
    config,
  })
} catch (err) {
  fatal(err)
}
for (const m of early.splice(0)) handle(gw, m)

function handle(gw: Gateway, m: ToWorker): void {
  switch (m.type) {
    case 'collect':
      void gw.metrics.registry.getMetricsAsJSON().then((json) => send({ type: 'collected', id: m.id, json }))
      break
    case 'metrics-text': {
      const w = asked.get(m.id)
      asked.delete(m.id)
      if (m.text !== undefined) w?.resolve(m.text)
      else w?.reject(new Error(m.error ?? 'metrics unavailable'))
      break
    }
    case 'network-data':
      for (const fn of netChanged) fn(m.setting, m.bytes)
      break
    case 'shutdown': {
      const done = gw.shutdown()
      // The supervisor reports the drain once no worker accepts connections any more.
      const closed = (): void => void (sharedListeners.every((s) => !s.listening) ? send({ type: 'closing' }) : setImmediate(closed))
      closed()
      void done.finally(() => process.exit(0))
      break
    }
  }
}
send({ type: 'ready', port: gw.address.port, adminPort: gw.adminAddress?.port })
