// The official OpenAI client library (npm `openai`, pinned in package.json) against
// `cis2 serve`'s /v1/chat/completions: client.chat.completions.create, plain and streamed,
// the receipt equal to `cis2 run --chat` on the same messages, and the refusals mapped to
// the library's error classes.
//   node openai_chat.mjs BASE_URL MODEL MESSAGES.json N EXPECTED_RECEIPT_FILE
// EXPECTED_RECEIPT_FILE is `cis2 run --chat MESSAGES.json -n N --stop-at-eos --receipt`
// (tests/t_serve_chat.sh). Prints PASS/FAIL lines; exits 1 on any FAIL.
import OpenAI from 'openai';
import { readFileSync } from 'node:fs';

const [base, model, messagesPath, nStr, expectedPath] = process.argv.slice(2);
const n = parseInt(nStr, 10);
const messages = JSON.parse(readFileSync(messagesPath, 'utf8')).messages;
const expected = readFileSync(expectedPath, 'utf8');
let fails = 0;
const check = (name, ok, why) => {
  if (ok) console.log(`PASS serve.chat.openai.${name}`);
  else { fails++; console.log(`FAIL serve.chat.openai.${name}: ${why}`); }
};
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60000 });

try {
  const c = await client.chat.completions.create({ model, messages, max_tokens: n, temperature: 0 });
  const ch = c.choices[0];
  check('receipt-equals-cis2-run-chat', c.cis2 && c.cis2.receipt === expected,
        `got:\n${c.cis2 && c.cis2.receipt}\nwant:\n${expected}`);
  check('shape', c.object === 'chat.completion' && ch.message.role === 'assistant' &&
        typeof ch.message.content === 'string' && ['length', 'stop'].includes(ch.finish_reason) &&
        c.usage.completion_tokens === c.cis2.generated_token_ids.length &&
        c.usage.prompt_tokens === c.cis2.prompt_token_ids.length, JSON.stringify(c).slice(0, 400));
  const c2 = await client.chat.completions.create({ model, messages, max_completion_tokens: n });
  check('max-completion-tokens', c2.cis2.receipt === expected, 'receipt differs');

  // Streamed: the first delta carries the role; the content deltas add up; the last
  // chunk carries finish_reason and the same receipt.
  const stream = await client.chat.completions.create({ model, messages, max_tokens: n, stream: true });
  let text = '', chunks = 0, roles = [], receipt = null, finish = null;
  for await (const k of stream) {
    chunks++;
    const d = k.choices[0] ? k.choices[0].delta : {};
    if (d.role) roles.push([chunks, d.role]);
    text += d.content || '';
    if (k.choices[0] && k.choices[0].finish_reason) finish = k.choices[0].finish_reason;
    if (k.cis2) receipt = k.cis2.receipt;
  }
  check('stream-role-first', JSON.stringify(roles) === '[[1,"assistant"]]', JSON.stringify(roles));
  check('stream-content-equals-message', text === ch.message.content && finish === ch.finish_reason,
        `stream '${text}' (${finish}) vs '${ch.message.content}' (${ch.finish_reason})`);
  check('stream-receipt-equals-cis2-run-chat', receipt === expected, `got ${receipt}`);
  check('stream-token-by-token', chunks >= 3, `${chunks} chunks`);

  // Sampled, seeded, two choices, log-probabilities (docs/serve.md, Sampling): the same seed
  // gives the same choices; each choice's logprobs.content has one entry per generated id.
  const sreq = { model, messages, max_tokens: n, temperature: 0.9, seed: 11, n: 2, logprobs: true, top_logprobs: 2 };
  const s1 = await client.chat.completions.create(sreq), s2 = await client.chat.completions.create(sreq);
  check('sampled-same-seed', JSON.stringify(s1.choices) === JSON.stringify(s2.choices) && s1.seed === 11,
        JSON.stringify(s1).slice(0, 300));
  check('sampled-n2-logprobs', s1.choices.length === 2 && s1.choices.every((cc, i) =>
    cc.index === i && cc.cis2.seed === 11 + i && cc.cis2.receipt.startsWith('CIS-2-RECEIPT v1+sampling\n') &&
    cc.logprobs.content.length === cc.cis2.generated_token_ids.length &&
    cc.logprobs.content.every((e) => typeof e.token === 'string' && e.logprob <= 0 && Array.isArray(e.bytes) &&
                                     e.top_logprobs.length === 2)), JSON.stringify(s1.choices[0]).slice(0, 400));

  const expectError = async (name, req, cls, status, param, code) => {
    try {
      await client.chat.completions.create(req);
      check(name, false, 'no error');
    } catch (e) {
      check(name, e instanceof cls && e.status === status && e.param === param && (code === undefined || e.code === code),
            `${e.constructor.name} ${e.status} param=${e.param} code=${e.code}: ${e.message}`);
    }
  };
  const user = [{ role: 'user', content: 'hi' }];
  await expectError('error-temperature', { model, messages: user, temperature: -1.0 }, OpenAI.BadRequestError, 400, 'temperature');
  await expectError('error-n', { model, messages: user, n: 17 }, OpenAI.BadRequestError, 400, 'n');
  await expectError('error-top-logprobs', { model, messages: user, top_logprobs: 2 }, OpenAI.BadRequestError, 400, 'top_logprobs');
  await expectError('error-role', { model, messages: [{ role: 'tool', content: 'x', tool_call_id: 't' }] },
                    OpenAI.BadRequestError, 400, 'messages');
  await expectError('error-special-token', { model, messages: [{ role: 'user', content: 'a <|endoftext|>' }] },
                    OpenAI.BadRequestError, 400, 'messages');
  await expectError('error-model', { model: 'no-such-model', messages: user }, OpenAI.NotFoundError, 404, 'model', 'model_not_found');
  await expectError('error-stream-too', { model, messages: user, top_p: 0.5, stream: true }, OpenAI.BadRequestError, 400, 'top_p');
} catch (e) {
  check('no-exception', false, `${e.constructor.name}: ${e.message}\n${e.stack}`);
}
process.exit(fails ? 1 : 0);
