"""cis2: bit-exact CIS-2 LLM inference from Python, over libcis2 (ctypes).

    import cis2
    m = cis2.Model("models/SmolLM2-135M")
    r = m.generate("The capital of France is", max_tokens=8)
    print(r.text, r.digests["witness-digest"])
    for chunk in m.stream("Once upon a time", 32):  # the same run, as it is generated
        print(chunk, end="", flush=True)
    print(cis2.verify(r.receipt, m))

Every result is the library's: the same ids, digests and receipt bytes as
`cis2 run` (docs/python.md). Decoding releases the GIL; one Engine is used by
one thread at a time (Model.generate serializes on its own engine; make more
with Model.engine() to decode on several threads over one loaded model).
"""
import codecs
import collections.abc
import contextlib
import ctypes
import errno
import gc
import math
import numbers
import operator
import os
import signal
import stat
import struct
import threading
import weakref
from dataclasses import dataclass, replace
from typing import Any, Dict, Optional, Tuple

__version__ = "0.5.0"

from . import _lib  # noqa: E402  (loads libcis2; ImportError says where it looked)

_c = _lib.lib
library_path = _lib.path  # the libcis2 file in use, and how it was found
library_found_by = _lib.how
library_version = _lib.version
if library_version.split(".")[:2] != __version__.split(".")[:2]:
    raise ImportError("cis2: %s (%s) is libcis2 %s; this package is written for %s" %
                      (library_path, library_found_by, library_version, __version__))

__all__ = ["Model", "Engine", "Stream", "Tokenizer", "Result", "TokenLogprob", "Verdict", "Field",
           "Config", "Trace", "Error", "verify", "verify_many", "chat_prompt", "library_path",
           "library_found_by", "library_version"]


class Error(Exception):
    """A call into libcis2 failed; str(e) is the library's one-line message."""


def _check(rc, err):
    if rc:
        raise Error(_lib.err_text(err))


def _is_bool(x):
    """A Python bool or numpy's (numpy.bool_, which operator.index takes as 0
    or 1 although it is no int: an array of flags is not token ids)."""
    return isinstance(x, bool) or type(x).__name__ in ("bool_", "bool")


def _ids_in(ids, what):
    """Token ids (any iterable of integers, numpy arrays included) as a C array."""
    if isinstance(ids, (str, bytes, bytearray, memoryview)):
        raise TypeError("%s: expected token ids, got %s" % (what, type(ids).__name__))
    # a set or a mapping has no order of its own: its ids would be read in
    # whatever order it iterates, a sequence nobody wrote
    if isinstance(ids, (collections.abc.Set, collections.abc.Mapping)):
        raise TypeError("%s: expected token ids in order (a list, tuple, array or iterator), "
                        "got %s" % (what, type(ids).__name__))
    # None or a bare int is not a sequence: "token ids must be integers" would
    # blame the items of something that has none
    try:
        it = iter(ids)
    except TypeError:
        raise TypeError("%s: expected %stoken ids (an iterable of integers), got %s" %
                        (what, "a str, bytes or " if what == "prompt" else "",
                         type(ids).__name__)) from None
    vals = []
    try:
        for x in it:  # one pass: `ids` may be a generator
            v = operator.index(x)
            if _is_bool(x) or not -(2**31) <= v < 2**31:
                break
            vals.append(v)
        else:
            x = None
    except TypeError:
        raise TypeError("%s: token ids must be integers" % what) from None
    if _is_bool(x):
        raise TypeError("%s: token ids must be integers, not bool" % what)
    if x is not None:
        raise ValueError("%s: token id %d does not fit in int32" % (what, v))
    return (ctypes.c_int32 * max(len(vals), 1))(*vals), len(vals)


def _flag_in(v, what):
    """A True/False argument: bool, or the int 0 or 1 (numpy's ints and bool too). A
    str such as "no" would otherwise be read as True."""
    if _is_bool(v):
        return bool(v)
    try:  # an int, numpy's included (a float or a str is no flag)
        n = operator.index(v)
    except TypeError:
        n = None
    if n in (0, 1):
        return bool(n)
    if n is not None:
        raise ValueError("%s must be True or False (or 0 or 1), got %d" % (what, n))
    raise TypeError("%s must be True or False, got %s %r" % (what, type(v).__name__, v))


def _many_in(xs, fn, what, one):
    """A list of the items of `xs`, for fn's argument `what` (TypeError for a
    single str, bytes or path, which is one item, or for a non-iterable)."""
    if isinstance(xs, (str, bytes, bytearray, memoryview, os.PathLike)):
        raise TypeError("%s: %s must be a list of %s, got one %s (%s)" %
                        (fn, what, what, type(xs).__name__, one))
    # the results come back in input order: a set or a mapping has none of its own
    if isinstance(xs, (collections.abc.Set, collections.abc.Mapping)):
        raise TypeError("%s: %s must be in order (a list, tuple or iterator), got %s" %
                        (fn, what, type(xs).__name__))
    try:
        return list(xs)
    except TypeError:
        raise TypeError("%s: %s must be a list of %s, got %s" %
                        (fn, what, what, type(xs).__name__)) from None


def _int_in(v, what, lo, hi, hint=""):
    """A Python integer argument (numpy integers too, never bool) in [lo, hi]:
    TypeError for another type, ValueError out of range — never a C int that
    ctypes would silently wrap (2**32 + 2 must not decode 2 tokens)."""
    if _is_bool(v):
        raise TypeError("%s must be an integer, got %r" % (what, v))
    try:
        n = operator.index(v)
    except TypeError:
        raise TypeError("%s must be an integer, got %s %r" % (what, type(v).__name__, v)) from None
    if not lo <= n <= hi:
        raise ValueError("%s must be an integer in [%d, %d]%s, got %d" % (what, lo, hi, hint, n))
    return n


def _f32_in(v, what, lo, hi):
    """A real-number argument (int, float, numpy's; never bool or str) as the
    binary32 nearest to it (round to nearest even, as the library reads it):
    ValueError unless it is 0 or a normal binary32 number in [lo, hi]
    (docs/sampling.md §1: subnormals, infinities and NaN are refused)."""
    if _is_bool(v) or not isinstance(v, numbers.Real):
        raise TypeError("%s must be a number, got %s %r" % (what, type(v).__name__, v))
    x = float(v)
    try:
        f = struct.unpack("<f", struct.pack("<f", x))[0] if math.isfinite(x) else x
    except OverflowError:
        f = math.inf
    if not (lo <= f <= hi) or (f != 0.0 and abs(f) < 2.0 ** -126):
        raise ValueError("%s must be 0 or a normal binary32 number in [%g, %g], got %r" %
                         (what, lo, hi, v))
    return f


def _sampler_in(temperature, top_k, top_p, min_p, seed):
    """A cis2_sampler from generate's sampling arguments (docs/sampling.md
    §1), or None for greedy (temperature 0). top_k, top_p, min_p or a seed
    without a temperature above 0 are a ValueError, as the CLI refuses the
    flags rather than ignore them. seed None: one from os.urandom, as
    `cis2 run` chooses one from the system's randomness."""
    t = _f32_in(temperature, "temperature", 0.0, 3.4028234663852886e38)
    k = _int_in(top_k, "top_k", 0, INT_MAX)
    p = _f32_in(top_p, "top_p", 0.0, 1.0)
    mp = _f32_in(min_p, "min_p", 0.0, 1.0)
    if seed is not None:
        seed = _int_in(seed, "seed", 0, 2 ** 64 - 1)
    if t == 0.0:
        for name, given in (("top_k", k != 0), ("top_p", p != 1.0), ("min_p", mp != 0.0),
                            ("seed", seed is not None)):
            if given:
                raise ValueError("%s needs a temperature above 0 (temperature 0 is the greedy "
                                 "argmax, which has no %s)" % (name, name))
        return None
    if seed is None:
        seed = int.from_bytes(os.urandom(8), "little")
    s = _lib.Sampler(temperature=t, top_k=k, top_p=p, min_p=mp, seed=seed)
    err = _lib.err_buf()
    if _c.cis2_sampler_check(ctypes.byref(s), err):  # the library's own rule, last
        raise ValueError(_lib.err_text(err))
    return s


def _sampler_out(s):
    """(sampler dict, seed) of a Result: (None, None) for a greedy run."""
    if s is None:
        return None, None
    return ({"temperature": s.temperature, "top_k": s.top_k, "top_p": s.top_p,
             "min_p": s.min_p}, s.seed)


def _sref(s):
    return ctypes.byref(s) if s is not None else None


def _numpy(what):
    """numpy, which only trace() needs (its arrays are numpy's): imported at
    the call, so the package installs and runs without it; ImportError naming
    it where it is missing."""
    try:
        import numpy
    except ImportError:
        raise ImportError("%s: needs numpy (its tensors are numpy float32 arrays), which this "
                          "Python lacks: pip install numpy, or apt-get install python3-numpy; "
                          "everything else in cis2 works without it" % what) from None
    return numpy


