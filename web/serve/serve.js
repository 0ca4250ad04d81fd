// The page of `cis2 serve`: stream a completion from /v1/completions (server-sent events),
// show the receipt of the run, verify it on the server (/v1/verify) or hand it to the
// WebAssembly verifier at /verifier/ (same origin, so its receipt box can be filled in).
import { sseEvents } from './sse.mjs';

const $ = (id) => document.getElementById(id);
let model = null;
let apiKey = sessionStorage.getItem('cis2-api-key') || '';

function headers() {
  const h = { 'Content-Type': 'application/json' };
  if (apiKey) h.Authorization = `Bearer ${apiKey}`;
  return h;
}
function showError(msg) { $('error').textContent = msg || ''; }
function escapeHtml(s) { return String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c])); }
async function errorText(res) {
  try { const j = await res.json(); return `${res.status}: ${j.error ? j.error.message : JSON.stringify(j)}`; }
  catch { return `${res.status} ${res.statusText}`; }
}

async function loadModel() {
  const res = await fetch('/v1/models', { headers: headers() });
  if (res.status === 401) {
    $('key-row').hidden = false;
    $('model-status').textContent = 'this server needs an API key';
    return;
  }
  if (!res.ok) { $('model-status').textContent = await errorText(res); return; }
  const m = (await res.json()).data[0];
  model = m.id;
  $('key-row').hidden = true;
  $('model-status').textContent =
    `model ${m.id} (${m.cis2.arch}, vocab ${m.cis2.vocab_size}, context ${m.cis2.max_position_embeddings})\n` +
    `weights-sha256   ${m.cis2.weights_sha256}\nconfig-sha256    ${m.cis2.config_sha256}\n` +
    `tokenizer-sha256 ${m.cis2.tokenizer_sha256}`;
  $('model-status').style.whiteSpace = 'pre-wrap';
}

$('key-btn').onclick = () => {
  apiKey = $('api-key').value.trim();
  sessionStorage.setItem('cis2-api-key', apiKey);
  loadModel().catch((e) => showError(String(e)));
};

// Stop, while a completion streams: the fetch is aborted, which closes the connection; the
// server sees its client gone and cancels the sequence (docs/serve.md). A stopped completion
// has no receipt: the server makes one only for a run that finishes.
let stopper = null;
$('stop-btn').onclick = () => { if (stopper) stopper.abort(); };

$('run-btn').onclick = async () => {
  showError('');
  $('out-text').textContent = '';
  $('speed').textContent = '';
  $('receipt').value = '';
  $('verdict').textContent = '';
  $('verdict').className = '';
  $('fields').querySelector('tbody').innerHTML = '';
  for (const b of ['run-btn', 'download-btn', 'verify-btn']) $(b).disabled = true;
  const ac = stopper = new AbortController();
  let pieces = 0, t0 = performance.now();
  try {
    if (!model) await loadModel();
    const body = { model, prompt: $('prompt').value, max_tokens: parseInt($('max-tokens').value, 10), stream: true };
    const stop = $('stop').value.replace(/\\n/g, '\n');
    if (stop) body.stop = [stop];
    if (!$('stop-eos').checked) body.ignore_eos = true;
    t0 = performance.now();
    $('stop-btn').disabled = false;
    const res = await fetch('/v1/completions', { method: 'POST', headers: headers(), body: JSON.stringify(body), signal: ac.signal });
    if (!res.ok) throw new Error(await errorText(res));
    let first = 0;
    for await (const ev of sseEvents(res.body)) {
      if (ev.error) throw new Error(ev.error.message);
      const ch = ev.choices[0];
      if (ch && ch.text) {
        if (!pieces++) first = performance.now() - t0;
        $('out-text').textContent += ch.text;
      }
      if (ev.cis2) {
        $('stop-btn').disabled = true;   // it finished: only [DONE] is to come
        const s = (performance.now() - t0) / 1000;
        $('speed').textContent = `${ev.usage.completion_tokens} tokens in ${s.toFixed(2)} s ` +
          `(${(ev.usage.completion_tokens / s).toFixed(1)} tokens/s, first text after ${first.toFixed(0)} ms), ` +
          `finish_reason ${ch.finish_reason}; generated-token-ids ${ev.cis2.generated_token_ids.join(',')}`;
        $('receipt').value = ev.cis2.receipt;
      }
    }
    if (!$('receipt').value) throw new Error('the stream ended without a receipt');
    $('download-btn').disabled = $('verify-btn').disabled = false;
  } catch (e) {
    if (!ac.signal.aborted) showError(String(e.message || e));
    else $('speed').textContent = `stopped after ${pieces} streamed piece(s) of text in ${((performance.now() - t0) / 1000).toFixed(2)} s: ` +
      'the server cancelled the completion; no receipt (one is made only for a completion that finishes)';
  } finally {
    stopper = null;
    $('stop-btn').disabled = true;
    $('run-btn').disabled = false;
  }
};

$('download-btn').onclick = () => {
  const url = URL.createObjectURL(new Blob([$('receipt').value], { type: 'text/plain' }));
  const a = document.createElement('a');
  a.href = url; a.download = 'receipt.txt';
  document.body.appendChild(a); a.click(); a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
};

$('verify-btn').onclick = async () => {
  showError('');
  const v = $('verdict'), tbody = $('fields').querySelector('tbody');
  v.className = ''; v.textContent = 'verifying…'; tbody.innerHTML = '';
  // One verification at a time, and no new completion meanwhile: a second click's rows were
  // added to the first's (20 rows under "all 10 fields match"), and a run started meanwhile
  // got the old receipt's verdict.
  $('verify-btn').disabled = $('run-btn').disabled = true;
  try {
    const res = await fetch('/v1/verify', { method: 'POST', headers: headers(), body: JSON.stringify({ receipt: $('receipt').value }) });
    if (!res.ok) throw new Error(await errorText(res));
    const r = await res.json();
    for (const f of r.fields) {
      const tr = document.createElement('tr');
      tr.className = f.status; tr.dataset.field = f.field;
      const st = f.status === 'match' ? '✓ match' : f.status === 'mismatch' ? '✗ MISMATCH' : 'skipped';
      tr.innerHTML = `<td>${escapeHtml(f.field)}</td><td class="st">${st}</td><td>${escapeHtml(f.receipt)}</td><td>${escapeHtml(f.recomputed)}</td>`;
      tbody.appendChild(tr);
    }
    v.className = r.verified ? 'pass' : 'fail';
    v.textContent = r.verified ? `PASS — the server re-ran the decode: all ${r.fields.length} fields match`
      : `FAIL — ${r.mismatches} field(s) differ`;
  } catch (e) {
    v.textContent = '';
    showError(String(e.message || e));
  } finally {
    $('verify-btn').disabled = $('run-btn').disabled = false;
  }
};

// Open the browser verifier and put this receipt into its receipt box (same origin).
$('verify-link').onclick = (ev) => {
  const text = $('receipt').value;
  if (!text) return;
  ev.preventDefault();
  const w = window.open($('verify-link').href, '_blank');
  if (!w) return;
  const fill = (tries) => {
    const box = w.document && w.document.getElementById('receipt-text');
    if (box) box.value = text;
    else if (tries > 0) setTimeout(() => fill(tries - 1), 100);
  };
  w.addEventListener('load', () => fill(50));
};

loadModel().catch((e) => showError(String(e)));
