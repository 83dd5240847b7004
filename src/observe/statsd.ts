/**
 * Counters sent to a statsd server over UDP (hot-shots), as envoyproxy/ratelimit
 * flushes its stats: every interval, what each counter gained since the last
 * flush (`name:delta|c`), lines packed into datagrams of at most 1432 bytes.
 * Off the call path: a send never waits, a dead or unreachable server costs
 * the datagrams and a log line a minute, never an answer's time; the lines of
 * one flush are bounded by the counters there are (grpc/rls-stats.ts caps them).
 */
import { createRequire } from 'node:module'
import type StatsD from 'hot-shots'
import type { Logger } from './logger.js'
import { LogThrottle } from './log-throttle.js'

/** hot-shots is loaded when a flusher starts (USE_STATSD): a gateway without statsd never loads it. */
const require = createRequire(import.meta.url)

export interface StatsdTarget {
  host: string
  port: number
  /** Between flushes (STATS_FLUSH_INTERVAL). */
  intervalMs: number
}

/** `drain` hands each counter's gain since the last drain to `send`. */
export type Drain = (send: (name: string, delta: number) => void) => void

export class StatsdFlusher {
  private readonly client: InstanceType<typeof StatsD>
  private readonly timer: NodeJS.Timeout
  private closed: Promise<void> | undefined

  constructor(
    target: StatsdTarget,
    private readonly drain: Drain,
    log: Logger,
  ) {
    const throttle = new LogThrottle(Date.now, 60_000)
    const Client = require('hot-shots') as typeof StatsD
    this.client = new Client({
      host: target.host,
      port: target.port,
      protocol: 'udp',
      // One Ethernet frame's payload; what is left is sent by flush() below, not on a timer of its own.
      maxBufferSize: 1432,
      bufferFlushInterval: target.intervalMs,
      // Resolved once a minute, not per datagram: a slow resolver is not met on every flush.
      cacheDns: true,
      cacheDnsTtl: 60_000,
      // Plain statsd lines, as upstream sends: no Datadog tags taken from DD_* variables.
      includeDataDogTags: false,
      datadog: false,
      errorHandler: (err) => {
        const n = throttle.hit()
        if (n > 0) log.warn({ err: { message: err.message }, host: target.host, port: target.port, errors: n }, 'statsd send failed')
      },
    })
    this.timer = setInterval(() => this.flush(), target.intervalMs)
    this.timer.unref() // nothing to keep the process up for
  }

  flush(): void {
    this.drain((name, delta) => this.client.increment(name, delta))
    this.client.flush()
  }

  /** The last gains sent, then the socket closed. */
  close(): Promise<void> {
    this.closed ??= new Promise((resolve) => {
      clearInterval(this.timer)
      this.flush()
      this.client.close(() => resolve())
    })
    return this.closed
  }
}
