"""The Python package's checks, run by tests/t_python.sh: every call of
python/cis2 against the CLI (`$CIS2`) on fixture models — receipts, CIS2_REF
lines, verify output, tokens, traces and error lines must be the CLI's byte
for byte. Usage: t_python.py GROUP MODELS_DIR [ARGS]; prints PASS/FAIL/SKIP.
Groups: api, layout, gil, threads, threads-fast, installed HOW RECEIPT,
dump OUT.json (plain calls, numpy present), nonumpy / nonumpy-installed
DUMP RECEIPT (the same calls where numpy cannot be imported)."""
import copy
import ctypes
import hashlib
import json
import os
import pathlib
import pickle
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

if sys.argv[1:2] == ["nonumpy"]:
    # numpy made unimportable, as where it is not installed (`import numpy`
    # raises ImportError): the package must import and run without it
    sys.modules["numpy"] = None

import cis2  # noqa: E402

CLI = os.environ.get("CIS2", "./cis2")
FIXTURES = ["llama", "qwen2", "qwen3", "untied-f32"]
failures = 0


def report(ok, name, detail=""):
    global failures
    if ok:
        print("PASS python.%s" % name)
    else:
        failures += 1
        print("FAIL python.%s: %s" % (name, str(detail).replace("\n", " | ")[:400]))


def raises(name, exc, fn, want=None):
    """fn() must raise `exc` with a one-line message (containing `want`, or equal
    to it when want is a tuple of one string)."""
    try:
        fn()
    except exc as e:
        msg = str(e)
        ok = "\n" not in msg and msg != ""
        if isinstance(want, tuple):
            ok = ok and msg == want[0]
        elif want:
            ok = ok and want in msg
        report(ok, name, "message %r, wanted %r" % (msg, want))
        return
    except Exception as e:  # the wrong kind
        report(False, name, "raised %s: %s, wanted %s" % (type(e).__name__, e, exc.__name__))
        return
    report(False, name, "did not raise %s" % exc.__name__)


def cli(*args):
    p = subprocess.run([CLI] + [str(a) for a in args], capture_output=True)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def cli_err(cmd, stderr):
    """The library's line from `cis2 CMD: line`."""
    return stderr.strip().split(": ", 1)[1] if stderr.startswith("cis2 %s: " % cmd) else stderr


def vector(name):
    v = {}
    for line in open("tests/fixtures/%s.vector" % name, encoding="utf-8"):
        if "=" in line and not line.startswith("#"):
            k, _, val = line.strip().partition("=")
            v[k] = val
    return v


def ids_of(s):
    return [int(x) for x in s.split(",")] if s else []


def kv(out, key):
    m = re.search(rb"^%s=(.*)$" % key.encode(), out, re.M)
    return m.group(1).decode() if m else None


def read_trace(path):
    """A cis2 trace (safetensors of F32): ordered names, arrays, metadata."""
    import numpy as np
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__", {})
    names = sorted(h, key=lambda k: h[k]["data_offsets"][0])
    arrs = {}
    for k in names:
        a, z = h[k]["data_offsets"]
        arrs[k] = np.frombuffer(b[8 + n + a:8 + n + z], "<f4").reshape(h[k]["shape"])
    return names, arrs, meta