INT_MAX = 2**31 - 1
THREADS_MAX = 1024  # cis2_engine_opts.threads, as the CLI's --threads
MAX_SEQS = 4096  # cis2_engine_opts.max_seqs


def _ids_out(p, n):
    return [p[i] for i in range(n)]


def _rope_scaling(c):
    """cis2_config's rope_scaling fields as config.json names them (None when unscaled)."""
    if c.rope_scaling == 0:
        return None
    return {"rope_type": "llama3", "factor": c.rope_factor,
            "low_freq_factor": c.rope_low_freq_factor,
            "high_freq_factor": c.rope_high_freq_factor,
            "original_max_position_embeddings": c.rope_original_max_pos}


def _hex(d):
    return bytes(d).hex()


def _text_in(text, what):
    if isinstance(text, str):
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError("%s: the str holds a lone surrogate U+%04X at index %d, which is "
                             "not UTF-8 (pass bytes, or a str without surrogates)" %
                             (what, ord(text[e.start]), e.start)) from None
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text)
    raise TypeError("%s: expected str or bytes, got %s" % (what, type(text).__name__))


RECEIPT_MAX = 64 << 20  # CIS2_RECEIPT_MAX: the most a receipt file may hold


def _path_in(path, what):
    """A file system path (str, bytes or os.PathLike) as the bytes the library gets."""
    try:
        b = os.fsencode(path)
    except TypeError:
        raise TypeError("%s: expected a path (str, bytes or os.PathLike), got %s" %
                        (what, type(path).__name__)) from None
    # The C string would end at a NUL: "dir\0junk" must not open "dir".
    if b"\0" in b:
        raise ValueError("%s: the path %r holds a NUL byte" % (what, path))
    if not b:
        raise ValueError("%s: the path is empty" % what)
    return b


def _input_error(path, why):
    return Error(_lib.sanitize(path + b": " + why.encode("utf-8", "replace")))


