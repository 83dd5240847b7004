/**
 * The status page (GET / of the admin listener) in a real browser: headless
 * Chromium (puppeteer-core) against the real gateway (two worker threads, an
 * admin port and token) under traffic that gets one key rejected. The operator
 * types the token, sees the limited key among the top keys and the live reject
 * rate, presses its reset button, and the key's next request passes. A wrong
 * token brings the prompt back. `/` of the public listener stays traffic. The
 * page asks nothing of any origin but the admin listener, and the browser
 * reports no error (a Content-Security-Policy violation would be one).
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import type { Browser, Page } from 'puppeteer-core'
import { writeHeaderBucketBundle } from '../helpers/bundles.js'
import { HAVE_CHROMIUM, launchChromium } from '../helpers/chromium.js'
import { startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'

if (!HAVE_CHROMIUM)
  console.error('\n\n*** chromium NOT INSTALLED: the status page browser test is SKIPPED (apt-get install chromium) ***\n\n')

const TOKEN = randomBytes(24).toString('hex')
// Generous: only a page that never shows what it should fails; a busy machine makes it late.
const SHOWN_MS = 30_000

describe('status page in headless Chromium', { skip: !HAVE_CHROMIUM }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'fv-status-page-'))
  let backend: Backend
  let gw: GatewayProcess
  let browser: Browser
  let admin: string

  before(async () => {
    backend = await startBackend()
    // Two requests per user, then hardly a token back: the third is rejected until a reset.
    const bundle = writeHeaderBucketBundle(dir, 'per_user', { burst: 2, tokens_per_second: 0.001 })
    gw = await startGateway(
      {
        FAIRVISOR_BACKEND_URL: backend.url,
        FAIRVISOR_CONFIG_FILE: bundle,
        FAIRVISOR_ADMIN_PORT: '0',
        FAIRVISOR_ADMIN_TOKEN: TOKEN,
        FAIRVISOR_WORKERS: '2',
      },
      { timeoutMs: 30_000 },
    )
    admin = `http://127.0.0.1:${gw.adminPort}`
    browser = await launchChromium()
  })
  after(async () => {
    await browser?.close()
    await gw?.stop()
    await backend?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  const asUser = async (user: string): Promise<number> => (await fetch(`${gw.url}/items`, { headers: { 'x-user': user } })).status

  /** A fresh tab that records every request it makes and every error the browser reports. */
  async function openPage(): Promise<{ page: Page; requests: string[]; errors: string[] }> {
    const page = await browser.newPage()
    const requests: string[] = []
    const errors: string[] = []
    page.on('request', (r) => requests.push(r.url()))
    page.on('pageerror', (e) => errors.push(`pageerror: ${(e as Error).message}`))
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(`console: ${m.text()}`)
    })
    const res = await page.goto(`${admin}/`)
    assert.equal(res?.status(), 200)
    return { page, requests, errors }
  }

  async function typeToken(page: Page, token: string): Promise<void> {
    // Found by its label, as a screen reader would: the field is named "Admin token".
    await page.locator('::-p-aria([name="Admin token"][role="textbox"])').fill(token)
    await page.locator('::-p-aria([name="Open status"][role="button"])').click()
  }

  /** The text of each cell of a table's body rows. */
  const rowsOf = (page: Page, id: string): Promise<string[][]> =>
    page.$$eval(`#${id} tbody tr`, (trs) => trs.map((tr) => [...tr.children].map((c) => c.textContent ?? '')))

  test('the page is on the admin listener only: / of the public listener is traffic for the backend', async () => {
    const page = await fetch(`${admin}/`)
    assert.equal(page.status, 200)
    assert.match(await page.text(), /<title>Fairvisor status<\/title>/)
    const before = backend.count
    const proxied = await fetch(`${gw.url}/`)
    assert.equal(await proxied.text(), 'ok')
    assert.equal(backend.count, before + 1)
  })

  test('the limited key is shown with its reject rate; its reset button makes its next request pass', async () => {
    assert.equal(await asUser('alice'), 200)
    assert.equal(await asUser('alice'), 200)
    assert.equal(await asUser('alice'), 429)
    assert.equal(await asUser('bob'), 200)

    const { page, requests, errors } = await openPage()
    await typeToken(page, TOKEN)

    // Live: alice keeps being rejected until the page has measured a reject rate between two of its polls.
    let traffic = true
    const rejecting = (async () => {
      while (traffic) assert.equal(await asUser('alice'), 429)
    })()
    try {
      await page.waitForFunction(
        () => {
          const row = [...document.querySelectorAll('#reasons tbody tr')].find(
            (tr) => tr.children[0]?.textContent === 'token_bucket_exceeded',
          )
          return row !== undefined && /^[1-9]|^0[.,]\d*[1-9]/.test(row.children[1]?.textContent ?? '')
        },
        { timeout: SHOWN_MS },
      )
    } finally {
      traffic = false
      await rejecting
    }

    const entry = await page.waitForFunction(
      () =>
        [...document.querySelectorAll('#top tbody tr')]
          .map((tr) => [...tr.children].map((c) => c.textContent ?? ''))
          .find((cells) => cells[0] === 'api' && cells[1] === 'per_user' && cells[3] === 'alice'),
      { timeout: SHOWN_MS },
    )
    const [, , reason, key, count] = (await entry.jsonValue()) as string[]
    assert.equal(reason, 'token_bucket_exceeded')
    assert.ok(Number(count!.replace(/\D/g, '')) >= 1, `rejects counted: ${count}`)
    assert.ok(!(await rowsOf(page, 'top')).some((cells) => cells[3]?.includes('bob')), 'bob was never rejected')

    // The rest of the page: bundle, store, workers, decisions.
    const gateway = await page.$eval('#gateway', (dl) => dl.textContent ?? '')
    assert.match(gateway, /Workers\s*2/)
    assert.match(gateway, /Store\s*\w+, healthy/)
    assert.match(gateway, /Readiness\s*ready/)
    const { policy_hash } = (await (await fetch(`${admin}/readyz`)).json()) as { policy_hash: string }
    assert.ok(gateway.includes(`Bundle hash${policy_hash}`), `the hash /readyz shows: ${policy_hash} in ${gateway}`)
    const rules = await page.$$eval('#policies tbody tr', (trs) => trs.map((tr) => [...tr.children].map((c) => c.textContent)))
    assert.deepEqual(rules, [['per_user', 'token_bucket', 'burst = 2; tokens_per_second = 0.001', 'header:x-user']])
    const decisions = Object.fromEntries((await rowsOf(page, 'decisions')).map((cells) => [cells[0], cells[2]]))
    assert.ok(Number(decisions.Allowed!.replace(/\D/g, '')) >= 3, JSON.stringify(decisions))
    assert.ok(Number(decisions.Rejected!.replace(/\D/g, '')) >= 2, JSON.stringify(decisions))

    // Reset alice's counter with the button of her row, found by its accessible name.
    await page.locator(`::-p-aria([name="Reset counter of key ${key} (api/per_user)"][role="button"])`).click()
    await page.waitForFunction(() => document.getElementById('notice')?.textContent?.startsWith('Counter reset'), { timeout: SHOWN_MS })
    assert.equal(await asUser('alice'), 200, 'the first request after the reset passes')
    assert.equal(await asUser('alice'), 200, 'a full bucket again')
    assert.equal(await asUser('alice'), 429, 'and limited as before')

    const foreign = requests.filter((u) => !u.startsWith(`${admin}/`))
    assert.deepEqual(foreign, [], 'every request of the page goes to the admin listener')
    assert.ok(
      requests.some((u) => u.startsWith(`${admin}/v1/admin/counters?`)),
      'the reset went through the admin API',
    )
    assert.ok(!requests.some((u) => u.includes(TOKEN)), 'the token is never in a URL')
    assert.deepEqual(errors, [], 'no script error, no blocked resource')
    await page.close()
  })

  test('a wrong token brings the prompt back, saying so; Forget token asks again', async () => {
    const { page, errors } = await openPage()
    const refused: number[] = []
    page.on('response', (r) => {
      if (r.url().includes('/v1/admin/')) refused.push(r.status())
    })
    await typeToken(page, `${TOKEN}x`)
    await page.waitForFunction(
      () => document.getElementById('login-error')?.textContent?.includes('refused') && !document.getElementById('login')?.hidden,
      { timeout: SHOWN_MS },
    )
    assert.equal(await page.$eval('#status', (e) => (e as HTMLElement).hidden), true, 'nothing shown without a good token')
    assert.equal(await page.evaluate(() => sessionStorage.length), 0, 'the refused token is forgotten')
    assert.ok(refused.length > 0 && refused.every((s) => s === 401), `answers: ${refused}`)

    await typeToken(page, TOKEN)
    await page.waitForFunction(() => (document.querySelectorAll('#policies tbody tr').length ?? 0) > 0, { timeout: SHOWN_MS })
    assert.equal(await page.$eval('#login-error', (e) => e.textContent), '')
    await page.locator('::-p-aria([name="Forget token"][role="button"])').click()
    await page.waitForFunction(() => !document.getElementById('login')?.hidden, { timeout: SHOWN_MS })
    assert.equal(await page.evaluate(() => sessionStorage.length), 0)
    // 401s are the browser's console errors for failed loads; nothing else may be there.
    assert.deepEqual(
      errors.filter((e) => !/status of 401/.test(e)),
      [],
    )
    await page.close()
  })
})
