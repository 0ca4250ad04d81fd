// A bounded load test of `cis2 serve` on localhost (node >= 18, no packages: global fetch).
//   node tools/serve_load.mjs --url http://127.0.0.1:PORT --model ID --cases cases.json
//        [--clients 32] [--requests 8] [--pid SERVER_PID] [--warmup 1] [--slots MAX_BATCH]
// cases.json: [{"prompt": "..." | [ids], "max_tokens": N, "receipt": "CIS-2-RECEIPT v1\n..."}, ...]
// where each receipt is the same prompt run alone (`cis2 run --receipt`, made by the caller).
// Each client sends its requests one after another, cycling through the cases: every third
// request streams, every eighth streams and disconnects after its first text chunk. A 503 is
// retried after its Retry-After (counted, "designed"); anything else that is not a 200 with a
// receipt equal to the solo one is a failure. With --pid, the server's RSS is sampled: after
// the warm-up (every case once, then --slots at once) and through the run.
// Prints metrics (key=value), then PASS/FAIL lines; exit 1 on any FAIL.
import { readFileSync, statSync } from 'node:fs';
import { sseEvents } from '../web/serve/sse.mjs';

const args = Object.fromEntries(process.argv.slice(2).reduce((a, v, i, all) => {
  if (v.startsWith('--')) a.push([v.slice(2), all[i + 1]]);
  return a;
}, []));
// Bad input: one line naming the flag, exit 2.
const refuse = (msg) => { console.error(`serve_load: ${msg}`); process.exit(2); };
const url = args.url, model = args.model;
if (!/^http:\/\/[^\s]+$/.test(url ?? '')) refuse(`--url wants http://HOST:PORT, got ${JSON.stringify(url)}`);
// A positive integer flag of at most `digits` digits (a pid can have 7).
const count = (name, def, digits = 6) => {
  const v = args[name] ?? def;
  if (!new RegExp(`^[1-9][0-9]{0,${digits - 1}}$`).test(v)) refuse(`--${name} wants a positive integer, got ${JSON.stringify(v)}`);
  return parseInt(v, 10);
};
const clients = count('clients', '32'), perClient = count('requests', '8'), slots = count('slots', '1');
const pid = args.pid === undefined ? 0 : count('pid', undefined, 7);
let cases;
try {
  if (!statSync(args.cases).isFile()) throw new Error('not a regular file'); // a FIFO would block the read
  cases = JSON.parse(readFileSync(args.cases, 'utf8'));
}
// e.message can quote the path or the file's bytes: printed escaped
catch (e) { refuse(`--cases ${JSON.stringify(args.cases)}: ${JSON.stringify(e.message).slice(1, -1)}`); }
if (!Array.isArray(cases) || !cases.length || !cases.every((c) => c && typeof c === 'object' && 'prompt' in c))
  refuse(`--cases ${JSON.stringify(args.cases)}: wants a non-empty JSON array of {"prompt": ...} objects`);

const rssKb = () => {
  if (!pid) return 0;
  try { return parseInt(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1], 10); }
  catch { return 0; }
};
// The server's CPU seconds (utime + stime, in Linux's fixed 100 Hz USER_HZ): a figure the
// other load on a shared machine disturbs less than wall time.
const cpuS = () => {
  if (!pid) return 0;
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (parseInt(f[11], 10) + parseInt(f[12], 10)) / 100;
  } catch { return 0; }
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const stats = { ok: 0, streamed: 0, aborted: 0, busy503: 0, failed: 0, mismatched: 0, tokens: 0, lat: [], ttft: [] };
const failures = [];

async function readStream(res, abortAfterFirst, ctl, t0) {
  let final = null, sawText = false;
  for await (const j of sseEvents(res.body)) {
    if (j.error) throw new Error(`stream error: ${j.error.message}`);
    if (j.choices[0] && j.choices[0].text && !sawText) {
      sawText = true;
      stats.ttft.push(performance.now() - t0);
      if (abortAfterFirst) { ctl.abort(); return 'aborted'; }
    }
    if (j.cis2) final = j;
  }
  return final;
}

