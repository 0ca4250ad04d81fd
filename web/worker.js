// Runs the engine off the page's main thread, so the progress bar moves
// while hashing and decoding. Messages: {id, cmd: 'init'|'load'|'run'|'verify', ...}.
import { Cis2, FILE_NAMES, WorkerHasher, blobSource } from './cis2.js';

let engine = null;
const post = (m) => self.postMessage(m);

self.onmessage = async (ev) => {
  const { id, cmd } = ev.data;
  try {
    let result;
    if (cmd === 'init') {
      const url = new URL('./cis2.wasm', import.meta.url);
      let wasm;
      try { wasm = await WebAssembly.compileStreaming(fetch(url)); }   // needs Content-Type: application/wasm
      catch { wasm = await WebAssembly.compile(await (await fetch(url)).arrayBuffer()); }
      // The files are hashed on a second worker while this one packs them (docs/wasm.md), or
      // with ?hash=wasm here, chunk by chunk, before each chunk is packed.
      const hasher = ev.data.hash === 'wasm' ? null
        : new WorkerHasher(new Worker(new URL('./hash_worker.js', import.meta.url), { type: 'module' }), wasm);
      engine = await Cis2.create(wasm, {
        stdout: (line) => post({ type: 'log', line }),
        progress: (done, total) => post({ type: 'progress', phase: 'decode', done, total }),
        hash: ev.data.hash,   // 'wasm': the engine's own SHA-256 on this worker
        hasher,
      });
      result = engine.selftest();
    } else if (cmd === 'load') {
      const src = {};
      for (const n of FILE_NAMES) src[n] = blobSource(ev.data.files[n]);
      result = await engine.load(src, (p) => post({ type: 'progress', phase: 'hash', ...p }));
      result.hash_impl = engine.hashImpl;
    } else if (cmd === 'run') {
      result = engine.run(ev.data.opts);
    } else if (cmd === 'verify') {
      result = engine.verify(ev.data.text);
    } else {
      throw new Error(`unknown command ${cmd}`);
    }
    post({ type: 'result', id, result });
  } catch (e) {
    post({ type: 'error', id, message: String(e && e.message || e) });
  }
};
