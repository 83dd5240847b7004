/**
 * The floor a Node reverse proxy on undici costs: node:http server + undici
 * Pool.request, piping bodies, with the gateway's pool settings. No header
 * filtering, no policy engine. BACKEND_URL=http://… PORT=0 prints `PORT <n>`.
 */
import { createServer } from 'node:http'
import { Pool, type Dispatcher } from 'undici'

const pool = new Pool(process.env.BACKEND_URL!, {
  connections: 256,
  pipelining: 1,
  keepAliveTimeout: 4000,
  headersTimeout: 30_000,
  bodyTimeout: 30_000,
  connect: { timeout: 5000 },
})
const server = createServer({ noDelay: true }, (req, res) => {
  const body = req.method === 'GET' || req.method === 'HEAD' ? null : req
  pool.request({ path: req.url!, method: req.method as Dispatcher.HttpMethod, headers: req.headers, body }).then(
    (r) => {
      res.writeHead(r.statusCode, r.headers as Record<string, string | string[]>)
      r.body.pipe(res)
    },
    () => {
      res.statusCode = 502
      res.end()
    },
  )
})
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => console.log(`PORT ${(server.address() as { port: number }).port}`))