async function one(c, mode) {
  const body = { model, prompt: c.prompt, max_tokens: c.max_tokens, stream: mode !== 'plain' };
  for (let attempt = 0; ; attempt++) {
    const ctl = new AbortController();
    const t0 = performance.now();
    let res;
    try {
      res = await fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(body), signal: ctl.signal });
    } catch (e) { stats.failed++; failures.push(`fetch: ${e.message}`); return; }
    if (res.status === 503 && attempt < 100) {
      stats.busy503++;
      await res.text();
      await sleep(1000 * parseFloat(res.headers.get('retry-after') || '1'));
      continue;
    }
    if (res.status !== 200) { stats.failed++; failures.push(`HTTP ${res.status}: ${(await res.text()).slice(0, 200)}`); return; }
    let out;
    try {
      out = mode === 'plain' ? await res.json() : await readStream(res, mode === 'abort', ctl, t0);
    } catch (e) {
      if (mode === 'abort' && e.name === 'AbortError') { stats.aborted++; return; }
      stats.failed++; failures.push(`${mode}: ${e.message}`); return;
    }
    if (out === 'aborted') { stats.aborted++; return; }
    if (!out || !out.cis2) { stats.failed++; failures.push(`${mode}: no cis2 object`); return; }
    stats.lat.push(performance.now() - t0);
    stats.ok++;
    if (mode !== 'plain') stats.streamed++;
    stats.tokens += out.usage.completion_tokens;
    if (out.cis2.receipt !== c.receipt) {
      stats.mismatched++;
      failures.push(`receipt differs from the solo run for prompt ${JSON.stringify(c.prompt).slice(0, 60)}`);
    }
    return;
  }
}

const modeOf = (client, i) => ((client * perClient + i) % 8 === 7 ? 'abort' : (client + i) % 3 === 0 ? 'stream' : 'plain');
const pct = (a, p) => { if (!a.length) return 0; const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.floor(p / 100 * s.length))]; };

// Warm-up: every case once, sequentially (first-touch allocations), then --slots copies of
// each case at once, so that every sequence slot has held every case: a slot keeps its KV
// cache's memory for its next sequence (docs/serve.md), so RSS after this is the run's bound.
if (args.warmup !== '0') {
  for (const c of cases) await one(c, 'plain');
  if (slots > 1) for (const c of cases) await Promise.all(Array.from({ length: slots }, () => one(c, 'plain')));
}
const warm = { ...stats };
for (const k of ['ok', 'streamed', 'aborted', 'busy503', 'failed', 'mismatched', 'tokens']) stats[k] = 0;
stats.lat = []; stats.ttft = [];
const rss0 = rssKb();
let rssMax = rss0;
const sampler = setInterval(() => { rssMax = Math.max(rssMax, rssKb()); }, 200);
const cpu0 = cpuS();
const t0 = performance.now();
await Promise.all(Array.from({ length: clients }, async (_, client) => {
  for (let i = 0; i < perClient; i++) await one(cases[(client * perClient + i) % cases.length], modeOf(client, i));
}));
const wall = (performance.now() - t0) / 1000;
const cpu = cpuS() - cpu0;
clearInterval(sampler);
await sleep(300); // let the server free the aborted sequences' slots
const rss1 = rssKb();
rssMax = Math.max(rssMax, rss1);

const total = clients * perClient;
console.log(`clients=${clients} requests_per_client=${perClient} requests=${total} wall_s=${wall.toFixed(2)}`);
console.log(`completed=${stats.ok} streamed=${stats.streamed} aborted_by_client=${stats.aborted} busy_503_retried=${stats.busy503} failed=${stats.failed} receipt_mismatches=${stats.mismatched}`);
console.log(`requests_per_s=${(stats.ok / wall).toFixed(2)} latency_p50_ms=${pct(stats.lat, 50).toFixed(0)} latency_p99_ms=${pct(stats.lat, 99).toFixed(0)} ttft_p50_ms=${pct(stats.ttft, 50).toFixed(0)}`);
console.log(`completion_tokens=${stats.tokens} aggregate_tokens_per_s=${(stats.tokens / wall).toFixed(1)}`);
if (pid) {
  console.log(`server_cpu_s=${cpu.toFixed(1)} tokens_per_server_cpu_s=${(stats.tokens / cpu).toFixed(1)} load_average=${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(',')}`);
  console.log(`rss_after_warmup_kb=${rss0} rss_end_kb=${rss1} rss_max_kb=${rssMax}`);
}
for (const f of failures.slice(0, 10)) console.log(`  ${f}`);
let fails = 0;
const check = (name, ok, why) => { console.log(ok ? `PASS serve.load.${name}` : `FAIL serve.load.${name}: ${why}`); if (!ok) fails++; };
check('warmup', warm.failed === 0 && warm.mismatched === 0, `${warm.failed} failed, ${warm.mismatched} mismatched`);
check('no-failed-requests', stats.failed === 0, `${stats.failed} failed`);
check('every-request-accounted', stats.ok + stats.aborted === total, `${stats.ok} + ${stats.aborted} != ${total}`);
check('receipts-equal-solo-runs', stats.mismatched === 0 && stats.ok > 0, `${stats.mismatched} of ${stats.ok}`);
// Stable: the run's growth after warm-up stays under max(16 MB, 25 %) — no per-request leak.
if (pid) check('rss-stable', rss1 - rss0 < Math.max(16384, rss0 / 4), `after warm-up ${rss0} kB, at the end ${rss1} kB`);
process.exit(fails ? 1 : 0);
