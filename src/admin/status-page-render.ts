/**
 * The status page's DOM helpers (browser JavaScript in a string, joined before
 * admin/status-page-script.ts's SCRIPT in the page's one script element):
 * tables, definition lists, the SVG rate lines, number and time formats.
 * Everything a client could have chosen (keys, reasons, bundle text) goes in
 * through textContent or a Text node, never as markup. No template literals or
 * backslashes inside, so the text is the same once embedded.
 */

export const RENDER = `
'use strict'
const $ = (id) => document.getElementById(id)
const HISTORY = 60 // seconds of rates kept for the lines
const numbers = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 })
const rateNumbers = new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 })

const formatCount = (n) => numbers.format(n)
const formatRate = (r) => rateNumbers.format(r) + '/s'

/** An ISO instant as local date and time, the ISO text in the element's title. */
function when(iso) {
  const t = document.createElement('time')
  if (!iso) return t
  t.dateTime = iso
  t.title = iso
  const d = new Date(iso)
  t.textContent = Number.isNaN(d.getTime()) ? iso : d.toLocaleString()
  return t
}

function code(text) {
  const c = document.createElement('code')
  c.textContent = text
  return c
}

/** Text read by screen readers only (a button's full name beside its short visible text). */
function hidden(text) {
  const s = document.createElement('span')
  s.className = 'visually-hidden'
  s.textContent = text
  return s
}

/** A table cell's content with a class (e.g. num for right-aligned figures). */
function cell(content, className) {
  return { content, className }
}

/** Replaces a table's body rows; each row is a list of strings, nodes or cell(). */
function fill(tableEl, rows, emptyText) {
  const body = tableEl.tBodies[0]
  const width = tableEl.tHead ? tableEl.tHead.rows[0].cells.length : 1
  body.replaceChildren()
  if (rows.length === 0) {
    const td = body.insertRow().insertCell()
    td.colSpan = width
    td.className = 'empty'
    td.textContent = emptyText
    return
  }
  for (const row of rows) {
    const tr = body.insertRow()
    row.forEach((c, i) => {
      // The first cell of a row names it: a row header for screen readers.
      const td = document.createElement(i === 0 ? 'th' : 'td')
      if (i === 0) td.scope = 'row'
      const content = c !== null && typeof c === 'object' && 'content' in c ? c.content : c
      if (c !== null && typeof c === 'object' && 'className' in c) td.className = c.className
      td.append(content === undefined || content === null ? '' : content)
      tr.append(td)
    })
  }
}

/** An empty table with a caption and column headers. */
function table(headers, caption) {
  const t = document.createElement('table')
  t.createCaption().textContent = caption
  const tr = t.createTHead().insertRow()
  for (const h of headers) {
    const th = document.createElement('th')
    th.scope = 'col'
    th.textContent = h
    tr.append(th)
  }
  t.createTBody()
  return t
}

/** Fills a dl with [term, text or node] pairs. */
function describe(dl, pairs) {
  dl.replaceChildren()
  for (const [term, value] of pairs) {
    const dt = document.createElement('dt')
    dt.textContent = term
    const dd = document.createElement('dd')
    dd.append(value === undefined || value === null ? '' : value)
    dl.append(dt, dd)
  }
}

/** A rule's algorithm_config as name = value pairs (nested values as JSON). */
function limits(config) {
  const entries = Object.entries(config || {})
  if (entries.length === 0) return ''
  return entries.map(([k, v]) => k + ' = ' + (v !== null && typeof v === 'object' ? JSON.stringify(v) : String(v))).join('; ')
}

/** The last minute of rates as an SVG line (a copy of the page's template), scaled to its own peak; its label says the peak. */
function sparkline(history, label) {
  const svg = $('spark').content.firstElementChild.cloneNode(true)
  svg.setAttribute('viewBox', '0 0 ' + (HISTORY - 1) + ' 10')
  const peak = Math.max(0, ...history)
  svg.setAttribute('aria-label', label + ' over the last minute: peak ' + formatRate(peak))
  const offset = HISTORY - history.length
  const y = (r) => (peak === 0 ? 9.5 : 9.5 - (r / peak) * 9)
  svg.querySelector('polyline').setAttribute('points', history.map((r, i) => offset + i + ',' + y(r).toFixed(2)).join(' '))
  return svg
}

function notice(text) {
  $('notice').textContent = text
}
`
