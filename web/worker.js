// Runs the engine off the page's main thread, so the progress bar moves
// while hashing and decoding. Messages: {id, cmd: 'init'|'load'|'digests'|'run'|'verify', ...}.
import { Cis2, FILE_NAMES, WorkerHasher, blobSource } from './cis2.js';

let engine = null, trapped = null;
const post = (m) => self.postMessage(m);

self.onmessage = async (ev) => {
  const { id, cmd } = ev.data;
  try {
    if (trapped) throw trapped;
    let result;
    if (cmd === 'init') {
      const url = new URL('./cis2.wasm', import.meta.url);
      let wasm;
      try { wasm = await WebAssembly.compileStreaming(fetch(url)); }   // needs Content-Type: application/wasm
      catch { wasm = await WebAssembly.compile(await (await fetch(url)).arrayBuffer()); }
      // The files are hashed on a second worker while this one packs them (docs/wasm.md), or
      // with ?hash=wasm here, chunk by chunk, before each chunk is packed.
      const hasher = ev.data.hash === 'wasm' ? null
        : new WorkerHasher(() => new Worker(new URL('./hash_worker.js', import.meta.url), { type: 'module' }), wasm);
      engine = await Cis2.create(wasm, {
        stdout: (line) => post({ type: 'log', line }),
        progress: (done, total) => post({ type: 'progress', phase: 'decode', done, total }),
        hashWait: (why) => post({ type: 'progress', phase: 'hash-wait', why }),
        hash: ev.data.hash,   // 'wasm': the engine's own SHA-256 on this worker
        hasher,
      });
      result = engine.selftest();
    } else if (cmd === 'load') {
      const src = {};
      for (const n of FILE_NAMES) src[n] = blobSource(ev.data.files[n]);
      // Returns once the weights are packed; the hash worker may still be on the last chunks
      // ('digests' waits for them; run and verify decode meanwhile, then wait).
      result = await engine.load(src, (p) => post({ type: 'progress', phase: 'hash', ...p }), { early: true });
      result.hash_impl = engine.hashImpl;
    } else if (cmd === 'digests') {
      result = await engine.digests();
      result.hash_impl = engine.hashImpl;
    } else if (cmd === 'run') {
      result = await engine.run(ev.data.opts);
    } else if (cmd === 'verify') {
      result = await engine.verify(ev.data.text);
    } else {
      throw new Error(`unknown command ${cmd}`);
    }
    post({ type: 'result', id, result });
  } catch (e) {
    // A trap (an out-of-bounds access, unreachable, the stack exhausted) stops the engine
    // mid-call: its heap and state are no longer to be trusted, so this and every later call
    // says so instead of computing on them.
    if (e instanceof WebAssembly.RuntimeError || (e instanceof RangeError && /call stack/.test(e.message)))
      trapped = trapped || new Error(`the engine stopped (${e.message}) in '${cmd}'; Restart engine starts a fresh one`);
    post({ type: 'error', id, message: String(trapped ? trapped.message : e && e.message || e), dead: !!trapped });
  }
};
