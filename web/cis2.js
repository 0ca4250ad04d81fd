// cis2.js — the JS glue for web/cis2.wasm. One ES module for the
// browser (run inside a Worker by web/worker.js) and for node (the tests).
//
// It provides the few WASI preview1 calls wasi-libc makes, over a tiny
// read-only file system: the preopened directory /m holds config.json and
// tokenizer.json *in the wasm heap*, and of model.safetensors its length and
// header only. Files are read chunk by chunk straight from their source (a
// File's byte stream in the browser, a file handle in node); the weights'
// chunks are pushed into the loader as they arrive, hashed and packed (see
// load()), so the 269 MB file is read once and never held whole.

const ERRNO = { SUCCESS: 0, ACCES: 2, BADF: 8, INVAL: 28, NOENT: 44, NOSYS: 52, SPIPE: 70 };
const FILETYPE = { CHAR: 2, DIR: 3, REG: 4 };
const PREOPEN_FD = 3, PREOPEN_NAME = '/m';
const CHUNK = 8 << 20;
export const FILE_NAMES = ['config.json', 'tokenizer.json', 'model.safetensors'];
const HASH_SLOT = { 'model.safetensors': 0, 'tokenizer.json': 1 };
// config.json and tokenizer.json are held in the heap whole, so a size the loader refuses
// anyway (CIS2_CONFIG_MAX, CIS2_TOKENIZER_MAX in src/model/model.h) is refused before it is
// read: past wasm32's 4 GiB it would wrap in cis2w_malloc's size_t and be copied over the heap.
const FILE_MAX = { 'config.json': 16 << 20, 'tokenizer.json': 256 << 20 };

class ExitError extends Error {
  constructor(code) { super(`wasm exited with code ${code}`); this.code = code; }
}

export class Cis2 {
  // wasm: a WebAssembly.Module, or bytes. opts.stdout(line), opts.progress(done, total)
  static async create(wasm, opts = {}) {
    const c = new Cis2(opts);
    const module = wasm instanceof WebAssembly.Module ? wasm : await WebAssembly.compile(wasm);
    c.instance = await WebAssembly.instantiate(module, c._imports());
    c.x = c.instance.exports;
    c.x._initialize();
    return c;
  }

  constructor(opts) {
    this.opts = opts;
    this.files = new Map();   // name -> { ptr, size }
    this.fds = new Map();     // fd -> { file, pos } (or { dir: true })
    this.nextFd = PREOPEN_FD + 1;
    this.outBuf = { 1: '', 2: '' };
    this.outDec = { 1: new TextDecoder('utf-8'), 2: new TextDecoder('utf-8') };   // streaming: UTF-8 may span writes
    this.dec = new TextDecoder('utf-8');
    this.enc = new TextEncoder();
  }

  get u8() { return new Uint8Array(this.x.memory.buffer); }   // fresh view: memory may have grown
  get dv() { return new DataView(this.x.memory.buffer); }

