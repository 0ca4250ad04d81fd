// The page's logic: pick files, load (hash) the model in a worker, verify a
// receipt field by field, run a prompt and offer its receipt.
const $ = (id) => document.getElementById(id);
let nextId = 1, loaded = null;   // the File objects of the loaded model
const pending = new Map();
const FILES = { 'config.json': 'f-config', 'tokenizer.json': 'f-tokenizer', 'model.safetensors': 'f-model' };
const HASH = new URLSearchParams(location.search).get('hash');

// The engine's worker, started again by Cancel (a fresh one: its heap, the model read into it
// and its hash worker go with the old one). Calls wait for the worker's init.
let worker = null, ready = null;
function send(w, cmd, extra = {}) {
  if (workerDead) return Promise.reject(workerDead);
  const id = nextId++;
  return new Promise((resolve, reject) => { pending.set(id, { resolve, reject }); w.postMessage({ id, cmd, ...extra }); });
}
function call(cmd, extra = {}) { return ready.then(() => send(worker, cmd, extra)); }

function setProgress(frac, label) { $('progress').value = frac; $('progress-label').textContent = label; }
const mb = (n) => (n / 1048576).toFixed(1) + ' MB';

function onWorkerMessage(m) {
  if (m.type === 'progress') {
    if (m.phase === 'hash') setProgress(m.done / m.total, `reading + hashing + packing ${m.file}: ${mb(m.done)} / ${mb(m.total)}`);
    else if (m.phase === 'hash-wait') setProgress(1, m.why === 'decoded' ? 'decoded; waiting for the SHA-256 of the last chunks' : 'waiting for the SHA-256 of the weights');
    else setProgress(m.done / m.total, `decoding: token ${m.done} / ${m.total}`);
  } else if (m.type === 'log') {
    $('selftest-log').textContent += m.line + '\n';
  } else {
    const p = pending.get(m.id);
    if (!p) return;   // a call already failed (workerFailed)
    pending.delete(m.id);
    if (m.dead) engineStopped();
    if (m.type === 'result') p.resolve(m.result); else p.reject(new Error(m.message));
  }
}

// The engine's worker failing outside a call (its script cannot load, an uncaught error, a
// message it cannot read) answers no call: every waiting call fails with that, not a stall.
let workerDead = null;
function failPending(e) {
  for (const p of pending.values()) p.reject(e);
  pending.clear();
}
function workerFailed(why) {
  engineStopped();
  failPending(workerDead = new Error(`the engine's worker failed: ${why}; Restart engine starts a fresh one`));
}
// Restart engine: shown while the engine cannot go on (it trapped, its worker died or did not start).
function offerRestart(on) { $('restart-btn').hidden = !on; }
// The self-test line no longer says "engine ready" once the engine cannot go on.
function engineStopped() {
  $('selftest-status').textContent = 'engine stopped: Restart engine starts a fresh one';
  $('selftest-status').className = 'mono err';
  offerRestart(true);
}

function startEngine() {
  const w = worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
  workerDead = null;
  offerRestart(false);
  w.onmessage = (ev) => { if (w === worker) onWorkerMessage(ev.data); };   // none from a cancelled one
  w.onerror = (ev) => { ev.preventDefault(); if (w === worker) workerFailed(ev.message || 'it could not start'); };
  w.onmessageerror = () => { if (w === worker) workerFailed('a message from it could not be read'); };
  $('selftest-log').textContent = '';
  $('selftest-status').textContent = 'loading the engine…'; $('selftest-status').className = 'mono';
  // ?hash=wasm: hash with the engine's own SHA-256 instead of the platform's (tests compare the two).
  ready = send(w, 'init', { hash: HASH }).then((st) => {
    if (w !== worker) return;
    const ok = st.fails === 0;
    $('selftest-status').textContent = `${ok ? 'PASS' : 'FAIL'} §1.3 self-test against the software FTZ/DAZ (wasm32)` +
      (ok ? ': engine ready' : ' — this engine will refuse to decode');
    $('selftest-status').className = ok ? 'mono' : 'mono err';
  });
  ready.catch((e) => {
    if (w !== worker) return;
    $('selftest-status').textContent = `FAIL: could not start the engine: ${e.message}`;
    showError(e);
    offerRestart(true);
  });
  return ready;
}

function busy(on) { for (const b of ['load-btn', 'verify-btn', 'run-btn']) $(b).disabled = on; }
function showError(e) { $('error').textContent = e ? String(e.message || e) : ''; }
// A verdict is about one receipt and the model loaded for it: it goes when either changes, so a
// PASS never stands next to a receipt or files it was not given for.
function clearVerdict() {
  $('verdict').className = ''; $('verdict').textContent = ''; $('verify-sampler').textContent = '';
  $('fields').querySelector('tbody').innerHTML = ''; $('verify-gen').innerHTML = '';
}
const RECEIPT_MAX = 64 << 20;   // `cis2 verify`'s limit (CIS2_RECEIPT_MAX, src/verify/verify.h)

