/**
 * deploy/grafana/fairvisor.json and deploy/prometheus/alerts.yml stay true to
 * /metrics: every metric a query names is exported by a real gateway (after
 * traffic through most features), and every label a query groups by or
 * matches on is one that metric carries. The dashboard is a well-formed
 * Grafana model; the alert rules pass `promtool check rules` and their unit
 * tests (`promtool test rules`).
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { before, describe, test } from 'node:test'
import { parse } from 'yaml'
import { createMetrics } from '../../src/observe/metrics.js'
import { ROOT } from '../helpers/processes.js'
import { labelsIn, metricsIn, scrapeBusyGateway, type Scrape } from '../helpers/scrape-gateway.js'

/** Labels Prometheus adds when it scrapes. */
const TARGET_LABELS = ['job', 'instance']

/** Label names per metric, from the registry the gateway builds. */
function labelNames(): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>()
  for (const m of createMetrics().registry.getMetricsAsArray()) {
    const own = (m as unknown as { labelNames?: string[] }).labelNames ?? []
    out.set(m.name, new Set([...own, ...TARGET_LABELS, ...((m as unknown as { type: string }).type === 'histogram' ? ['le'] : [])]))
  }
  return out
}

function checkExpr(where: string, expr: string, scrape: Scrape, labels: Map<string, Set<string>>): void {
  const names = metricsIn(expr, scrape.families)
  assert.ok(names.length > 0, `${where}: names no fairvisor_ metric: ${expr}`)
  for (const n of names) assert.ok(scrape.families.has(n), `${where}: ${n} is not exported by the gateway's /metrics`)
  for (const l of labelsIn(expr)) {
    assert.ok(
      names.some((n) => labels.get(n)?.has(l)),
      `${where}: label ${l} is on none of ${names.join(', ')}`,
    )
  }
}

interface Panel {
  id: number
  type: string
  title: string
  gridPos: { h: number; w: number; x: number; y: number }
  datasource?: { type: string; uid: string }
  targets?: { refId: string; expr: string; datasource?: { uid: string } }[]
}

const dashboard = JSON.parse(readFileSync(join(ROOT, 'deploy/grafana/fairvisor.json'), 'utf8')) as {
  title: string
  uid: string
  schemaVersion: number
  panels: Panel[]
  templating: { list: { name: string; type: string; query: string | { query: string } }[] }
  annotations: { list: { name: string; expr?: string }[] }
}
const alerts = parse(readFileSync(join(ROOT, 'deploy/prometheus/alerts.yml'), 'utf8')) as {
  groups: { name: string; rules: { alert: string; expr: string; labels: { severity: string }; annotations: { summary: string } }[] }[]
}

