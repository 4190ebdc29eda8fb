// Drives headless Chromium through the DevTools protocol for the viewer's
// end-to-end tests: loads a page, waits (in real time, so the page's own
// performance.now() figures are real) until the viewer says ready, error
// or idle (listing the profiles, waiting for a choice), optionally exercises zoom, search and sorting, saves a
// screenshot, and prints one JSON object describing what the page shows.
//
//   node --experimental-websocket cdp.js URL... [--header 'Name: value']
//        [--page-header 'Name: value'] [--screenshot FILE] [--width W]
//        [--height H] [--timeout MS] [--interact]
//
// --header goes on every request, --page-header on page loads only (so a
// test can tell whether the page's own fetches carry a token). With more
// than one URL they are loaded in turn in the same browser and the output
// is a JSON array; the screenshot and interactions are of the first.
//
// It starts its own Chromium with a temporary profile and ends it (by its
// own process id) before exiting.
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const args = process.argv.slice(2);
const opt = { urls: [], headers: {}, pageHeaders: {}, screenshot: null, width: 1400, height: 900, timeout: 60000, interact: false };
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--header' || a === '--page-header') {
    const [k, ...v] = args[++i].split(':');
    (a === '--header' ? opt.headers : opt.pageHeaders)[k.trim()] = v.join(':').trim();
  }
  else if (a === '--screenshot') opt.screenshot = args[++i];
  else if (a === '--width') opt.width = +args[++i];
  else if (a === '--height') opt.height = +args[++i];
  else if (a === '--timeout') opt.timeout = +args[++i];
  else if (a === '--interact') opt.interact = true;
  else opt.urls.push(a);
}
if (!opt.urls.length) { console.error('usage: cdp.js URL [options]'); process.exit(2); }

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// Chromium is started again, once, if it exits before it opens its
// debugging port (a start-up crash on a loaded machine); what it printed
// is shown either way.
let dataDir = null, chrome = null, chromeExit = null, chromeErr = '';
function startChrome() {
  dataDir = fs.mkdtempSync(path.join(process.env.CPROFTEST_TMP || os.tmpdir(), 'chrome-'));
  chromeExit = null;
  chromeErr = '';
  chrome = spawn('chromium', ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage',
    '--disable-background-timer-throttling', '--disable-renderer-backgrounding', '--disable-backgrounding-occluded-windows',
    '--remote-debugging-port=0', '--user-data-dir=' + dataDir, '--window-size=' + opt.width + ',' + opt.height, 'about:blank'],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  chrome.stderr.on('data', (d) => { chromeErr = (chromeErr + d).slice(-2000); });
  chrome.on('exit', (code, sig) => { chromeExit = sig || code; });
}
startChrome();

function finish(code, out) {
  if (out) process.stdout.write(JSON.stringify(out, null, 1) + '\n');
  try { process.kill(chrome.pid, 'SIGTERM'); } catch (e) { /* already gone */ }
  setTimeout(() => { try { fs.rmSync(dataDir, { recursive: true, force: true }); } catch (e) { /* best effort */ } process.exit(code); }, 300);
}
setTimeout(() => { console.error('cdp.js: gave up after the timeout'); finish(1); }, opt.timeout * opt.urls.length + 20000).unref();

