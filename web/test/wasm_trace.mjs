// Arm E of `cis2 arms` (docs/divergence.md): a teacher-forced trace from the wasm32 build,
// in the file format `cis2 trace` writes, run under node.
//   node web/test/wasm_trace.mjs --wasm web/cis2.wasm --model DIR --prompt-ids 1,2,3
//        [--teacher-force 4,5] --out E.st [--arm E] [--backend fast|ref]
// (--ids and --teacher are short for --prompt-ids and --teacher-force, the flags of
// `cis2 trace`, whose messages the engine's errors quote.)
// DIR holds config.json, tokenizer.json and model.safetensors (bf16/f32 or `cis2 quantize`'s
// int8). Errors: one line on stderr; exit 2 for bad usage or a missing/unreadable file, 1 when
// the engine refuses or fails (ids outside the vocabulary, a bad checkpoint, out of memory). The output is written to a new
// temporary file next to OUT (O_EXCL) and renamed over it; OUT must be absent or a regular file.
import { readFileSync, lstatSync, openSync, writeSync, closeSync, renameSync, unlinkSync } from 'node:fs';
import { open } from 'node:fs/promises';
import path from 'node:path';
import { Cis2, FILE_NAMES } from '../cis2.js';

const usage = 'usage: wasm_trace.mjs --wasm FILE --model DIR --prompt-ids IDS [--teacher-force IDS] --out FILE [--arm NAME] [--backend fast|ref]';
function die(msg, code = 1) {
  process.stderr.write(`wasm_trace: ${String(msg).split('\n')[0]}\n`);
  process.exit(code);
}

const opt = { teacher: '', arm: 'E', backend: 'fast' };
const argv = process.argv.slice(2);
const known = { '--wasm': 'wasm', '--model': 'model', '--prompt-ids': 'ids', '--ids': 'ids',
  '--teacher-force': 'teacher', '--teacher': 'teacher', '--out': 'out', '-o': 'out', '--arm': 'arm',
  '--backend': 'backend' };
for (let i = 0; i < argv.length; i++) {
  const k = argv[i];
  if (!Object.hasOwn(known, k)) die(`unknown option '${k}' (${usage})`, 2);
  if (i + 1 >= argv.length) die(`${k} needs a value`, 2);
  opt[known[k]] = argv[++i];
}
const flag = { wasm: '--wasm', model: '--model', ids: '--prompt-ids', out: '--out' };
for (const k of Object.keys(flag)) if (!opt[k]) die(`${flag[k]} is required (${usage})`, 2);
if (opt.backend !== 'fast' && opt.backend !== 'ref') die(`--backend '${opt.backend}': expected fast or ref`, 2);
const why = (e) => (e.code === 'ENOENT' ? 'no such file or directory' : e.message);
const idsRe = /^[0-9]+(,[0-9]+)*$/;
if (!idsRe.test(opt.ids)) die(`--prompt-ids '${opt.ids}': expected comma-separated token ids`, 2);
if (opt.teacher && !idsRe.test(opt.teacher)) die(`--teacher-force '${opt.teacher}': expected comma-separated token ids`, 2);

function regularOrAbsent(p, what) {
  let st;
  try { st = lstatSync(p); } catch (e) { if (e.code === 'ENOENT') return; die(`${what} ${p}: ${why(e)}`, 2); }
  if (!st.isFile()) die(`${what} ${p}: not a regular file`, 2);
}
regularOrAbsent(opt.out, '--out');

let wasm;
try { wasm = readFileSync(opt.wasm); } catch (e) { die(`--wasm ${opt.wasm}: ${why(e)}`, 2); }
const handles = [];
async function fileSource(p) {
  const fh = await open(p, 'r');
  handles.push(fh);
  const { size } = await fh.stat();
  return { size, read: async (a, b) => { const buf = Buffer.alloc(b - a); const { bytesRead } = await fh.read(buf, 0, b - a, a); return buf.subarray(0, bytesRead); } };
}

try {
  const t0 = performance.now();
  const c = await Cis2.create(wasm, { hash: 'wasm' });
  if (opt.backend === 'ref') c.x.cis2w_set_backend(1);
  const src = {};
  for (const n of FILE_NAMES) {
    const p = path.join(opt.model, n);
    regularOrAbsent(p, '--model');
    try { src[n] = await fileSource(p); } catch (e) { die(`--model ${opt.model}: ${n}: ${why(e)}`, 2); }
  }
  try { await c.load(src); } finally { for (const fh of handles) await fh.close(); }
  const tmp = path.join(path.dirname(opt.out), `.${path.basename(opt.out)}.tmp.${process.pid}`);
  const fd = openSync(tmp, 'wx', 0o644);
  let nbytes;
  try {
    nbytes = c.trace({ promptIds: opt.ids, teacherIds: opt.teacher, arm: opt.arm }, (b) => {
      for (let off = 0; off < b.length;) off += writeSync(fd, b, off, b.length - off);
    });
    closeSync(fd);
    renameSync(tmp, opt.out);
  } catch (e) { try { closeSync(fd); } catch { /* closed */ } try { unlinkSync(tmp); } catch { /* gone */ } throw e; }
  const mib = c.x.memory.buffer.byteLength / 1048576;
  process.stderr.write(`wasm_trace: ${nbytes} bytes in ${((performance.now() - t0) / 1000).toFixed(2)} s, wasm memory ${mib.toFixed(0)} MiB\n`);
} catch (e) {
  die(e && e.message ? e.message : e);
}
