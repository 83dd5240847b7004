// How a worker gets its sockets (src/workers/sockets.ts), on real sockets: the supervisor binds each listener once,
// every "worker" (here servers of this thread) listens where it is told and takes connections on the one port, and a
// port that cannot be had names its setting with nothing left bound. Node ≥ 22.12 shares the port with SO_REUSEPORT,
// older Node hands each worker a duplicate descriptor: whichever path this Node takes is the one tested.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { connect, createServer, type AddressInfo, type Server } from 'node:net'
import { after, before, it } from 'node:test'
import { SettingError } from '../../../src/errors.js'
import { listenAt } from '../../../src/listeners.js'
import { sharedPorts, Sockets } from '../../../src/workers/sockets.js'

let busy: Server
let busyPort: number
before(async () => {
  busy = createServer()
  busyPort = (await listenAt(busy, { host: '127.0.0.1', port: 0 })).port
})
after(() => busy.close())

it('the port is shared by reusePort exactly where Node has the option (22.12, 23.1 and later)', async () => {
  const [major, minor] = process.versions.node.split('.').map(Number) as [number, number]
  const hasOption = major > 23 || (major === 23 && minor >= 1) || (major === 22 && minor >= 12)
  assert.equal(await sharedPorts(), hasOption && process.platform === 'linux')
})

it('every worker listens on the one port the supervisor bound, and each takes connections on it', async () => {
  const socks = await Sockets.bind({ host: '127.0.0.1', port: 0, adminPort: undefined, grpcPort: 0 })
  const port = socks.port('main')!
  assert.ok(port > 0)
  assert.equal(socks.port('admin'), undefined)
  const seen = new Set<number>()
  const workers = [0, 1].map((i) => createServer((c) => c.end(() => seen.add(i))))
  try {
    for (const w of workers) {
      const at = await socks.forWorker()
      assert.deepEqual(Object.keys(at).sort(), ['grpc', 'main'])
      assert.equal((await listenAt(w, at.main!)).port, port)
    }
    socks.settled()
    // New connections until both have taken one (the kernel spreads them; a generous bound for a busy machine).
    for (let n = 0; n < 2000 && seen.size < 2; n++) {
      await new Promise<void>((resolve) =>
        connect(port, '127.0.0.1')
          .on('close', () => resolve())
          .on('error', () => resolve()),
      )
    }
    assert.deepEqual([...seen].sort(), [0, 1])
  } finally {
    for (const w of workers) w.close()
    socks.close()
  }
})

it('a port that cannot be had: a SettingError naming its setting, and the ones bound before it free again', async () => {
  const free = createServer()
  const freePort = (await listenAt(free, { host: '127.0.0.1', port: 0 })).port
  await new Promise((resolve) => free.close(resolve))
  await assert.rejects(
    Sockets.bind({ host: '127.0.0.1', port: freePort, adminPort: busyPort, grpcPort: undefined }),
    (e: Error) => e instanceof SettingError && e.variable === 'FAIRVISOR_ADMIN_PORT' && /EADDRINUSE/.test(e.message),
  )
  // The main port was bound first and let go: an ordinary listener takes it.
  const again = createServer()
  const bound: AddressInfo = await listenAt(again, { host: '127.0.0.1', port: freePort })
  assert.equal(bound.port, freePort)
  again.close()
})

it('a port another process shares with SO_REUSEPORT (a second gateway started by mistake) is in use all the same', async () => {
  const code = `require('net').createServer().listen({ host: '127.0.0.1', port: 0, reusePort: true }, function () {
    console.log(this.address().port)
  })`
  const other = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] })
  try {
    const [line] = (await once(other.stdout, 'data')) as [Buffer]
    const port = Number(line.toString().trim())
    // Bound after all (the bug), the sockets are let go again so the failure ends the test.
    const err = await Sockets.bind({ host: '127.0.0.1', port, adminPort: undefined, grpcPort: undefined }).then(
      (socks) => socks.close(),
      (e: Error) => e,
    )
    assert.ok(err instanceof SettingError && err.variable === 'FAIRVISOR_PORT' && /EADDRINUSE/.test(err.message), String(err))
  } finally {
    other.kill()
  }
})
