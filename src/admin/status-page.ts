/**
 * The status page: `GET /` of the admin listener (docs/admin.md, "Status
 * page"). One self-contained document, its style and script inline, fetching
 * nothing but the admin API of the origin that served it. The page itself
 * needs no token (it holds no data); its script asks the operator for one.
 *
 * The Content-Security-Policy allows exactly the page's one style element and
 * one script element by their SHA-256 (computed here from the very text
 * served), connections to the same origin only, and nothing else: no other
 * script, style, frame, form target or image but the empty data: favicon
 * (which keeps the browser from asking for /favicon.ico). Trusted Types are
 * required, so markup can never be built from strings.
 */
import { createHash } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { ADMIN_ERRORS, type AdminErrorCode } from '../errors.js'
import { sendJson } from '../http/respond.js'
import { BODY, STYLE } from './status-page-markup.js'
import { RENDER } from './status-page-render.js'
import { SCRIPT } from './status-page-script.js'

const PAGE_SCRIPT = RENDER + SCRIPT

export const STATUS_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Fairvisor status</title>
<link rel="icon" href="data:,">
<style>${STYLE}</style>
</head>
<body>${BODY}<script>${PAGE_SCRIPT}</script>
</body>
</html>
`

const sha256 = (text: string): string => `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`

export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  `script-src ${sha256(PAGE_SCRIPT)}`,
  `style-src ${sha256(STYLE)}`,
  "connect-src 'self'",
  'img-src data:',
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "require-trusted-types-for 'script'",
  "trusted-types 'none'",
].join('; ')

const BYTES = Buffer.from(STATUS_PAGE, 'utf8')

const HEADERS = [
  'content-type',
  'text/html; charset=utf-8',
  'content-length',
  String(BYTES.length),
  'cache-control',
  'no-store',
  'content-security-policy',
  CONTENT_SECURITY_POLICY,
  'x-content-type-options',
  'nosniff',
  'referrer-policy',
  'no-referrer',
  'x-frame-options',
  'DENY',
  'cross-origin-opener-policy',
  'same-origin',
  'cross-origin-resource-policy',
  'same-origin',
]

/** GET (and HEAD) `/`: the page; any other method 405, as the admin API answers one. */
export function statusPage(req: IncomingMessage, res: ServerResponse): void {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    const code: AdminErrorCode = 'admin_method_not_allowed'
    const message = `${req.method} is not allowed here; use GET, HEAD`
    return sendJson(res, ADMIN_ERRORS[code], { error: { code, message } }, ['allow', 'GET, HEAD'])
  }
  res.writeHead(200, HEADERS)
  res.end(req.method === 'HEAD' ? undefined : BYTES)
}
