// The listeners by name (src/listeners.ts): two on one port refused, a listener that cannot listen names its setting
// and leaves nothing listening, on real sockets.
import assert from 'node:assert/strict'
import { createServer, type AddressInfo, type Server } from 'node:net'
import { after, before, it } from 'node:test'
import { SettingError } from '../../src/errors.js'
import { distinctPorts, listenAll, listenError, wantedListeners } from '../../src/listeners.js'

let busy: Server
let busyPort: number
before(async () => {
  busy = createServer()
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve))
  busyPort = (busy.address() as AddressInfo).port
})
after(() => busy.close())

it('the listeners the settings ask for, in binding order: main, admin, gRPC', () => {
  assert.deepEqual(wantedListeners({ port: 8080, adminPort: undefined, grpcPort: 9000 }), [
    ['main', 8080],
    ['grpc', 9000],
  ])
  assert.deepEqual(
    wantedListeners({ port: 0, adminPort: 0, grpcPort: 0 }).map(([name]) => name),
    ['main', 'admin', 'grpc'],
  )
})

it('two listeners on one port: the later one is refused naming the earlier; port 0 twice is two free ports', () => {
  assert.throws(
    () => distinctPorts({ port: 8080, adminPort: 9000, grpcPort: 8080 }),
    (e: Error) => e instanceof SettingError && e.variable === 'FAIRVISOR_GRPC_PORT' && /8080 is also FAIRVISOR_PORT/.test(e.message),
  )
  assert.throws(
    () => distinctPorts({ port: 8080, adminPort: 8080, grpcPort: undefined }),
    (e: Error) => e instanceof SettingError && e.variable === 'FAIRVISOR_ADMIN_PORT',
  )
  distinctPorts({ port: 0, adminPort: 0, grpcPort: 0 })
})

it('a listener that cannot listen: a SettingError naming its setting, and the ones before it closed again', async () => {
  const [main, admin, grpc] = [createServer(), createServer(), createServer()]
  const settings = { host: '127.0.0.1', port: 0, adminPort: busyPort, grpcPort: 0 }
  await assert.rejects(
    listenAll({ main, admin, grpc }, (name) => ({ host: '127.0.0.1', port: name === 'admin' ? busyPort : 0 }), settings),
    (e: Error) =>
      e instanceof SettingError &&
      e.variable === 'FAIRVISOR_ADMIN_PORT' &&
      e.message.includes(`127.0.0.1:${busyPort}`) &&
      /EADDRINUSE/.test(e.message),
  )
  assert.equal(main.listening, false, 'the main listener is closed again')
  assert.equal(grpc.listening, false, 'the gRPC listener, after the failed one, never listened')
})

it('every listener given listens; one not given is skipped', async () => {
  const [main, grpc] = [createServer(), createServer()]
  const at = await listenAll({ main, grpc }, () => ({ host: '127.0.0.1', port: 0 }), {
    host: '127.0.0.1',
    port: 0,
    adminPort: undefined,
    grpcPort: 0,
  })
  try {
    assert.deepEqual(Object.keys(at), ['main', 'grpc'])
    assert.equal(at.main?.port, (main.address() as AddressInfo).port)
  } finally {
    main.close()
    grpc.close()
  }
})

it('listenError: a host fault names FAIRVISOR_HOST; an error without a system code is a bug passed on as it is', () => {
  const notHere = listenError('main', '192.0.2.1', 80, Object.assign(new Error('x'), { code: 'EADDRNOTAVAIL' }))
  assert.ok(notHere instanceof SettingError && notHere.variable === 'FAIRVISOR_HOST' && /\(FAIRVISOR_PORT\)/.test(notHere.message))
  const named = listenError('grpc', 'gateway.local', 9000, Object.assign(new Error('x'), { code: 'EINVAL' }))
  assert.ok(named instanceof SettingError && named.variable === 'FAIRVISOR_HOST' && /must be an IP address/.test(named.message))
  const bug = new TypeError('not a system error')
  assert.equal(listenError('admin', '127.0.0.1', 1, bug), bug)
})
