// A second worker that hashes the model's files while the engine's worker packs them: the
// chunks web/cis2.js read (each the very bytes it also put into the engine's heap) arrive
// here in file order, transferred, and go through the engine's own SHA-256 (cis2_sha256_update
// in a second instance of cis2.wasm); each buffer goes back to be reused. Messages, in order:
// {cmd: 'init', module}, {cmd: 'begin', slot}, {cmd: 'update', slot, buf, len},
// {cmd: 'end', slot} -> {cmd: 'digest', slot, digest (32 bytes)}; {cmd: 'buf', buf} returns a buffer.
import { Cis2 } from './cis2.js';

let c = null, heap = 0, heapLen = 0;
let queue = Promise.resolve();

async function handle(m) {
  if (m.cmd === 'init') {
    c = await Cis2.create(m.module, {});
  } else if (m.cmd === 'begin') {
    c.x.cis2w_hash_begin(m.slot);
  } else if (m.cmd === 'update') {
    if (m.len > heapLen) {
      if (heap) c.x.cis2w_free(heap);
      heap = c.x.cis2w_malloc(m.len) >>> 0;
      heapLen = heap ? m.len : 0;
      if (!heap) throw new Error('hash worker: out of wasm memory');
    }
    c.u8.set(new Uint8Array(m.buf, 0, m.len), heap);
    c.x.cis2w_hash_update(m.slot, heap, m.len);
    self.postMessage({ cmd: 'buf', buf: m.buf }, [m.buf]);
  } else if (m.cmd === 'end') {
    const hex = c._cstr(c.x.cis2w_hash_end(m.slot));
    const digest = Uint8Array.from(hex.match(/../g), (h) => parseInt(h, 16));
    self.postMessage({ cmd: 'digest', slot: m.slot, digest });
  }
}

self.onmessage = (ev) => {
  queue = queue.then(() => handle(ev.data)).catch((e) => self.postMessage({ cmd: 'error', message: String(e && e.message || e) }));
};
