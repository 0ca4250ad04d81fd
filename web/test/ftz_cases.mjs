// The wasm side of web/test/ftz_diff.sh: stdin lines "OP A B" through cis2w_fp_op.
import { readFileSync } from 'node:fs';
import { Cis2 } from '../cis2.js';
const c = await Cis2.create(readFileSync(process.env.CIS2_WASM || new URL('../cis2.wasm', import.meta.url)));
const out = [];
for (const line of readFileSync(0, 'utf8').split('\n')) {
  if (!line) continue;
  const [op, a, b] = line.split(' ');
  out.push((c.x.cis2w_fp_op(Number(op), parseInt(a, 16), parseInt(b, 16)) >>> 0).toString(16).padStart(8, '0'));
}
process.stdout.write(out.join('\n') + '\n');