function pickedFiles() {
  const files = {};
  for (const [name, id] of Object.entries(FILES)) {
    const f = $(id).files[0];
    if (!f) throw new Error(`pick ${name} first`);
    files[name] = f;
  }
  return files;
}

$('receipt-text').addEventListener('input', clearVerdict);
for (const id of [...Object.values(FILES), 'f-all']) $(id).addEventListener('change', clearVerdict);

// "All three at once": route by file name (model.safetensors is any *.safetensors); other files
// (a model folder's README, generation_config.json...) are left out. Two *.safetensors are a
// sharded checkpoint, which is one model.safetensors only once joined: said, none taken.
$('f-all').addEventListener('change', () => {
  const byId = {};
  for (const f of $('f-all').files) {
    const id = f.name === 'config.json' ? 'f-config' : f.name === 'tokenizer.json' ? 'f-tokenizer'
      : f.name.endsWith('.safetensors') ? 'f-model' : null;
    if (id) (byId[id] = byId[id] || []).push(f);
  }
  const shards = byId['f-model'] || [];
  if (shards.length > 1) {
    showError(`${shards.length} .safetensors files picked (${shards.map((f) => escName(f.name)).join(', ')}): a sharded checkpoint ` +
              'is joined into one model.safetensors first (cis2 join-shards, docs/wasm.md); none was taken');
    delete byId['f-model'];
  }
  for (const [id, [f]] of Object.entries(byId)) {
    const dt = new DataTransfer();
    dt.items.add(f);
    $(id).files = dt.files;
  }
});

// Loads the picked files unless they are what is loaded. Resolves once the weights are packed
// (to the seconds that took, or null when nothing was loaded); the hash worker may still be
// hashing the last chunks then: `hashed` resolves when both digests are in and shown.
let hashed = Promise.resolve();
async function ensureLoaded() {
  const files = pickedFiles();
  // The very File objects, not their names, sizes and times: another copy of a model (a
  // fine-tune of the same shapes, unpacked with the same times) looks the same by those.
  if (loaded && Object.keys(files).every((n) => files[n] === loaded[n])) return null;
  loaded = null;
  $('load-status').textContent = '';
  const t0 = performance.now();
  const info = await call('load', { files });
  const s = ((performance.now() - t0) / 1000).toFixed(2);
  setProgress(1, `loaded in ${s} s`);
  showLoad(info);
  hashed = call('digests').then(showLoad);
  hashed.catch(() => {});
  loaded = files;
  return (performance.now() - t0) / 1000;
}

function showLoad(info) {
  const h = (d) => d || '(hashing…)';
  $('load-status').textContent =
    `${info.arch}: ${info.layers} layers, hidden ${info.hidden}, ${info.heads}/${info.kv_heads} heads, vocab ${info.vocab}; backend ${info.backend} on ${info.isa}; hashed with ${info.hash_impl}\n` +
    `weights-sha256   ${h(info.weights_sha256)}\nconfig-sha256    ${info.config_sha256}\ntokenizer-sha256 ${h(info.tokenizer_sha256)}` +
    (info.timing ? '\ntiming ' + Object.entries(info.timing).filter(([k]) => k !== 't0').map(([k, v]) => `${k} ${(v / 1000).toFixed(3)} s`).join(', ') : '');
  $('load-status').style.whiteSpace = 'pre-wrap';
}

function speed(r) {
  const ms = r.prefill_ms + r.decode_ms;
  const tps = r.n_gen / (ms / 1000);
  return `${r.n_gen} tokens in ${ms.toFixed(1)} ms: ${tps.toFixed(2)} tokens/s (prefill of ${r.n_prompt} tokens ${r.prefill_ms.toFixed(1)} ms)`;
}

// The code points that reorder or break the line (C1 controls, bidi formatting, line/paragraph
// separators, BOM), as src/core/strbuf.c's unsafe_cp lists them (a RegExp class body), and
// their \uHHHH escape.
const UNSAFE_CP = '\\u007f-\\u009f\\u061c\\u200e\\u200f\\u2028-\\u202e\\u2066-\\u2069\\ufeff';
const uEsc = (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

// The generated text as `cis2 run` prints text=: JSON, with the unsafe code points as \u
// escapes too: tokenizer.json decides what the tokens decode to.
const jsonText = (s) => JSON.stringify(s).replace(new RegExp(`[${UNSAFE_CP}]`, 'g'), uEsc);

function genBlock(r) {
  const text = r.text !== undefined ? jsonText(r.text) : `(text not decodable: ${r.text_error})`;
  return `<div class="out"><b>generated text</b> <span id="gen-text">${escapeHtml(text)}</span>\n` +
         `<b>generated-token-ids</b> ${escapeHtml(r.generated_token_ids)}\n<span id="speed">${speed(r)}</span></div>`;
}

// A name from the user's disk (a picked file's) as cis2_sb_escape (src/core/strbuf.c) prints
// strings from files: \\, \n, \r, \t, \xHH for other controls and DEL, \uHHHH for C1 controls and
// the code points that reorder or break the line; the rest as it is.
const escName = (s) => String(s).replace(new RegExp(`[\\\\\\u0000-\\u001f${UNSAFE_CP}]`, 'g'),
  (c) => ({ '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' }[c] ||
          (c < '\u0080' ? `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}` : uEsc(c))));

function escapeHtml(s) { return String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c])); }