describe('Grafana dashboard and Prometheus alerts against a running gateway', () => {
  let scrape: Scrape
  let labels: Map<string, Set<string>>
  before(async () => {
    scrape = await scrapeBusyGateway()
    labels = labelNames()
  })

  test('the dashboard is a Grafana dashboard model', () => {
    assert.ok(dashboard.title && dashboard.uid)
    assert.ok(Number.isInteger(dashboard.schemaVersion) && dashboard.schemaVersion >= 36, `schemaVersion ${dashboard.schemaVersion}`)
    const ds = dashboard.templating.list.find((v) => v.type === 'datasource')
    assert.ok(ds && ds.query === 'prometheus', 'a Prometheus data source variable')
    const ids = dashboard.panels.map((p) => p.id)
    assert.equal(new Set(ids).size, ids.length, 'panel ids are unique')
    // Panels lie on the 24-column grid without overlapping.
    const cells = new Set<string>()
    for (const p of dashboard.panels) {
      const g = p.gridPos
      assert.ok(
        [g.h, g.w, g.x, g.y].every(Number.isInteger) && g.w > 0 && g.h > 0 && g.x >= 0 && g.x + g.w <= 24,
        `${p.title}: gridPos ${JSON.stringify(g)}`,
      )
      for (let x = g.x; x < g.x + g.w; x++)
        for (let y = g.y; y < g.y + g.h; y++) {
          assert.ok(!cells.has(`${x},${y}`), `${p.title} overlaps another panel at ${x},${y}`)
          cells.add(`${x},${y}`)
        }
      if (p.type === 'row') continue
      assert.equal(p.datasource?.uid, `\${${ds.name}}`, `${p.title}: uses the data source variable`)
      assert.ok(p.targets && p.targets.length > 0, `${p.title}: has targets`)
      const refIds = p.targets.map((t) => t.refId)
      assert.equal(new Set(refIds).size, refIds.length, `${p.title}: refIds are unique`)
      for (const t of p.targets) assert.ok(typeof t.expr === 'string' && t.expr.length > 0, `${p.title}: target ${t.refId} has an expr`)
    }
  })

  test('every dashboard query names metrics and labels the gateway exports', () => {
    let n = 0
    for (const p of dashboard.panels) {
      for (const t of p.targets ?? []) {
        checkExpr(`panel "${p.title}"`, t.expr, scrape, labels)
        n++
      }
    }
    for (const v of dashboard.templating.list)
      if (typeof v.query === 'object') checkExpr(`variable ${v.name}`, v.query.query, scrape, labels)
    for (const a of dashboard.annotations.list) if (a.expr) checkExpr(`annotation ${a.name}`, a.expr, scrape, labels)
    assert.ok(n >= 20, `${n} queries`)
  })

  test('the dashboard covers decisions, rejects, store, reloads, LLM tokens, budgets and circuit breakers', () => {
    const exprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr)).join('\n')
    for (const needed of [
      'fairvisor_decisions_total',
      'fairvisor_store_errors_total',
      'store_unavailable_fail_open',
      'fairvisor_store_full_total',
      'fairvisor_store_fill_ratio',
      'fairvisor_config_reload_total',
      'fairvisor_tokens_consumed_total',
      'fairvisor_token_reservation_unused_total',
      'fairvisor_token_settlements_total',
      'budget_exceeded',
      'fairvisor_circuit_state',
      'fairvisor_decision_duration_seconds_bucket',
    ])
      assert.ok(exprs.includes(needed), `no panel shows ${needed}`)
  })

  test('every alert names metrics and labels the gateway exports', () => {
    const rules = alerts.groups.flatMap((g) => g.rules)
    assert.ok(rules.length >= 5)
    for (const r of rules) {
      checkExpr(`alert ${r.alert}`, r.expr, scrape, labels)
      assert.ok(['critical', 'warning', 'info'].includes(r.labels.severity), `${r.alert}: severity`)
      assert.ok(r.annotations.summary, `${r.alert}: summary`)
    }
    const page = readFileSync(join(ROOT, 'docs/deploy.md'), 'utf8')
    for (const r of rules) assert.ok(page.includes(`| \`${r.alert}\` |`), `docs/deploy.md does not list ${r.alert}`)
    for (const name of ['FairvisorStoreErrors', 'FairvisorFailingOpen', 'FairvisorReloadFailing', 'FairvisorStoreFull']) {
      assert.ok(
        rules.some((r) => r.alert === name),
        `no ${name} alert`,
      )
    }
  })

  const promtool = spawnSync('promtool', ['--version'], { encoding: 'utf8' })
  const skip = promtool.error ? 'promtool is not installed (Debian: apt-get install prometheus; .ci/run does it)' : false
  test('promtool check rules and promtool test rules pass', { skip }, () => {
    const dir = join(ROOT, 'deploy/prometheus')
    const check = spawnSync('promtool', ['check', 'rules', 'alerts.yml'], { cwd: dir, encoding: 'utf8', timeout: 60000 })
    assert.equal(check.status, 0, check.stdout + check.stderr)
    const unit = spawnSync('promtool', ['test', 'rules', 'alerts.test.yml'], { cwd: dir, encoding: 'utf8', timeout: 60000 })
    assert.equal(unit.status, 0, unit.stdout + unit.stderr)
    // Every alert has a unit test.
    const tested = readFileSync(join(dir, 'alerts.test.yml'), 'utf8')
    for (const r of alerts.groups.flatMap((g) => g.rules))
      assert.match(tested, new RegExp(`alertname: ${r.alert}\\b`), `${r.alert} has no promtool test`)
  })
})