(async () => {
  let port = 0;
  for (let i = 0, starts = 1; i < 300 && !port; i++) {
    try { port = +fs.readFileSync(path.join(dataDir, 'DevToolsActivePort'), 'utf8').split('\n')[0]; } catch (e) { /* not yet */ }
    if (port) break;
    if (chromeExit !== null && starts < 2) {
      console.error('cdp.js: Chromium exited (' + chromeExit + ') before opening its debugging port; starting it again. It printed:\n' + chromeErr);
      try { fs.rmSync(dataDir, { recursive: true, force: true }); } catch (e) { /* best effort */ }
      startChrome();
      starts++;
    }
    await sleep(100);
  }
  if (!port) throw new Error('Chromium did not open its debugging port' + (chromeExit !== null ? ' (it exited: ' + chromeExit + ')' : '') + '; it printed:\n' + chromeErr);
  let target = null;
  for (let i = 0; i < 100 && !target; i++) {
    try { target = (await (await fetch('http://127.0.0.1:' + port + '/json/list')).json()).find((t) => t.type === 'page'); } catch (e) { /* not yet */ }
    if (!target) await sleep(100);
  }
  const ws = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise((res, rej) => { ws.onopen = res; ws.onerror = rej; });
  let seq = 0;
  const pending = new Map();
  let consoleLines = [];
  ws.onmessage = (ev) => {
    const m = JSON.parse(ev.data);
    if (m.id && pending.has(m.id)) { pending.get(m.id)(m); pending.delete(m.id); }
    else if (m.method === 'Fetch.requestPaused') {
      const h = Object.entries(Object.assign({}, m.params.request.headers, opt.pageHeaders)).map(([name, value]) => ({ name, value }));
      ws.send(JSON.stringify({ id: ++seq, method: 'Fetch.continueRequest', params: { requestId: m.params.requestId, headers: h } }));
    }
    else if (m.method === 'Runtime.exceptionThrown') consoleLines.push('exception: ' + JSON.stringify(m.params.exceptionDetails).slice(0, 500));
  };
  const send = (method, params = {}) => new Promise((res, rej) => {
    const id = ++seq;
    pending.set(id, (m) => (m.error ? rej(new Error(method + ': ' + JSON.stringify(m.error))) : res(m.result)));
    ws.send(JSON.stringify({ id, method, params }));
  });
  const evaluate = async (expr) => {
    const r = await send('Runtime.evaluate', { expression: expr, returnByValue: true, awaitPromise: true });
    if (r.exceptionDetails) throw new Error('evaluate: ' + JSON.stringify(r.exceptionDetails).slice(0, 500));
    return r.result.value;
  };
  await send('Runtime.enable');
  await send('Page.enable');
  await send('Network.enable');
  if (Object.keys(opt.headers).length) await send('Network.setExtraHTTPHeaders', { headers: opt.headers });
  if (Object.keys(opt.pageHeaders).length)
    await send('Fetch.enable', { patterns: [{ resourceType: 'Document', requestStage: 'Request' }] });
  await send('Emulation.setDeviceMetricsOverride', { width: opt.width, height: opt.height, deviceScaleFactor: 1, mobile: false });
  const results = [];
  for (let ui = 0; ui < opt.urls.length; ui++) {
  const first = ui === 0;
  const t0 = Date.now();
  await send('Page.navigate', { url: opt.urls[ui] });
  await sleep(200);
  let state = '';
  while (Date.now() - t0 < opt.timeout) {
    await sleep(100);
    try { state = await evaluate("(document.getElementById('status') || {dataset: {}}).dataset.state || ''"); } catch (e) { state = ''; }
    if (state === 'ready' || state === 'error' || state === 'idle') break;
  }
  const describe = `(() => {
    const $ = (id) => document.getElementById(id);
    const frames = Array.from(document.querySelectorAll('#flame .frame')).map((el) => ({
      name: el.dataset.name, value: +el.dataset.value, self: +el.dataset.self, depth: +el.dataset.depth,
      x: +el.dataset.x, w: +el.dataset.w, match: el.classList.contains('match') }));
    const top = Array.from(document.querySelectorAll('#top tbody tr')).slice(0, 20).map((tr) => ({
      name: tr.dataset.name, flat: +tr.dataset.flat, cum: +tr.dataset.cum }));
    return { status: $('status') ? $('status').dataset.state : null, error: $('error') ? $('error').textContent : null,
      renderMs: $('render-ms') ? +$('render-ms').textContent : null, frameCount: $('frame-count') ? +$('frame-count').textContent : null,
      samples: $('sample-count') ? +$('sample-count').textContent : null, total: $('total') ? +$('total').dataset.value : null,
      sample: $('sample') ? $('sample').value : null, profiles: Array.from(document.querySelectorAll('#profile option')).map((o) => o.value),
      location: location.href, frames, top };
  })()`;
  const out = await evaluate(describe);
  out.waitedMs = Date.now() - t0;
  out.console = consoleLines;
  consoleLines = [];
  if (first && opt.screenshot) {
    const shot = await send('Page.captureScreenshot', { format: 'png' });
    fs.writeFileSync(opt.screenshot, Buffer.from(shot.data, 'base64'));
  }
  if (first && opt.interact && out.status === 'ready') {
    // Zoom into the hottest non-root frame, then back out through the root.
    out.interact = await evaluate(`(async () => {
      const q = (s) => Array.from(document.querySelectorAll(s));
      const r = {};
      const frames = q('#flame .frame').filter((el) => el.dataset.depth !== '0');
      frames.sort((a, b) => (+b.dataset.self) - (+a.dataset.self));
      const hot = frames[0];
      const name = hot.dataset.name, depth = hot.dataset.depth;
      hot.dispatchEvent(new MouseEvent('mousemove', { bubbles: true, clientX: 20, clientY: 20 }));
      r.tooltip = document.getElementById('tooltip').textContent;
      let t = performance.now();
      hot.click();
      r.zoomMs = performance.now() - t;
      const zoomed = q('#flame .frame').find((el) => el.dataset.name === name && el.dataset.depth === depth);
      r.zoomedWidth = zoomed ? +zoomed.dataset.w : null;
      r.rootWidth = +q('#flame .frame')[0].dataset.w;
      q('#flame .frame')[0].click();
      r.framesAfterReset = q('#flame .frame').length;
      const s = document.getElementById('search');
      s.value = '^' + name + '$';
      t = performance.now();
      s.dispatchEvent(new Event('input'));
      r.searchMs = performance.now() - t;
      r.matches = q('#flame .frame.match').map((el) => el.dataset.name);
      r.matched = document.getElementById('matched').textContent;
      s.value = '';
      s.dispatchEvent(new Event('input'));
      const th = q('#top th').find((el) => el.dataset.key === 'cum');
      th.click();
      const cums = q('#top tbody tr').slice(0, 50).map((tr) => +tr.dataset.cum);
      r.sortedByCum = cums.every((v, i) => i === 0 || Math.abs(cums[i - 1]) >= Math.abs(v));
      q('#top th').find((el) => el.dataset.key === 'name').click();
      const names = q('#top tbody tr').slice(0, 50).map((tr) => tr.dataset.name);
      r.sortedByName = names.every((v, i) => i === 0 || names[i - 1] <= v);
      r.hot = name;
      return r;
    })()`);
  }
  results.push(out);
  }
  ws.close();
  finish(0, results.length === 1 ? results[0] : results);
})().catch((e) => { console.error('cdp.js: ' + (e && e.stack ? e.stack : e)); finish(1); });
