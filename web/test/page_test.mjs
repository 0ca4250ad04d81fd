// Drives web/index.html in Debian's Chromium, headless, via playwright-core
// (tools/test_web.sh prepares the files and the server).
//   node page_test.mjs URL MODEL_DIR GOOD_RECEIPT DOCTORED_RECEIPT PROMPT N EXPECTED_RUN_RECEIPT OUT_DIR
// Prints PASS/FAIL lines and the screenshot paths; exits 1 on any FAIL.
import { chromium } from 'playwright-core';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const [url, modelDir, goodPath, badPath, prompt, n, expectedRunPath, outDir] = process.argv.slice(2);
let fails = 0;
const pass = (m) => console.log(`PASS ${m}`);
const fail = (m, why) => { fails++; console.log(`FAIL ${m}: ${why}`); };
const check = (name, ok, why) => (ok ? pass(name) : fail(name, why));

const userDataDir = mkdtempSync(path.join(tmpdir(), 'cis2-chromium-'));
const ctx = await chromium.launchPersistentContext(userDataDir, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  acceptDownloads: true,
  viewport: { width: 1100, height: 1300 },
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const logs = [];
try {
  const page = ctx.pages()[0] || await ctx.newPage();
  page.on('console', (m) => { if (m.type() === 'error') logs.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
  page.setDefaultTimeout(120000);
  await page.goto(url);
  await page.waitForFunction(() => /^(PASS|FAIL)/.test(document.getElementById('selftest-status').textContent));
  const st = await page.textContent('#selftest-status');
  check('page-selftest', st.startsWith('PASS'), st);

  await page.setInputFiles('#f-config', path.join(modelDir, 'config.json'));
  await page.setInputFiles('#f-tokenizer', path.join(modelDir, 'tokenizer.json'));
  await page.setInputFiles('#f-model', path.join(modelDir, 'model.safetensors'));

  // A good receipt, picked as a file.
  await page.setInputFiles('#receipt-file', goodPath);
  await page.waitForFunction(() => document.getElementById('receipt-text').value.startsWith('CIS-2-RECEIPT v1'));
  await page.click('#verify-btn');
  await page.waitForFunction(() => document.getElementById('verdict').textContent !== '' || document.getElementById('error').textContent !== '');
  let verdict = await page.textContent('#verdict');
  const err = await page.textContent('#error');
  const nMatch = await page.locator('#fields tr.match').count();
  const nMis = await page.locator('#fields tr.mismatch').count();
  check('page-verify-good-receipt', verdict.startsWith('PASS') && nMatch >= 9 && nMis === 0,
        `verdict '${verdict}', error '${err}', ${nMatch} match / ${nMis} mismatch rows`);
  const loadStatus = await page.textContent('#load-status');
  const nativeWeights = readFileSync(goodPath, 'utf8').match(/^weights-sha256 (\S+)/m)[1];
  check('page-hashes-weights', loadStatus.includes(nativeWeights), `load status '${loadStatus}'`);
  const speed = await page.textContent('#speed');
  check('page-shows-tokens-per-second', /tokens\/s/.test(speed), speed);
  const shotGood = path.join(outDir, 'web-verify-pass.png');
  await page.screenshot({ path: shotGood, fullPage: true });

  // A doctored receipt, pasted.
  await page.fill('#receipt-text', readFileSync(badPath, 'utf8'));
  await page.click('#verify-btn');
  await page.waitForFunction(() => document.getElementById('verdict').textContent.startsWith('FAIL') || document.getElementById('error').textContent !== '');
  verdict = await page.textContent('#verdict');
  const bad = await page.$$eval('#fields tr.mismatch', (rows) => rows.map((r) => r.dataset.field));
  check('page-verify-doctored-receipt', verdict.startsWith('FAIL') && bad.length === 1 && bad[0] === 'witness-digest',
        `verdict '${verdict}', mismatched rows [${bad}] (want [witness-digest])`);
  const shotBad = path.join(outDir, 'web-verify-fail.png');
  await page.screenshot({ path: shotBad, fullPage: true });

  // A free-form prompt: its receipt must equal native `cis2 run --prompt ... --receipt`.
  await page.fill('#prompt', prompt);
  await page.fill('#n', String(n));
  await page.click('#run-btn');
  await page.waitForSelector('#download-btn:not([hidden])');
  const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#download-btn')]);
  const dlPath = path.join(outDir, 'web-run-receipt.txt');
  await dl.saveAs(dlPath);
  const got = readFileSync(dlPath, 'utf8'), want = readFileSync(expectedRunPath, 'utf8');
  check('page-run-receipt-equals-native', got === want, `downloaded:\n${got}\nnative:\n${want}`);
  const runSpeed = await page.textContent('#run-speed');
  check('page-run-shows-tokens-per-second', /tokens\/s/.test(runSpeed), runSpeed);
  const shotRun = path.join(outDir, 'web-run.png');
  await page.screenshot({ path: shotRun, fullPage: true });
  // The engine's SHA-256 on the engine's own worker (?hash=wasm) gives the same artifact hashes
  // as the hash worker fed the chunks, and both equal native's: the same receipt verifies.
  await page.goto(`${url}?hash=wasm`);
  await page.waitForFunction(() => /^(PASS|FAIL)/.test(document.getElementById('selftest-status').textContent));
  await page.setInputFiles('#f-all', ['config.json', 'tokenizer.json', 'model.safetensors'].map((f) => path.join(modelDir, f)));
  await page.setInputFiles('#receipt-file', goodPath);
  await page.waitForFunction(() => document.getElementById('receipt-text').value.startsWith('CIS-2-RECEIPT v1'));
  await page.click('#verify-btn');
  await page.waitForFunction(() => document.getElementById('verdict').textContent !== '' || document.getElementById('error').textContent !== '');
  const wasmStatus = await page.textContent('#load-status'), wasmVerdict = await page.textContent('#verdict');
  const shaOf = (st, k) => (st.match(new RegExp(`^${k}\\s+(\\S+)`, 'm')) || [])[1];
  check('page-wasm-sha256-equals-hash-worker',
        /hashed with cis2 SHA-256 \(wasm\)/.test(wasmStatus) && /hashed with cis2 SHA-256 \(wasm, second worker\)/.test(loadStatus) &&
        ['weights-sha256', 'tokenizer-sha256'].every((k) => shaOf(wasmStatus, k) && shaOf(wasmStatus, k) === shaOf(loadStatus, k)) &&
        wasmVerdict.startsWith('PASS'),
        `hash worker:\n${loadStatus}\nwasm:\n${wasmStatus}\nverdict '${wasmVerdict}'`);

  // Optional: a SmolLM2-sized checkpoint (tools/test_web.sh CIS2_WEB_BIG_MODEL=DIR).
  if (process.env.BIG_MODEL_DIR) {
    const big = process.env.BIG_MODEL_DIR;
    await page.goto(url);   // the hash worker again
    await page.waitForFunction(() => /^PASS/.test(document.getElementById('selftest-status').textContent));
    await page.setInputFiles('#f-all', ['config.json', 'tokenizer.json', 'model.safetensors'].map((f) => path.join(big, f)));
    await page.fill('#receipt-text', readFileSync(process.env.BIG_RECEIPT, 'utf8'));
    // Every progress label the page shows while it works.
    await page.evaluate(() => {
      window.__labels = [];
      const el = document.getElementById('progress-label');
      new MutationObserver(() => window.__labels.push(el.textContent)).observe(el, { childList: true, characterData: true, subtree: true });
    });
    const t0 = Date.now();
    await page.click('#verify-btn');
    await page.waitForFunction(() => document.getElementById('verdict').textContent !== '' || document.getElementById('error').textContent !== '',
                               null, { timeout: 900000 });
    const wall = (Date.now() - t0) / 1000;
    const v = await page.textContent('#verdict'), e = await page.textContent('#error');
    const ls = await page.textContent('#progress-label'), sp = await page.textContent('#speed').catch(() => '');
    const nGen = (readFileSync(process.env.BIG_RECEIPT, 'utf8').match(/^gen-toks (\d+)/m) || [])[1];
    check('page-verify-big-model', v.startsWith('PASS'), `verdict '${v}', error '${e}'`);
    const labels = await page.evaluate(() => window.__labels);
    const seen = (re) => labels.some((l) => re.test(l));
    check('page-big-model-progress-shown', seen(/reading \+ hashing \+ packing model\.safetensors/) && seen(new RegExp(`decoding: token ${nGen} / ${nGen}`)),
          `labels seen: ${[...new Set(labels)].slice(0, 8).join(' | ')}`);
    console.log(`load status: ${await page.textContent('#load-status')}`);
    console.log(`big model: ${nGen}-token receipt verified in ${wall.toFixed(2)} s from the click (${ls}); ${sp}`);
    const shotBig = path.join(outDir, 'web-verify-big-model.png');
    await page.screenshot({ path: shotBig, fullPage: true });
    console.log(`screenshot: ${shotBig}`);
  }
  check('page-no-errors', logs.length === 0, logs.join(' | '));
  console.log(`screenshot: ${shotGood}`);
  console.log(`screenshot: ${shotBad}`);
  console.log(`screenshot: ${shotRun}`);
} catch (e) {
  fail('page-test', `${e.message}${logs.length ? ' | ' + logs.join(' | ') : ''}`);
} finally {
  await ctx.close();
  rmSync(userDataDir, { recursive: true, force: true });
}
process.exit(fails ? 1 : 0);
