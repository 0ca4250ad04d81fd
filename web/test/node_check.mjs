// Drive web/cis2.wasm through web/cis2.js in node (tests/t_wasm.sh).
//   node web/test/node_check.mjs selftest
//   node web/test/node_check.mjs run DIR IDS N       -> key=value lines like `cis2 run`
//   node web/test/node_check.mjs verify DIR RECEIPT  -> MATCH/MISMATCH lines like `cis2 verify`
// Files are streamed from disk in chunks (fs FileHandle reads), as the page does.
import { readFileSync, statSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { open } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { Cis2, FILE_NAMES, blobSource } from '../cis2.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const wasm = readFileSync(process.env.CIS2_WASM || path.join(here, '..', 'cis2.wasm'));
const [cmd, ...args] = process.argv.slice(2);
// Hashing: the engine's own SHA-256 over each chunk before it is packed (node has no hash worker;
// CIS2_WASM_HASH=wasm asks for the same explicitly).
//
// CIS2_WASM_HOLD_DIGESTS=1: a stand-in for the page's hash worker (node's own SHA-256, a second
// reading) whose digests are held back until run/verify has decoded and waits for them, so the
// decode runs with the digests pending and binds them afterwards (cis2_witness_replay); prints
// digests_held_during_decode=1 when that happened. =wrong: the weights' digest comes back with
// one bit flipped (a different file, as far as the receipt can tell).
// CIS2_WASM_REC_MAX=N: at most N bytes of logits recorded before the digests are in.
const hold = process.env.CIS2_WASM_HOLD_DIGESTS;
let released = null, heldDuringDecode = false;
const release = new Promise((r) => { released = r; });
const heldHasher = {
  name: 'node:crypto SHA-256, digests held',
  h: new Map(),
  begin(slot) { this.h.set(slot, createHash('sha256')); },
  async update(slot, chunk) { this.h.get(slot).update(chunk); },
  async end(slot) {
    const d = new Uint8Array(this.h.get(slot).digest());
    if (hold === 'wrong' && slot === 0) d[0] ^= 1;
    await release;
    return d;
  },
};
const c = await Cis2.create(wasm, {
  stdout: (l) => console.log(l), hash: process.env.CIS2_WASM_HASH,
  hasher: hold ? heldHasher : undefined,
  hashWait: (why) => { heldDuringDecode = why === 'decoded'; released(); },
});
if (process.env.CIS2_WASM_REC_MAX !== undefined) c.x.cis2w_set_rec_max(Number(process.env.CIS2_WASM_REC_MAX));
// CIS2_WASM_REF=1: the scalar reference backend instead of the SIMD128 fast one.
if (process.env.CIS2_WASM_REF === '1') c.x.cis2w_set_backend(1);

async function fileSource(p) {
  const fh = await open(p, 'r');
  const { size } = await fh.stat();
  return { size, read: async (a, b) => { const buf = Buffer.alloc(b - a); const { bytesRead } = await fh.read(buf, 0, b - a, a); return buf.subarray(0, bytesRead); } };
}
async function load(dir) {
  const src = {};
  for (const n of FILE_NAMES) src[n] = await fileSource(path.join(dir, n));
  return c.load(src, null, { early: !!hold });
}

if (cmd === 'selftest') {
  const r = c.selftest();
  process.exit(r.fails ? 1 : 0);
} else if (cmd === 'run') {
  const [dir, ids, n] = args;
  let info = await load(dir);
  // CIS2_WASM_SAMPLER="T K P M S": sample (docs/sampling.md) with that temperature, top-k,
  // top-p, min-p and seed; prints sampler= and seed= as `cis2 run` does.
  const sv = process.env.CIS2_WASM_SAMPLER;
  const sampling = sv ? Object.fromEntries(['temperature', 'topK', 'topP', 'minP', 'seed'].map((k, i) => [k, sv.split(' ')[i]])) : null;
  const r = await c.run({ promptIds: ids, n: Number(n), sampling })
    .catch((e) => { console.log(`ERROR ${e.message}`); process.exit(1); });
  if (r.sampler) console.log(`sampler=${r.sampler}\nseed=${r.seed}`);
  if (hold) { info = await c.digests(); console.log(`digests_held_during_decode=${heldDuringDecode ? 1 : 0}`); }
  console.log(`weights_sha256=${info.weights_sha256}\nconfig_sha256=${info.config_sha256}\ntokenizer_sha256=${info.tokenizer_sha256}`);
  console.log(`prompt_token_ids=${r.prompt_token_ids}\ngen_toks=${r.n_gen}\ngenerated_token_ids=${r.generated_token_ids}`);
  console.log(`table_digest=${r.table_digest}\ninv_freq_table_digest=${r.inv_freq_table_digest}\nargmax_digest=${r.argmax_digest}\ncis2_ref=${r.cis2_ref}`);
  if (process.env.CIS2_RECEIPT_OUT) (await import('node:fs')).writeFileSync(process.env.CIS2_RECEIPT_OUT, r.receipt);
} else if (cmd === 'verify') {
  const [dir, receipt] = args;
  await load(dir);
  const r = await c.verify(readFileSync(receipt, 'utf8'));
  if (hold) console.log(`digests_held_during_decode=${heldDuringDecode ? 1 : 0}`);
  if (r.parse_error) { console.log(`PARSE-ERROR ${r.parse_error}`); process.exit(2); }
  for (const f of r.fields) console.log(f.ok ? `MATCH ${f.field}` : `MISMATCH ${f.field}: receipt ${f.receipt}, recomputed ${f.recomputed}`);
  process.exit(r.bad ? 1 : 0);
} else if (cmd === 'stall') {
  // blobSource over a Blob whose byte stream gives one chunk and then never settles (as
  // Chromium's did on a second load of the same picked files): the bytes must still all come,
  // in order, the rest by slices. Prints "ok" (after the 3 s stall timeout).
  const data = Uint8Array.from({ length: (8 << 20) + 12345 }, (_, i) => (i * 7) & 255);
  const blob = new Blob([data]);
  const stalling = {
    size: blob.size, slice: (a, b) => blob.slice(a, b),
    stream: () => ({ getReader: () => {
      let n = 0;
      return { read: (v) => (n++ ? new Promise(() => {}) : Promise.resolve({ value: (v.set(data.subarray(0, 4096)), v.subarray(0, 4096)), done: false })),
               cancel: async () => {} };
    } }),
  };
  const src = blobSource(stalling), got = new Uint8Array(data.length);
  let off = 0;
  for await (const chunk of src.chunks()) { got.set(chunk, off); off += chunk.length; }
  console.log(off === data.length && got.every((b, i) => b === data[i]) ? 'ok' : `got ${off} of ${data.length} bytes, or other bytes`);
} else if (cmd === 'bighead') {
  // DIR's model.safetensors with META_MB of __metadata__ in its header, streamed in chunks of
  // 3 bytes (the 8-byte length spans chunks), then CHUNK_BYTES each (the header ends inside
  // one): it loads (its SHA-256 is node's, it decodes IDS as DIR's own file does), and every
  // byte is copied a few times at most, not once per chunk while the header comes in.
  // Prints "ok" (or what differs), then copied=B file=B load_ms=T.
  const [dir, ids, metaMb, chunkBytes] = args;
  const sf = readFileSync(path.join(dir, 'model.safetensors'));
  const hlen = Number(sf.readBigUInt64LE(0)), hdr = JSON.parse(sf.subarray(8, 8 + hlen).toString('utf8'));
  hdr.__metadata__ = { ...hdr.__metadata__, big: 'm'.repeat(Number(metaMb) << 20) };
  let hb = Buffer.from(JSON.stringify(hdr), 'utf8');
  hb = Buffer.concat([hb, Buffer.alloc((8 - hb.length % 8) % 8, 0x20)]);
  const lenb = Buffer.alloc(8); lenb.writeBigUInt64LE(BigInt(hb.length));
  const big = Buffer.concat([lenb, hb, sf.subarray(8 + hlen)]);
  const memSource = (b) => ({
    size: b.length,
    read: async (a, e) => b.subarray(a, e),
    chunks: async function* () { for (let a = 0, k = 3; a < b.length; a += k, k = Number(chunkBytes)) yield b.subarray(a, a + k); },
  });
  const sources = async (weights) => {
    const src = {};
    for (const n of FILE_NAMES) src[n] = n === 'model.safetensors' ? memSource(weights) : memSource(readFileSync(path.join(dir, n)));
    return src;
  };
  await c.load(await sources(sf));
  const want = (await c.run({ promptIds: ids, n: 2 })).generated_token_ids;
  const set = Uint8Array.prototype.set;
  let copied = 0;
  Uint8Array.prototype.set = function (a, o) { copied += a.length; return set.call(this, a, o); };
  const total = FILE_NAMES.reduce((t, n) => t + (n === 'model.safetensors' ? big.length : statSync(path.join(dir, n)).size), 0);
  const t0 = Date.now();
  const info = await c.load(await sources(big));
  const ms = Date.now() - t0;
  Uint8Array.prototype.set = set;
  const got = (await c.run({ promptIds: ids, n: 2 })).generated_token_ids;
  const sha = createHash('sha256').update(big).digest('hex');
  const bad = [info.weights_sha256 !== sha && `weights_sha256 ${info.weights_sha256}, node's ${sha}`,
               got !== want && `generated ${got}, the file without the metadata ${want}`,
               copied > 4 * total && `${copied} bytes copied for ${total} bytes of files`].filter(Boolean);
  console.log(`${bad.length ? bad.join('; ') : 'ok'} copied=${copied} file=${big.length} load_ms=${ms}`);
} else {
  console.error('usage: node_check.mjs selftest | run DIR IDS N | verify DIR RECEIPT | stall | bighead DIR IDS META_MB CHUNK_BYTES');
  process.exit(2);
}