  _imports() {
    const self = this;
    const wasi = {
      args_get: () => ERRNO.SUCCESS,
      args_sizes_get: (argc, bufsz) => { self.dv.setUint32(argc, 0, true); self.dv.setUint32(bufsz, 0, true); return 0; },
      environ_get: () => ERRNO.SUCCESS,
      environ_sizes_get: (n, bufsz) => { self.dv.setUint32(n, 0, true); self.dv.setUint32(bufsz, 0, true); return 0; },
      clock_time_get: (id, prec, out) => {
        const ms = (typeof performance !== 'undefined' ? performance.now() : Date.now());
        self.dv.setBigUint64(out, BigInt(Math.round(ms * 1e6)), true);
        return ERRNO.SUCCESS;
      },
      proc_exit: (code) => { throw new ExitError(code); },
      fd_write: (fd, iovs, n, nwritten) => {
        const dv = self.dv; let total = 0;
        for (let i = 0; i < n; i++) {
          const p = dv.getUint32(iovs + 8 * i, true), len = dv.getUint32(iovs + 8 * i + 4, true);
          if (fd === 1 || fd === 2) self._out(fd, self.u8.slice(p, p + len));
          total += len;
        }
        if (fd !== 1 && fd !== 2) return ERRNO.BADF;
        dv.setUint32(nwritten, total, true);
        return ERRNO.SUCCESS;
      },
      fd_prestat_get: (fd, buf) => {
        if (fd !== PREOPEN_FD) return ERRNO.BADF;
        self.dv.setUint8(buf, 0);
        self.dv.setUint32(buf + 4, PREOPEN_NAME.length, true);
        return ERRNO.SUCCESS;
      },
      fd_prestat_dir_name: (fd, p, len) => {
        if (fd !== PREOPEN_FD) return ERRNO.BADF;
        self.u8.set(self.enc.encode(PREOPEN_NAME).subarray(0, len), p);
        return ERRNO.SUCCESS;
      },
      path_open: (dirfd, dirflags, p, plen, oflags, rb, ri, fdflags, out) => {
        if (dirfd !== PREOPEN_FD) return ERRNO.BADF;
        if (oflags & (1 | 4 | 8)) return ERRNO.ACCES;   // creat/excl/trunc: read-only
        const name = self.dec.decode(self.u8.slice(p, p + plen)).replace(/^\.\//, '');
        const file = self.files.get(name);
        if (!file) return ERRNO.NOENT;
        const fd = self.nextFd++;
        self.fds.set(fd, { file, pos: 0 });
        self.dv.setUint32(out, fd, true);
        return ERRNO.SUCCESS;
      },
      fd_close: (fd) => (self.fds.delete(fd) ? ERRNO.SUCCESS : ERRNO.BADF),
      fd_fdstat_get: (fd, buf) => {
        let type;
        if (fd <= 2) type = FILETYPE.CHAR;
        else if (fd === PREOPEN_FD) type = FILETYPE.DIR;
        else if (self.fds.has(fd)) type = FILETYPE.REG;
        else return ERRNO.BADF;
        const dv = self.dv;
        dv.setUint8(buf, type); dv.setUint16(buf + 2, 0, true);
        dv.setBigUint64(buf + 8, 0xFFFFFFFFFFFFFFFFn, true); dv.setBigUint64(buf + 16, 0xFFFFFFFFFFFFFFFFn, true);
        return ERRNO.SUCCESS;
      },
      fd_fdstat_set_flags: () => ERRNO.SUCCESS,
      fd_filestat_get: (fd, buf) => {
        const dv = self.dv, f = self.fds.get(fd);
        if (!f && fd > PREOPEN_FD) return ERRNO.BADF;
        for (let i = 0; i < 64; i += 8) dv.setBigUint64(buf + i, 0n, true);
        dv.setUint8(buf + 16, f ? FILETYPE.REG : fd === PREOPEN_FD ? FILETYPE.DIR : FILETYPE.CHAR);
        dv.setBigUint64(buf + 24, 1n, true);
        dv.setBigUint64(buf + 32, BigInt(f ? f.file.size : 0), true);
        return ERRNO.SUCCESS;
      },
      fd_seek: (fd, off, whence, out) => {
        const f = self.fds.get(fd);
        if (!f) return fd <= 2 ? ERRNO.SPIPE : ERRNO.BADF;
        const base = whence === 0 ? 0 : whence === 1 ? f.pos : whence === 2 ? f.file.size : -1;
        const pos = base + Number(off);
        if (base < 0 || pos < 0) return ERRNO.INVAL;
        f.pos = pos;
        self.dv.setBigUint64(out, BigInt(pos), true);
        return ERRNO.SUCCESS;
      },
      fd_read: (fd, iovs, n, nread) => {
        const f = self.fds.get(fd);
        if (!f) return ERRNO.BADF;
        const got = self._readAt(f.file, f.pos, iovs, n);
        f.pos += got;
        self.dv.setUint32(nread, got, true);
        return ERRNO.SUCCESS;
      },
      fd_pread: (fd, iovs, n, off, nread) => {
        const f = self.fds.get(fd);
        if (!f) return ERRNO.BADF;
        self.dv.setUint32(nread, self._readAt(f.file, Number(off), iovs, n), true);
        return ERRNO.SUCCESS;
      },
    };
    // Anything else wasi-libc might ask for: "not supported".
    const wasiProxy = new Proxy(wasi, { get: (t, k) => (k in t ? t[k] : () => ERRNO.NOSYS) });
    return {
      wasi_snapshot_preview1: wasiProxy,
      cis2: {
        progress: (done, total) => { if (self.opts.progress) self.opts.progress(done, total); },
      },
    };
  }

  _readAt(file, pos, iovs, n) {
    const dv = this.dv, u8 = this.u8;
    let got = 0;
    for (let i = 0; i < n; i++) {
      const p = dv.getUint32(iovs + 8 * i, true), len = dv.getUint32(iovs + 8 * i + 4, true);
      const k = Math.max(0, Math.min(len, file.avail - pos - got));
      u8.copyWithin(p, file.ptr + pos + got, file.ptr + pos + got + k);
      got += k;
      if (k < len) break;
    }
    return got;
  }

  _out(fd, bytes) {
    this.outBuf[fd] += this.outDec[fd].decode(bytes, { stream: true });
    let i;
    while ((i = this.outBuf[fd].indexOf('\n')) >= 0) {
      const line = this.outBuf[fd].slice(0, i);
      this.outBuf[fd] = this.outBuf[fd].slice(i + 1);
      if (this.opts.stdout) this.opts.stdout(line, fd);
    }
  }

  _cstr(ptr) {
    if (!ptr) return null;
    const u8 = this.u8;
    let e = ptr;
    while (u8[e]) e++;
    return this.dec.decode(u8.slice(ptr, e));
  }

  // s: a string (as UTF-8) or a Uint8Array (as it is), NUL-terminated in the heap during fn.
  _withStr(s, fn) {
    if (s === null || s === undefined) return fn(0, 0);
    const b = s instanceof Uint8Array ? s : this.enc.encode(s);
    const p = this.x.cis2w_malloc(b.length + 1);
    if (!p) throw new Error('out of wasm memory');
    const u8 = this.u8;
    u8.set(b, p); u8[p + b.length] = 0;
    try { return fn(p, b.length); } finally { this.x.cis2w_free(p); }
  }

  _json(ptr) {
    if (!ptr) throw new Error(this._cstr(this.x.cis2w_error()));
    return JSON.parse(this._cstr(ptr));
  }

  // §1.3 self-test etc.: { fails, lines }
  selftest() {
    const lines = [], prev = this.opts.stdout;
    this.opts.stdout = (l) => { lines.push(l); if (prev) prev(l); };
    try { return { fails: this.x.cis2w_selftest(), lines }; } finally { this.opts.stdout = prev; }
  }

  unload() {
    this.gen = (this.gen || 0) + 1;
    this.hashed = null;
    this.digestInfo = null;
    this.x.cis2w_unload();
    for (const f of this.files.values()) this.x.cis2w_free(f.ptr);
    this.files.clear();
    this.fds.clear();
  }

  // sources: { 'config.json': src, 'tokenizer.json': src, 'model.safetensors': src }
  // where src = { size, read(start, end) -> Promise<Uint8Array>, optional chunks() }.
  // onProgress({ file, done, total }) while reading, hashing and packing. Returns
  // cis2w_load_end's JSON, with info.timing (ms: read, copy = into the heap, hash = on this
  // thread, pack = cis2w_load_feed, files = all three in, load = cis2w_load_end).
  // config.json and tokenizer.json are held in the heap whole; model.safetensors is read once,
  // chunk by chunk, and never held whole: its header goes in first (cis2w_load_begin parses
  // it), then each chunk is copied into the loader's window (cis2w_load_buf), hashed, and
  // packed (cis2w_load_feed: every tensor it completes goes into the tiles). Hashing: each
  // chunk, the very bytes that are packed, goes to opts.hasher (a hash worker, WorkerHasher)
  // when there is one and opts.hash !== 'wasm'; else the engine's own SHA-256 takes the
  // window bytes before they are packed (cis2w_hash_update). Why that is "hash exactly the
  // bytes you compute on" (§12.1): docs/wasm.md, "Memory: files held once".
  async load(sources, onProgress, { early = false } = {}) {
    this.unload();
    for (const name of FILE_NAMES) if (!sources[name]) throw new Error(`missing ${name}`);
    const hw = (this.opts.hash !== 'wasm' && this.opts.hasher) || null;
    if (hw && hw.recover) hw.recover();   // a hasher that can start afresh (WorkerHasher)
    this.hashImpl = hw ? hw.name : 'cis2 SHA-256 (wasm)';
    const total = FILE_NAMES.reduce((a, n) => a + sources[n].size, 0);
    let doneAll = 0;
    const T = { t0: now(), read: 0, copy: 0, hash: 0, pack: 0 };
    const x = this.x, err = () => new Error(this._cstr(x.cis2w_error()));
    const digests = [];   // the hash worker's: [name, slot, promise]; awaited after cis2w_load_end
    for (const slot of Object.values(HASH_SLOT)) x.cis2w_hash_begin(slot);   // nothing stale
    // One chunk's bytes at heap address p: hashed (here, or by the hash worker) before anything
    // (a pack, a window slide) can touch them.
    const hash = async (slot, p, chunk) => {
      if (slot === undefined) return;
      const t = now();
      if (hw) await hw.update(slot, chunk); else x.cis2w_hash_update(slot, p, chunk.length);
      T.hash += now() - t;
    };
    const push = async (slot, chunk) => {   // model.safetensors: into the window, hashed, packed
      let t = now();
      const p = x.cis2w_load_buf(chunk.length) >>> 0;
      if (!p) throw err();
      this.u8.set(chunk, p);
      T.copy += now() - t;
      await hash(slot, p, chunk);
      t = now();
      if (x.cis2w_load_feed(chunk.length)) throw err();
      T.pack += now() - t;
    };
    try {
      for (const name of FILE_NAMES) {
        const src = sources[name], size = src.size, slot = HASH_SLOT[name];
        const weights = name === 'model.safetensors';
        // The weights' head, the bytes before cis2w_load_begin: the 8-byte length, then the
        // header, each byte copied in once (a buffer of the header's size once its length is
        // known; not grown chunk by chunk, which copied a 100 MB header again for every chunk).
        let head = new Uint8Array(Math.min(8, size)), headLen = 0, began = false;
        const takeHead = (chunk) => {   // copies what of chunk belongs to the head; returns how much
          let used = 0;
          for (;;) {
            const k = Math.min(head.length - headLen, chunk.length - used);
            head.set(chunk.subarray(used, used + k), headLen);
            headLen += k; used += k;
            if (headLen < head.length) return used;
            const end = headerEnd(head, size);
            if (end <= head.length) return used;
            const h = new Uint8Array(end);   // the 8 bytes are in: the header's size is known
            h.set(head);
            head = h;
          }
        };
        const begin = async () => {   // the header is in (or the file ended): parse it, push the head
          const hp = x.cis2w_malloc(headLen) >>> 0;
          if (!hp) throw new Error(`out of wasm memory for ${name}'s header`);
          this.u8.set(head.subarray(0, headLen), hp);
          this.files.set(name, { ptr: hp, size, avail: headLen });
          began = true;
          if (x.cis2w_load_begin(CHUNK)) throw err();
          for (let a = 0; a < headLen; a += CHUNK) await push(slot, head.subarray(a, Math.min(headLen, a + CHUNK)));
        };
        if (!weights) {
          if (size > FILE_MAX[name]) throw new Error(`${name}: ${size} bytes is more than the ${FILE_MAX[name]} this input may have`);
          const ptr = x.cis2w_malloc(size) >>> 0;   // an address past 2 GiB comes back negative
          if (!ptr) throw new Error(`out of wasm memory for ${name} (${size} bytes)`);
          this.files.set(name, { ptr, size, avail: size });
        }
        if (hw && slot !== undefined) hw.begin(slot);
        let off = 0, t = now();
        for await (const chunk of namedChunks(name, src)) {
          T.read += now() - t;
          if (off + chunk.length > size) throw new Error(`${name}: longer than its ${size} bytes`);
          if (!weights) {
            t = now();
            const p = this.files.get(name).ptr + off;
            this.u8.set(chunk, p);   // the chunk's buffer is reused once we ask for the next
            T.copy += now() - t;
            await hash(slot, p, chunk);
          } else if (began) {
            await push(slot, chunk);
          } else {
            const k = takeHead(chunk);
            if (headLen === head.length) {
              await begin();
              if (k < chunk.length) await push(slot, chunk.subarray(k));   // the data after the header
            }
          }
          off += chunk.length;
          doneAll += chunk.length;
          if (onProgress) onProgress({ file: name, done: doneAll, total });
          t = now();
        }
        if (off !== size) throw new Error(`${name}: short read at ${off} of ${size} bytes`);
        if (weights && !began) await begin();
        if (slot !== undefined) {
          if (hw) {
            const d = hw.end(slot);
            d.catch(() => {});   // awaited below, in order: a failed load or an earlier failed digest leaves it not
            digests.push([name, slot, d]);
          }
          else x.cis2w_hash_end(slot);
        }
      }
    } catch (e) {
      this.unload();   // abandons a load in progress
      throw e;
    }
    T.files = now() - T.t0;
    // The hash worker's digests go into the engine as they arrive. A later load() or
    // unload() makes this load stale: its digests are then dropped, its waiters told.
    const gen = this.gen, got = {};
    const hashed = (async () => {
      const t = now();
      for (const [name, slot, promise] of digests) {
        const d = new Uint8Array(await promise);
        if (gen !== this.gen) throw new Error('the model was unloaded while it was being hashed');
        const p = x.cis2w_malloc(32);
        this.u8.set(d, p);
        const rc = x.cis2w_hash_set(slot, p);
        x.cis2w_free(p);
        if (rc) throw new Error(`cannot record the ${name} digest`);
        got[digestKey(name)] = [...d].map((b) => b.toString(16).padStart(2, '0')).join('');
      }
      T.digestWait = now() - t;
    })();
    hashed.catch(() => {});   // a caller that never asks is not an unhandled rejection
    let t = now(), info;
    try { info = this._json(x.cis2w_load_end(1)); } catch (e) { this.unload(); throw e; }
    T.load = now() - t;
    info.timing = T;
    this.hashed = hashed.then(() => { this.digestInfo = { ...info, ...got }; });
    this.hashed.catch(() => {});
    if (early) {
      for (const [name] of digests) info[digestKey(name)] = null;   // still coming
      return info;
    }
    await this.hashed;
    return this.digestInfo;
  }

  // { prompt } (text) or { promptIds: '1,2,3' }; n; stopAtEos; sampling (null: greedy) as
  // { temperature, topK, topP, minP, seed }, each a number or its text as `cis2 run`'s flags
  // take it (docs/sampling.md §1; the seed a decimal string up to 2^64 - 1, or left out: one
  // from crypto.getRandomValues, returned as the result's seed). run and verify decode at once
  // and report when both artifact digests are in: after load(.., { early: true }) the hash
  // worker may still be hashing the file's last chunks while they decode.
  async run({ prompt = null, promptIds = null, n = 16, stopAtEos = false, sampling = null }) {
    const smp = sampling ? samplerText(sampling) : null;
    return this._serial(async () => {
      const decode = () => this._withStr(promptIds, (ip) => this._withStr(smp, (sp) =>
        this._withStr(promptIds ? null : prompt, (pp, pl) => this.x.cis2w_run(pp, pl, ip, n, stopAtEos ? 1 : 0, sp))));
      const waited = await this._decoded(decode), r = this._json(this.x.cis2w_run_report());
      r.hash_wait_ms = waited;
      return r;
    });
  }

  // receiptText: a string, or a file's bytes (verified exactly as they are).
  async verify(receiptText) {
    return this._serial(async () => {
      const waited = await this._decoded(() => this._withStr(receiptText, (p, l) => this.x.cis2w_verify(p, l)));
      const r = this._json(this.x.cis2w_verify_report());
      r.hash_wait_ms = waited;
      return r;
    });
  }

  // Resolves to load()'s info, the digests in, once both are (early loads).
  digests() { return this._digestsIn().then(() => this.digestInfo); }

  // decode() (cis2w_run or cis2w_verify), then the digests in; resolves to the ms it waited
  // for them after the decode. 2 from decode() means too long to record before they are in,
  // so it runs again once they are.
  async _decoded(decode) {
    let rc = decode();
    if (rc === 2) { await this._digestsIn('too long to record'); rc = decode(); }
    if (rc) throw new Error(this._cstr(this.x.cis2w_error()));
    const t = now();
    await this._digestsIn('decoded');
    return now() - t;
  }

  // why: for opts.hashWait(why), called when this waits ('decoded': after a decode).
  _digestsIn(why = null) {
    if (!this.hashed) return Promise.reject(new Error('no model loaded'));
    if (why && this.opts.hashWait && !this.digestInfo) this.opts.hashWait(why);
    return this.hashed;
  }

  // One engine call at a time: a run or verify awaiting the digests holds its decode in the
  // engine (cis2w_run / cis2w_verify, then _report), which another call would replace.
  _serial(fn) {
    const p = (this.queue || Promise.resolve()).then(fn);
    this.queue = p.catch(() => {});
    return p;
  }

  // A teacher-forced trace (`cis2 trace` format, docs/divergence.md): promptIds and
  // teacherIds as '1,2,3' (teacherIds may be ''); arm names the trace (null: "cis2-fast").
  // sink(bytes) receives the file in order: its header, then each tensor's data, as views
  // of the wasm heap valid only during the call (so the trace is never held twice).
  // Returns the number of bytes written.
  trace({ promptIds, teacherIds = '', arm = null }, sink) {
    return this._withStr(promptIds, (ip) => this._withStr(teacherIds, (tp) => this._withStr(arm, (ap) => {
      const lp = this.x.cis2w_malloc(4);
      if (!lp) throw new Error('out of wasm memory');
      try {
        const p = this.x.cis2w_trace(ip, tp, ap, lp);
        if (!p) throw new Error(this._cstr(this.x.cis2w_error()));
        let total = this.dv.getUint32(lp, true);
        sink(this.u8.subarray(p, p + total));
        for (let i = 0, n = this.x.cis2w_trace_count(); i < n; i++) {
          const d = this.x.cis2w_trace_data(i, lp);
          if (!d) continue;
          const len = this.dv.getUint32(lp, true);
          sink(this.u8.subarray(d, d + len));
          total += len;
        }
        return total;
      } finally { this.x.cis2w_trace_free(); this.x.cis2w_free(lp); }
    })));
  }
}

const now = () => (typeof performance !== 'undefined' ? performance.now() : Date.now());

// run()'s sampling as cis2w_run takes it: "T K P M S" (web/wasm_api.c parse_sampler reads
// each as `cis2 run` reads its flag and names the one it refuses). A seed left out is drawn
// here, 64 bits from the platform's randomness, as `cis2 run` draws one.
function samplerText({ temperature, topK = 0, topP = 1, minP = 0, seed = null }) {
  if (seed === null || seed === undefined || String(seed).trim() === '') {
    const w = new Uint32Array(2);
    crypto.getRandomValues(w);
    seed = ((BigInt(w[0]) << 32n) | BigInt(w[1])).toString();
  }
  // A space inside a value would shift the fields: such a value is no number of §1's form
  // (said in `cis2 run`'s words, as web/wasm_api.c parse_sampler says the rest).
  const f = [temperature, topK, topP, minP, seed].map((v) => String(v).trim());
  const want = ['a number like 0.7', 'an integer from 0 to 2147483647', 'a number in [0, 1] (1 = off)',
    'a number in [0, 1] (0 = off)', 'an integer from 0 to 18446744073709551615'];
  for (const [i, name] of ['temperature', 'top-k', 'top-p', 'min-p', 'seed'].entries())
    if (f[i] === '' || /\s/.test(f[i])) throw new Error(`${name}: expected ${want[i]}, got '${f[i]}'`);
  return f.join(' ');
}
const digestKey = (name) => (name === 'model.safetensors' ? 'weights_sha256' : 'tokenizer_sha256');

// safetensors: the length of the file's head that holds its header (8 bytes of length, then
// the header), as far as the bytes so far tell. A length the loader refuses (past
// MAX_HEADER, src/model/safetensors.c, or past the end of the file) needs only the 8 bytes:
// cis2w_load_begin says why, as `cis2 run` does, without the file read into the heap first.
const HEADER_MAX = 100 << 20;
function headerEnd(head, size) {
  if (head.length < 8) return Math.min(8, size);
  const n = new DataView(head.buffer, head.byteOffset, 8).getBigUint64(0, true);
  return n > BigInt(Math.min(HEADER_MAX, size - 8)) ? 8 : 8 + Number(n);
}

// The chunks of a source in order. src.chunks() where the source streams (each chunk valid
// until the next is asked for); else src.read(a, b) in CHUNK steps, one read ahead.
async function* sourceChunks(src) {
  if (src.chunks) { yield* src.chunks(); return; }
  yield* readChunks(src, 0);
}

// sourceChunks, its errors (a file removed, changed or made unreadable after it was picked:
// the browser's "network error", NotReadableError...) named by the file, as the CLI's
// "PATH: cannot open: ..." is.
async function* namedChunks(name, src) {
  try { yield* sourceChunks(src); } catch (e) { throw new Error(`${name}: cannot read: ${e && e.message || e}`); }
}

// src.read(a, b) in CHUNK steps from byte `from` to the end, one read ahead.
async function* readChunks(src, from) {
  const ahead = (a) => { const r = src.read(a, Math.min(src.size, a + CHUNK)); r.catch(() => {}); return r; };
  let next = from < src.size ? ahead(from) : null;
  for (let off = from; off < src.size; off += CHUNK) {
    const chunk = await next;
    if (off + CHUNK < src.size) next = ahead(off + CHUNK);
    if (chunk.length !== Math.min(CHUNK, src.size - off)) throw new Error(`short read at ${off}`);
    yield chunk;
  }
}

// A source over a browser File/Blob: its byte stream read into one reused buffer (BYOB: no
// fresh 270 MB of ArrayBuffers for the allocator to fault in), or slices where the browser's
// Blob stream is not a byte stream. Chromium's byte stream of a picked File can stall for
// good: loading the same picked files a second time, a read() never settled in 5 of 6 runs in
// headless Chromium (not understood; slices never stalled, and with this timer pending beside
// each read it was not seen again). So a read that brings nothing for STALL_MS goes on with
// slices from where it stopped; a slow disk only loses the reused buffer.
const STALL_MS = 3000;
export function blobSource(blob) {
  const src = { size: blob.size, read: async (a, b) => new Uint8Array(await blob.slice(a, b).arrayBuffer()) };
  let reader = null;
  try { reader = blob.stream().getReader({ mode: 'byob' }); } catch { return src; }
  src.chunks = async function* () {
    let buf = new ArrayBuffer(CHUNK), off = 0;
    for (;;) {
      let timer = null;
      const read = reader.read(new Uint8Array(buf));
      read.catch(() => {});
      const got = await Promise.race([read, new Promise((r) => { timer = setTimeout(r, STALL_MS, null); })]);
      clearTimeout(timer);
      if (!got) {
        reader.cancel().catch(() => {});
        yield* readChunks(src, off);
        return;
      }
      const { value, done } = got;
      if (done) return;
      off += value.length;
      yield value;
      buf = value.buffer;   // read() transferred it; the same memory comes back
    }
  };
  return src;
}

// A hasher on a second worker (web/hash_worker.js): update(slot, chunk) copies the chunk into a
// buffer of a small pool and transfers it there, waiting for one to come back when MAX_AHEAD
// are out; end(slot) resolves to the 32-byte digest. The reader and packer outrun this SHA-256,
// so the hash trails by up to MAX_AHEAD chunks, which a run or verify overlaps with its decode
// (run/verify above). Not more: with 32 out, 6 of 13 loads of the 270 MB checkpoint in headless
// Chromium stalled (idle, the file's reading stopped part-way; not understood), and 16 measured
// no faster than 6.
const MAX_AHEAD = 6;
// A worker that failed (its script did not start, a chunk it could not hash) holds a half-fed
// hash and buffers it never gave back: the next load() asks recover(), which ends it and starts
// a fresh one from makeWorker(), so one failure fails one load, not every load after it.
export class WorkerHasher {
  constructor(makeWorker, module) {
    this.name = 'cis2 SHA-256 (wasm, second worker)';
    this.makeWorker = makeWorker;
    this.module = module;
    this._start();
  }
  _start() {
    const worker = this.w = this.makeWorker();
    this.pool = [];
    this.out = 0;
    this.waiters = [];
    this.ends = [];   // { resolve, reject } per end() not yet answered, in order: the worker answers in order
    this.failed = null;
    worker.onmessage = (ev) => {
      const m = ev.data;
      if (worker !== this.w || this.failed) return;   // after its error it answers nothing we wait for
      if (m.cmd === 'buf') { this.out--; this.pool.push(m.buf); this._wake(); }
      else if (m.cmd === 'digest') this.ends.shift().resolve(m.digest);
      else if (m.cmd === 'error') this._fail(new Error(m.message));
    };
    // A worker whose script cannot be fetched or run fires 'error', never a message: fail the
    // load with that instead of waiting for a digest that cannot come.
    worker.onerror = (ev) => {
      if (ev.preventDefault) ev.preventDefault();
      if (worker !== this.w) return;
      this._fail(new Error(`hash worker (web/hash_worker.js): ${ev.message || 'failed to start'}`));
    };
    worker.postMessage({ cmd: 'init', module: this.module });
  }
  // Before a load: a fresh worker in place of one that failed.
  recover() {
    if (!this.failed) return;
    this.w.terminate();
    this._start();
  }
  _fail(e) {
    if (!this.failed) this.failed = e;
    this._failAll();
  }
  _wake() { const w = this.waiters; this.waiters = []; for (const f of w) f(); }
  _failAll() { const e = this.ends; this.ends = []; for (const r of e) r.reject(this.failed); this._wake(); }
  begin(slot) { this.w.postMessage({ cmd: 'begin', slot }); }
  async update(slot, chunk) {
    while (this.out >= MAX_AHEAD && !this.failed) await new Promise((r) => this.waiters.push(r));
    if (this.failed) throw this.failed;
    let buf = this.pool.pop();
    if (!buf || buf.byteLength < chunk.length) buf = new ArrayBuffer(Math.max(CHUNK, chunk.length));
    new Uint8Array(buf).set(chunk);
    this.out++;
    this.w.postMessage({ cmd: 'update', slot, buf, len: chunk.length }, [buf]);
  }
  end(slot) {
    if (this.failed) return Promise.reject(this.failed);
    const p = new Promise((resolve, reject) => this.ends.push({ resolve, reject }));
    this.w.postMessage({ cmd: 'end', slot });
    return p;
  }
}
