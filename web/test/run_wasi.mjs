// Runs a WASI command module (tools/build_wasm.sh WASM_TESTS=DIR: tests/unit_*.c built for
// wasm32) in node, the current directory preopened; exits with its status.
//   node web/test/run_wasi.mjs DIR/unit_fast.wasm
import { readFileSync } from 'node:fs';
import { WASI } from 'node:wasi';

const wasi = new WASI({ version: 'preview1', args: [process.argv[2]], env: {}, preopens: { '.': '.' } });
const module = await WebAssembly.compile(readFileSync(process.argv[2]));
// The library's wasm shims import two calls from the page glue; tests use neither.
const instance = await WebAssembly.instantiate(module, {
  wasi_snapshot_preview1: wasi.wasiImport,
  cis2: { progress: () => {} },
});
process.exitCode = wasi.start(instance);
