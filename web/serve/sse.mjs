// The server-sent events of cis2 serve's /v1/completions (docs/serve.md), from a fetch
// Response body: each `data:` event parsed as JSON, comment lines (": ping") skipped, the end
// at "data: [DONE]". Leaving the loop early cancels the body. Shared by the page (serve.js)
// and the load test (tools/serve_load.mjs).
export async function* sseEvents(body) {
  const reader = body.getReader();
  const dec = new TextDecoder();
  let buf = '', ended = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) { ended = true; return; }
      buf += dec.decode(value, { stream: true });
      let k;
      while ((k = buf.indexOf('\n\n')) >= 0) {
        const ev = buf.slice(0, k);
        buf = buf.slice(k + 2);
        const data = ev.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
        if (data === '[DONE]') { ended = true; return; }
        if (data) yield JSON.parse(data);
      }
    }
  } finally {
    if (!ended) reader.cancel().catch(() => {});
  }
}
