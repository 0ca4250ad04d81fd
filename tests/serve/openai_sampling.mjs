// The official OpenAI client library (npm `openai`) against `cis2 serve`'s sampling:
// temperature + seed (the receipt is `cis2 run --temperature … --seed …`'s), the seed
// returned, n choices with seeds seed + i, and logprobs in the completions shape.
//   node openai_sampling.mjs BASE_URL MODEL PROMPT N SEED EXPECTED_RECEIPT_FILE
// EXPECTED_RECEIPT_FILE is `cis2 run --prompt PROMPT -n N --temperature 1.5 --top-p 0.95
// --seed SEED --stop-at-eos --receipt` (t_serve_sampling.sh). Prints PASS/FAIL lines; exits 1
// on any FAIL.
import OpenAI from 'openai';
import { readFileSync } from 'node:fs';

const [base, model, prompt, nStr, seedStr, expectedPath] = process.argv.slice(2);
const n = parseInt(nStr, 10), seed = parseInt(seedStr, 10);
const expected = readFileSync(expectedPath, 'utf8');
let fails = 0;
const check = (name, ok, why) => {
  if (ok) console.log(`PASS serve_sampling.openai.${name}`);
  else { fails++; console.log(`FAIL serve_sampling.openai.${name}: ${why}`); }
};
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
const req = { model, prompt, max_tokens: n, temperature: 1.5, top_p: 0.95, seed };

try {
  const c = await client.completions.create(req);
  check('seeded-receipt-equals-cis2-run', c.cis2 && c.cis2.receipt === expected,
        `got:\n${c.cis2 && c.cis2.receipt}\nwant:\n${expected}`);
  check('seed-returned', c.seed === seed && c.cis2.seed === seed, `seed ${c.seed}, cis2.seed ${c.cis2 && c.cis2.seed}`);

  const free = await client.completions.create({ ...req, seed: undefined });
  check('server-seed-returned', Number.isSafeInteger(free.seed) && free.cis2.receipt.endsWith(`\nseed ${free.seed}\n`),
        `seed ${free.seed}`);

  const m = await client.completions.create({ ...req, n: 3 });
  check('n3', m.choices.length === 3 && m.choices.every((ch, i) => ch.index === i && ch.cis2.seed === seed + i) &&
        m.choices[0].cis2.receipt === expected, JSON.stringify(m).slice(0, 400));

  const stream = await client.completions.create({ ...req, stream: true });
  let text = '', receipt = null;
  for await (const k of stream) {
    text += k.choices[0] ? k.choices[0].text : '';
    if (k.cis2) receipt = k.cis2.receipt;
  }
  check('stream', text === c.choices[0].text && receipt === expected, `'${text}' vs '${c.choices[0].text}'`);

  const l = await client.completions.create({ ...req, logprobs: 2 });
  const lp = l.choices[0].logprobs;
  check('logprobs', lp && lp.tokens.length === l.cis2.generated_token_ids.length &&
        lp.token_logprobs.every((v) => typeof v === 'number' && v <= 0) &&
        lp.top_logprobs.every((o) => Object.keys(o).length >= 1 && Object.keys(o).length <= 2) &&
        l.cis2.receipt === expected, JSON.stringify(lp).slice(0, 400));

  try {
    await client.completions.create({ ...req, top_p: 2 });
    check('error-top-p', false, 'no error');
  } catch (e) {
    check('error-top-p', e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'top_p',
          `${e.constructor.name} ${e.status} param=${e.param}: ${e.message}`);
  }
} catch (e) {
  check('no-exception', false, `${e.constructor.name}: ${e.message}\n${e.stack}`);
}
process.exit(fails ? 1 : 0);