def same_bits(a, b):
    import numpy as np
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def build_backend_checks(models):
    """python/_cis2_build.py refuses config settings it would misread."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("_cis2_build", "python/_cis2_build.py")
    b = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(b)
    report(b._library({"bundle": "0"}) is None and b._library({"bundle": "False"}) is None,
           "build-bundle-0")
    raises("build-bundle-unknown-value", ValueError, lambda: b._library({"bundle": "maybe"}),
           "bundle=maybe")
    cfg = os.path.abspath(os.path.join(models, "llama", "config.json"))
    raises("build-library-not-elf", ValueError, lambda: b._library({"library": cfg}),
           "not a shared library")


# ------------------------------------------------------------------ api
def group_api(models, tmp):
    hdr = open("include/cis2.h", encoding="utf-8").read()
    want = re.search(r'#define CIS2_VERSION\s+"([^"]+)"', hdr).group(1)
    report(cis2.__version__ == want == cis2.library_version,
           "version (package %s, library %s, cis2.h %s)" % (cis2.__version__,
                                                            cis2.library_version, want))
    for fx in FIXTURES:
        M, v = os.path.join(models, fx), vector(fx)
        ids, n = ids_of(v["prompt_token_ids"]), int(v["gen_toks"])
        rcpt = os.path.join(tmp, fx + ".receipt")
        rc, out, err = cli("run", "--model", M, "--prompt-ids", v["prompt_token_ids"], "-n", n,
                           "--receipt", rcpt)
        if rc:
            report(False, fx + ".cli-run", err)
            continue
        cli_ref = re.search(rb"^CIS2_REF .*$", out, re.M).group(0).decode()
        with cis2.Model(M) as m:
            report(m.digests["weights-sha256"] == v["weights_sha256"] and
                   m.digests["config-sha256"] == v["config_sha256"] and
                   m.digests["tokenizer-sha256"] == v["tokenizer_sha256"] and
                   m.digests["table-digest"] == v["table_digest"] and
                   m.digests["inv-freq-table-digest"] == v["inv_freq_table_digest"],
                   fx + ".model-digests-equal-pinned-vector", m.digests)
            report(m.config.arch == fx.split("-")[0] if fx != "untied-f32" else
                   not m.config.tied, fx + ".config", m.config)
            r = m.generate(ids, n)
            report(r.ids == ids_of(v["generated_token_ids"]) and r.prompt_ids == ids,
                   fx + ".generate-ids", r.ids)
            report(r.cis2_ref == cli_ref, fx + ".cis2-ref-equals-cli", (r.cis2_ref, cli_ref))
            report(r.receipt == open(rcpt).read(), fx + ".receipt-equals-cli-ref-backend",
                   r.receipt)
            with m.engine(backend="fast") as e:
                rf = e.generate(ids, n)
                report(rf.receipt == r.receipt and e.backend.startswith("fast"),
                       fx + ".receipt-equals-cli-fast-backend (%s)" % e.backend, rf)
            vd = cis2.verify(r.receipt, m)
            rc, vout, _ = cli("verify", rcpt, "--model", M)
            report(vd.ok and rc == 0 and str(vd) + "\n" == vout.decode(),
                   fx + ".verify-equals-cli", str(vd))
    llama_checks(os.path.join(models, "llama"), os.path.join(models, "qwen2"), tmp)
    argument_checks(os.path.join(models, "llama"), tmp)
    for fx in ("llama", "qwen3"):
        generate_many_checks(os.path.join(models, fx), fx, tmp)
        stream_checks(os.path.join(models, fx), fx)
    build_backend_checks(models)
    docstring_checks()
    chat_checks(os.path.join(models, "qwen2"), tmp)


def chat_checks(M, tmp):
    """cis2.chat_prompt: the bytes `cis2 run --chat` renders, template kwargs,
    a template file, the pinned date, and the refusals."""
    d = os.path.join(tmp, "chat-model")
    shutil.copytree(M, d)
    tpl = open("tests/fixtures/chat/qwen2.5.jinja", encoding="utf-8").read()
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"chat_template": tpl, "eos_token": "<|im_end|>"}, f)
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
    mf = os.path.join(tmp, "chat.json")
    with open(mf, "w", encoding="utf-8") as f:
        json.dump(msgs, f)
    rcpt = os.path.join(tmp, "chat.receipt")
    rc, out, err = cli("run", "--model", d, "--chat", mf, "-n", 1, "--receipt", rcpt)
    hexs = re.search(r"^prompt-hex (\S+)$", open(rcpt).read(), re.M).group(1) if rc == 0 else ""
    got = cis2.chat_prompt(d, msgs)
    report(rc == 0 and got.encode("utf-8").hex() == hexs, "chat.prompt-equals-run-chat",
           (got, err))
    kt = os.path.join(tmp, "kw.jinja")
    with open(kt, "w", encoding="utf-8") as f:
        f.write("{% if enable_thinking is defined and enable_thinking is false %}off{% else %}on"
                "{% endif %}|{{ strftime_now('%d %b %Y') if strftime_now is defined else '-' }}"
                "|{{ bos_token }}|{{ add_generation_prompt }}")
    cases = [({}, None, True, "on|-||True"),
             ({"enable_thinking": False, "bos_token": "<s>"}, "2024-02-29", False,
              "off|29 Feb 2024|<s>|False")]
    for kw, date, gen, want in cases:
        got = cis2.chat_prompt(d, msgs, template=kt, kwargs=kw, date=date,
                               add_generation_prompt=gen)
        report(got == want, "chat.template-kwargs-date %r" % (kw,), got)
    report(cis2.chat_prompt(d, msgs, chat_format="chatml", add_generation_prompt=False) ==
           "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n",
           "chat.chatml")
    raises("chat.kwargs-reserved", cis2.Error,
           lambda: cis2.chat_prompt(d, msgs, kwargs={"messages": []}), '"messages" is set by')
    raises("chat.kwargs-not-dict", TypeError, lambda: cis2.chat_prompt(d, msgs, kwargs=[1]),
           "kwargs: expected a dict")
    raises("chat.bad-date", cis2.Error, lambda: cis2.chat_prompt(d, msgs, date="2024-13-01"),
           "is not YYYY-MM-DD")
    raises("chat.bad-role", cis2.Error,
           lambda: cis2.chat_prompt(d, [{"role": "tool", "content": "x"}]), "messages[0].role")


def docstring_checks():
    """help() of every public name says something: each class, function,
    method and property of cis2.__all__ (dataclass-made __init__s excepted)."""
    import dataclasses
    import inspect
    missing = []
    for name in cis2.__all__:
        obj = getattr(cis2, name)
        if not (inspect.isclass(obj) or callable(obj)):
            continue
        if not inspect.getdoc(obj):
            missing.append(name)
        if not inspect.isclass(obj):
            continue
        for k, v in vars(obj).items():
            if k.startswith("_") and k != "__init__":
                continue
            if k == "__init__" and dataclasses.is_dataclass(obj):
                continue
            f = v.fget if isinstance(v, property) else getattr(v, "__func__", v)
            if (callable(f) or isinstance(v, property)) and not (f and f.__doc__):
                missing.append("%s.%s" % (name, k))
    report(not missing and name, "docstrings-on-every-public-callable", missing)


def generate_many_checks(M, fx, tmp):
    """generate_many: each Result bit-identical to its solo generate and its
    receipt to `cis2 batch`'s for the same line, with more prompts than
    sequences in flight (prompts join as others finish)."""
    prompts = ["Hello world", [5, 17, 42, 7, 99], "The quick brown fox", [3], "a b c d e f g",
               "日本語 🙂", [300, 301, 89, 5]]
    inp, outp = os.path.join(tmp, fx + "-many.jsonl"), os.path.join(tmp, fx + "-many.out")
    with open(inp, "w") as f:
        for i, p in enumerate(prompts):
            key = "prompt" if isinstance(p, str) else "prompt_ids"
            f.write(json.dumps({"id": str(i), key: p}) + "\n")
    rc, _, err = cli("batch", "--model", M, "--in", inp, "--out", outp, "-n", 5, "--batch", 3)
    lines = [json.loads(x) for x in open(outp)] if rc == 0 else []
    with cis2.Model(M, backend="fast", threads=2) as m:
        for batch in (1, 3, 8):
            rs = m.generate_many(iter(prompts), 5, batch=batch)
            solo = [m.generate(p, 5) for p in prompts]
            report(len(rs) == len(prompts) and
                   all(a.receipt == b.receipt and a.ids == b.ids and a.cis2_ref == b.cis2_ref and
                       a.prompt_ids == b.prompt_ids for a, b in zip(rs, solo)),
                   "%s.generate-many-batch-%d-equals-solo" % (fx, batch))
        report(len(lines) == len(prompts) and
               all(r.receipt == ln["receipt"] for r, ln in zip(rs, lines)),
               fx + ".generate-many-receipts-equal-cli-batch", err or lines[:1])
        eos = m.generate_many(prompts[:3], 6, stop_at_eos=True, batch=2)
        report([r.receipt for r in eos] ==
               [m.generate(p, 6, stop_at_eos=True).receipt for p in prompts[:3]],
               fx + ".generate-many-stop-at-eos-equals-solo")
        with m.engine(max_seqs=4) as e:
            report(e.max_seqs == 4 and m.engine().max_seqs == 1 and
                   [r.receipt for r in e.generate_many(prompts, 5)] == [r.receipt for r in rs],
                   fx + ".engine-max-seqs")
        report(m.generate_many([], 3) == [], fx + ".generate-many-empty")
        raises(fx + ".generate-many-one-str", TypeError, lambda: m.generate_many("abc", 3),
               "generate takes a single prompt")
        raises(fx + ".generate-many-bad-item", TypeError,
               lambda: m.generate_many([[1, 2], "x", 7], 3), "prompts[2]: prompt: ")
        # the library's bound: positions up to n + max_tokens - 2 (the last pick is never
        # fed), so max_pos - 2 prompt tokens and 3 more fit, max_pos - 1 do not
        report(len(m.generate_many([[1] * (m.config.max_pos - 2)], 3)[0].ids) == 3,
               fx + ".generate-many-fits-exactly")
        big = [1] * (m.config.max_pos - 1)
        raises(fx + ".generate-many-too-long", ValueError,
               lambda: m.generate_many([[1], big], 3),
               ("prompts[1]: prompt (%d tokens) + max_tokens 3 exceeds max_position_embeddings = "
                "%d" % (len(big), m.config.max_pos),))
        raises(fx + ".generate-too-long-names-max-tokens", ValueError,
               lambda: m.generate(big, 3), "+ max_tokens 3 exceeds")
        raises(fx + ".generate-many-batch-0", ValueError,
               lambda: m.generate_many(["a"], 3, batch=0), "batch must be an integer in [1, 4096]")
        raises(fx + ".engine-max-seqs-0", ValueError, lambda: m.engine(max_seqs=0),
               "max_seqs must be an integer in [1, 4096]")
        # verify_many: each Verdict as verify's alone (MATCH and MISMATCH, a tampered
        # witness and a tampered weights hash), batched over more receipts than slots
        recs = [r.receipt for r in rs]

        def tamper(text, key):
            return re.sub(r"^(%s )(.)" % key, lambda g: g.group(1) + "01"[g.group(2) == "0"],
                          text, count=1, flags=re.M)
        recs += [tamper(recs[0], "witness-digest"), tamper(recs[1], "weights-sha256")]
        solo = [cis2.verify(x, m) for x in recs]
        for batch in (1, 3):
            vs = m.verify_many(recs, batch=batch)
            report(len(vs) == len(recs) and
                   all(str(a) == str(b) and a.ok == b.ok and a.ids == b.ids and
                       a.witness == b.witness for a, b in zip(vs, solo)) and
                   [v.ok for v in vs] == [True] * len(prompts) + [False, False],
                   "%s.verify-many-batch-%d-equals-verify" % (fx, batch),
                   [(v.ok, v.mismatches) for v in vs])
        rc, vout, _ = cli("verify-batch", outp, "--model", M)
        report(rc == 0 and all(v.ok for v in m.verify_many([ln["receipt"] for ln in lines])),
               fx + ".verify-many-agrees-with-cli-verify-batch", vout)
        p0 = pathlib.Path(tmp, fx + "-many-0.receipt")
        p0.write_text(recs[0])
        with m.engine(max_seqs=2) as e:
            report([v.ok for v in e.verify_many(iter([p0, recs[1], recs[-1]]))] ==
                   [True, True, False], fx + ".engine-verify-many-paths-and-text")
        report(m.verify_many([]) == [], fx + ".verify-many-empty")
        raises(fx + ".verify-many-one-str", TypeError, lambda: m.verify_many(recs[0]),
               "verify takes a single receipt")
        raises(fx + ".verify-many-bad-item", cis2.Error,
               lambda: m.verify_many([recs[0], "garbage"]), "receipts[1]: receipt: line 1: ")


def _same_run(a, b):
    """Two Results of one run: everything but the timings."""
    return (a is not None and b is not None and a.ids == b.ids and a.prompt_ids == b.prompt_ids and
            a.text == b.text and a.receipt == b.receipt and a.cis2_ref == b.cis2_ref and
            a.digests == b.digests and a.stopped_at_eos == b.stopped_at_eos and a.nan == b.nan and
            a.receipt_error == b.receipt_error)


def _complete_chunks(bs):
    """For token byte strings bs forming valid UTF-8: the text each token
    completes (a character cut at a token's end waits for the next one)."""
    out, done, acc = [], 0, b""
    for b in bs:
        acc += b
        end = len(acc)
        while end > done:
            try:
                acc[done:end].decode("utf-8")
                break
            except UnicodeDecodeError:
                end -= 1
        out.append(acc[done:end].decode("utf-8"))
        done = end
    return out


class _Rescue:
    """Closes stream `s` from another thread after 30 s: a call that would
    wait on the stream's own thread for ever fails its check, never hangs."""

    def __init__(self, s):
        self.fired = []
        self.timer = threading.Timer(30, lambda: (self.fired.append(1), s.close()))
        self.timer.start()

    def done(self):
        """Whether it had to close the stream (and stops it if not)."""
        self.timer.cancel()
        return bool(self.fired)


def stream_checks(M, fx):
    """Model.stream / Engine.stream: the chunks join to generate's text, one
    per token, and .result is generate's Result; a character split across
    tokens waits for its last byte; stop_at_eos; breaking out, close() and
    Ctrl-C inside a step free the engine; the engine is refused, not
    deadlocked, on the stream's own thread and waited for on another; bad
    arguments raise at the call with generate's messages."""
    prompts = ["Hello world", [5, 17, 42, 7, 99], "日本語 🙂", [300, 301, 89, 5], "a b c d e f g"]
    with cis2.Model(M) as m:
        e = m._engine

        def idle():
            return cis2._c.cis2_engine_active(e._h) == 0 and e._lock.acquire(False) and \
                (e._lock.release() or True)
        join_ok, res_ok, per_tok_ok, kinds, bad = True, True, True, set(), []
        for p in prompts:
            r = m.generate(p, 12)
            s = m.stream(p, 12)
            chunks = list(s)
            text = "".join(chunks)
            kinds.add(r.text is None)
            if r.text is not None:
                join_ok &= text == r.text
            else:  # not UTF-8: each invalid sequence a U+FFFD, as `cis2 serve` streams it
                join_ok &= text == m.detokenize(r.ids) and "\ufffd" in text
            per_tok_ok &= len(chunks) == len(r.ids) and s.ids == r.ids and s.text == text
            res_ok &= _same_run(s.result, r) and r.receipt is not None
            if not (_same_run(s.result, r) and len(chunks) == len(r.ids)):
                bad.append((p, chunks, s.ids, r.ids))
        report(join_ok and kinds == {True, False}, fx + ".stream-chunks-join-to-generate-text",
               "kinds of text seen (None?): %s; %s" % (kinds, bad[:1]))
        report(per_tok_ok, fx + ".stream-one-chunk-per-token-ids-and-text", bad[:1])
        report(res_ok, fx + ".stream-result-equals-generate", bad[:1])
        with m.engine(backend="fast", threads=2) as ef:
            got = [ef.stream(p, 7).__iter__() for p in prompts[:1]]
            for s in got:
                list(s)
            report(_same_run(got[0].result, m.generate(prompts[0], 7)),
                   fx + ".engine-stream-fast-equals-generate")
        # stop_at_eos: a prompt whose greedy run meets an EOS if this model has one
        # within 30 tokens, and an EOS forced in (stop_at_eos ends on a fed id too)
        eos, natural = m.config.eos_ids[0], None
        for k in range(m.config.vocab):
            if m.generate([k], 30, stop_at_eos=True).stopped_at_eos:
                natural = k
                break
        ok, why = True, "no prompt [k] meets an EOS in 30 tokens"
        if natural is not None:
            r = m.generate([natural], 30, stop_at_eos=True)
            s = m.stream([natural], 30, stop_at_eos=True)
            chunks = list(s)
            ok = (_same_run(s.result, r) and s.result.stopped_at_eos and len(chunks) == len(r.ids)
                  < 30 and "".join(chunks) == (r.text if r.text is not None else
                                               m.detokenize(r.ids)))
            why = "prompt [%d]: %d chunks, %s" % (natural, len(chunks), s.result)
        forced = [5, 17, eos, 9]
        s = e.stream([3], 6, stop_at_eos=True, _force=forced)
        chunks = list(s)
        rf = m.generate([3], 6, stop_at_eos=True, force=forced)
        report(ok and _same_run(s.result, rf) and s.ids == [5, 17, eos] and len(chunks) == 3 and
               s.result.stopped_at_eos and (natural is not None or fx == "llama"),
               fx + ".stream-stop-at-eos-equals-generate", why)
        # one character's bytes over several tokens: nothing of it comes out
        # before its last byte (this tokenizer has no merge for these characters)
        text = "日本語 🙂"
        ids = m.tokenize(text)
        bs = [m.tokenizer.decode_bytes([i]) for i in ids]
        split = len(ids) > len(text)
        s = e.stream([5], len(ids), _force=ids)
        chunks = list(s)
        report(split and chunks == _complete_chunks(bs) and "".join(chunks) == text and
               chunks.count("") >= 2 and s.result.text == text and
               _same_run(s.result, m.generate([5], len(ids), force=ids)),
               fx + ".stream-holds-back-a-split-character", (len(ids), chunks))
        # ... and one the run ends in the middle of: U+FFFD, and no Result.text
        s = e.stream([5], 2, _force=ids[:2])
        chunks = list(s)
        report(chunks == ["", "\ufffd"] and s.result.text is None and
               "".join(chunks) == m.detokenize(s.result.ids),
               fx + ".stream-cut-character-at-the-end-is-U+FFFD", chunks)
        # breaking out of the loop drops the stream: its sequence is cancelled
        solo = m.generate("Hello world", 12)
        for i, _ in enumerate(m.stream("Hello world", 200)):
            if i == 2:
                break
        report(idle() and _same_run(m.generate("Hello world", 12), solo),
               fx + ".stream-break-frees-the-engine")
        s = m.stream("Hello world", 200)
        first = [next(s), next(s)]
        s.close()
        after = list(s)
        report(after == [] and s.result is None and len(s.ids) == 2 and idle() and
               _same_run(m.generate("Hello world", 12), solo) and first == [
                   m.stream("Hello world", 2).__next__(), first[1]],
               fx + ".stream-close-frees-the-engine")
        with m.stream("Hello world", 200) as s:
            next(s)
        report(idle() and s.result is None, fx + ".stream-with-block-frees-the-engine")
        # the stream holds the engine: on its own thread another call is refused
        # (waiting would never end), on another thread it waits for the stream
        held = ("this engine is held by an unfinished stream on this thread: iterate it to its "
                "end or close() it first (or use another engine, Model.engine())",)
        s = m.stream("Hello world", 12)
        next(s)
        rescue = _Rescue(s)
        raises(fx + ".stream-same-thread-generate-refused", cis2.Error,
               lambda: m.generate("Hello world", 12), held)
        raises(fx + ".stream-same-thread-stream-refused", cis2.Error,
               lambda: m.stream("Hello world", 12), held)
        raises(fx + ".stream-same-thread-verify-refused", cis2.Error,
               lambda: m.verify(solo.receipt), held)
        rescue.done()
        out = []
        th = threading.Thread(target=lambda: out.append(m.generate("Hello world", 12)))
        th.start()
        th.join(0.3)
        waited = th.is_alive() and not out
        rest = list(s)
        th.join(60)
        report(waited and out and _same_run(out[0], solo) and _same_run(s.result, solo) and
               len(rest) == 11, fx + ".stream-other-thread-waits-for-it",
               "waited: %s, got: %s" % (waited, out))
        s = m.stream("Hello world", 50)
        next(s)
        s.cycle = s  # dropped, but only the cycle collector would free it
        del s
        try:
            again = _same_run(m.generate("Hello world", 12), solo) and idle()
        except cis2.Error as x:
            again = x
        report(again is True, fx + ".stream-dropped-in-a-cycle-frees-the-engine", again)
        e2 = m.engine()
        s = e2.stream("Hello world", 50)
        next(s)
        rescue = _Rescue(s)
        e2.close()  # on the stream's thread: ends the stream, never waits for it
        report(not rescue.done() and list(s) == [] and s.result is None and e2._h is None,
               fx + ".engine-close-ends-its-threads-stream")
        # Ctrl-C inside a step: a stand-in library sends SIGINT during the 3rd
        # step; the stream raises KeyboardInterrupt there and is closed
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        spy = _InterruptAtStep(cis2._c, 3)
        s = m.stream("Hello world", 50)
        try:
            cis2._c = spy
            for _ in s:
                pass
            got = "finished"
        except KeyboardInterrupt:
            got = "interrupted"
        finally:
            cis2._c = spy.real
        report(got == "interrupted" and spy.steps == 3 and len(s.ids) == 3 and list(s) == [] and
               s.result is None and idle() and _same_run(m.generate("Hello world", 12), solo),
               fx + ".keyboard-interrupt-cancels-a-stream", "%s after %d step(s)" %
               (got, spy.steps))
        # ... and Ctrl-C from a timer, landing in a step or in the loop's body
        # (where the dropped stream is closed): the engine is free either way
        interrupted, deadline = 0, time.monotonic() + 120
        for k in range(3):
            timer = threading.Timer(0.02 * (k + 1), lambda: os.kill(os.getpid(), signal.SIGINT))
            timer.start()
            try:
                while time.monotonic() < deadline:  # a lost interrupt fails, never hangs
                    for _ in m.stream([5, 17], min(2000, m.config.max_pos - 2)):
                        pass
            except KeyboardInterrupt:
                interrupted += 1
            timer.join()
        report(interrupted == 3 and idle() and _same_run(m.generate("Hello world", 12), solo),
               fx + ".keyboard-interrupt-in-a-stream-loop-frees-the-engine", interrupted)
        # made on this thread, iterated on another (as a TextIteratorStreamer's consumer)
        s, out = m.stream("Hello world", 12), []
        th = threading.Thread(target=lambda: out.extend(s))
        th.start()
        th.join(60)
        report(_same_run(s.result, solo) and "".join(out) == s.text and len(out) == 12 and
               idle(), fx + ".stream-iterated-on-another-thread")
        # refusals: raised by the call, before any iteration, with generate's
        # exception and message; a refused stream leaves the engine free
        big = [1] * (m.config.max_pos - 1)
        cases = [("", 3), (big, 3), ([5], 0), ([5], 3, "no"), (None, 3), ([99999], 3),
                 ("a\ud800b", 3), ([True], 3), ([5], 2**40)]
        diff = []
        for c in cases:
            def call(f):
                try:
                    f(*c[:2], **({"stop_at_eos": c[2]} if len(c) > 2 else {}))
                except Exception as x:
                    return type(x).__name__, str(x)
                return None
            want, got = call(m.generate), call(m.stream)
            if want is None or want != got:
                diff.append((c[1:], want, got))
        report(not diff and idle(), fx + ".stream-refusals-equal-generate", diff)
        raises(fx + ".stream-too-long", ValueError, lambda: m.stream(big, 3),
               ("prompt (%d tokens) + max_tokens 3 exceeds max_position_embeddings = %d" %
                (len(big), m.config.max_pos),))
        raises(fx + ".stream-empty-prompt", ValueError, lambda: m.stream("", 3),
               ("the prompt encodes to no tokens",))
        report(_same_run(m.generate("Hello world", 12), solo), fx + ".stream-refusals-leave-"
               "the-engine-usable")
        s = m.stream("Hello world", 50)
        next(s)  # left open: the model's close() ends it (on its thread), never waits
        rescue = _Rescue(s)
    report(not rescue.done() and list(s) == [] and s.result is None and m._h is None,
           fx + ".model-close-ends-its-threads-stream")
    raises(fx + ".stream-closed-model", cis2.Error, lambda: m.stream([5], 2),
           ("the model is closed",))


def argument_checks(M, tmp):
    """Every argument of every public call, given a wrong type (TypeError), a
    wrong value (ValueError) or None where it is not allowed: the exception
    docs/python.md promises, raised before the library is called, with a
    one-line message naming the argument — never cis2.Error, which is the
    library refusing a well-formed call (a missing file, a malformed
    receipt, a closed model). Valid spellings Python's conventions allow
    (numpy integers, 0/1 for a flag) are accepted."""
    import numpy as np
    m, tp = cis2.Model(M), os.path.join(M, "tokenizer.json")
    e, tok, vocab = m.engine(), cis2.Tokenizer(tp), m.config.vocab
    rcpt = m.generate([5, 17], 2).receipt
    T, V = TypeError, ValueError
    isas = "(auto, scalar, sse2, avx2, avx512, neon)"
    cases = [
        # Model(path, *, backend, isa, threads)
        ("model-path-none", T, lambda: cis2.Model(None), "Model: expected a path"),
        ("model-path-int", T, lambda: cis2.Model(5), "Model: expected a path"),
        ("model-path-empty", V, lambda: cis2.Model(""), "Model: the path is empty"),
        ("model-backend-none", T, lambda: cis2.Model(M, backend=None),
         ("backend must be a str ('ref' or 'fast'), got NoneType None",)),
        ("model-backend-int", T, lambda: cis2.Model(M, backend=5), "backend must be a str"),
        ("model-backend-bytes", T, lambda: cis2.Model(M, backend=b"ref"),
         "backend must be a str"),
        ("model-backend-unknown", V, lambda: cis2.Model(M, backend="gpu"),
         ("backend must be 'ref' or 'fast', got 'gpu'",)),
        ("model-isa-none", T, lambda: cis2.Model(M, backend="fast", isa=None),
         ("isa must be a str %s, got NoneType None" % isas,)),
        ("model-isa-int", T, lambda: cis2.Model(M, backend="fast", isa=5), "isa must be a str"),
        ("model-isa-bytes", T, lambda: cis2.Model(M, backend="fast", isa=b"auto"),
         "isa must be a str"),
        ("model-isa-unknown", V, lambda: cis2.Model(M, backend="fast", isa="mmx"),
         "unknown isa 'mmx'"),
        ("model-isa-empty", V, lambda: cis2.Model(M, backend="fast", isa=""), "unknown isa ''"),
        ("model-threads-none", T, lambda: cis2.Model(M, threads=None),
         "threads must be an integer"),
        ("model-threads-str", T, lambda: cis2.Model(M, threads="2"), "threads must be an integer"),
        ("model-threads-float", T, lambda: cis2.Model(M, threads=2.0),
         "threads must be an integer"),
        ("model-threads-bool", T, lambda: cis2.Model(M, threads=True),
         "threads must be an integer"),
        ("model-threads-negative", V, lambda: cis2.Model(M, threads=-1), "[0, 1024]"),
        # Tokenizer(path) / Tokenizer.load(path)
        ("tokenizer-path-none", T, lambda: cis2.Tokenizer(None), "Tokenizer: expected the path"),
        ("tokenizer-load-none", T, lambda: cis2.Tokenizer.load(None),
         "Tokenizer: expected the path"),
        ("tokenizer-path-int", T, lambda: cis2.Tokenizer(5), "Tokenizer: expected a path"),
        ("tokenizer-path-empty", V, lambda: cis2.Tokenizer(""), "Tokenizer: the path is empty"),
        # Engine(model, backend, isa, threads, max_seqs) / Model.engine(...)
        ("engine-model-none", T, lambda: cis2.Engine(None), "Engine: expected a cis2.Model"),
        ("engine-backend-none", T, lambda: cis2.Engine(m, backend=None), "backend must be a str"),
        ("engine-isa-none", T, lambda: cis2.Engine(m, isa=None), "isa must be a str"),
        ("engine-threads-none", T, lambda: cis2.Engine(m, threads=None),
         "threads must be an integer"),
        ("engine-max-seqs-none", T, lambda: cis2.Engine(m, max_seqs=None),
         "max_seqs must be an integer"),
        ("engine-max-seqs-str", T, lambda: m.engine(max_seqs="2"), "max_seqs must be an integer"),
        ("engine-max-seqs-float", T, lambda: m.engine(max_seqs=2.0),
         "max_seqs must be an integer"),
        ("engine-max-seqs-bool", T, lambda: m.engine(max_seqs=True),
         "max_seqs must be an integer"),
        ("engine-max-seqs-4097", V, lambda: m.engine(max_seqs=4097), "[1, 4096]"),
        ("model-engine-backend-int", T, lambda: m.engine(backend=5), "backend must be a str"),
        ("model-engine-isa-int", T, lambda: m.engine(isa=5), "isa must be a str"),
        ("model-engine-threads-float", T, lambda: m.engine(threads=1.5),
         "threads must be an integer"),
        # generate(prompt, max_tokens, *, stop_at_eos, force)
        ("generate-prompt-float", T, lambda: m.generate(5.0), "prompt: expected a str"),
        ("generate-prompt-empty-str", V, lambda: m.generate(""),
         ("the prompt encodes to no tokens",)),
        ("generate-prompt-empty-bytes", V, lambda: m.generate(b""),
         ("the prompt encodes to no tokens",)),
        ("generate-prompt-no-ids", V, lambda: m.generate([]), ("the prompt has no tokens",)),
        ("generate-prompt-empty-array", V, lambda: m.generate(np.array([], np.int64)),
         ("the prompt has no tokens",)),
        ("generate-prompt-id-negative", V, lambda: m.generate([5, -1]),
         ("prompt token id -1 is outside the vocabulary (vocab_size = %d)" % vocab,)),
        ("generate-prompt-id-vocab", V, lambda: m.generate([vocab]),
         ("prompt token id %d is outside the vocabulary (vocab_size = %d)" % (vocab, vocab),)),
        ("generate-prompt-id-none", T, lambda: m.generate([None]),
         ("prompt: token ids must be integers",)),
        ("generate-prompt-id-float", T, lambda: m.generate([1.0]), "token ids must be integers"),
        ("generate-prompt-id-str", T, lambda: m.generate(["1"]), "token ids must be integers"),
        ("generate-prompt-nested", T, lambda: m.generate([[1]]), "token ids must be integers"),
        ("generate-prompt-float-array", T, lambda: m.generate(np.array([1.0, 2.0])),
         "token ids must be integers"),
        ("generate-max-tokens-float", T, lambda: m.generate([5], 3.0),
         ("max_tokens must be an integer, got float 3.0",)),
        ("generate-max-tokens-bool", T, lambda: m.generate([5], True),
         "max_tokens must be an integer"),
        ("generate-max-tokens-negative", V, lambda: m.generate([5], -1),
         "max_tokens must be an integer in [1, 2147483647], got -1"),
        ("generate-stop-at-eos-none", T, lambda: m.generate([5], 1, stop_at_eos=None),
         ("stop_at_eos must be True or False, got NoneType None",)),
        ("generate-stop-at-eos-float", T, lambda: m.generate([5], 1, stop_at_eos=1.0),
         "stop_at_eos must be True or False"),
        ("generate-stop-at-eos-2", V, lambda: m.generate([5], 1, stop_at_eos=2),
         ("stop_at_eos must be True or False (or 0 or 1), got 2",)),
        ("generate-force-str", T, lambda: m.generate([5], 1, force="ab"),
         ("force: expected token ids, got str",)),
        ("generate-force-id-negative", V, lambda: m.generate([5], 1, force=[-1]),
         ("forced token id -1 is outside the vocabulary (vocab_size = %d)" % vocab,)),
        ("generate-force-id-float", T, lambda: m.generate([5], 1, force=[1.5]),
         ("force: token ids must be integers",)),
        ("generate-force-id-none", T, lambda: m.generate([5], 1, force=[None]),
         ("force: token ids must be integers",)),
        ("generate-force-id-bool", T, lambda: m.generate([5], 1, force=[True]),
         ("force: token ids must be integers, not bool",)),
        ("generate-force-id-int32", V, lambda: m.generate([5], 1, force=[2**40]),
         "force: token id 1099511627776 does not fit in int32"),
        ("engine-generate-prompt-no-ids", V, lambda: e.generate([]),
         ("the prompt has no tokens",)),
        ("engine-generate-id-vocab", V, lambda: e.generate([vocab]), "outside the vocabulary"),
        # stream(prompt, max_tokens, *, stop_at_eos)
        ("stream-prompt-no-ids", V, lambda: m.stream([]), ("the prompt has no tokens",)),
        ("stream-prompt-id-vocab", V, lambda: m.stream([vocab]), "outside the vocabulary"),
        ("stream-max-tokens-float", T, lambda: m.stream([5], 1.0),
         "max_tokens must be an integer"),
        ("stream-stop-at-eos-none", T, lambda: m.stream([5], 1, stop_at_eos=None),
         "stop_at_eos must be True or False"),
        ("engine-stream-prompt-empty", V, lambda: e.stream(""),
         ("the prompt encodes to no tokens",)),
        ("stream-engine-none", T, lambda: cis2.Stream(None, [5]), "Stream: expected a cis2.Engine"),
        # generate_many(prompts, max_tokens, *, stop_at_eos, batch)
        ("generate-many-none", T, lambda: m.generate_many(None),
         ("generate_many: prompts must be a list of prompts, got NoneType",)),
        ("generate-many-set", T, lambda: m.generate_many({"a", "b"}),
         ("generate_many: prompts must be in order (a list, tuple or iterator), got set",)),
        ("generate-many-dict", T, lambda: m.generate_many({"a": 1}), "prompts must be in order"),
        ("generate-many-item-none", T, lambda: m.generate_many([[5], None]),
         "prompts[1]: prompt: expected a str"),
        ("generate-many-item-no-ids", V, lambda: m.generate_many([[5], []]),
         ("prompts[1]: the prompt has no tokens",)),
        ("generate-many-item-empty-str", V, lambda: m.generate_many([""]),
         ("prompts[0]: the prompt encodes to no tokens",)),
        ("generate-many-item-id-vocab", V, lambda: m.generate_many([[5], [-1]]),
         ("prompts[1]: prompt token id -1 is outside the vocabulary (vocab_size = %d)" % vocab,)),
        ("generate-many-max-tokens-float", T, lambda: m.generate_many([[5]], 1.0),
         "max_tokens must be an integer"),
        ("generate-many-max-tokens-0", V, lambda: m.generate_many([[5]], 0), "max_tokens"),
        ("generate-many-stop-at-eos-none", T,
         lambda: m.generate_many([[5]], 1, stop_at_eos=None), "stop_at_eos"),
        ("generate-many-batch-none", T, lambda: m.generate_many([[5]], 1, batch=None),
         ("batch must be an integer, got NoneType None",)),
        ("generate-many-batch-float", T, lambda: m.generate_many([[5]], 1, batch=1.0),
         "batch must be an integer"),
        ("generate-many-batch-bool", T, lambda: m.generate_many([[5]], 1, batch=True),
         "batch must be an integer"),
        ("generate-many-batch-5000", V, lambda: m.generate_many([[5]], 1, batch=5000),
         "batch must be an integer in [1, 4096]"),
        ("engine-generate-many-set", T, lambda: e.generate_many({(5,)}),
         "prompts must be in order"),
        ("engine-generate-many-item-vocab", V, lambda: e.generate_many([[vocab]]),
         "prompts[0]: prompt token id"),
        # verify(receipt, model) / verify_many(receipts, model, *, batch)
        ("verify-receipt-none", T, lambda: cis2.verify(None, m),
         ("verify: receipt must be its text (str or bytes) or a path (os.PathLike), "
          "got NoneType",)),
        ("verify-receipt-int", T, lambda: m.verify(5), "verify: receipt must be its text"),
        ("engine-verify-receipt-list", T, lambda: e.verify([rcpt]),
         "verify: receipt must be its text"),
        ("verify-receipt-surrogate", V, lambda: cis2.verify("a\ud800", m),
         "verify: the str holds a lone surrogate"),
        ("verify-model-none", T, lambda: cis2.verify(rcpt, None),
         ("verify: expected a cis2.Model or cis2.Engine, got NoneType",)),
        ("verify-model-path", T, lambda: cis2.verify(rcpt, M), "expected a cis2.Model"),
        ("verify-many-none", T, lambda: cis2.verify_many(None, m),
         ("verify_many: receipts must be a list of receipts, got NoneType",)),
        ("verify-many-set", T, lambda: m.verify_many({rcpt}),
         ("verify_many: receipts must be in order (a list, tuple or iterator), got set",)),
        ("verify-many-item-none", T, lambda: cis2.verify_many([rcpt, None], m),
         "receipts[1]: verify_many: receipt must be its text"),
        ("verify-many-model-none", T, lambda: cis2.verify_many([rcpt], None),
         "verify_many: expected a cis2.Model or cis2.Engine"),
        ("verify-many-batch-none", T, lambda: cis2.verify_many([rcpt], m, batch=None),
         "batch must be an integer"),
        ("verify-many-batch-float", T, lambda: m.verify_many([rcpt], batch=1.0),
         "batch must be an integer"),
        ("verify-many-batch-0", V, lambda: m.verify_many([rcpt], batch=0),
         "batch must be an integer in [1, 4096]"),
        ("engine-verify-many-int", T, lambda: e.verify_many(5), "receipts must be a list"),
        # tokenize / detokenize / encode / decode / decode_bytes
        ("tokenize-none", T, lambda: m.tokenize(None),
         ("encode: text: expected str or bytes, got NoneType",)),
        ("tokenize-list", T, lambda: m.tokenize(["a"]), "encode: text: expected str or bytes"),
        ("encode-int", T, lambda: tok.encode(5), "encode: text: expected str or bytes"),
        ("encode-surrogate", V, lambda: tok.encode("\ud800"),
         "encode: text: the str holds a lone surrogate"),
        ("detokenize-id-negative", V, lambda: m.detokenize([-1]),
         ": token id -1 (position 0) is outside the vocabulary 0..%d" % (tok.vocab_size - 1)),
        ("detokenize-id-vocab", V, lambda: m.detokenize([5, tok.vocab_size]),
         ": token id %d (position 1) is outside the vocabulary" % tok.vocab_size),
        ("decode-bytes-id-negative", V, lambda: tok.decode_bytes(iter([-1])),
         "outside the vocabulary"),
        ("decode-id-none", T, lambda: tok.decode([None]), ("decode: token ids must be integers",)),
        ("decode-id-float", T, lambda: tok.decode([1.0]), "decode: token ids must be integers"),
        ("decode-set", T, lambda: tok.decode({1}), "decode: expected token ids in order"),
        ("decode-str", T, lambda: tok.decode("ab"), ("decode: expected token ids, got str",)),
        # trace(prompt, max_tokens, *, force, layers, nodes, backend)
        ("trace-prompt-no-ids", V, lambda: m.trace([]), ("the prompt has no tokens",)),
        ("trace-max-tokens-float", T, lambda: m.trace([5], 1.0), "max_tokens must be an integer"),
        ("trace-force-id-vocab", V, lambda: m.trace([5], force=[vocab]),
         "forced token id %d is outside the vocabulary" % vocab),
        ("trace-layers-int", T, lambda: m.trace([5], 1, layers=5),
         ("trace: layers must be an iterable of layer numbers, got int 5",)),
        ("trace-layer-none", T, lambda: m.trace([5], 1, layers=[None]),
         "trace: a layer must be an integer"),
        ("trace-layer-float", T, lambda: m.trace([5], 1, layers=[1.0]),
         "trace: a layer must be an integer"),
        ("trace-layer-bool", T, lambda: m.trace([5], 1, layers=[True]),
         "trace: a layer must be an integer"),
        ("trace-layer-negative", V, lambda: m.trace([5], 1, layers=[-1]),
         "trace: a layer must be an integer in [0, "),
        ("trace-layers-bytes", T, lambda: m.trace([5], 1, layers=b"0"),
         "trace: layers must be an iterable of layer numbers"),
        ("trace-nodes-int", T, lambda: m.trace([5], 1, nodes=5),
         ("trace: nodes must be an iterable of node names, got int 5",)),
        ("trace-node-int", T, lambda: m.trace([5], 1, nodes=[5]),
         "trace: a node name must be a str"),
        ("trace-node-bytes", T, lambda: m.trace([5], 1, nodes=[b"logits"]),
         "trace: a node name must be a str"),
        ("trace-node-empty", V, lambda: m.trace([5], 1, nodes=[""]), "trace: no node named ''"),
        ("trace-backend-int", T, lambda: m.trace([5], 1, backend=5), "backend must be a str"),
        ("trace-backend-unknown", V, lambda: m.trace([5], 1, backend="gpu"),
         "backend must be 'ref' or 'fast'"),
    ]
    for name, exc, fn, want in cases:
        raises("arg." + name, exc, fn, want)
    # ... and what Python's conventions accept: numpy integers wherever an
    # integer goes, 0/1 (numpy's too) for a flag; the same run as plain ints
    want = m.generate([5, 17], 2, stop_at_eos=True).receipt
    try:
        got = [m.generate(np.array([5, 17], np.int32), np.int64(2),
                          stop_at_eos=np.int64(1)).receipt,
               m.generate([np.int16(5), np.uint8(17)], 2, stop_at_eos=1).receipt,
               m.generate_many([[5, 17]], np.uint16(2), stop_at_eos=np.bool_(True),
                               batch=np.int64(2))[0].receipt,
               m.engine(max_seqs=np.int8(2), threads=np.int64(0)).generate(
                   [5, 17], 2, stop_at_eos=True).receipt]
    except Exception as x:
        got = "%s: %s" % (type(x).__name__, x)
    report(got == [want] * 4, "arg.numpy-integers-and-0-1-flags-accepted", got)
    report(len(cases) >= 100, "arg.cases (%d)" % len(cases))
    tok.close()
    m.close()


def llama_checks(M, other, tmp):
    import numpy as np
    m = cis2.Model(M)
    # text prompts: the receipt's prompt-hex is the text's UTF-8
    for i, text in enumerate(["Hello, wörld ✓", "  spaces\tand\nnewlines", "日本語 🙂"]):
        p = os.path.join(tmp, "text%d.receipt" % i)
        rc, out, err = cli("run", "--model", M, "--prompt", text, "-n", 4, "--receipt", p)
        r = m.generate(text, 4)
        report(rc == 0 and r.receipt == open(p).read() and
               kv(out, "generated_token_ids") == ",".join(map(str, r.ids)),
               "text-prompt-%d.receipt-equals-cli" % i, err or r)
        rc, out, _ = cli("tokenize", "--model", M, text)
        report(m.tokenize(text) == ids_of(out.decode().strip()), "tokenize-equals-cli-%d" % i)
        report(m.generate(text.encode("utf-8"), 4).receipt == r.receipt, "bytes-prompt-%d" % i)
        report(m.detokenize(m.tokenize(text)) == text, "detokenize-round-trip-%d" % i)
    for ids in ([5, 17, 42], [300, 301, 89]):
        s = ",".join(map(str, ids))
        rc, out, _ = cli("detokenize", "--model", M, s)
        got = m.tokenizer.decode_bytes(ids)
        report(rc == 0 and got + b"\n" == out, "detokenize-equals-cli-" + s, (got, out))
    tok = cis2.Tokenizer.load(os.path.join(M, "tokenizer.json"))
    report(tok.encode("Hello world") == m.tokenize("Hello world") and tok.vocab_size > 0 and
           tok.vocab_size == m.tokenizer.vocab_size, "tokenizer-load")
    # Tokenizer(path), as a transformers user writes it, reads the file (it once took
    # the str for a library handle: a segfault); never a raw handle
    with cis2.Tokenizer(os.path.join(M, "tokenizer.json")) as t2:
        report(t2.encode("Hello world") == tok.encode("Hello world"), "tokenizer-from-path")
    raises("tokenizer-from-int", TypeError, lambda: cis2.Tokenizer(12345), "path")
    with m.tokenizer as mt:  # a model's tokenizer is the model's to free
        mt.encode("x")
    mt.close()
    report(m.generate([5, 17], 2).receipt is not None and
           m.tokenize("Hello") == tok.encode("Hello"), "model-tokenizer-close-no-op")
    tok.close()
    raises("tokenizer-closed", cis2.Error, lambda: tok.encode("x"), ("the tokenizer is closed",))
    report(m.tokenizer.decode(np.array([5, 17, 42], dtype=np.int64)) == m.detokenize([5, 17, 42]),
           "numpy-ids-accepted")

    # Result.text: None exactly where `cis2 run` prints text_error= (bytes not UTF-8)
    seen = set()
    for ids, n in (([5, 17, 42], 4), ([0], 3), ([1, 2, 3], 1), (list(range(40)), 3)):
        rc, out, _ = cli("run", "--model", M, "--prompt-ids", ",".join(map(str, ids)), "-n", n)
        t, r = kv(out, "text"), m.generate(ids, n)
        want = None if t is None else json.loads(t)
        seen.add(want is None)
        report(rc == 0 and r.text == want, "result-text-equals-cli-%d-ids-n%d" % (len(ids), n),
               (r.text, t, kv(out, "text_error")))
    report(seen == {True, False}, "result-text-cases-cover-text-error", seen)

    # receipts for ids the tokenizer cannot (all) decode: as `cis2 run --receipt`
    # writes them, or none with its reason where it refuses
    tv = m.tokenizer.vocab_size
    big = os.path.join(tmp, "bigvocab")
    subprocess.run([sys.executable, "tools/make_model.py", big, "--vocab", str(tv + 80),
                    "--tokenizer", os.path.join(M, "tokenizer.json")], check=True,
                   stdout=subprocess.DEVNULL)
    with cis2.Model(big) as mb:
        for ids in ([5, tv + 30, 17], [tv + 1, tv + 2]):
            p = os.path.join(tmp, "bigvocab.receipt")
            if os.path.exists(p):
                os.unlink(p)
            rc, _, err = cli("run", "--model", big, "--prompt-ids", ",".join(map(str, ids)), "-n",
                             2, "--receipt", p)
            r = mb.generate(ids, 2)
            want = open(p).read() if rc == 0 else None
            why = cli_err("run", err).split("--receipt: ", 1)[-1] if rc else None
            report(r.receipt == want and getattr(r, "receipt_error", "?") == why,
                   "receipt-ids-beyond-tokenizer-equals-cli-%d" % len(ids),
                   (r.receipt, getattr(r, "receipt_error", "?"), want, err))
    badtok = os.path.join(tmp, "badtok")
    os.mkdir(badtok)
    for f in ("config.json", "model.safetensors"):
        os.symlink(os.path.abspath(os.path.join(M, f)), os.path.join(badtok, f))
    j = json.load(open(os.path.join(M, "tokenizer.json"), encoding="utf-8"))
    j["not-a-key"] = 1
    json.dump(j, open(os.path.join(badtok, "tokenizer.json"), "w"))
    rc, _, err = cli("run", "--model", badtok, "--prompt-ids", "5,17", "-n", 2, "--receipt",
                     os.path.join(tmp, "badtok.receipt"))
    with cis2.Model(badtok) as mb:
        r = mb.generate([5, 17], 2)
    report(rc == 2 and r.receipt is None and
           getattr(r, "receipt_error", "?") == cli_err("run", err).split("--receipt: ", 1)[-1],
           "receipt-unusable-tokenizer-none-as-cli",
           (r.receipt, getattr(r, "receipt_error", "?"), err))

    # stop at EOS: equal to the CLI's --stop-at-eos
    eos = m.config.eos_ids
    rc, out, _ = cli("run", "--model", M, "--prompt-ids", "5,17,42", "-n", 8, "--stop-at-eos")
    r = m.generate([5, 17, 42], 8, stop_at_eos=True)
    want = kv(out, "stop_at_eos=1 stopped")
    report(rc == 0 and want == str(int(r.stopped_at_eos)) and
           kv(out, "generated_token_ids") == ",".join(map(str, r.ids)),
           "stop-at-eos-equals-cli (eos %s)" % (eos,), (want, r))

    # teacher forcing: the forced ids are fed; no receipt for a non-greedy run
    force = [7, 99, 3]
    rf = m.generate([5, 17, 42], force=force)
    report(rf.ids == force and rf.receipt is None and len(rf.digests["witness-digest"]) == 64,
           "generate-force", rf)

    # verify: equal to the CLI's output on a tampered receipt and a foreign model
    good = m.generate([5, 17, 42, 7, 99], 6).receipt
    bad = re.sub(r"(?m)^witness-digest .*$", "witness-digest " + "0" * 64, good)
    p = os.path.join(tmp, "tampered.receipt")
    open(p, "w").write(bad)
    rc, out, _ = cli("verify", p, "--model", M)
    vd = cis2.verify(bad, m)
    report(rc == 1 and not vd.ok and vd["witness-digest"].status == "MISMATCH" and
           vd["generated-token-ids"].status == "MATCH" and str(vd) + "\n" == out.decode(),
           "verify-tampered-equals-cli", str(vd))
    rc, out, _ = cli("verify", p, "--model", other)
    with cis2.Model(other) as mo:
        vo = cis2.verify(pathlib.Path(p), mo)
    report(rc == 1 and vo.mismatches >= 1 and vo["weights-sha256"].status == "MISMATCH" and
           str(vo) + "\n" == out.decode(), "verify-other-model-equals-cli", str(vo))
    cli_names = re.findall(r"(?m)^(?:MATCH|MISMATCH|SKIP) ([a-z0-9-]+)", out.decode())
    report([f.name for f in vo] == cli_names and len(vo) == len(cli_names) > 5 and
           vd.ids == [int(x) for x in re.search(r"(?m)^generated-token-ids (.*)$", good)
                      .group(1).split(",")], "verdict-fields-and-recomputed-run", cli_names)
    p2 = os.path.join(tmp, "malformed.receipt")
    open(p2, "w").write(good.replace("gen-toks 6", "gen-toks 7"))
    rc, _, err = cli("verify", p2, "--model", M)
    raises("verify-malformed-error-equals-cli", cis2.Error,
           lambda: cis2.verify(pathlib.Path(p2), m), (cli_err("verify", err),))
    raises("verify-wrong-type", TypeError, lambda: cis2.verify(good, "not a model"))
    raises("verify-str-naming-a-file-says-pass-a-path", cis2.Error, lambda: cis2.verify(p, m),
           "pass pathlib.Path(%r)" % p)
    # a receipt path is read as the library reads inputs: a FIFO, a directory or
    # a missing file is the CLI's one line at once (a FIFO once hung open())
    fifo = os.path.join(tmp, "receipt.fifo")
    os.mkfifo(fifo)

    def unblock():  # a writer that closes: a reader stuck in open() gets EOF
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    timer = threading.Timer(5, unblock)
    timer.start()
    for what, path in (("fifo", fifo), ("directory", tmp),
                       ("missing", os.path.join(tmp, "none.receipt"))):
        rc, _, err = cli("verify", path, "--model", M)
        raises("verify-path-%s-error-equals-cli" % what, cis2.Error,
               lambda: cis2.verify(pathlib.Path(path), m), (cli_err("verify", err),))
    timer.cancel()
    if not os.path.exists("-"):  # "-" is no stdin here: said so, as the library says it
        raises("verify-path-dash", cis2.Error, lambda: cis2.verify(pathlib.Path("-"), m),
               ("-: this input is not read from standard input; give a file name (./- for a "
                "file named -)",))
    # a field not checked here (prompt-hex: a tokenizer.json the library refuses)
    # is named in str(v)'s last line, as in the CLI's (it said "all fields match")
    sk = os.path.join(tmp, "skiptok")
    shutil.copytree(M, sk)
    tj = json.load(open(os.path.join(sk, "tokenizer.json")))
    tj["added_tokens"][0]["lstrip"] = True
    json.dump(tj, open(os.path.join(sk, "tokenizer.json"), "w"))
    rc, out, _ = cli("run", "--model", sk, "--prompt-ids", "5,17,42,7,99", "-n", 6)
    wit = re.search(r"CIS2_REF digest=([0-9a-f]+)", out.decode()).group(1)
    with open(os.path.join(sk, "tokenizer.json"), "rb") as f:
        tsha = hashlib.sha256(f.read()).hexdigest()
    skr = re.sub(r"(?m)^witness-digest .*$", "witness-digest " + wit,
                 re.sub(r"(?m)^tokenizer-sha256 .*$", "tokenizer-sha256 " + tsha, good))
    p4 = os.path.join(tmp, "skip.receipt")
    open(p4, "w").write(skr)
    rc, out, _ = cli("verify", p4, "--model", sk)
    with cis2.Model(sk) as msk:
        vs = cis2.verify(skr, msk)
    report(rc == 0 and vs.ok and vs["prompt-hex"].status == "SKIPPED" and
           str(vs) + "\n" == out.decode() and str(vs).endswith("not checked here: prompt-hex"),
           "verify-skipped-field-equals-cli", str(vs))
    # a receipt needing more positions than the model has: named as the CLI
    # names it (it said "-n N", a flag nobody gave)
    mp = m.config.max_pos
    p3 = os.path.join(tmp, "beyond.receipt")
    long_r = re.sub(r"(?m)^gen-toks \d+$", "gen-toks %d" % mp, good)
    long_r = re.sub(r"(?m)^generated-token-ids .*$",
                    "generated-token-ids " + ",".join(["5"] * mp), long_r)
    open(p3, "w").write(long_r)
    rc, _, err = cli("verify", p3, "--model", M)
    raises("verify-beyond-max-pos-error-equals-cli", cis2.Error,
           lambda: cis2.verify(pathlib.Path(p3), m), (cli_err("verify", err).split(": ", 1)[1],))
    report(rc == 2 and "the receipt cannot be re-run with this model" in err,
           "verify-beyond-max-pos-cli", err)
    # the same with its weights-sha256 changed: another model's receipt, a
    # verdict (MISMATCH, exit 1) in both, never an error
    p5 = os.path.join(tmp, "beyond-other.receipt")
    other_r = re.sub(r"(?m)^weights-sha256 .*$", "weights-sha256 " + "0" * 64, long_r)
    open(p5, "w").write(other_r)
    rc, out, err = cli("verify", p5, "--model", M)
    try:
        vo = cis2.verify(other_r, m)
        ok = (rc == 1 and not vo.ok and vo["weights-sha256"].status == "MISMATCH" and
              str(vo) + "\n" == out.decode())
        report(ok, "verify-beyond-max-pos-other-model-verdict-equals-cli",
               "%s | cli rc %d: %s %s" % (vo, rc, out, err))
    except cis2.Error as e:
        report(False, "verify-beyond-max-pos-other-model-verdict-equals-cli", "raised %s" % e)

    # greedy trace: every node bit-identical to `cis2 trace -n`, same names, same order
    tp = os.path.join(tmp, "greedy.st")
    rc, _, err = cli("trace", "--model", M, "--prompt-ids", "5,17,42", "-n", 3, "-o", tp)
    t = m.trace([5, 17, 42], 3)
    names, arrs, meta = read_trace(tp)
    bad_nodes = [k for k in names if k not in t or not same_bits(arrs[k], t[k])]
    report(rc == 0 and list(t) == names and not bad_nodes and
           t.result.digests["witness-digest"] == meta.get("cis2_ref"),
           "trace-greedy-equals-cli (%d nodes)" % len(names), bad_nodes[:3] or err)
    report(all(a.dtype == np.float32 for a in t.values()) and
           t["p2.L0.attn_scores"].shape == (m.config.n_heads, 3), "trace-arrays")
    # teacher-forced: every node the engine computes equals the CLI's teacher-forced trace
    tp = os.path.join(tmp, "forced.st")
    rc, _, err = cli("trace", "--model", M, "--prompt-ids", "5,17,42", "--teacher-force", "7,99",
                     "-o", tp)
    t = m.trace([5, 17, 42], force=[7, 99])
    names, arrs, _ = read_trace(tp)
    bad_nodes = [k for k in t if k not in arrs or not same_bits(arrs[k], t[k])]
    report(rc == 0 and t.result.ids == [7, 99] and not bad_nodes and len(t) > len(names) // 2 and
           "p3.logits" in t, "trace-teacher-forced-equals-cli (%d of %d nodes)" % (len(t),
                                                                                 len(names)),
           bad_nodes[:3] or err)
    t = m.trace([5, 17, 42], 2, layers=np.array([1]), nodes=["q_proj", "logits"])
    report(sorted(t) == ["p0.L1.q_proj", "p1.L1.q_proj", "p2.L1.q_proj", "p2.logits",
                         "p3.L1.q_proj", "p3.logits"], "trace-filters", sorted(t))

    # filters that would silently keep nothing: a str's letters, a layer or node that is not there
    raises("trace-nodes-str", TypeError, lambda: m.trace([5], 1, nodes="logits"), "nodes")
    raises("trace-layers-str", TypeError, lambda: m.trace([5], 1, layers="0"), "layers")
    raises("trace-layer-out-of-range", ValueError, lambda: m.trace([5], 1, layers=[99]),
           "layer must be an integer in [0, %d], got 99" % (m.config.n_layers - 1))
    raises("trace-node-unknown", ValueError, lambda: m.trace([5], 1, nodes=["logit"]),
           "no node named 'logit'")
    # named twice: a typo for another one, refused as cis2 trace --layers/--nodes refuse it
    raises("trace-layer-twice", ValueError, lambda: m.trace([5], 1, layers=[0, 0]),
           ("trace: layer 0 is given twice",))
    raises("trace-node-twice", ValueError, lambda: m.trace([5], 1, nodes=["embed", "embed"]),
           ("trace: node 'embed' is given twice",))
    # an empty filter kept nothing of its kind: nodes=[] returned an empty trace
    raises("trace-nodes-empty", ValueError, lambda: m.trace([5], 1, nodes=[]),
           ("trace: nodes is empty; give None to keep every one",))
    raises("trace-layers-empty", ValueError, lambda: m.trace([5], 1, layers=iter([])),
           ("trace: layers is empty; give None to keep every one",))
    # arguments that would be read as something the caller did not write: a
    # set's (or dict's) order, a str flag ("no" is truthy)
    raises("generate-ids-set", TypeError, lambda: m.generate({42, 5, 17}, 1),
           "prompt: expected token ids in order")
    raises("generate-force-dict", TypeError, lambda: m.generate([5], 1, force={7: 1}),
           "force: expected token ids in order")
    raises("generate-stop-at-eos-str", TypeError,
           lambda: m.generate([5], 1, stop_at_eos="no"),
           ("stop_at_eos must be True or False, got str 'no'",))
    report(m.generate([5, 17], 2, stop_at_eos=1).ids ==
           m.generate([5, 17], 2, stop_at_eos=True).ids, "generate-stop-at-eos-int-flag")

    # errors: the library's one line, the same as the CLI's
    rc, _, err = cli("run", "--model", os.path.join(tmp, "nonexistent"), "--prompt-ids", "1")
    raises("error-missing-model-equals-cli", cis2.Error,
           lambda: cis2.Model(os.path.join(tmp, "nonexistent")), (cli_err("run", err),))
    # a C string ends at its first NUL: "DIR\0junk" must not open DIR; "" is no path
    raises("error-model-path-nul", ValueError, lambda: cis2.Model(M + "\0junk"), "NUL byte")
    raises("error-model-path-empty", ValueError, lambda: cis2.Model(""), "the path is empty")
    raises("error-tokenizer-path-nul", ValueError,
           lambda: cis2.Tokenizer.load(os.path.join(M, "tokenizer.json") + "\0x"), "NUL byte")
    raises("error-isa-nul", ValueError, lambda: m.engine(isa="auto\0junk"), "isa")
    # a path the library quotes: one line, escaped as the CLI prints it
    odd = os.fsencode(tmp) + b"/no\nsuch\x1b[31m\xff\xe2\x80\xae-dir"
    p = subprocess.run([CLI, "run", "--model", odd, "--prompt-ids", "1"], capture_output=True)
    want = cli_err("run", p.stderr.decode("utf-8", "replace"))
    raises("error-odd-path-escaped-as-cli", cis2.Error, lambda: cis2.Model(odd), (want,))
    raises("error-odd-str-path-escaped-as-cli", cis2.Error, lambda: cis2.Model(os.fsdecode(odd)),
           (want,))
    rc, _, err = cli("run", "--model", M, "--prompt-ids", "5,99999")
    raises("error-id-outside-vocab-equals-cli", ValueError, lambda: m.generate([5, 99999], 2),
           (cli_err("run", err),))
    # the CLI's line names -n; Python's names its own argument (as serve's does)
    raises("error-too-long-names-max-tokens", ValueError, lambda: m.generate([5], 9000),
           ("prompt (1 tokens) + max_tokens 9000 exceeds max_position_embeddings = %d" %
            m.config.max_pos,))
    raises("error-empty-prompt", ValueError, lambda: m.generate("", 2), "no tokens")
    raises("error-no-ids", ValueError, lambda: m.generate([], 2), "no tokens")
    raises("error-max-tokens", ValueError, lambda: m.generate([5], 0), "max_tokens")
    # integers ctypes would wrap to a C int: refused, never decoded modulo 2**32
    raises("error-max-tokens-beyond-int", ValueError, lambda: m.generate([5], 2**32 + 2),
           "max_tokens must be an integer in [1, 2147483647], got 4294967298")
    raises("error-max-tokens-type", TypeError, lambda: m.generate([5], "3"), "max_tokens")
    raises("error-threads-beyond-int", ValueError,
           lambda: m.engine(backend="fast", threads=2**32 + 1), "threads")
    raises("error-threads-type", TypeError, lambda: m.engine(threads=1.0), "threads")
    # past the library's 1024 (include/cis2.h) it is a bad argument like -1, a
    # ValueError before the engine is made, not the library's cis2.Error
    raises("error-threads-beyond-1024", ValueError,
           lambda: m.engine(backend="fast", threads=1025),
           ("threads must be an integer in [0, 1024] (0 = every CPU it may run on), got 1025",))
    raises("error-threads-beyond-1024-model", ValueError,
           lambda: cis2.Model(M, backend="fast", threads=5000), "[0, 1024]")
    report(m.engine(backend="fast", threads=1024).backend.startswith("fast"),
           "threads-1024-accepted")
    # None or a bare int is no prompt: the message names what was given, not
    # "token ids must be integers" (it is one)
    raises("error-prompt-none", TypeError, lambda: m.generate(None, 2),
           ("prompt: expected a str, bytes or token ids (an iterable of integers), got NoneType",))
    raises("error-prompt-int", TypeError, lambda: m.generate(5, 2),
           ("prompt: expected a str, bytes or token ids (an iterable of integers), got int",))
    raises("error-decode-none", TypeError, lambda: m.detokenize(None),
           ("decode: expected token ids (an iterable of integers), got NoneType",))
    raises("error-force-int", TypeError, lambda: m.generate([5], 2, force=7),
           ("force: expected token ids (an iterable of integers), got int",))
    try:
        got = m.generate([5, 17], np.int64(2)).ids
    except Exception as e:
        got = "%s: %s" % (type(e).__name__, e)
    report(got == m.generate([5, 17], 2).ids, "numpy-max-tokens-accepted", got)
    raises("error-backend", ValueError, lambda: m.engine(backend="gpu"), "backend")
    raises("error-backend-before-load", ValueError,
           lambda: cis2.Model(os.path.join(tmp, "nonexistent"), backend="gpu"), "backend")
    raises("error-isa", ValueError, lambda: m.engine(backend="fast", isa="mmx"), "isa")
    # the ref backend has no SIMD paths: an isa there is refused, as --isa is by the CLI
    raises("error-isa-with-ref", ValueError, lambda: m.engine(backend="ref", isa="scalar"),
           ("isa 'scalar' applies to backend='fast' only (the ref backend has no SIMD paths)",))
    raises("error-backend-type", TypeError, lambda: m.engine(backend=["ref"]), "backend")
    raises("error-engine-not-a-model", TypeError, lambda: cis2.Engine("models/x"), "cis2.Model")
    raises("error-force-beyond-max-tokens", ValueError,
           lambda: m.generate([5], 1, force=[7, 8, 9]), "the last 2 would never be fed")
    raises("error-id-type", TypeError, lambda: m.generate(["a"], 2), "integers")
    raises("error-id-int32", ValueError, lambda: m.generate([2**40], 2), "int32")
    raises("error-id-bool", TypeError, lambda: m.generate([True, 17], 2), "not bool")
    # numpy's bools are no ints either (operator.index took them as 0 and 1)
    raises("error-id-numpy-bool", TypeError,
           lambda: m.generate(__import__("numpy").array([True, False]), 2), "not bool")
    raises("error-max-tokens-numpy-bool", TypeError,
           lambda: m.generate([5], __import__("numpy").bool_(True)),
           "max_tokens must be an integer")
    raises("error-stop-at-eos-numpy-array", TypeError,
           lambda: m.generate([5], 1, stop_at_eos=__import__("numpy").array([1, 0])),
           "stop_at_eos must be True or False")
    raises("error-prompt-lone-surrogate", ValueError, lambda: m.generate("a\ud800b", 2),
           ("prompt: the str holds a lone surrogate U+D800 at index 1, which is not UTF-8 (pass "
            "bytes, or a str without surrogates)",))
    report(m.generate((i for i in [5, 17, 42]), 2).ids == m.generate([5, 17, 42], 2).ids,
           "generator-ids-accepted")
    report(m.generate(memoryview(b"Hello"), 2).receipt == m.generate("Hello", 2).receipt,
           "memoryview-prompt-is-text")
    raises("error-decode-bytes-are-not-ids", TypeError, lambda: m.detokenize(bytearray(b"ab")),
           "expected token ids")
    raises("error-force-vocab", ValueError, lambda: m.generate([5], force=[99999]),
           "forced token id 99999")
    # Ctrl-C during a decode: KeyboardInterrupt between two steps; the
    # sequence is cancelled, so the engine's one slot is free again. A
    # process started in the background by a shell without job control
    # inherits SIGINT ignored, and Python then leaves it so: the tests of
    # Ctrl-C put Python's own handler in place, as an interactive start has.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    before = m.generate([5, 17, 42, 7, 99], 6).receipt
    timer = threading.Timer(0.05, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    interrupted, deadline = False, time.monotonic() + 120
    try:
        while time.monotonic() < deadline:  # a lost interrupt fails, never hangs
            m.generate([5, 17], 2000)
    except KeyboardInterrupt:
        interrupted = True
    timer.join()
    report(interrupted and m.generate([5, 17, 42, 7, 99], 6).receipt == before,
           "keyboard-interrupt-cancels-the-sequence")
    # ... and during generate_many: every sequence in flight is cancelled, so all the
    # engine's slots are free again for the next call
    with m.engine(max_seqs=3) as e3:
        timer = threading.Timer(0.05, lambda: os.kill(os.getpid(), signal.SIGINT))
        timer.start()
        interrupted, deadline = False, time.monotonic() + 120
        try:
            while time.monotonic() < deadline:
                e3.generate_many([[5, 17]] * 5, 2000)
        except KeyboardInterrupt:
            interrupted = True
        timer.join()
        again = e3.generate_many([[5, 17, 42, 7, 99]] * 4, 6)
        report(interrupted and [r.receipt for r in again] == [before] * 4,
               "keyboard-interrupt-cancels-generate-many")
        # ... and verify_many's re-runs, whose verdicts are freed
        long_receipt = m.generate([5, 17], 2000).receipt
        timer = threading.Timer(0.05, lambda: os.kill(os.getpid(), signal.SIGINT))
        timer.start()
        interrupted, deadline = False, time.monotonic() + 120
        try:
            while time.monotonic() < deadline:
                e3.verify_many([long_receipt] * 5)
        except KeyboardInterrupt:
            interrupted = True
        timer.join()
        report(interrupted and [v.ok for v in e3.verify_many([before] * 4)] == [True] * 4,
               "keyboard-interrupt-cancels-verify-many")
    # a copy would share the library handle and free it twice
    for what, obj in (("model", m), ("engine", m.engine()), ("tokenizer", tok)):
        for how, fn in (("copy", copy.copy), ("deepcopy", copy.deepcopy), ("pickle", pickle.dumps)):
            raises("%s-%s-refused" % (what, how), TypeError, lambda: fn(obj), "cannot be copied")
    # ... and during a trace, whose per-node callback once swallowed it ("Exception
    # ignored on calling ctypes callback function") and ran to the end
    timer = threading.Timer(0.05, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        m.trace([5, 17], 2000, nodes=["logits"])
        interrupted = False
    except KeyboardInterrupt:
        interrupted = True
    timer.join()
    report(interrupted and m.generate([5, 17, 42, 7, 99], 6).receipt == before,
           "keyboard-interrupt-stops-a-trace")
    # ... and during a verify, once one C call that Ctrl-C could not stop: a
    # stand-in library sends SIGINT inside the 3rd step; the verify stops after it
    spy = _InterruptAtStep(cis2._c, 3)
    long_receipt = m.generate([5, 17], 40).receipt
    try:
        cis2._c = spy
        cis2.verify(long_receipt, m)
        interrupted = False
    except KeyboardInterrupt:
        interrupted = True
    finally:
        cis2._c = spy.real
    ok = cis2.verify(long_receipt, m).mismatches == 0 and cis2.verify(before, m).mismatches == 0
    report(interrupted and spy.steps == 3 and ok, "keyboard-interrupt-stops-a-verify",
           "interrupted=%s after %d step(s), verifies after: %s" % (interrupted, spy.steps, ok))
    # A program's own SIGINT handler, run between two steps of a trace (inside
    # the per-node callback what it raised was dropped, and the trace ran to
    # its end): one that raises stops the trace; one that returns lets it
    # finish; either is back in place after.
    class _Stop(Exception):
        pass

    calls = []

    def stopping(signum, frame):
        calls.append(signum)
        raise _Stop()

    prev = signal.signal(signal.SIGINT, stopping)
    timer = threading.Timer(0.05, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        m.trace([5, 17], 2000, nodes=["logits"])
        got = "finished"
    except _Stop:
        got = "stopped"
    timer.join()
    same = m.generate([5, 17, 42, 7, 99], 6).receipt == before
    report(got == "stopped" and calls == [signal.SIGINT] and same and
           signal.getsignal(signal.SIGINT) is stopping, "own-sigint-handler-stops-a-trace",
           "%s, handler called %d time(s)" % (got, len(calls)))
    calls.clear()
    want = m.trace([5, 17], 6, nodes=["logits"])
    signal.signal(signal.SIGINT, lambda signum, frame: calls.append(signum))
    spy = _InterruptAtStep(cis2._c, 3)
    try:
        cis2._c = spy
        t = m.trace([5, 17], 6, nodes=["logits"])
    finally:
        cis2._c = spy.real
    whole = list(t) == list(want) and all((t[k] == want[k]).all() for k in want)
    report(calls == [signal.SIGINT] and whole and spy.steps == 6,
           "own-sigint-handler-returns-and-the-trace-goes-on",
           "handler called %d time(s), %d steps, %d of %d arrays, same: %s" %
           (len(calls), spy.steps, len(t), len(want), whole))
    signal.signal(signal.SIGINT, prev)
    # Ctrl-C while close() waits for a call in flight: the object stays open
    # (it was left marked closing with its handle never freed), and a later
    # close() frees it
    t2 = cis2.Tokenizer(os.path.join(M, "tokenizer.json"))
    use, ended = t2._use(), []
    use.__enter__()

    def end_use():  # once: after the close, or after 60 s if the interrupt was lost
        with lock:
            if not ended:
                ended.append(1)
                use.__exit__(None, None, None)

    lock = threading.Lock()
    timer = threading.Timer(0.05, lambda: os.kill(os.getpid(), signal.SIGINT))
    safety = threading.Timer(60, end_use)
    timer.start()
    safety.start()
    try:
        t2.close()
        got = "closed"
    except KeyboardInterrupt:
        got = "interrupted"
    timer.join()
    safety.cancel()
    end_use()
    try:
        usable = t2.encode("ab") == m.tokenizer.encode("ab")
    except cis2.Error:
        usable = False
    t2.close()
    report(got == "interrupted" and usable and t2._h is None, "interrupted-close-can-close-again",
           "%s, usable after: %s, handle freed: %s" % (got, usable, t2._h is None))
    e, mt = m.engine(backend="fast"), m.tokenizer
    eb, reprs = e.backend, [repr(m), repr(e), repr(mt)]
    e.close()
    reprs.append(repr(e))
    m.close()
    reprs += [repr(m), repr(mt)]
    report(reprs == ["Model(%r, arch=llama, backend=ref)" % M,
                     "Engine(%r, backend=%s)" % (M, eb), "Tokenizer(vocab_size=%d)" % tv,
                     "Engine(%r, backend=%s, closed)" % (M, eb), "Model(%r, closed)" % M,
                     "Tokenizer(closed)"], "reprs", reprs)
    raises("error-closed-model", cis2.Error, lambda: m.generate([5], 2),
           ("the model is closed",))
    raises("error-closed-tokenizer", cis2.Error, lambda: m.tokenize("x"),
           ("the model is closed",))
    raises("error-closed-model-backend", cis2.Error, lambda: m.backend, ("the model is closed",))
    raises("error-closed-model-engine", cis2.Error, lambda: m.engine(), ("the model is closed",))
    raises("error-closed-model-verify", cis2.Error, lambda: cis2.verify(good, m),
           ("the model is closed",))
    raises("error-closed-model-verify-garbage", cis2.Error, lambda: m.verify("x"),
           ("the model is closed",))
    # handles are released: many open/close cycles do not grow the process
    for _ in range(3):
        with cis2.Model(M) as mm:
            e = mm.engine()
            e.generate([5], 1)
    report(e._h is None and mm._h is None, "close-frees-engines-then-model")
    close_while_tokenizing(M)


class _CloseSpy:
    """Stands in for the library handle: cis2_tokenizer_encode waits until
    another thread has begun m.close(), gives it time to free, then runs only
    if the model has not been freed under it; every step is logged."""

    def __init__(self, real, closing):
        self.real, self.closing, self.log = real, closing, []

    def __getattr__(self, name):
        f = getattr(self.real, name)
        if name == "cis2_model_free":
            def free(*a):
                self.log.append("model_free")
                return f(*a)
            return free
        if name != "cis2_tokenizer_encode":
            return f

        def encode(*a):
            self.log.append("encode")
            self.closing.wait(10)
            time.sleep(0.3)  # a close() that does not wait frees the model now
            if "model_free" in self.log:
                self.log.append("encode-after-free")
                return 1  # the real call would read freed memory
            rc = f(*a)
            self.log.append("encode-done")
            return rc
        return encode


def close_while_tokenizing(M):
    """Model.close() on one thread while another thread is inside a tokenizer
    call: the close waits for the call, then frees (it once freed the model
    under it: a segfault with a large tokenizer.json)."""
    m, real = cis2.Model(M), cis2._c
    closing, out = threading.Event(), []
    spy = _CloseSpy(real, closing)
    cis2._c = spy
    try:
        th = threading.Thread(target=lambda: out.append(m.tokenize("Hello world")))
        th.start()
        while "encode" not in spy.log:
            time.sleep(0.01)
        closer = threading.Thread(target=m.close)
        closer.start()
        closing.set()
        th.join(20)
        closer.join(20)
    finally:
        cis2._c = real
    report(spy.log == ["encode", "encode-done", "model_free"] and len(out) == 1 and
           not closer.is_alive(), "close-waits-for-a-tokenizer-call-on-another-thread", spy.log)
    raises("tokenize-after-concurrent-close", cis2.Error, lambda: m.tokenize("x"),
           ("the model is closed",))


# --------------------------------------------------------------- layout
def group_layout(models, tmp):
    """Every mirrored struct's size and field offsets equal the C compiler's."""
    lines = ['#include "cis2.h"', "#include <stddef.h>", "#include <stdio.h>", "int main(void) {"]
    want = []
    for cname, cls in cis2._lib.STRUCTS.items():
        lines.append('printf("%s %%zu\\n", sizeof(%s));' % (cname, cname))
        want.append("%s %d" % (cname, ctypes.sizeof(cls)))
        for f in cls._fields_:
            lines.append('printf("%s.%s %%zu\\n", offsetof(%s, %s));' % (cname, f[0], cname, f[0]))
            want.append("%s.%s %d" % (cname, f[0], getattr(cls, f[0]).offset))
    lines.append("return 0; }")
    src, exe = os.path.join(tmp, "layout.c"), os.path.join(tmp, "layout")
    open(src, "w").write("\n".join(lines) + "\n")
    p = subprocess.run(["cc", "-Iinclude", src, "-o", exe], capture_output=True, text=True)
    if p.returncode:
        report(False, "layout.compile", p.stderr)
        return
    got = subprocess.run([exe], capture_output=True, text=True).stdout.split("\n")[:-1]
    diff = [(g, w) for g, w in zip(got, want) if g != w]
    report(not diff and len(got) == len(want),
           "layout.structs-equal-c (%d structs, %d fields)" % (len(cis2._lib.STRUCTS),
                                                               len(want) - len(cis2._lib.STRUCTS)),
           diff[:4])


# ------------------------------------------------------------------ gil
class _Spy:
    """Stands in for the library handle: marks when a decode step
    (cis2_engine_step, what generate calls per token) is entered and left (in
    Python, under the GIL, right around the real ctypes call)."""

    def __init__(self, real):
        self.real, self.phase = real, "before"

    def __getattr__(self, name):
        f = getattr(self.real, name)
        if name != "cis2_engine_step":
            return f

        def call(*a):
            self.phase = "in"
            try:
                return f(*a)
            finally:
                self.phase = "after"
        return call


class _InterruptAtStep:
    """The library, with cis2_engine_step counted and a SIGINT sent to this
    process just before step number `at` runs."""

    def __init__(self, real, at):
        self.real, self.at, self.steps = real, at, 0

    def __getattr__(self, name):
        return getattr(self.real, name)

    def cis2_engine_step(self, *a):
        self.steps += 1
        if self.steps == self.at:
            os.kill(os.getpid(), signal.SIGINT)
        return self.real.cis2_engine_step(*a)


def _inside_steps(m, lib):
    """How often the main thread ran while a decoding thread was inside a
    cis2_engine_step call made through `lib`."""
    old, real = sys.getswitchinterval(), cis2._c
    seen = 0
    try:
        sys.setswitchinterval(1000)
        spy = _Spy(lib)
        cis2._c = spy
        th = threading.Thread(target=lambda: m.generate([5, 17, 42], 96))
        th.start()
        while th.is_alive():
            if spy.phase == "in":
                seen += 1
            time.sleep(0.0005)  # blocks: lets the decoding thread have the GIL back
        th.join()
    finally:
        cis2._c = real
        sys.setswitchinterval(old)
    return seen


class _HoldsGil:
    """The library as ctypes.PyDLL sees it (the GIL held through each call),
    for cis2_engine_step only: the negative control."""

    def __init__(self, real):
        self.real = real
        step = ctypes.PyDLL(cis2.library_path).cis2_engine_step
        step.restype, step.argtypes = real.cis2_engine_step.restype, real.cis2_engine_step.argtypes
        self.cis2_engine_step = step

    def __getattr__(self, name):
        return getattr(self.real, name)


def group_gil(models, tmp):
    """Deterministic: with a 1000 s switch interval a thread holding the GIL
    keeps it until it blocks. The main thread can run while the decoding
    thread is between entering and leaving cis2_engine_step only if that call
    released the GIL. (With the GIL held, `seen` stays 0 whatever the timing:
    the negative control calls the same function through ctypes.PyDLL.)"""
    m = cis2.Model(os.path.join(models, "llama"))
    m.generate([5], 2)  # warm: nothing lazy left inside the measured calls
    seen = tries = 0
    while not seen and tries < 5:
        tries += 1
        seen = _inside_steps(m, cis2._c)
    report(seen > 0, "gil-released-during-decode (main thread ran %d time(s) inside "
           "cis2_engine_step, try %d)" % (seen, tries),
           "never ran while cis2_engine_step was running")
    held = _inside_steps(m, _HoldsGil(cis2._c))
    report(held == 0, "gil-negative-control (through PyDLL: ran %d time(s) inside)" % held)


# -------------------------------------------------------------- threads
def _concurrent(engines, jobs):
    """Each engine decodes its job on its own thread, all at once."""
    out, errs = [None] * len(engines), []
    start = threading.Barrier(len(engines))

    def work(i):
        try:
            start.wait()
            out[i] = engines[i].generate(*jobs[i]).receipt
        except Exception as e:
            errs.append("%s: %s" % (type(e).__name__, e))
    ths = [threading.Thread(target=work, args=(i,)) for i in range(len(engines))]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    return out, errs


def threads_case(models, backend):
    """Two engines over one model, on two threads (include/cis2.h: a model is
    read-only and shareable), then one freed and the other used again: every
    receipt must equal the single-engine one."""
    name = "threads-%s" % backend
    m = cis2.Model(os.path.join(models, "qwen2"), backend=backend)
    jobs = [([5, 17, 42, 7, 99], 12), ([3, 1, 4, 1, 5, 9, 2, 6], 10)]
    alone = [m.generate(*j).receipt for j in jobs]
    e1, e2 = m.engine(), m.engine()
    got, errs = _concurrent([e1, e2], jobs)
    report(not errs and got == alone, name + ".two-engines-two-threads-equal-alone",
           errs or "receipts differ from the single-engine run")
    got, errs = _concurrent([e1, e2], [jobs[1], jobs[0]])
    report(not errs and got == alone[::-1], name + ".swapped-jobs-equal-alone",
           errs or "receipts differ from the single-engine run")
    got, errs = _concurrent([m, m.engine()], jobs)  # Model.generate serializes on its engine
    report(not errs and got == alone, name + ".model-and-engine-threads", errs)
    # Free the newest engine, then the older ones must still work (each in turn).
    sys.stdout.flush()  # a crash below must not swallow the lines above
    for k, (older, newest) in enumerate(((e1, e2), (m, e1))):
        newest.close()
        try:
            r = older.generate(*jobs[0]).receipt
        except cis2.Error as e:
            r = "Error: %s" % e
        report(r == alone[0], name + ".older-engine-survives-freeing-newest-%d" % (k + 1),
               "after freeing the newest engine the older one gives %s (engines still share "
               "state through the model)" % (r if r.startswith("Error") else "another receipt"))
    m.close()


# ------------------------------------------------------------ installed
def group_installed(models, tmp, how, receipt):
    """Run from an installed copy: found the library as expected, same receipt."""
    where, how_name = os.path.dirname(cis2.__file__), how.replace(" ", "-")
    report(not where.startswith(os.path.abspath("python")),
           "installed.%s.imported-from-install (%s)" % (how_name, where))
    report(cis2.library_found_by == how,
           "installed.%s.library-found-by (%s: %s)" % (how_name, cis2.library_found_by,
                                                      cis2.library_path))
    with cis2.Model(os.path.join(models, "llama")) as m:
        r = m.generate([5, 17, 42, 7, 99], 6)
    report(r.receipt == open(receipt).read(), "installed.%s.receipt-equals-cli" % how_name)


# ------------------------------------------------------------- no numpy
def _plain_run(models):
    """Every call but trace on the llama fixture, as plain data (JSON): what a
    program that has no numpy gets."""
    M = os.path.join(models, "llama")
    with cis2.Model(M) as m:
        r, ri = m.generate("Hello world", 6), m.generate([5, 17, 42, 7, 99], 6)
        rf = m.generate([5, 17], force=[7, 99, 3])
        with m.stream("Once upon", 5) as st:
            chunks = list(st)
        out = {
            "digests": m.digests, "config": repr(m.config), "dtype": m.dtype,
            "generate-text": [r.prompt_ids, r.ids, r.text, r.receipt, r.cis2_ref, r.digests],
            "generate-ids": [ri.ids, ri.text, ri.receipt, ri.cis2_ref, ri.digests],
            "generate-forced": [rf.ids, rf.receipt, rf.receipt_error],
            "generate-many": [[x.ids, x.receipt] for x in
                              m.generate_many(["Once upon", [5, 17], b"Hello"], 4, batch=2)],
            "stream": [chunks, st.result.receipt],
            "verify": [str(cis2.verify(ri.receipt, m)), str(m.verify(r.receipt))],
            "verify-many": [str(v) for v in m.verify_many([r.receipt, ri.receipt])],
            "tokenize": m.tokenize("Hello, wörld ✓"),
            "detokenize": [m.detokenize([5, 17, 42]), list(m.tokenizer.decode_bytes([300, 301]))],
        }
    return json.loads(json.dumps(out))


def group_dump(models, tmp, path):
    """The plain calls where numpy is importable, for the nonumpy groups."""
    import numpy  # noqa: F401  (this run is the one with numpy)
    with open(path, "w") as f:
        json.dump(_plain_run(models), f)
    report(True, "nonumpy.dump-with-numpy (numpy %s)" % numpy.__version__)


def group_nonumpy(models, tmp, dump, receipt, installed):
    """numpy cannot be imported (not installed, or made unimportable): the
    package imports, every call but trace gives what it gives with numpy,
    and trace raises ImportError naming numpy before running anything."""
    try:
        __import__("numpy")
        gone = False
    except ImportError:
        gone = True
    report(gone, "nonumpy.numpy-not-importable")
    if installed:
        where = os.path.dirname(cis2.__file__)
        report(not where.startswith(os.path.abspath("python")) and
               cis2.library_found_by == "bundled",
               "nonumpy.installed-without-numpy (%s, %s)" % (where, cis2.library_found_by))
    try:
        got = _plain_run(models)
    except Exception as e:
        report(False, "nonumpy.calls-run", "%s: %s" % (type(e).__name__, e))
        return
    report(got["generate-ids"][2] == open(receipt).read(), "nonumpy.receipt-equals-cli")
    if dump != "-":
        want = json.load(open(dump))
        diff = sorted(k for k in want if got.get(k) != want[k])
        report(not diff and got == want, "nonumpy.every-call-equals-numpy-run (%d calls)" %
               len(want), diff)
    with cis2.Model(os.path.join(models, "llama")) as m:
        raises("nonumpy.trace-needs-numpy", ImportError, lambda: m.trace([5], 1),
               "trace: needs numpy (its tensors are numpy float32 arrays), which this Python "
               "lacks")
        report(m.generate([5, 17, 42, 7, 99], 6).receipt == got["generate-ids"][2],
               "nonumpy.model-usable-after-trace-refused")
    report(sys.modules.get("numpy") is None, "nonumpy.cis2-never-imported-numpy")


# ---------------------------------------------------------------- sampling
def group_sampling(models, tmp):
    """generate(..., temperature=, top_k=, top_p=, min_p=, seed=) as `cis2 run`
    with the same flags (docs/sampling.md), receipt byte for byte; sampled
    receipts verify from Python and a changed seed is caught."""
    M = os.path.join(models, "llama")
    m = cis2.Model(M)
    ids = [5, 17, 42, 7]
    sets = [(["--prompt-ids", "5,17,42,7"], ids, 8,
             dict(temperature=0.8, top_p=0.95, seed=42), ["--top-p", "0.95", "--seed", "42"]),
            (["--prompt", "Once upon a time"], "Once upon a time", 6,
             dict(temperature=1.3, top_k=5, min_p=0.05, seed=2 ** 64 - 1),
             ["--top-k", "5", "--min-p", "0.05", "--seed", str(2 ** 64 - 1)])]
    results = []
    for i, (cp, pp, n, kw, flags) in enumerate(sets):
        path = os.path.join(tmp, "s%d.receipt" % i)
        rc, out, err = cli("run", "--model", M, *cp, "-n", n, "--temperature", kw["temperature"],
                           *flags, "--receipt", path)
        r = m.generate(pp, n, **kw)
        results.append((r, path))
        want = open(path).read() if rc == 0 else None
        report(rc == 0 and r.receipt == want and
               kv(out, "generated_token_ids") == ",".join(map(str, r.ids)) and
               r.receipt.startswith("CIS-2-RECEIPT v1+sampling\n") and r.seed == kw["seed"],
               "sampling.receipt-equals-cli-%d" % i, err or (r.receipt, want))
        rc, out, err = cli("verify", path, "--model", M)
        v = m.verify(r.receipt)
        report(v.ok and v["sampler"].status == "MATCH" and v["seed"].status == "MATCH" and
               v.ids == r.ids and rc == 0, "sampling.receipt-verifies-%d" % i, str(v) + err)
        report(cis2.verify(pathlib.Path(path), m).ok, "sampling.cli-receipt-verifies-%d" % i)
    r0 = results[0][0]
    again = m.generate(ids, 8, temperature=0.8, top_p=0.95, seed=42)
    report(again.ids == r0.ids and again.digests == r0.digests, "sampling.same-seed-same-ids")
    seen = {tuple(m.generate(ids, 8, temperature=2.0, seed=s).ids) for s in range(8)}
    report(len(seen) > 1, "sampling.different-seeds-differ", seen)
    # a changed seed: the receipt no longer verifies, and both sampler lines say so
    bad = r0.receipt.replace("\nseed 42\n", "\nseed 43\n")
    v = cis2.verify(bad, m)
    report(bad != r0.receipt and not v.ok and v["seed"].status == "MISMATCH" and
           v["sampler"].status == "MISMATCH", "sampling.changed-seed-mismatch", str(v))
    bad = r0.receipt.replace("top-p=0.95", "top-p=0.9")
    report(bad != r0.receipt and not cis2.verify(bad, m).ok, "sampling.changed-top-p-mismatch")
    # temperature 0 is the greedy run, v1 receipt byte for byte
    g, t0 = m.generate(ids, 8), m.generate(ids, 8, temperature=0.0)
    report(t0.receipt == g.receipt and t0.ids == g.ids and t0.seed is None and
           t0.receipt.startswith("CIS-2-RECEIPT v1\n"), "sampling.t0-equals-greedy")
    # seed None: one is chosen and returned, and reproduces the run
    r = m.generate(ids, 8, temperature=0.9, top_k=40)
    rr = m.generate(ids, 8, temperature=0.9, top_k=40, seed=r.seed)
    report(isinstance(r.seed, int) and 0 <= r.seed < 2 ** 64 and rr.receipt == r.receipt and
           ("\nseed %d\n" % r.seed) in r.receipt and cis2.verify(r.receipt, m).ok,
           "sampling.seed-none-chosen-and-returned", r.seed)
    report(r.sampler == {"temperature": struct.unpack("<f", struct.pack("<f", 0.9))[0],
                         "top_k": 40, "top_p": 1.0, "min_p": 0.0}, "sampling.result-sampler",
           r.sampler)
    # stream and generate_many sample as generate
    st = m.stream(ids, 8, temperature=0.8, top_p=0.95, seed=42)
    chunks = list(st)
    report(st.result is not None and st.result.receipt == r0.receipt and
           st.ids == r0.ids and len(chunks) == 8, "sampling.stream-equals-generate")
    many = m.generate_many([ids, "Once upon a time", ids], 8, temperature=0.8, top_p=0.95,
                           seed=42, batch=2)
    solo = m.generate("Once upon a time", 8, temperature=0.8, top_p=0.95, seed=42)
    report(many[0].receipt == r0.receipt and many[2].receipt == r0.receipt and
           many[1].receipt == solo.receipt, "sampling.generate-many-equals-generate")
    vs = cis2.verify_many([r0.receipt, g.receipt, results[1][0].receipt], m, batch=2)
    report([v.ok for v in vs] == [True] * 3 and "seed" not in [f.name for f in vs[1]],
           "sampling.verify-many-mixed", [str(v) for v in vs])
    # logprobs=k: docs/sampling.md §9 over each step's raw logits, the bits of
    # tools/sample_reference.py's reading over cis2 trace's logits
    lr = m.generate(ids, 6, temperature=1.5, seed=7, logprobs=3)
    plain = m.generate(ids, 6, temperature=1.5, seed=7)
    report(lr.receipt == plain.receipt and [t.id for t in lr.logprobs] == lr.ids and
           all(len(t.top) == 3 and t.logprob <= 0 for t in lr.logprobs) and plain.logprobs is None,
           "sampling.logprobs-shape", lr.logprobs)
    g0 = m.generate(ids, 1, logprobs=3)  # the same step-0 logits: the same numbers, greedy too
    report(g0.logprobs[0].top == lr.logprobs[0].top, "sampling.logprobs-raw-logits",
           (g0.logprobs, lr.logprobs[0]))
    try:
        import numpy  # noqa: F401
    except ImportError:
        print("SKIP sampling.logprobs-reference: no numpy")
    else:
        path = os.path.join(tmp, "lp.st")
        rc, out, err = cli("trace", "--model", M, "--prompt-ids", "5,17,42,7", "--teacher-force",
                           ",".join(map(str, lr.ids[:5])), "--nodes", "logits", "-o", path)
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
        import sample_reference as sr
        bits = lambda v: struct.unpack("<I", struct.pack("<f", v))[0]  # noqa: E731
        ok = rc == 0
        t = sr.read_trace(path) if ok else {}
        for i, tl in enumerate(lr.logprobs if ok else []):
            lp, top = sr.logprobs(t["p%d.logits" % (3 + i)], 3)
            ok = ok and bits(tl.logprob) == bits(lp[tl.id]) and [x[0] for x in tl.top] == top and \
                all(bits(x[1]) == bits(lp[x[0]]) for x in tl.top)
        report(ok, "sampling.logprobs-reference", err)
    raises("sampling.arg.logprobs-negative", ValueError, lambda: m.generate(ids, 2, logprobs=-1),
           "logprobs")
    raises("sampling.arg.logprobs-str", TypeError, lambda: m.generate(ids, 2, logprobs="3"),
           "logprobs")
    # bad arguments: TypeError for a type, ValueError for a value (docs/python.md)
    bad_cases = [
        ("temperature-str", TypeError, dict(temperature="0.8"), "temperature must be a number"),
        ("temperature-bool", TypeError, dict(temperature=True), "temperature must be a number"),
        ("temperature-negative", ValueError, dict(temperature=-0.5), "temperature"),
        ("temperature-nan", ValueError, dict(temperature=float("nan")), "temperature"),
        ("temperature-inf", ValueError, dict(temperature=float("inf")), "temperature"),
        ("temperature-huge", ValueError, dict(temperature=1e39), "temperature"),
        ("temperature-subnormal", ValueError, dict(temperature=1e-40), "temperature"),
        ("top-k-negative", ValueError, dict(temperature=1.0, top_k=-1), "top_k"),
        ("top-k-float", TypeError, dict(temperature=1.0, top_k=1.5), "top_k"),
        ("top-k-too-big", ValueError, dict(temperature=1.0, top_k=2 ** 31), "top_k"),
        ("top-p-above-1", ValueError, dict(temperature=1.0, top_p=1.5), "top_p"),
        ("top-p-str", TypeError, dict(temperature=1.0, top_p="0.9"), "top_p"),
        ("min-p-negative", ValueError, dict(temperature=1.0, min_p=-0.1), "min_p"),
        ("seed-negative", ValueError, dict(temperature=1.0, seed=-1), "seed"),
        ("seed-2-64", ValueError, dict(temperature=1.0, seed=2 ** 64), "seed"),
        ("seed-float", TypeError, dict(temperature=1.0, seed=4.0), "seed"),
        ("top-k-without-temperature", ValueError, dict(top_k=5), "top_k needs a temperature"),
        ("seed-without-temperature", ValueError, dict(seed=3), "seed needs a temperature"),
        ("top-p-without-temperature", ValueError, dict(top_p=0.5), "top_p needs a temperature"),
    ]
    for name, exc, kw, want in bad_cases:
        raises("sampling.arg.%s" % name, exc, lambda: m.generate(ids, 2, **kw), want)
    raises("sampling.arg.stream-bad", ValueError, lambda: m.stream(ids, 2, temperature=-1),
           "temperature")
    raises("sampling.arg.generate-many-bad", TypeError,
           lambda: m.generate_many([ids], 2, temperature=1.0, seed="1"), "seed")
    m.close()


def main():
    group, models = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(dir=os.environ.get("TESTTMP")) as tmp:
        if group == "api":
            group_api(models, tmp)
        elif group == "sampling":
            group_sampling(models, tmp)
        elif group == "layout":
            group_layout(models, tmp)
        elif group == "gil":
            group_gil(models, tmp)
        elif group == "threads":
            threads_case(models, "ref")
        elif group == "threads-fast":
            threads_case(models, "fast")
        elif group == "installed":
            group_installed(models, tmp, sys.argv[3], sys.argv[4])
        elif group == "dump":
            group_dump(models, tmp, sys.argv[3])
        elif group in ("nonumpy", "nonumpy-installed"):
            group_nonumpy(models, tmp, sys.argv[3], sys.argv[4], group == "nonumpy-installed")
        else:
            print("FAIL python.usage: unknown group %r" % group)
            return 2
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
