// The official OpenAI client library (npm `openai`, pinned in package.json) against
// `cis2 serve`: models, a completion, the same completion streamed, a stop string,
// errors mapped to the library's error classes, and a stream abandoned mid-way.
//   node openai_client.mjs BASE_URL MODEL PROMPT N EXPECTED_RECEIPT_FILE STOP
// EXPECTED_RECEIPT_FILE is `cis2 run --prompt PROMPT -n N --stop-at-eos --receipt` (t_serve.sh).
// Prints PASS/FAIL lines; exits 1 on any FAIL.
import OpenAI from 'openai';
import { readFileSync } from 'node:fs';

const [base, model, prompt, nStr, expectedPath, stop] = process.argv.slice(2);
const n = parseInt(nStr, 10);
const expected = readFileSync(expectedPath, 'utf8');
let fails = 0;
const check = (name, ok, why) => {
  if (ok) console.log(`PASS serve.openai.${name}`);
  else { fails++; console.log(`FAIL serve.openai.${name}: ${why}`); }
};
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60000 });

try {
  const models = await client.models.list();
  const m = models.data[0];
  check('models-list', models.data.length === 1 && m.id === model && /^[0-9a-f]{64}$/.test(m.cis2.weights_sha256),
        JSON.stringify(models.data));
  const one = await client.models.retrieve(model);
  check('models-retrieve', one.id === model, JSON.stringify(one));

  const c = await client.completions.create({ model, prompt, max_tokens: n, temperature: 0 });
  const ch = c.choices[0];
  check('completion-receipt-equals-cis2-run', c.cis2 && c.cis2.receipt === expected,
        `got:\n${c.cis2 && c.cis2.receipt}\nwant:\n${expected}`);
  check('completion-shape', c.object === 'text_completion' && typeof ch.text === 'string' &&
        ['length', 'stop'].includes(ch.finish_reason) && c.usage.completion_tokens === c.cis2.generated_token_ids.length &&
        c.usage.prompt_tokens === c.cis2.prompt_token_ids.length, JSON.stringify(c).slice(0, 400));

  // Streamed: the deltas add up to the same text; the last chunk carries the same receipt.
  const stream = await client.completions.create({ model, prompt, max_tokens: n, stream: true });
  let text = '', chunks = 0, receipt = null, finish = null;
  for await (const k of stream) {
    chunks++;
    text += k.choices[0] ? k.choices[0].text : '';
    if (k.choices[0] && k.choices[0].finish_reason) finish = k.choices[0].finish_reason;
    if (k.cis2) receipt = k.cis2.receipt;
  }
  check('stream-text-equals-completion', text === ch.text && finish === ch.finish_reason,
        `stream '${text}' (${finish}) vs '${ch.text}' (${ch.finish_reason})`);
  check('stream-receipt-equals-cis2-run', receipt === expected, `got ${receipt}`);
  check('stream-token-by-token', chunks >= 2, `${chunks} chunks`);

  // A stop string: OpenAI semantics (the text ends before it), and a receipt of the ids generated.
  const s = await client.completions.create({ model, prompt, max_tokens: n, stop: [stop] });
  const sc = s.choices[0];
  check('stop-string', sc.finish_reason === 'stop' && !sc.text.includes(stop) && ch.text.startsWith(sc.text) &&
        s.cis2.generated_token_ids.length < n, JSON.stringify(sc));

  // Errors become the library's classes, with status, param and code.
  const expectError = async (name, req, cls, status, param, code) => {
    try {
      await client.completions.create(req);
      check(name, false, 'no error');
    } catch (e) {
      check(name, e instanceof cls && e.status === status && e.param === param && (code === undefined || e.code === code),
            `${e.constructor.name} ${e.status} param=${e.param} code=${e.code}: ${e.message}`);
    }
  };
  await expectError('error-temperature', { model, prompt, temperature: -1 }, OpenAI.BadRequestError, 400, 'temperature');
  await expectError('error-n', { model, prompt, n: 17 }, OpenAI.BadRequestError, 400, 'n');
  await expectError('error-model', { model: 'no-such-model', prompt }, OpenAI.NotFoundError, 404, 'model', 'model_not_found');
  await expectError('error-context', { model, prompt: [1, 2, 3], max_tokens: 100000 }, OpenAI.BadRequestError, 400, 'max_tokens');
  await expectError('error-unknown-argument', { model, prompt, tools: [] }, OpenAI.BadRequestError, 400, 'tools');
  await expectError('error-stream-too', { model, prompt, top_p: 0.5, stream: true }, OpenAI.BadRequestError, 400, 'top_p');

  // A client that stops reading: break out of the stream (the library aborts the request).
  const long = await client.completions.create({ model, prompt, max_tokens: 2000, stream: true, ignore_eos: true });
  let got = 0;
  for await (const k of long) { if (k.choices[0] && k.choices[0].text) got++; if (got >= 3) break; }
  check('stream-abandoned', got >= 3, `${got} chunks before break`);
} catch (e) {
  check('no-exception', false, `${e.constructor.name}: ${e.message}\n${e.stack}`);
}
process.exit(fails ? 1 : 0);