async function withBusy(fn) {
  busy(true);
  $('cancel-btn').disabled = false;
  showError(null);
  setProgress(0, 'working…');
  try { await fn(); } catch (e) { showError(e); setProgress(0, e && e.cancelled ? 'cancelled' : 'error'); } finally {
    busy(false);
    $('cancel-btn').disabled = true;
  }
}

$('load-btn').onclick = () => withBusy(async () => { loaded = null; await ensureLoaded(); await hashed; });

// A picked receipt is verified as the file's bytes, as `cis2 verify FILE` reads them: the
// textarea turns CR and CRLF into LF (and File.text() drops a BOM), which would pass a receipt
// the strict parser refuses (docs/errors.md, verify-crlf). Its text stands for the file only
// while it is unedited; pasted or edited text is verified as the textarea holds it.
let picked = null;   // { bytes, shown }
$('receipt-file').addEventListener('change', async () => {
  const f = $('receipt-file').files[0];
  picked = null;
  clearVerdict();
  showError(null);
  if (!f) return;
  if (f.size > RECEIPT_MAX) { showError(`${escName(f.name)}: ${f.size} bytes is more than the ${RECEIPT_MAX} a receipt may have`); return; }
  // A file removed, changed or made unreadable after it was picked cannot be read: said, as
  // `cis2 verify` says "cannot open", not left as an unhandled rejection and an empty box.
  let bytes;
  try { bytes = new Uint8Array(await f.arrayBuffer()); } catch (e) {
    if ($('receipt-file').files[0] === f) showError(`${escName(f.name)}: cannot read: ${e && e.message || e}`);
    return;
  }
  if ($('receipt-file').files[0] !== f) return;   // another pick came while this one was read
  $('receipt-text').value = new TextDecoder().decode(bytes);
  picked = { bytes, shown: $('receipt-text').value };
});

$('verify-btn').onclick = () => withBusy(async () => {
  clearVerdict();
  const text = $('receipt-text').value;
  if (!text.trim()) throw new Error('paste or pick a receipt first');
  const v = $('verdict'), tbody = $('fields').querySelector('tbody');
  const tv = performance.now();
  const tl = await ensureLoaded();
  setProgress(0, 'decoding…');
  const r = await call('verify', { text: picked && picked.shown === text ? picked.bytes : text });
  await hashed;
  // The verdict is about this receipt and the files loaded for it: one changed meanwhile (the
  // inputs stay usable while it runs) and it would stand next to what it was not given for.
  if ($('receipt-text').value !== text || Object.entries(FILES).some(([n, id]) => $(id).files[0] !== loaded[n]))
    throw new Error('the receipt or the model files changed while verifying: press Verify again');
  if (r.parse_error) {
    v.className = 'fail';
    v.textContent = `FAIL — the receipt does not parse: ${r.parse_error}`;
    return;
  }
  for (const f of r.fields) {
    const tr = document.createElement('tr');
    tr.className = f.ok ? 'match' : 'mismatch';
    tr.dataset.field = f.field;
    tr.innerHTML = `<td>${escapeHtml(f.field)}</td><td class="st">${f.ok ? '✓ match' : '✗ MISMATCH'}</td>` +
                   `<td>${escapeHtml(f.receipt)}</td><td>${escapeHtml(f.recomputed)}</td>`;
    tbody.appendChild(tr);
  }
  if (r.prompt_hex_skipped) {
    const tr = document.createElement('tr');
    tr.className = 'skip'; tr.dataset.field = 'prompt-hex';
    tr.innerHTML = '<td>prompt-hex</td><td class="st">skipped</td><td>(empty in the receipt)</td><td></td>';
    tbody.appendChild(tr);
  }
  // A sampled receipt (docs/sampling.md §6) was re-run under the sampler and seed it states;
  // its verdict has the rows sampler and seed.
  if (r.sampler) $('verify-sampler').textContent = `sampled: ${r.sampler}, seed ${r.seed}`;
  const bad = r.fields.filter((f) => !f.ok).map((f) => f.field);
  if (bad.length === 0) {
    v.className = 'pass';
    // As `cis2 verify` says it: a field not checked here is not counted as a match (§14.3).
    v.textContent = r.prompt_hex_skipped ? `PASS — receipt verified: every field checked matches (${r.fields.length}); not checked here: prompt-hex`
      : `PASS — receipt verified: all ${r.fields.length} fields match`;
  } else {
    v.className = 'fail';
    v.textContent = `FAIL — ${bad.length} field(s) differ: ${bad.join(', ')}`;
  }
  $('verify-gen').innerHTML = genBlock(r);
  setProgress(1, `verified in ${((performance.now() - tv) / 1000).toFixed(2)} s` +
              (tl !== null ? ` (load ${tl.toFixed(2)} s, decode ${((r.prefill_ms + r.decode_ms) / 1000).toFixed(2)} s, ` +
                             `then waiting for the SHA-256 ${(r.hash_wait_ms / 1000).toFixed(2)} s)` : ''));
});

