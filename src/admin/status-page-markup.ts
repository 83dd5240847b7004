/**
 * The status page's markup and style (served by admin/status-page.ts, filled
 * in by the script of admin/status-page-script.ts). Plain HTML kept as strings
 * so the build (tsc alone) ships it in dist/ with nothing to copy. No inline
 * `style` attributes or event handlers: the Content-Security-Policy allows
 * only the one style element and the one script element, by hash.
 */

export const STYLE = `
:root { color-scheme: light dark; --fg: #1b1f24; --muted: #57606a; --line: #d0d7de; --bg: #fff; --alt: #f6f8fa;
  --ok: #1a7f37; --bad: #cf222e; --accent: #0969da; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6edf3; --muted: #9aa5b1; --line: #30363d; --bg: #0d1117; --alt: #161b22;
    --ok: #3fb950; --bad: #f85149; --accent: #58a6ff; }
}
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; gap: 1rem; align-items: baseline; flex-wrap: wrap; padding: .75rem 1.25rem; border-bottom: 1px solid var(--line); }
header h1 { font-size: 1.25rem; margin: 0; }
#updated { color: var(--muted); margin: 0; flex: 1; }
main { padding: 0 1.25rem 2rem; max-width: 90rem; }
section { margin-top: 1.5rem; }
h2 { font-size: 1.1rem; margin: 0 0 .5rem; }
h3 { font-size: 1rem; margin: 1rem 0 .4rem; }
.grid { display: grid; gap: 1.5rem; grid-template-columns: repeat(auto-fit, minmax(24rem, 1fr)); }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; margin: 0; }
dt { color: var(--muted); }
dd { margin: 0; overflow-wrap: anywhere; }
table { border-collapse: collapse; width: 100%; }
caption { text-align: left; color: var(--muted); padding-bottom: .3rem; }
th, td { text-align: left; padding: .3rem .6rem; border-bottom: 1px solid var(--line); vertical-align: middle; }
thead th { background: var(--alt); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.empty { color: var(--muted); font-style: italic; }
code { font: 12.5px/1.3 ui-monospace, SFMono-Regular, Menlo, monospace; overflow-wrap: anywhere; }
.ok { color: var(--ok); font-weight: 600; }
.bad { color: var(--bad); font-weight: 600; }
.spark { width: 8rem; height: 1.5rem; color: var(--accent); display: block; }
.spark polyline { fill: none; stroke: currentColor; stroke-width: 1.5; vector-effect: non-scaling-stroke; }
button { font: inherit; padding: .25rem .75rem; border: 1px solid var(--line); border-radius: 6px; background: var(--alt); color: var(--fg); cursor: pointer; }
button:hover:not(:disabled) { border-color: var(--accent); }
button:disabled { opacity: .6; cursor: progress; }
button:focus-visible, input:focus-visible { outline: 2px solid var(--accent); outline-offset: 2px; }
form { display: flex; gap: .5rem; align-items: center; flex-wrap: wrap; }
input { font: inherit; padding: .3rem .5rem; min-width: 20rem; border: 1px solid var(--line); border-radius: 6px; background: var(--bg); color: var(--fg); }
#login { max-width: 40rem; }
#login-error { font-weight: 600; min-height: 1.45em; color: var(--bad); }
#notice { font-weight: 600; }
.policy { margin-bottom: 1rem; }
.visually-hidden { position: absolute; width: 1px; height: 1px; padding: 0; margin: -1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; border: 0; }
[hidden] { display: none !important; }
`

/** The body: the token prompt and the status sections, empty until the script fills them. */
export const BODY = `
<header>
  <h1>Fairvisor status</h1>
  <p id="updated"></p>
  <button type="button" id="logout" hidden>Forget token</button>
</header>
<main>
  <section id="login" aria-labelledby="login-title" hidden>
    <h2 id="login-title">Admin token</h2>
    <p>This page reads the gateway's admin API. Enter the admin token (the value of <code>FAIRVISOR_ADMIN_TOKEN</code>);
      it is kept in this browser tab only, until the tab is closed.</p>
    <p id="login-error" role="alert"></p>
    <form id="login-form">
      <label for="token">Admin token</label>
      <input id="token" name="token" type="password" autocomplete="off" spellcheck="false" required>
      <button type="submit">Open status</button>
    </form>
  </section>

  <div id="status" hidden>
    <p id="notice" role="status" aria-live="polite"></p>
    <div class="grid">
      <section aria-labelledby="gateway-title">
        <h2 id="gateway-title">Gateway</h2>
        <dl id="gateway"></dl>
      </section>
      <section aria-labelledby="rates-title">
        <h2 id="rates-title">Decisions per second</h2>
        <table id="decisions">
          <caption>Summed over workers, measured each second; the line shows the last minute.</caption>
          <thead><tr><th scope="col">Decision</th><th scope="col" class="num">Per second</th>
            <th scope="col" class="num">Total</th><th scope="col">Last minute</th></tr></thead>
          <tbody></tbody>
        </table>
        <h3 id="reasons-title">Rejects per second by reason</h3>
        <table id="reasons" aria-labelledby="reasons-title">
          <thead><tr><th scope="col">Reason</th><th scope="col" class="num">Per second</th>
            <th scope="col" class="num">Total</th><th scope="col">Last minute</th></tr></thead>
          <tbody></tbody>
        </table>
      </section>
    </div>

    <section aria-labelledby="top-title">
      <h2 id="top-title">Most limited keys</h2>
      <table id="top">
        <caption id="top-caption">Keys rejected most; credentials are shown as their logged hash.</caption>
        <thead><tr><th scope="col">Policy</th><th scope="col">Rule</th><th scope="col">Reason</th><th scope="col">Key</th>
          <th scope="col" class="num">Rejects</th><th scope="col" class="num">Overcount at most</th>
          <th scope="col">Action</th></tr></thead>
        <tbody></tbody>
      </table>
    </section>

    <section aria-labelledby="bundle-title">
      <h2 id="bundle-title">Bundle</h2>
      <div id="policies"></div>
    </section>

    <section aria-labelledby="reloads-title">
      <h2 id="reloads-title">Reload history</h2>
      <table id="reloads">
        <caption>The last reloads, newest first.</caption>
        <thead><tr><th scope="col">At</th><th scope="col">Result</th><th scope="col">Version</th></tr></thead>
        <tbody></tbody>
      </table>
    </section>
  </div>
</main>
<template id="spark"><svg class="spark" role="img" preserveAspectRatio="none" viewBox="0 0 59 10"><polyline points=""></polyline></svg></template>
`
