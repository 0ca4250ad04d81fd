// Runs the engine off the page's main thread, so the progress bar moves
// while hashing and decoding. Messages: {id, cmd: 'init'|'load'|'run'|'verify', ...}.
import { Cis2, FILE_NAMES, blobSource } from './cis2.js';

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
      engine = await Cis2.create(wasm, {
        stdout: (line) => post({ type: 'log', line }),
        progress: (done, total) => post({ type: 'progress', phase: 'decode', done, total }),
        hash: ev.data.hash,   // 'wasm': the engine's own SHA-256 even where WebCrypto exists
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