$('run-btn').onclick = () => withBusy(async () => {
  // The last run's text and receipt go first: after a run that fails they are not this prompt's.
  $('run-out').innerHTML = ''; $('run-receipt').value = '';
  for (const id of ['run-receipt', 'download-btn', 'use-btn']) $(id).hidden = true;
  await ensureLoaded();
  const n = parseInt($('n').value, 10);
  if (!(n >= 1)) throw new Error('tokens must be at least 1');
  const sampling = samplingOpts();
  setProgress(0, 'decoding…');
  const r = await call('run', { opts: { prompt: $('prompt').value, n, stopAtEos: $('stop-eos').checked, sampling } });
  await hashed;
  $('run-out').innerHTML = genBlock(r).replace('id="gen-text"', 'id="run-text"').replace('id="speed"', 'id="run-speed"') +
    `<div class="mono">argmax-digest ${r.argmax_digest}<br>CIS2_REF ${r.cis2_ref}` +
    (r.sampler ? `<br><span id="run-sampler">sampler ${escapeHtml(r.sampler)}<br>seed ${escapeHtml(r.seed)}</span>` : '') + '</div>';
  $('run-receipt').value = r.receipt;
  for (const id of ['run-receipt', 'download-btn', 'use-btn']) $(id).hidden = false;
});

// The run's sampler, as `cis2 run --temperature T --top-k K --top-p P --min-p M --seed S`
// takes it (the engine reads each value and names one it refuses): null for greedy. As the
// CLI, a temperature of 0 with another sampling value set is refused, not ignored.
function samplingOpts() {
  const v = (id) => $(id).value.trim();
  const o = { temperature: v('s-temperature'), topK: v('s-top-k'), topP: v('s-top-p'), minP: v('s-min-p'), seed: v('s-seed') };
  if (/^0*(\.0+)?$/.test(o.temperature)) {   // 0, 0.0, or left empty: greedy
    const set = [['top-k', o.topK, '0'], ['top-p', o.topP, '1'], ['min-p', o.minP, '0'], ['seed', o.seed, '']]
      .find(([, x, d]) => x !== d);
    if (set) throw new Error(`${set[0]} needs a temperature above 0 (temperature 0 is the greedy argmax, which has no ${set[0]})`);
    return null;
  }
  return o;
}

$('download-btn').onclick = () => {
  const url = URL.createObjectURL(new Blob([$('run-receipt').value], { type: 'text/plain' }));
  const a = document.createElement('a');
  a.href = url; a.download = 'receipt.txt';
  document.body.appendChild(a); a.click(); a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
};
$('use-btn').onclick = () => {
  $('receipt-text').value = $('run-receipt').value;
  clearVerdict();   // the box's last verdict is not this receipt's
  $('receipt-text').scrollIntoView();
};

// The engine's worker ended, with all it holds, and a fresh one started; a call in flight
// fails with e, and nothing is loaded.
function restartEngine(e) {
  worker.terminate();
  loaded = null;
  $('load-status').textContent = '';
  failPending(e);
  return startEngine();
}

// Cancel: whatever the engine is doing (reading a checkpoint into its heap, waiting for the
// SHA-256, decoding) stops at once; the call in flight fails with what it was doing.
$('cancel-btn').onclick = () => {
  const e = new Error(`cancelled: ${$('progress-label').textContent}; nothing is loaded now`);
  e.cancelled = true;
  restartEngine(e).catch(() => {});
};

// Restart engine, once it stopped: a fresh one (the self-test again) without reloading the
// page; the picked files stay picked and are loaded again by the next Load, Verify or Run.
$('restart-btn').onclick = () => {
  showError(null);
  setProgress(0, 'idle');
  busy(true);
  restartEngine(new Error('the engine was restarted')).then(() => busy(false), () => busy(false));
};

busy(true);
startEngine().then(() => busy(false), () => {});