def _read_input(path, limit=RECEIPT_MAX):
    """A file's bytes as the library reads its inputs (src/core/io.c
    cis2_read_file_max): opened without blocking, refused unless a regular
    file (a FIFO would hang a plain open), at most `limit` bytes; Error with
    the CLI's line."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ENOENT and path == b"-":  # as cis2_open_input
            raise Error("-: this input is not read from standard input; give a file name (./- "
                        "for a file named -)") from None
        raise _input_error(path, "cannot open: " + os.strerror(e.errno)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if
                    stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else
                    "a character device" if stat.S_ISCHR(st.st_mode) else "a block device" if
                    stat.S_ISBLK(st.st_mode) else "not a regular file")
            raise _input_error(path, "not a regular file (%s)" % kind)
        if st.st_size > limit:
            raise _input_error(path, "%d bytes is more than the %d this input may have" %
                               (st.st_size, limit))
        os.set_blocking(fd, True)
        chunks, got = [], 0
        while got < st.st_size:
            try:
                b = os.read(fd, st.st_size - got)
            except OSError as e:
                raise _input_error(path, "read failed: " + os.strerror(e.errno)) from None
            if not b:
                raise _input_error(path, "read failed: the file shrank while it was read")
            chunks.append(b)
            got += len(b)
        if os.read(fd, 1):
            raise _input_error(path, "holds more than the %d bytes its size says (still being "
                               "written?)" % st.st_size)
        return b"".join(chunks)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _sigint_between_steps():
    """While a run lasts, SIGINT on the main thread is only recorded; the
    step loop calls the poll() yielded between two steps, and poll() runs the
    handler that was in place there: Python's default raises
    KeyboardInterrupt, a program's own handler does what it does (raise to
    stop the run, or return to let it go on). Inside a callback from C, where
    Ctrl-C would otherwise land, Python prints "Exception ignored" and drops
    whatever the handler raised. A signal after the last step is handled as
    the run ends."""
    pending = []
    old = signal.getsignal(signal.SIGINT)
    own = threading.current_thread() is threading.main_thread() and callable(old)
    if own:
        signal.signal(signal.SIGINT, lambda signum, frame: pending.append((signum, frame)))

    def poll():
        while pending:
            signum, frame = pending.pop(0)
            old(signum, frame)
        return False

    try:
        yield poll
    finally:
        if own:
            signal.signal(signal.SIGINT, old)
    poll()


class _Closing:
    """A library handle `_h`: close() on leaving a `with` block and when
    garbage-collected (quietly at interpreter shutdown). Calls that use the
    handle without a lock of their own (tokenizer calls, making an engine) do
    so inside _use(); close() refuses new uses and waits for those in flight
    before the handle is freed, so closing on one thread while another uses
    the object raises "closed" there and never frees memory under a call."""
    _h = None
    _cv = None  # a threading.Condition, made by __init__
    _closing = False
    _busy = 0

    @contextlib.contextmanager
    def _use(self):
        with self._cv:
            h = self._handle()
            self._busy += 1
        try:
            yield h
        finally:
            with self._cv:
                self._busy -= 1
                if not self._busy:
                    self._cv.notify_all()

    def _retire(self):
        """Marks the object closed and waits until no call uses its handle;
        returns the handle to free (None when closed already)."""
        if self._cv is None:
            return None
        with self._cv:
            if self._closing or not self._h:
                return None
            self._closing = True
            try:
                self._cv.wait_for(lambda: not self._busy)
            except BaseException:  # Ctrl-C while waiting: not closed, so close() can run again
                self._closing = False
                raise
            return self._h

    def __enter__(self):
        return self

    def _no_copy(self, *args):
        # A copy would share the handle, and both would free it (a double free).
        raise TypeError("a cis2.%s cannot be copied or pickled: it owns a library handle (share "
                        "the object, or load again)" % type(self).__name__)

    __copy__ = __deepcopy__ = __reduce__ = __reduce_ex__ = _no_copy

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if self._h:
            try:
                self.close()
            except Exception:
                pass


# ---------------------------------------------------------------- tokenizer
class Tokenizer(_Closing):
    """Byte-level BPE (§3.3): encode (add_special_tokens=false) and decode.
    Model.tokenizer is the one parsed from the model's hashed tokenizer.json;
    Tokenizer.load(path) reads a tokenizer.json by itself."""

    def __init__(self, path=None, *, _handle=None, _owner=None):
        """Tokenizer(path) reads a tokenizer.json, as Tokenizer.load(path)."""
        self._owner, self._cv = _owner, threading.Condition()  # owner: the Model it belongs to
        if _handle is None:
            if path is None:
                raise TypeError("Tokenizer: expected the path of a tokenizer.json")
            h, err = ctypes.c_void_p(), _lib.err_buf()
            _check(_c.cis2_tokenizer_load(ctypes.byref(h), _path_in(path, "Tokenizer"), err), err)
            _handle = h.value
        self._h = _handle

    @classmethod
    def load(cls, path):
        """Read the tokenizer.json at `path` (str, bytes or os.PathLike) by
        itself; cis2.Error when it cannot be read or reproduced exactly."""
        return cls(path)

    def _handle(self):
        if self._owner is not None:
            self._owner._handle()  # raises once the model is closed
        if not self._h or self._closing:
            raise Error("the tokenizer is closed")
        return self._h

    @contextlib.contextmanager
    def _use(self):
        if self._owner is None:
            with _Closing._use(self) as h:
                yield h
        else:  # the model's tokenizer lives as long as the model
            with self._owner._use():
                yield self._handle()

    @property
    def vocab_size(self):
        """The number of ids decode accepts (0 .. vocab_size - 1)."""
        with self._use() as h:
            return _c.cis2_tokenizer_vocab_size(h)

    def encode(self, text):
        """str (or UTF-8 bytes) → list of token ids."""
        b = _text_in(text, "encode: text")
        ids, n, err = _lib.c_int32_p(), ctypes.c_int(), _lib.err_buf()
        with self._use() as h:
            rc = _c.cis2_tokenizer_encode(h, b, len(b), ctypes.byref(ids), ctypes.byref(n), err)
        _check(rc, err)
        try:
            return _ids_out(ids, n.value)
        finally:
            _c.cis2_free(ids)

    def decode_bytes(self, ids):
        """Token ids → the bytes they stand for, as `cis2 detokenize` writes
        them (not necessarily UTF-8: a token may hold part of a character);
        ValueError (the library's line) for an id outside the vocabulary."""
        arr, n = _ids_in(ids, "decode")
        with self._use() as h:
            vocab = _c.cis2_tokenizer_vocab_size(h)
            try:
                return self._decode_c(h, arr, n)
            except Error as e:  # the library's line, as the bad argument it is
                if any(not 0 <= arr[i] < vocab for i in range(n)):
                    raise ValueError(str(e)) from None
                raise

    @staticmethod
    def _decode(h, ids):
        """decode_bytes on the raw handle `h`: cis2.Error for any refusal."""
        return Tokenizer._decode_c(h, *_ids_in(ids, "decode"))

    @staticmethod
    def _decode_c(h, arr, n):
        out, ln, err = ctypes.c_void_p(), ctypes.c_size_t(), _lib.err_buf()
        _check(_c.cis2_tokenizer_decode(h, arr, n, ctypes.byref(out), ctypes.byref(ln), err), err)
        try:
            return ctypes.string_at(out, ln.value)
        finally:
            _c.cis2_free(out)

    def __repr__(self):
        if not self._h or self._closing or (self._owner is not None and not self._owner._open()):
            return "Tokenizer(closed)"
        return "Tokenizer(vocab_size=%d)" % _c.cis2_tokenizer_vocab_size(self._h)

    def decode(self, ids):
        """Token ids → str (bytes that are not UTF-8 become U+FFFD)."""
        return self.decode_bytes(ids).decode("utf-8", "replace")

    def close(self):
        """Free a Tokenizer.load one; a model's tokenizer lives (and is freed)
        with its model, so its close() does nothing."""
        if self._owner is not None:
            return
        h = self._retire()
        if h:
            _c.cis2_tokenizer_free(h)
        self._h = None


# ------------------------------------------------------------------- values
@dataclass(frozen=True)
class Config:
    """The shape and options read from config.json (§2.2)."""
    arch: str
    hidden: int
    inter: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab: int
    max_pos: int
    eps: float
    rope_theta: float
    tied: bool
    qkv_bias: bool
    qk_norm: bool
    bos_id: Optional[int]
    eos_ids: Tuple[int, ...]
    # None without scaling; else config.json's rope_scaling as the engine reads it
    # (docs/rope_scaling.md): {"rope_type": "llama3", "factor", "low_freq_factor",
    # "high_freq_factor", "original_max_position_embeddings"}.
    rope_scaling: Optional[Dict[str, Any]] = None


@dataclass(frozen=True)
class TokenLogprob:
    """A generated id's log-probability under docs/sampling.md §9 (the pinned
    log-softmax of its step's raw logits, a binary32 value; -inf for a NaN
    logit) and `top`: (id, logprob) of the step's k most likely ids, largest
    first, the lower id first among equal logits."""
    id: int
    logprob: float
    top: tuple


@dataclass(frozen=True)
class Result:
    """One greedy decode (§3.4/§12). `digests` is keyed like the receipt;
    `receipt` is the receipt text, or None where `cis2 run --receipt` writes
    none — a teacher-forced run (not a greedy decode, and must not look like
    one), a tokenizer that cannot decode the prompt ids, ids that decode to no
    bytes — with the reason in `receipt_error`; `cis2_ref` is the CLI's
    CIS2_REF line; `nan` is (step, index) of the first NaN logit, or None."""
    prompt_ids: list
    ids: list
    text: Optional[str]
    digests: dict
    receipt: Optional[str]
    cis2_ref: str
    stopped_at_eos: bool
    nan: Optional[Tuple[int, int]]
    prefill_ms: float
    decode_ms: float
    receipt_error: Optional[str] = None
    sampler: Optional[dict] = None  # temperature, top_k, top_p, min_p (binary32 values)
    seed: Optional[int] = None  # the seed a sampled run used (None: greedy)
    # generate(logprobs=k): one TokenLogprob per generated id (docs/sampling.md §9)
    logprobs: Optional[list] = None

    def __repr__(self):
        return "Result(ids=%r, text=%r, witness=%s)" % (self.ids, self.text,
                                                        self.digests["witness-digest"][:16])


@dataclass(frozen=True)
class Field:
    """One receipt field's verdict: status is MATCH, MISMATCH or SKIPPED."""
    name: str
    status: str
    receipt: str
    recomputed: str


class Verdict:
    """cis2_receipt_verify's field-by-field verdict (§14.3): artifact hashes
    first, then the recomputed run. str(v) prints what `cis2 verify` prints."""

    def __init__(self, fields, mismatches, ids, witness):
        """Made by cis2.verify (and Model.verify, Engine.verify)."""
        self.fields, self.mismatches = tuple(fields), mismatches
        self.ok = mismatches == 0
        self.ids, self.witness = ids, witness  # the recomputed run (ids empty if it did not run)

    def __getitem__(self, name):
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    def __iter__(self):
        return iter(self.fields)

    def __len__(self):
        return len(self.fields)

    def __str__(self):
        lines = []
        for f in self.fields:
            if f.status == "MATCH":
                lines.append("MATCH %s" % f.name)
            elif f.status == "SKIPPED":
                lines.append("SKIP %s: %s" % (f.name, f.recomputed))
            else:
                lines.append("MISMATCH %s: receipt %s, recomputed %s" %
                             (f.name, f.receipt, f.recomputed))
        skipped = [f.name for f in self.fields if f.status == "SKIPPED"]
        lines.append("receipt does NOT match: %d field(s) differ" % self.mismatches
                     if self.mismatches else
                     "receipt verified: every field checked matches; not checked here: %s" %
                     ", ".join(skipped) if skipped else "receipt verified: all fields match")
        return "\n".join(lines)

    def __repr__(self):
        return "Verdict(ok=%r, mismatches=%d, fields=%d)" % (self.ok, self.mismatches,
                                                             len(self.fields))


class Trace(dict):
    """Trace nodes of one run: name → float32 numpy array, named as `cis2 trace`
    names them (p{pos}.embed, p{pos}.L{l}.{node}, p{pos}.final_norm,
    p{pos}.logits; attn_scores/attn_probs as [n_heads, n_ctx]), in execution
    order. `result` is the run's Result."""
    result = None


def _trace_rank(key, i):
    """(position, embed < layer 0..n < final_norm < logits, arrival) of a trace name."""
    pos, rest = key[1:].split(".", 1)
    if rest.startswith("L"):
        stage = 1 + int(rest[1:].split(".", 1)[0])
    else:
        stage = {"embed": 0, "final_norm": 1 << 30, "logits": (1 << 30) + 1}.get(rest, 1 << 31)
    return int(pos), stage, i


# ------------------------------------------------------------------- engine
class Engine(_Closing):
    """An engine over a loaded Model: its KV caches and scratch memory. One
    thread at a time uses an engine (calls on it serialize on a lock); engines
    on different threads decode concurrently, the GIL released."""
    _held = None  # the _Hold of a stream that holds self._lock, while one does

    @staticmethod
    def _opts(backend, isa, threads, max_seqs=1):
        """cis2_engine_opts from the Python arguments (TypeError/ValueError when bad)."""
        if not isinstance(backend, str):
            raise TypeError("backend must be a str ('ref' or 'fast'), got %s %r" %
                            (type(backend).__name__, backend))
        if backend not in _lib.BACKEND:
            raise ValueError("backend must be 'ref' or 'fast', got %r" % (backend,))
        o = _lib.EngineOpts()
        o.backend = _lib.BACKEND[backend]
        isa_id = ctypes.c_int()
        if not isinstance(isa, str):
            raise TypeError("isa must be a str (auto, scalar, sse2, avx2, avx512, neon), got %s %r"
                            % (type(isa).__name__, isa))
        if ("\0" in isa or
                _c.cis2_isa_from_name(isa.encode("utf-8", "replace"), ctypes.byref(isa_id))):
            raise ValueError("unknown isa %r (expected auto, scalar, sse2, avx2, avx512, neon)" %
                             (isa,))
        o.isa = isa_id.value
        # as cis2_cli_engine_opts: the ref backend has no SIMD paths, so an isa
        # would be ignored while the engine claimed it
        if isa_id.value != 0 and backend != "fast":  # 0: CIS2_ISA_AUTO
            raise ValueError("isa %r applies to backend='fast' only (the %s backend has no SIMD "
                             "paths)" % (isa, backend))
        # cis2_engine_opts.threads: at most 1024 (include/cis2.h); beyond, the
        # library's cis2.Error, not the ValueError of every other bad argument
        o.threads = _int_in(threads, "threads", 0, THREADS_MAX, " (0 = every CPU it may run on)")
        o.max_seqs = _int_in(max_seqs, "max_seqs", 1, MAX_SEQS)
        return o

    def __init__(self, model, backend="ref", isa="auto", threads=0, max_seqs=1, _trace=None):
        """Engine(model, backend="ref", isa="auto", threads=0, max_seqs=1), as
        model.engine(...): backend "ref" or "fast"; isa (fast only) auto,
        scalar, sse2, avx2, avx512 or neon; threads (fast only) 0..1024,
        0 = every CPU it may run on; max_seqs 1..4096, the sequences generate_many decodes
        at once. ValueError/TypeError for a bad argument."""
        if not isinstance(model, Model):
            raise TypeError("Engine: expected a cis2.Model, got %s" % type(model).__name__)
        o = self._opts(backend, isa, threads, max_seqs)
        self._max_seqs = o.max_seqs
        self._trace_fn = _trace  # keep the callback alive as long as the engine
        if _trace is not None:
            o.trace = _trace
        self._model, self._lock, self._h = model, threading.Lock(), None
        h, err = ctypes.c_void_p(), _lib.err_buf()
        with model._use() as mh:  # Model.close waits for this, then frees this engine
            _check(_c.cis2_engine_new(ctypes.byref(h), mh, ctypes.byref(o), err), err)
            self._h = h.value
            self._backend = _c.cis2_engine_backend(self._h).decode()
            model._engines.add(self)

    @property
    def model(self):
        """The Model this engine decodes with."""
        return self._model

    @property
    def backend(self):
        """"ref", or "fast/<isa>" as the library names its path."""
        self._handle()
        return self._backend

    @property
    def max_seqs(self):
        """How many sequences generate_many decodes at once."""
        return self._max_seqs

    def __repr__(self):
        return "Engine(%r, backend=%s%s)" % (self._model.path, getattr(self, "_backend", "?"),
                                              "" if self._h else ", closed")

    def _handle(self):
        if not self._h:
            raise Error("the engine is closed")
        return self._h

    def generate(self, prompt, max_tokens=None, *, stop_at_eos=False, force=None,
                 temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, seed=None, logprobs=None,
                 _stop=None):
        """Prefill `prompt` (str, UTF-8 bytes or token ids) and decode
        `max_tokens` tokens (default 16; exactly that many, §3.4, unless
        stop_at_eos): greedily, or with temperature > 0 sampled as
        docs/sampling.md defines (top_k, top_p, min_p, seed; seed None picks
        one, returned as Result.seed). `force`: teacher forcing, step i feeds
        force[i] instead of its pick (max_tokens defaults to len(force)).
        `logprobs=k` (0 .. vocab size): Result.logprobs holds each generated
        id's log-probability and the k most likely ids of its step
        (TokenLogprob, docs/sampling.md §9), as cis2 serve returns them."""
        k = None
        if logprobs is not None:
            k = _int_in(logprobs, "logprobs", 0, self._model.config.vocab)
        lps = []
        fn = None
        if k is not None:
            top = (_lib.LogProb * max(k, 1))()
            lp = ctypes.c_float()

            def on_step(ctx, step, logits, vocab, chosen):  # on this thread, inside a step
                got = _c.cis2_logprobs(logits, vocab, chosen, ctypes.byref(lp), k, top)
                lps.append(TokenLogprob(id=chosen, logprob=lp.value, top=tuple(
                    (top[i].id, top[i].logprob) for i in range(max(got, 0)))))
            fn = _lib.STEP_FN(on_step)
        ids, n, pbytes, no_receipt, g, _farr, smp = self._run_in(
            prompt, max_tokens, stop_at_eos, force, fn,
            (temperature, top_k, top_p, min_p, seed))
        r = _lib.Result()
        with self._locked():
            self._decode(ids, n, g, r, _stop, smp)
            try:  # under the engine's lock: Model.close frees the model after this engine
                res = self._model._result(r, pbytes, no_receipt, smp)
            finally:
                _c.cis2_result_free(ctypes.byref(r))
        return res if k is None else replace(res, logprobs=lps)

    def _run_in(self, prompt, max_tokens, stop_at_eos, force, on_step=None, sampling=None):
        """generate's arguments checked, in its order: (ids, n, prompt bytes,
        why there is no receipt or None, the gen options, the force array
        they point into, the sampler or None). `sampling`: (temperature,
        top_k, top_p, min_p, seed), or None for greedy."""
        ids, n, pbytes, no_receipt = self._model._prompt(prompt)
        farr, nf = _ids_in(force, "force") if force is not None else (None, 0)
        if max_tokens is None:
            max_tokens = nf if nf else 16
        max_tokens = _int_in(max_tokens, "max_tokens", 1, INT_MAX)
        if nf > max_tokens:  # the library would feed the first max_tokens and drop the rest
            raise ValueError("force has %d ids but max_tokens is %d: the last %d would never be "
                             "fed" % (nf, max_tokens, nf - max_tokens))
        stop = _flag_in(stop_at_eos, "stop_at_eos")
        self._fits(n, max_tokens)
        self._in_vocab(ids, n, "prompt")
        if nf:
            self._in_vocab(farr, nf, "forced")
        g = _lib.GenOpts(n_gen=max_tokens, stop_at_eos=1 if stop else 0)
        if on_step is not None:
            g.on_step = on_step
        if nf:
            g.force, g.n_force = ctypes.cast(farr, _lib.c_int32_p), nf
            no_receipt = "a teacher-forced run is not a greedy decode"
        smp = _sampler_in(*sampling) if sampling is not None else None
        return ids, n, pbytes, no_receipt, g, farr, smp

    def stream(self, prompt, max_tokens=None, *, stop_at_eos=False, temperature=0.0, top_k=0,
               top_p=1.0, min_p=0.0, seed=None, _force=None):
        """generate(prompt, max_tokens, stop_at_eos=...) a token at a time: a
        Stream, whose iteration yields one str per generated token (the text
        it completes) and whose .result, once exhausted, is the Result that
        generate returns. A bad argument raises here, as generate's. The
        stream holds the engine until it is exhausted or closed: another
        call on this engine from the thread that made or last iterated the
        stream raises Error, one from another thread waits. (_force:
        teacher forcing, for the tests.) The sampling arguments are
        generate's."""
        return Stream(self, prompt, max_tokens, stop_at_eos, _force,
                      (temperature, top_k, top_p, min_p, seed))

    def _acquire(self):
        """Takes self._lock, or raises Error where waiting would never end:
        the lock is held by an unfinished stream that only this thread drives.
        A stream that is garbage but not yet finalized (a reference cycle) is
        ended here."""
        hd = self._held
        if hd is not None and hd.thread == threading.get_ident() and hd.owner() is not None:
            gc.collect()  # a stream dropped in a reference cycle: its __del__ ends it
            hd = self._held
        if hd is not None:
            if hd.owner() is None:
                hd.end(self)
            elif hd.thread == threading.get_ident():
                raise Error("this engine is held by an unfinished stream on this thread: iterate "
                            "it to its end or close() it first (or use another engine, "
                            "Model.engine())")
        self._lock.acquire()

    @contextlib.contextmanager
    def _locked(self):
        self._acquire()
        try:
            yield
        finally:
            self._lock.release()

    def _in_vocab(self, arr, n, what):
        """ValueError, in cis2_seq_submit's words, for an id of the C array
        `arr` outside the model's vocabulary (`what`: "prompt" or "forced"):
        a bad argument, refused before the library is called."""
        vocab, ids = self._model.config.vocab, arr[:n]
        if ids and (min(ids) < 0 or max(ids) >= vocab):
            bad = next(x for x in ids if not 0 <= x < vocab)  # the first, as the library names
            raise ValueError("%s token id %d is outside the vocabulary (vocab_size = %d)" %
                             (what, bad, vocab))

    def _fits(self, n, max_tokens):
        """ValueError unless n prompt tokens and max_tokens more fit the
        model's positions, as the library counts them: positions 0 .. n +
        max_tokens - 2 are computed (the last pick is never fed). Its own
        message names the CLI's -n."""
        cap = self._model.config.max_pos
        if n + max_tokens - 1 > cap:
            raise ValueError("prompt (%d tokens) + max_tokens %d exceeds max_position_embeddings "
                             "= %d" % (n, max_tokens, cap))

    def generate_many(self, prompts, max_tokens=None, *, stop_at_eos=False, temperature=0.0,
                      top_k=0, top_p=1.0, min_p=0.0, seed=None):
        """generate() for every prompt of `prompts` (a list, or any iterable,
        of what generate takes), up to max_seqs of them decoding at once: each
        step reads every weight once for all of them, and a prompt joins as
        soon as another finishes. Returns their Results in input order, each
        bit-identical to generate(prompt, max_tokens, stop_at_eos=...) alone,
        receipt included. Every prompt is checked before anything is
        decoded; an error names it as prompts[i]. Sampling as generate's: a
        seed given is every prompt's; seed None picks one per prompt."""
        prompts = _many_in(prompts, "generate_many", "prompts", "generate takes a single prompt")
        max_tokens = _int_in(16 if max_tokens is None else max_tokens, "max_tokens", 1, INT_MAX)
        g = _lib.GenOpts(n_gen=max_tokens,
                         stop_at_eos=1 if _flag_in(stop_at_eos, "stop_at_eos") else 0)
        m, items, smps = self._model, [], []
        sampling = (temperature, top_k, top_p, min_p, seed)
        _sampler_in(*sampling)  # bad sampling arguments raise before any prompt is read
        for i, p in enumerate(prompts):
            smps.append(_sampler_in(*sampling))  # seed None: each prompt its own
            try:
                items.append(m._prompt(p))
                self._fits(items[-1][1], max_tokens)
                self._in_vocab(items[-1][0], items[-1][1], "prompt")
            except (ValueError, TypeError, Error) as e:
                raise type(e)("prompts[%d]: %s" % (i, e)) from None
        out = [None] * len(items)

        def done(i, r):
            try:  # under the lock, as generate: Model.close waits for it
                out[i] = m._result(r, items[i][2], items[i][3], smps[i])
            finally:
                _c.cis2_result_free(ctypes.byref(r))
        with self._locked():
            self._decode_many([(i, it[0], it[1], g, smps[i]) for i, it in enumerate(items)],
                              "prompts", done)
        return out

    def _decode_many(self, runs, what, done):
        """Decodes every (i, ids, n, gen opts, sampler or None) of `runs`, max_seqs at a time,
        a run joining as soon as another finishes; done(i, r) takes each
        finished cis2_result (it owns r). The caller holds self._lock. Ctrl-C
        lands between two steps; an error or an interrupt cancels every
        sequence in flight, so the engine's slots are free again. A refused
        submission is named as what[i]."""
        h, err, live, nxt = self._handle(), _lib.err_buf(), {}, 0
        try:
            while nxt < len(runs) or live:
                while nxt < len(runs) and len(live) < self._max_seqs:
                    i, ids, n, g, smp = runs[nxt]
                    seq = ctypes.c_int(-1)
                    if _c.cis2_seq_submit_sampled(h, ids, n, ctypes.byref(g), _sref(smp),
                                                  ctypes.byref(seq), err):
                        raise Error("%s[%d]: %s" % (what, i, _lib.err_text(err)))
                    live[seq.value], nxt = i, nxt + 1
                _check(_c.cis2_engine_step(h, err), err)
                for seq in [q for q in live if _c.cis2_seq_done(h, q)]:
                    r = _lib.Result()
                    _check(_c.cis2_seq_take(h, seq, ctypes.byref(r), err), err)
                    done(live.pop(seq), r)
        except BaseException:  # Ctrl-C between two steps, or an error: free the slots
            for seq in live:
                _c.cis2_seq_cancel(h, seq)
            raise

    def _decode(self, ids, n, g, r, stop=None, smp=None):
        """cis2_generate's own path into `r`, one call per token (the caller
        holds self._lock): the GIL is released inside each step, and Ctrl-C
        (KeyboardInterrupt, what `stop()` raises, or `stop()` true) lands
        between two; the sequence is cancelled then, so the engine's slot is
        free again."""
        h, err, seq = self._handle(), _lib.err_buf(), ctypes.c_int(-1)
        _check(_c.cis2_seq_submit_sampled(h, ids, n, ctypes.byref(g), _sref(smp),
                                          ctypes.byref(seq), err), err)
        try:
            while not _c.cis2_seq_done(h, seq):
                if stop is not None and stop():
                    raise KeyboardInterrupt
                _check(_c.cis2_engine_step(h, err), err)
            _check(_c.cis2_seq_take(h, seq, ctypes.byref(r), err), err)
        except BaseException:
            _c.cis2_seq_cancel(h, seq)
            raise

    def verify(self, receipt):
        """cis2.verify(receipt, self)."""
        return verify(receipt, self)

    def verify_many(self, receipts):
        """cis2.verify_many(receipts, self): max_seqs re-runs at a time."""
        return verify_many(receipts, self)

    def close(self):
        """Free the engine (waits for a call in progress on another thread,
        a stream iterated there included; a stream of this thread is closed)."""
        hd = self._held
        if hd is not None and (hd.thread == threading.get_ident() or hd.owner() is None):
            hd.end(self)
        with self._lock:
            if self._h:
                _c.cis2_engine_free(self._h)
                self._h = None


# ------------------------------------------------------------------- stream
class _Hold:
    """A stream's hold on its engine's lock: its sequence, and the one way to
    end it (once; from the stream, or from the engine when the stream's thread
    closes the engine or the stream is garbage). No reference to the engine or
    the stream, so no cycle keeps either alive."""

    def __init__(self, seq, owner):
        self.seq, self.owner, self.open = seq, owner, True
        self.mu = threading.RLock()  # one step or end at a time
        self.thread = threading.get_ident()  # the thread that last drove the stream

    def end(self, engine):
        """Cancel the sequence (unless taken) and release the engine."""
        with self.mu:
            if not self.open:
                return
            self.open = False
            try:
                if self.seq >= 0:
                    _c.cis2_seq_cancel(engine._h, self.seq)
                    self.seq = -1
            finally:
                engine._held = None
                engine._lock.release()


class Stream:
    """generate() a token at a time (Model.stream, Engine.stream). Iterating
    yields one str per generated token: the text that token completes —
    UTF-8 bytes of a character still cut at the token's end wait for the next
    token (so a chunk may be ""), and the bytes of a sequence that is not
    UTF-8 become U+FFFD, as `cis2 serve` streams them. The chunks join to
    Result.text whenever that is not None; when the generated bytes are not
    UTF-8 (Result.text None) they join to Model.detokenize(result.ids).
    `ids` is the ids generated so far (ids[-1] the one behind the chunk just
    yielded), `text` the chunks so far, `result` the Result once the last
    token is out — bit-identical to generate's, receipt included — and None
    before, or for a stream closed early. close() (also leaving a `with`
    block, Ctrl-C inside a step, or dropping the stream) cancels the sequence
    and frees the engine; iterating it then stops."""

    def __init__(self, engine, prompt, max_tokens=None, stop_at_eos=False, _force=None,
                 _sampling=None):
        """Made by Engine.stream / Model.stream, which document the arguments."""
        self._hold, self.result = None, None
        if not isinstance(engine, Engine):
            raise TypeError("Stream: expected a cis2.Engine, got %s" % type(engine).__name__)
        got = []  # appended by the library's on_step, on this thread, inside a step

        def on_step(ctx, step, logits, vocab, chosen):
            got.append(chosen)
        self._fn = _lib.STEP_FN(on_step)  # alive as long as the sequence
        ids, n, self._pbytes, self._no_receipt, g, self._farr, self._smp = engine._run_in(
            prompt, max_tokens, stop_at_eos, _force, self._fn, _sampling)
        self._engine, self._ids, self._chunks = engine, got, []
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        seq, err = ctypes.c_int(-1), _lib.err_buf()
        engine._acquire()  # held until the end or close(); released by _Hold.end
        try:
            _check(_c.cis2_seq_submit_sampled(engine._handle(), ids, n, ctypes.byref(g),
                                              _sref(self._smp), ctypes.byref(seq), err), err)
            hold = _Hold(seq.value, weakref.ref(self))
            engine._held = hold
            self._hold = hold
        except BaseException:  # Ctrl-C included: neither the slot nor the lock is kept
            if seq.value >= 0:
                _c.cis2_seq_cancel(engine._h, seq.value)
            engine._held = None
            engine._lock.release()
            raise

    @property
    def ids(self):
        """The token ids generated so far (a new list)."""
        return list(self._ids)

    @property
    def text(self):
        """The chunks yielded so far, joined."""
        return "".join(self._chunks)

    def __iter__(self):
        return self

    def __next__(self):
        hd = self._hold
        if hd is None:
            raise StopIteration
        with hd.mu:
            if not hd.open:
                raise StopIteration
            hd.thread = threading.get_ident()
            e, err, before = self._engine, _lib.err_buf(), len(self._ids)
            try:
                # SIGINT inside the step would land in on_step, where ctypes
                # drops it: recorded there, handled after the step
                with _sigint_between_steps():
                    rc = _c.cis2_engine_step(e._h, err)
                if not hd.open:  # the program's SIGINT handler closed the stream
                    raise StopIteration
                _check(rc, err)
                if len(self._ids) != before + 1:
                    raise Error("stream: step %d reported %d ids, not one (its on_step "
                                "callback failed)" % (before, len(self._ids) - before))
                done = _c.cis2_seq_done(e._h, hd.seq)
                chunk = self._utf8.decode(self._token_bytes(self._ids[-1]), bool(done))
                if done:
                    r = _lib.Result()
                    _check(_c.cis2_seq_take(e._h, hd.seq, ctypes.byref(r), err), err)
                    hd.seq = -1
                    try:  # before the engine is released: Model.close waits for it
                        self.result = e._model._result(r, self._pbytes, self._no_receipt,
                                                       self._smp)
                    finally:
                        _c.cis2_result_free(ctypes.byref(r))
                    hd.end(e)
            except BaseException:
                hd.end(e)
                raise
            self._chunks.append(chunk)
            return chunk

    def _token_bytes(self, tid):
        """One id's bytes (none for an id the tokenizer names no token for,
        as cis2_receipt_prompt_bytes and `cis2 serve`; none at all without a
        usable tokenizer, where Result.text is None too)."""
        m = self._engine._model
        if m._tok is None:
            return b""
        try:  # the raw handle: this stream holds the engine, Model.close waits for it
            return Tokenizer._decode(m._tok_h, [tid])
        except Error:
            return b""

    def close(self):
        """Cancel the sequence, unless finished, and free the engine; the
        stream yields nothing more (result stays None if it was not done)."""
        if self._hold is not None:
            self._hold.end(self._engine)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if self._hold is not None and self._hold.open:
            try:
                self.close()
            except Exception:
                pass

    def _no_copy(self, *args):
        # a copy would share the sequence and its place in the text
        raise TypeError("a cis2.Stream cannot be copied or pickled")

    __copy__ = __deepcopy__ = __reduce__ = __reduce_ex__ = _no_copy

    def __repr__(self):
        hd = self._hold
        state = ("done" if self.result is not None else
                 "open" if hd is not None and hd.open else "closed")
        return "Stream(ids=%r, %s)" % (self._ids, state)


# -------------------------------------------------------------------- model
class Model(_Closing):
    """A model directory (config.json, model.safetensors, tokenizer.json),
    loaded once, hashed (§12.1) and read-only, with a default engine of the
    given backend. Engines made by engine() share the loaded weights."""

    def __init__(self, path, *, backend="ref", isa="auto", threads=0):
        """Model(path, *, backend="ref", isa="auto", threads=0): load the
        directory `path` (str, bytes or os.PathLike). backend "fast" is the
        exact SIMD backend (isa: auto, scalar, sse2, avx2, avx512, neon;
        threads 0..1024, 0 = every CPU it may run on), bit-identical to "ref". Bad
        arguments raise ValueError/TypeError before anything is read; a
        directory the library refuses raises cis2.Error with its line."""
        self._h, self._engines, self._cv = None, weakref.WeakSet(), threading.Condition()
        cpath = _path_in(path, "Model")
        self.path = os.fspath(path)
        Engine._opts(backend, isa, threads)  # bad options fail before the load
        h, err = ctypes.c_void_p(), _lib.err_buf()
        _check(_c.cis2_model_open(ctypes.byref(h), cpath, None, err), err)
        self._h = h.value
        self._opts = dict(backend=backend, isa=isa, threads=threads)
        try:
            self._engine = Engine(self, **self._opts)
        except Exception:
            self.close()
            raise
        c = _c.cis2_model_config(self._h).contents
        self.config = Config(
            arch=_lib.ARCH.get(c.arch, str(c.arch)), hidden=c.hidden, inter=c.inter,
            n_layers=c.n_layers, n_heads=c.n_heads, n_kv_heads=c.n_kv_heads,
            head_dim=c.head_dim, vocab=c.vocab, max_pos=c.max_pos, eps=c.eps,
            rope_theta=c.rope_theta, tied=bool(c.tied), qkv_bias=bool(c.qkv_bias),
            qk_norm=bool(c.qk_norm), bos_id=None if c.bos_id < 0 else c.bos_id,
            eos_ids=tuple(c.eos_ids[:c.n_eos]), rope_scaling=_rope_scaling(c))
        d = _c.cis2_model_digests(self._h).contents
        # Keyed as in the receipt (§12.1, §6.6, §7.2).
        self.digests = {"weights-sha256": _hex(d.weights_sha256),
                        "config-sha256": _hex(d.config_sha256),
                        "tokenizer-sha256": _hex(d.tokenizer_sha256),
                        "table-digest": _hex(d.table_digest),
                        "inv-freq-table-digest": _hex(d.inv_freq_digest)}
        self.dtype = _c.cis2_model_dtype(self._h).decode()
        err = _lib.err_buf()
        th = _c.cis2_model_tokenizer(self._h, err)
        self._tok = Tokenizer(_handle=th, _owner=self) if th else None
        self._tok_h = th  # for calls made while an engine holds the model open
        self._tok_err = None if th else _lib.err_text(err)

    def _handle(self):
        if not self._open():
            raise Error("the model is closed")
        return self._h

    def _open(self):
        return bool(self._h) and not self._closing

    # -- engines
    def engine(self, backend=None, isa=None, threads=None, max_seqs=None):
        """Another engine over this model (defaults: the model's options, and
        max_seqs 1)."""
        o = dict(self._opts)
        for k, v in (("backend", backend), ("isa", isa), ("threads", threads),
                     ("max_seqs", max_seqs)):
            if v is not None:
                o[k] = v
        return Engine(self, **o)

    @property
    def backend(self):
        """The default engine's backend: "ref", or "fast/<isa>"."""
        self._handle()  # "the model is closed", not its engine
        return self._engine.backend

    # -- tokenizer
    @property
    def tokenizer(self):
        """The tokenizer parsed from the hashed tokenizer.json; Error when that
        file is one the library cannot reproduce exactly (ids still work)."""
        self._handle()
        if self._tok is None:
            raise Error(self._tok_err)
        return self._tok

    def tokenize(self, text):
        """str (or UTF-8 bytes) → token ids, with the model's tokenizer."""
        return self.tokenizer.encode(text)

    def detokenize(self, ids):
        """Token ids → str, with the model's tokenizer (bytes that are not
        UTF-8 become U+FFFD; tokenizer.decode_bytes gives them exactly)."""
        return self.tokenizer.decode(ids)

    # -- running
    def generate(self, prompt, max_tokens=None, *, stop_at_eos=False, force=None,
                 temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, seed=None, logprobs=None):
        """Engine.generate on the model's own engine: prefill `prompt` (str,
        UTF-8 bytes or token ids) and decode `max_tokens` tokens (default 16,
        or len(force)), greedily or, with temperature > 0, sampled
        (docs/sampling.md); returns a Result, whose receipt is byte-identical
        to `cis2 run --receipt`'s with the same flags. logprobs=k: per-token
        log-probabilities and k alternatives (Result.logprobs)."""
        return self._engine.generate(prompt, max_tokens, stop_at_eos=stop_at_eos, force=force,
                                     temperature=temperature, top_k=top_k, top_p=top_p,
                                     min_p=min_p, seed=seed, logprobs=logprobs)

    def stream(self, prompt, max_tokens=None, *, stop_at_eos=False, temperature=0.0, top_k=0,
               top_p=1.0, min_p=0.0, seed=None):
        """Engine.stream on the model's own engine: generate() a token at a
        time, a Stream yielding str chunks as they come; its .result is
        generate's Result. The stream holds that engine until it ends, so
        m.generate on the same thread inside the loop raises Error (use
        Model.engine() for a second one)."""
        return self._engine.stream(prompt, max_tokens, stop_at_eos=stop_at_eos,
                                   temperature=temperature, top_k=top_k, top_p=top_p,
                                   min_p=min_p, seed=seed)

    def generate_many(self, prompts, max_tokens=None, *, stop_at_eos=False, batch=8,
                      temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, seed=None):
        """Engine.generate_many on an engine of this model's options that
        decodes `batch` sequences at once (made for the call, then freed):
        a list of Results in input order, each bit-identical to
        generate(prompt, ...) alone."""
        with self.engine(max_seqs=_int_in(batch, "batch", 1, MAX_SEQS)) as e:
            return e.generate_many(prompts, max_tokens, stop_at_eos=stop_at_eos,
                                   temperature=temperature, top_k=top_k, top_p=top_p,
                                   min_p=min_p, seed=seed)

    def verify(self, receipt):
        """cis2.verify(receipt, self)."""
        return verify(receipt, self._engine)

    def verify_many(self, receipts, *, batch=8):
        """cis2.verify_many(receipts, self, batch=batch)."""
        return verify_many(receipts, self, batch=batch)

    def trace(self, prompt, max_tokens=None, *, force=None, layers=None, nodes=None,
              backend=None):
        """Every node of the forward passes of generate(prompt, max_tokens,
        force=force) as numpy arrays (a Trace: a dict name → array, and the
        run's Result). `layers` / `nodes` (iterables of layer numbers / node
        names) limit what is kept; a str, a layer the model lacks or a node
        name no pass computes is an error, never an empty trace. Greedy traces
        equal `cis2 trace -n N` bit for bit."""
        np = _numpy("trace")
        n_layers = self.config.n_layers
        for what, arg in (("layers", layers), ("nodes", nodes)):
            # set("logits") would be its letters; 3 is not a list of one layer
            if arg is not None and (isinstance(arg, (str, bytes)) or
                                    not isinstance(arg, collections.abc.Iterable)):
                raise TypeError("trace: %s must be an iterable of %s, got %s %r" %
                                (what, "layer numbers" if what == "layers" else "node names",
                                 type(arg).__name__, arg))
        keep_layers = keep_nodes = None
        if layers is not None:
            keep_layers = set()
            for l in layers:
                l = _int_in(l, "trace: a layer", 0, n_layers - 1)
                if l in keep_layers:  # a typo for another layer (cis2 trace --layers refuses it)
                    raise ValueError("trace: layer %d is given twice" % l)
                keep_layers.add(l)
        if nodes is not None:
            keep_nodes = set()
            for name in nodes:
                if not isinstance(name, str):
                    raise TypeError("trace: a node name must be a str, got %s %r" %
                                    (type(name).__name__, name))
                if name in keep_nodes:  # as cis2 trace --nodes
                    raise ValueError("trace: node %r is given twice" % name)
                keep_nodes.add(name)
        for what, keep in (("layers", keep_layers), ("nodes", keep_nodes)):
            if keep is not None and not keep:
                # it would keep nothing of that kind (cis2 trace refuses --nodes '')
                raise ValueError("trace: %s is empty; give None to keep every one" % what)
        heads = self.config.n_heads
        out, failed, seen = Trace(), [], set()

        def capture(ctx, pos, layer, node, v, n):
            try:
                name = node.decode()
                seen.add(name)
                if keep_nodes is not None and name not in keep_nodes:
                    return
                if layer >= 0 and keep_layers is not None and layer not in keep_layers:
                    return
                key = "p%d.L%d.%s" % (pos, layer, name) if layer >= 0 else "p%d.%s" % (pos, name)
                a = np.ctypeslib.as_array(v, shape=(n,)).copy() if n else np.zeros(0, np.float32)
                if name in ("attn_scores", "attn_probs") and heads and n % heads == 0:
                    a = a.reshape(heads, n // heads)
                out[key] = a
            except BaseException as e:  # raised again after the run
                failed.append(e)

        fn = _lib.TRACE_FN(capture)
        o = dict(self._opts)
        if backend is not None:
            o["backend"] = backend
        # Ctrl-C would raise KeyboardInterrupt on entering `capture`, where
        # ctypes prints "Exception ignored" and drops it (_sigint_between_steps).
        with _sigint_between_steps() as poll:
            with Engine(self, _trace=fn, **o) as e:
                out.result = e.generate(prompt, max_tokens, force=force, _stop=poll)
        if failed:
            raise failed[0]
        unknown = sorted((keep_nodes or set()) - seen)
        if unknown:  # a misspelt node would otherwise be a silently empty trace
            raise ValueError("trace: no node named %s (this run's nodes: %s)" %
                             (", ".join(map(repr, unknown)), ", ".join(sorted(seen))))
        # A batched prefill reports stage by stage across positions; order as
        # `cis2 trace` files do: by position, then embed, layers, final_norm,
        # logits (the library's order within one position and layer).
        keys = list(out)
        done = Trace((keys[i], out[keys[i]])
                     for i in sorted(range(len(keys)), key=lambda i: _trace_rank(keys[i], i)))
        if not done:  # layers=[...] of nodes that exist only outside layers, say
            raise ValueError("trace: layers %s and nodes %s together keep no tensor of this run" %
                             (sorted(keep_layers) if keep_layers is not None else "None",
                              sorted(keep_nodes) if keep_nodes is not None else "None"))
        done.result = out.result
        return done

    # -- helpers for Engine
    def _prompt(self, prompt):
        """(C ids, n, receipt prompt bytes, None) from text, bytes or ids, or
        (C ids, n, None, why there can be no receipt). For ids the receipt's
        prompt bytes are what they decode to, as `cis2 run --prompt-ids
        --receipt` writes them (cis2_receipt_prompt_bytes: ids the model has
        but tokenizer.json names no token for add nothing)."""
        self._handle()
        if isinstance(prompt, (str, bytes, bytearray, memoryview)):
            b = _text_in(prompt, "prompt")
            ids = self.tokenizer.encode(b)
            if not ids:  # a bad argument, as an empty --prompt is for the CLI
                raise ValueError("the prompt encodes to no tokens")
            arr, n = _ids_in(ids, "prompt")
            return arr, n, b, None
        arr, n = _ids_in(prompt, "prompt")
        if not n:  # the library's words (cis2_seq_submit), before it is called
            raise ValueError("the prompt has no tokens")
        if self._tok is None:
            return arr, n, None, ("prompt-hex is the bytes the prompt ids decode to, and the "
                                  "tokenizer is not usable: %s" % self._tok_err)
        out, ln, err = ctypes.c_void_p(), ctypes.c_size_t(), _lib.err_buf()
        with self._use():  # "the model is closed" is raised, not taken for undecodable ids
            rc = _c.cis2_receipt_prompt_bytes(self._tok_h, arr, n, ctypes.byref(out),
                                              ctypes.byref(ln), err)
        if rc:
            return arr, n, None, "prompt-hex: %s" % _lib.err_text(err)
        try:
            pbytes = ctypes.string_at(out, ln.value)
        finally:
            _c.cis2_free(out)
        if not pbytes and n:
            return arr, n, None, ("the prompt ids decode to no bytes, and a receipt's prompt-hex "
                                  "may not be empty")
        return arr, n, pbytes, None

    def _result(self, r, pbytes, no_receipt, smp=None):
        """The Result of run `r` (sampled with `smp`, or greedy for None): with
        a receipt over `pbytes`, or none and `no_receipt` (the reason) in
        receipt_error."""
        prompt_ids, ids = _ids_out(r.prompt, r.n_prompt), _ids_out(r.gen, r.n_gen)
        text = None  # as `cis2 run`: no text (text_error=) when the bytes are not UTF-8
        if self._tok is not None:
            try:  # the raw handle: Model.close may be waiting for this run's engine
                text = Tokenizer._decode(self._tok_h, ids).decode("utf-8")
            except (Error, UnicodeDecodeError):
                text = None
        rtext, why = None, no_receipt
        if why is None:
            rc = _lib.Receipt()
            pb = (ctypes.c_uint8 * max(len(pbytes), 1)).from_buffer_copy(pbytes or b"\0")
            _c.cis2_receipt_from_run(ctypes.byref(rc), self._h, ctypes.byref(r), pb, len(pbytes))
            out, ln = ctypes.c_void_p(), ctypes.c_size_t()
            if _c.cis2_receipt_format_sampled(ctypes.byref(rc), _sref(smp), ctypes.byref(out),
                                              ctypes.byref(ln)):
                raise Error("out of memory formatting the receipt")
            try:
                rtext = ctypes.string_at(out, ln.value).decode("ascii")
            finally:
                _c.cis2_free(out)
        witness = _hex(r.witness)
        sampler, seed = _sampler_out(smp)
        return Result(
            prompt_ids=prompt_ids, ids=ids, text=text,
            digests={"argmax-digest": _hex(r.argmax), "witness-digest": witness},
            receipt=rtext,
            cis2_ref="CIS2_REF digest=%s prompt_idx=0 prompt_toks=%d gen_toks=%d dtype=%s" %
            (witness, r.n_prompt, r.n_gen, self.dtype),
            stopped_at_eos=bool(r.stopped_at_eos),
            nan=None if r.nan_step < 0 else (r.nan_step, r.nan_index),
            prefill_ms=r.prefill_ms, decode_ms=r.decode_ms, receipt_error=why, sampler=sampler,
            seed=seed)

    # -- lifetime
    def close(self):
        """Free every engine of this model, then the model (waits for calls in
        progress on other threads; new ones raise Error)."""
        h = self._retire()
        if h is None:
            return
        for e in list(self._engines):
            e.close()
        _c.cis2_model_free(h)
        self._h = None

    def __repr__(self):
        if not self._open():
            return "Model(%r, closed)" % (getattr(self, "path", None),)
        return "Model(%r, arch=%s, backend=%s)" % (self.path, self.config.arch,
                                                   self._engine.backend)


# ------------------------------------------------------------------- verify
def chat_prompt(model_dir, messages, *, template=None, chat_format=None, kwargs=None,
                date=None, add_generation_prompt=True, tokenizer=None):
    """The prompt `cis2 run --chat` renders (docs/chat_templates.md): `messages`
    (a list of {"role", "content"} dicts) rendered with the chat template of
    `model_dir` (its tokenizer_config.json or chat_template.jinja), or the
    Jinja source in the file `template` (with model_dir's special tokens), or
    chat_format="chatml"; `kwargs` a dict of template variables
    (enable_thinking, date_string, ...), `date` "YYYY-MM-DD" the day
    strftime_now formats (None: undefined; never the clock). With a
    Tokenizer, content it would read as a special token is refused. Returns
    the rendered str: generate() it, as run --chat does."""
    if template is not None and chat_format is not None:
        raise ValueError("chat_prompt: template and chat_format exclude each other")
    import json
    msgs = _text_in(json.dumps(messages, ensure_ascii=False), "chat_prompt: messages")
    kw = None
    if kwargs is not None:
        if not isinstance(kwargs, dict):
            raise TypeError("chat_prompt: kwargs: expected a dict, got %s" % type(kwargs).__name__)
        kw = _text_in(json.dumps(kwargs, ensure_ascii=False), "chat_prompt: kwargs")
    day = _text_in(date, "chat_prompt: date") if date is not None else None
    err, t = _lib.err_buf(), ctypes.c_void_p()
    if chat_format is not None:
        _check(_c.cis2_chat_template_builtin(ctypes.byref(t),
                                             _text_in(chat_format, "chat_prompt: chat_format"),
                                             err), err)
    elif template is not None:
        _check(_c.cis2_chat_template_load_file(ctypes.byref(t), _path_in(model_dir, "chat_prompt"),
                                               _path_in(template, "chat_prompt: template"), err),
               err)
    else:
        _check(_c.cis2_chat_template_load(ctypes.byref(t), _path_in(model_dir, "chat_prompt"),
                                          err), err)
    m, n, out, ol = ctypes.c_void_p(), ctypes.c_int(), ctypes.c_void_p(), ctypes.c_size_t()
    try:
        _check(_c.cis2_chat_parse_messages(msgs, len(msgs), b"messages", ctypes.byref(m),
                                           ctypes.byref(n), err), err)
        o = _lib.ChatOpts(1 if add_generation_prompt else 0, kw, len(kw) if kw else 0, day)
        tok = tokenizer._handle() if tokenizer is not None else None
        _check(_c.cis2_chat_render_opts(t, m, n.value, ctypes.byref(o), tok, ctypes.byref(out),
                                        ctypes.byref(ol), err), err)
        return ctypes.string_at(out, ol.value).decode("utf-8")
    finally:
        _c.cis2_free(out)
        _c.cis2_free(m)
        _c.cis2_chat_template_free(t)


def verify(receipt, model):
    """Check a receipt (its text: str or bytes; or a path as os.PathLike)
    against `model` (a Model, or an Engine to recompute on): the artifact
    hashes, then a re-run of its prompt (§14.3). Returns a Verdict; raises
    Error when the receipt is malformed or the run cannot start."""
    engine = model._engine if isinstance(model, Model) else model
    if not isinstance(engine, Engine):
        raise TypeError("verify: expected a cis2.Model or cis2.Engine, got %s" %
                        type(model).__name__)
    engine._model._handle()  # "the model is closed" before reading or parsing anything
    engine._handle()
    (rc, smp), err = _parse_receipt(receipt, "verify"), _lib.err_buf()
    try:
        v, g, run, r = _lib.Verdict(), _lib.GenOpts(), ctypes.c_int(), _lib.Result()
        with engine._locked():
            h = engine._handle()
            # nonzero: it cannot check, or (2) the receipt needs more positions
            # than the model has and no field differs already (v is freed)
            _check(_c.cis2_receipt_verify_begin(_c.cis2_engine_model(h), ctypes.byref(rc),
                                                ctypes.byref(v), ctypes.byref(g),
                                                ctypes.byref(run), err), err)
            try:  # the recomputation a step at a time, so Ctrl-C stops it between two
                if run.value:
                    with _sigint_between_steps() as poll:
                        engine._decode(rc.prompt_ids, rc.n_prompt, g, r, poll, smp)
                    st = _c.cis2_receipt_verify_finish_sampled(ctypes.byref(rc), _sref(smp),
                                                               ctypes.byref(r), ctypes.byref(v),
                                                               err)
                    _check(st, err)
            except BaseException:
                _c.cis2_result_free(ctypes.byref(r))
                _c.cis2_verdict_free(ctypes.byref(v))
                raise
        return _verdict_out(v)
    finally:
        _c.cis2_receipt_free(ctypes.byref(rc))


def _parse_receipt(receipt, what):
    """(a parsed cis2_receipt, its sampler or None) from text (str/bytes) or
    a path (os.PathLike): a v1 receipt, or a v1+sampling one (docs/sampling.md
    §6); cis2.Error with the library's line when it does not parse."""
    name = b"receipt"
    if not isinstance(receipt, (str, bytes, bytearray, memoryview, os.PathLike)):
        raise TypeError("%s: receipt must be its text (str or bytes) or a path (os.PathLike), "
                        "got %s" % (what, type(receipt).__name__))
    if isinstance(receipt, os.PathLike):
        name = _path_in(receipt, what)
        receipt = _read_input(name)
    text = _text_in(receipt, what)
    rc, smp, err = _lib.Receipt(), _lib.Sampler(), _lib.err_buf()
    if _c.cis2_receipt_parse_sampled(text, len(text), name, ctypes.byref(rc), ctypes.byref(smp),
                                     err):
        msg = _lib.err_text(err)
        if (name == b"receipt" and 0 < len(text) < 4096 and b"\n" not in text and
                b"\0" not in text and os.path.isfile(text)):
            msg += "; a str or bytes is the receipt's text: to read the file %s pass " \
                "pathlib.Path(%r)" % (_lib.sanitize(text), os.fsdecode(text))
        raise Error(msg)
    return rc, (smp if smp.temperature > 0.0 else None)


def _verdict_out(v):
    """The Verdict of a finished cis2_verdict, which is freed."""
    try:
        fields = [Field(f.name.decode(), _lib.FIELD_STATUS.get(f.status, str(f.status)),
                        (f.receipt or b"").decode("utf-8", "replace"),
                        (f.recomputed or b"").decode("utf-8", "replace"))
                  for f in v.fields[:v.n_fields]]
        return Verdict(fields, v.mismatches, _ids_out(v.run.gen, v.run.n_gen),
                       _hex(v.run.witness))
    finally:
        _c.cis2_verdict_free(ctypes.byref(v))


def verify_many(receipts, model, *, batch=8):
    """verify() for every receipt of `receipts` (a list, or any iterable, of
    what verify takes), their re-runs decoded `batch` at a time on one engine
    (a Model: an engine made for the call; an Engine: its own max_seqs, and
    batch is not used). Returns their Verdicts in input order, each the one
    verify gives alone. Every receipt is parsed and its hashes checked before
    anything is decoded; an error names it as receipts[i]."""
    if isinstance(model, Model):
        with model.engine(max_seqs=_int_in(batch, "batch", 1, MAX_SEQS)) as e:
            return verify_many(receipts, e)
    if not isinstance(model, Engine):
        raise TypeError("verify_many: expected a cis2.Model or cis2.Engine, got %s" %
                        type(model).__name__)
    receipts = _many_in(receipts, "verify_many", "receipts", "verify takes a single receipt")
    engine, err = model, _lib.err_buf()
    engine._model._handle()
    engine._handle()
    n = len(receipts)
    rcs, smps, vs, gs, runs, done = [], [], [], [], [], [False] * n
    try:
        for i, x in enumerate(receipts):
            try:
                rc, smp = _parse_receipt(x, "verify_many")
                rcs.append(rc), smps.append(smp)
            except (ValueError, TypeError, Error) as e:
                raise type(e)("receipts[%d]: %s" % (i, e)) from None
        out = [None] * n
        with engine._locked():
            h = engine._handle()
            m = _c.cis2_engine_model(h)
            for i in range(n):  # hashes, prompt-hex and ids first: nothing decoded yet
                v, g, run = _lib.Verdict(), _lib.GenOpts(), ctypes.c_int()
                st = _c.cis2_receipt_verify_begin(m, ctypes.byref(rcs[i]), ctypes.byref(v),
                                                  ctypes.byref(g), ctypes.byref(run), err)
                if st:  # v freed by _begin
                    raise Error("receipts[%d]: %s" % (i, _lib.err_text(err)))
                vs.append(v), gs.append(g), runs.append(run.value)
            for i in range(n):  # a verdict complete already (a hash differs): not re-run
                if not runs[i]:
                    out[i], done[i] = _verdict_out(vs[i]), True

            def finish(i, r):  # v takes r over, unless _finish fails
                if _c.cis2_receipt_verify_finish_sampled(ctypes.byref(rcs[i]), _sref(smps[i]),
                                                         ctypes.byref(r), ctypes.byref(vs[i]),
                                                         err):
                    _c.cis2_result_free(ctypes.byref(r))
                    raise Error("receipts[%d]: %s" % (i, _lib.err_text(err)))
                out[i], done[i] = _verdict_out(vs[i]), True
            engine._decode_many([(i, rcs[i].prompt_ids, rcs[i].n_prompt, gs[i], smps[i])
                                 for i in range(n) if runs[i]], "receipts", finish)
        return out
    finally:
        for i, v in enumerate(vs):
            if not done[i]:
                _c.cis2_verdict_free(ctypes.byref(v))
        for rc in rcs:
            _c.cis2_receipt_free(ctypes.byref(rc))
