"""Finding and loading libcis2, and its C API (include/cis2.h) as ctypes types.

Where the library comes from, first hit wins (cis2.library_path says which):
  1. $CIS2_LIBRARY: the path of a libcis2.so.N (nothing else is tried);
  2. bundled: libcis2.so.N next to this file (a wheel built where the C
     library was built carries it);
  3. the source tree: <checkout>/build/libcis2.so.N when this package is
     imported from <checkout>/python/ (PYTHONPATH=python after `make`);
  4. the dynamic loader: libcis2.so.N through LD_LIBRARY_PATH and the
     ld.so cache (`make install` to /usr/local, then ldconfig);
  5. pkg-config: $(pkg-config --variable=libdir cis2)/libcis2.so.N (an
     install to another PREFIX, found through PKG_CONFIG_PATH).
The library is loaded with ctypes.CDLL, which releases the GIL for the whole
of every call into it; only the trace callback takes it back.
"""
import ctypes
import os
import shutil
import subprocess

ABI = 1  # the soname's major (CIS2_ABI_VERSION) whose layouts this file mirrors
SONAME = "libcis2.so.%d" % ABI
ERR_LEN = 512  # CIS2_ERR_LEN

_HERE = os.path.dirname(os.path.abspath(__file__))


def _pkg_config_libdir():
    exe = shutil.which("pkg-config")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--variable=libdir", "cis2"], capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _loaded_from(lib):
    """The file the dynamic loader picked for `lib` (dladdr), or None."""
    try:
        dladdr = ctypes.CDLL(None).dladdr
    except (OSError, AttributeError):
        return None
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    info = _DlInfo()
    if not dladdr(ctypes.cast(lib.cis2_version, ctypes.c_void_p), ctypes.byref(info)):
        return None
    return os.fsdecode(info.dli_fname) if info.dli_fname else None


def _load():
    """Returns (CDLL, path, how); raises ImportError naming every place tried."""
    env = os.environ.get("CIS2_LIBRARY")
    if env:
        try:
            return ctypes.CDLL(env), env, "CIS2_LIBRARY"
        except OSError as e:
            raise ImportError("cis2: CIS2_LIBRARY=%s cannot be loaded: %s" % (env, e)) from None
    tried = []
    checkout = os.path.dirname(os.path.dirname(_HERE))
    files = [
        (os.path.join(_HERE, SONAME), "bundled"),
        (os.path.join(checkout, "build", SONAME), "source tree"),
    ]
    for path, how in files:
        if os.path.exists(path):
            try:
                return ctypes.CDLL(path), path, how
            except OSError as e:
                tried.append("%s (%s)" % (path, e))
        else:
            tried.append(path)
    try:
        lib = ctypes.CDLL(SONAME)
        return lib, _loaded_from(lib) or SONAME, "dynamic loader"
    except OSError:
        tried.append(SONAME + " (dynamic loader)")
    libdir = _pkg_config_libdir()
    if libdir:
        path = os.path.join(libdir, SONAME)
        try:
            return ctypes.CDLL(path), path, "pkg-config"
        except OSError as e:
            tried.append("%s (pkg-config: %s)" % (path, e))
    else:
        tried.append("pkg-config cis2 (not found)")
    raise ImportError(
        "cis2: cannot find %s; tried %s. Build it with `make`, install it with `make install`, or "
        "set CIS2_LIBRARY=/path/to/%s" % (SONAME, "; ".join(tried), SONAME))


# ------------------------------------------------------------------ types
c_int32_p = ctypes.POINTER(ctypes.c_int32)
c_uint8_p = ctypes.POINTER(ctypes.c_uint8)
Digest = ctypes.c_uint8 * 32

# void (*cis2_trace_fn)(void *ctx, int pos, int layer, const char *node, const float *v, size_t n)
TRACE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_char_p,
                            ctypes.POINTER(ctypes.c_float), ctypes.c_size_t)
# void (*cis2_step_fn)(void *ctx, int step, const float *logits, int vocab, int32_t chosen)
STEP_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_float),
                           ctypes.c_int, ctypes.c_int32)

ARCH = {0: "llama", 1: "qwen2", 2: "qwen3", 3: "cis2-toy"}  # cis2_arch (3: test-only)
BACKEND = {"ref": 0, "fast": 1}  # cis2_backend_kind
FIELD_STATUS = {0: "MATCH", 1: "MISMATCH", 2: "SKIPPED"}  # cis2_field_status


class Config(ctypes.Structure):  # cis2_config
    _fields_ = [("arch", ctypes.c_int), ("hidden", ctypes.c_int), ("inter", ctypes.c_int),
                ("n_layers", ctypes.c_int), ("n_heads", ctypes.c_int),
                ("n_kv_heads", ctypes.c_int), ("head_dim", ctypes.c_int), ("vocab", ctypes.c_int),
                ("max_pos", ctypes.c_int), ("eps", ctypes.c_float), ("rope_theta", ctypes.c_float),
                ("tied", ctypes.c_int), ("qkv_bias", ctypes.c_int), ("qk_norm", ctypes.c_int),
                ("bos_id", ctypes.c_int), ("n_eos", ctypes.c_int), ("eos_ids", ctypes.c_int * 8),
                ("rope_scaling", ctypes.c_int), ("rope_factor", ctypes.c_double),
                ("rope_low_freq_factor", ctypes.c_double), ("rope_high_freq_factor", ctypes.c_double),
                ("rope_original_max_pos", ctypes.c_int)]


class Digests(ctypes.Structure):  # cis2_digests
    _fields_ = [("weights_sha256", Digest), ("config_sha256", Digest),
                ("tokenizer_sha256", Digest), ("table_digest", Digest),
                ("inv_freq_digest", Digest)]


class ModelOpts(ctypes.Structure):  # cis2_model_opts
    _fields_ = [("hash", ctypes.c_int)]


class EngineOpts(ctypes.Structure):  # cis2_engine_opts
    _fields_ = [("backend", ctypes.c_int), ("isa", ctypes.c_int), ("threads", ctypes.c_int),
                ("max_seqs", ctypes.c_int), ("trace", TRACE_FN), ("trace_ctx", ctypes.c_void_p),
                ("fault", ctypes.c_char_p), ("fault_arg", ctypes.c_char_p)]


class GenOpts(ctypes.Structure):  # cis2_gen_opts
    _fields_ = [("n_gen", ctypes.c_int), ("stop_at_eos", ctypes.c_int), ("on_step", STEP_FN),
                ("ctx", ctypes.c_void_p), ("force", c_int32_p), ("n_force", ctypes.c_int)]


class Result(ctypes.Structure):  # cis2_result
    _fields_ = [("prompt", c_int32_p), ("n_prompt", ctypes.c_int), ("gen", c_int32_p),
                ("n_gen", ctypes.c_int), ("witness", Digest), ("argmax", Digest),
                ("prefill_ms", ctypes.c_double), ("decode_ms", ctypes.c_double),
                ("stopped_at_eos", ctypes.c_int), ("nan_step", ctypes.c_int),
                ("nan_index", ctypes.c_int)]


class Receipt(ctypes.Structure):  # cis2_receipt
    _fields_ = [("spec_version", ctypes.c_char * 16), ("weights_sha", Digest),
                ("config_sha", Digest), ("tokenizer_sha", Digest), ("prompt_bytes", c_uint8_p),
                ("prompt_len", ctypes.c_size_t), ("prompt_ids", c_int32_p),
                ("n_prompt", ctypes.c_int), ("gen_toks", ctypes.c_int),
                ("dtype", ctypes.c_char * 16), ("table_digest", Digest),
                ("inv_freq_digest", Digest), ("gen_ids", c_int32_p), ("n_gen", ctypes.c_int),
                ("argmax_digest", Digest), ("witness_digest", Digest)]


class Sampler(ctypes.Structure):  # cis2_sampler (docs/sampling.md)
    _fields_ = [("temperature", ctypes.c_float), ("top_k", ctypes.c_int),
                ("top_p", ctypes.c_float), ("min_p", ctypes.c_float), ("seed", ctypes.c_uint64)]


class LogProb(ctypes.Structure):  # cis2_logprob (docs/sampling.md §9)
    _fields_ = [("id", ctypes.c_int32), ("logprob", ctypes.c_float)]


class ChatOpts(ctypes.Structure):  # cis2_chat_opts (docs/chat_templates.md)
    _fields_ = [("add_generation_prompt", ctypes.c_int), ("kwargs", ctypes.c_char_p),
                ("kwargs_len", ctypes.c_size_t), ("date", ctypes.c_char_p)]


class VerdictField(ctypes.Structure):  # cis2_verdict_field
    _fields_ = [("name", ctypes.c_char_p), ("status", ctypes.c_int),
                ("receipt", ctypes.c_char_p), ("recomputed", ctypes.c_char_p)]


VERDICT_MAX_FIELDS = 16  # CIS2_VERDICT_MAX_FIELDS


class Verdict(ctypes.Structure):  # cis2_verdict
    _fields_ = [("n_fields", ctypes.c_int), ("fields", VerdictField * VERDICT_MAX_FIELDS),
                ("mismatches", ctypes.c_int), ("run", Result)]


# The C names of the mirrored structs (tests/t_python.py compares every size
# and offset with the C compiler's).
STRUCTS = {"cis2_config": Config, "cis2_digests": Digests, "cis2_model_opts": ModelOpts,
           "cis2_engine_opts": EngineOpts, "cis2_gen_opts": GenOpts, "cis2_result": Result,
           "cis2_receipt": Receipt, "cis2_sampler": Sampler, "cis2_logprob": LogProb, "cis2_verdict_field": VerdictField, "cis2_verdict": Verdict,
           "cis2_chat_opts": ChatOpts}

# ------------------------------------------------------------- prototypes
_P = ctypes.c_void_p
_S = ctypes.c_char_p
_I = ctypes.c_int
_E = ctypes.c_char_p  # err: a CIS2_ERR_LEN buffer
PROTOTYPES = {
    "cis2_version": (_S, []),
    "cis2_free": (None, [_P]),
    "cis2_isa_from_name": (_I, [_S, ctypes.POINTER(ctypes.c_int)]),
    "cis2_model_open": (_I, [ctypes.POINTER(_P), _S, ctypes.POINTER(ModelOpts), _E]),
    "cis2_model_free": (None, [_P]),
    "cis2_model_config": (ctypes.POINTER(Config), [_P]),
    "cis2_model_digests": (ctypes.POINTER(Digests), [_P]),
    "cis2_model_dtype": (_S, [_P]),
    "cis2_model_tokenizer": (_P, [_P, _E]),
    "cis2_engine_new": (_I, [ctypes.POINTER(_P), _P, ctypes.POINTER(EngineOpts), _E]),
    "cis2_engine_free": (None, [_P]),
    "cis2_engine_backend": (_S, [_P]),
    "cis2_engine_model": (_P, [_P]),
    "cis2_generate": (_I, [_P, c_int32_p, _I, ctypes.POINTER(GenOpts), ctypes.POINTER(Result),
                           _E]),
    "cis2_seq_submit": (_I, [_P, c_int32_p, _I, ctypes.POINTER(GenOpts), ctypes.POINTER(_I),
                             _E]),
    "cis2_seq_submit_sampled": (_I, [_P, c_int32_p, _I, ctypes.POINTER(GenOpts),
                                     ctypes.POINTER(Sampler), ctypes.POINTER(_I), _E]),
    "cis2_sampler_check": (_I, [ctypes.POINTER(Sampler), _E]),
    "cis2_logprobs": (_I, [ctypes.POINTER(ctypes.c_float), _I, ctypes.c_int32,
                           ctypes.POINTER(ctypes.c_float), _I, ctypes.POINTER(LogProb)]),
    "cis2_engine_step": (_I, [_P, _E]),
    "cis2_engine_active": (_I, [_P]),
    "cis2_seq_done": (_I, [_P, _I]),
    "cis2_seq_take": (_I, [_P, _I, ctypes.POINTER(Result), _E]),
    "cis2_seq_cancel": (None, [_P, _I]),
    "cis2_result_free": (None, [ctypes.POINTER(Result)]),
    "cis2_receipt_prompt_bytes": (_I, [_P, c_int32_p, _I, ctypes.POINTER(_P),
                                       ctypes.POINTER(ctypes.c_size_t), _E]),
    "cis2_receipt_from_run": (None, [ctypes.POINTER(Receipt), _P, ctypes.POINTER(Result),
                                     c_uint8_p, ctypes.c_size_t]),
    "cis2_receipt_format": (_I, [ctypes.POINTER(Receipt), ctypes.POINTER(_P),
                                 ctypes.POINTER(ctypes.c_size_t)]),
    "cis2_receipt_parse": (_I, [_S, ctypes.c_size_t, _S, ctypes.POINTER(Receipt), _E]),
    "cis2_receipt_format_sampled": (_I, [ctypes.POINTER(Receipt), ctypes.POINTER(Sampler),
                                         ctypes.POINTER(_P), ctypes.POINTER(ctypes.c_size_t)]),
    "cis2_receipt_parse_sampled": (_I, [_S, ctypes.c_size_t, _S, ctypes.POINTER(Receipt),
                                        ctypes.POINTER(Sampler), _E]),
    "cis2_receipt_verify_finish_sampled": (_I, [ctypes.POINTER(Receipt), ctypes.POINTER(Sampler),
                                                ctypes.POINTER(Result), ctypes.POINTER(Verdict),
                                                _E]),
    "cis2_receipt_free": (None, [ctypes.POINTER(Receipt)]),
    "cis2_receipt_verify_begin": (_I, [_P, ctypes.POINTER(Receipt), ctypes.POINTER(Verdict),
                                       ctypes.POINTER(GenOpts), ctypes.POINTER(_I), _E]),
    "cis2_receipt_verify_finish": (_I, [ctypes.POINTER(Receipt), ctypes.POINTER(Result),
                                        ctypes.POINTER(Verdict), _E]),
    "cis2_verdict_free": (None, [ctypes.POINTER(Verdict)]),
    "cis2_tokenizer_load": (_I, [ctypes.POINTER(_P), _S, _E]),
    "cis2_tokenizer_free": (None, [_P]),
    "cis2_tokenizer_encode": (_I, [_P, _S, ctypes.c_size_t, ctypes.POINTER(c_int32_p),
                                   ctypes.POINTER(_I), _E]),
    "cis2_tokenizer_decode": (_I, [_P, c_int32_p, _I, ctypes.POINTER(_P),
                                   ctypes.POINTER(ctypes.c_size_t), _E]),
    "cis2_tokenizer_vocab_size": (_I, [_P]),
    "cis2_chat_template_load": (_I, [ctypes.POINTER(_P), _S, _E]),
    "cis2_chat_template_load_file": (_I, [ctypes.POINTER(_P), _S, _S, _E]),
    "cis2_chat_template_builtin": (_I, [ctypes.POINTER(_P), _S, _E]),
    "cis2_chat_template_free": (None, [_P]),
    "cis2_chat_parse_messages": (_I, [_S, ctypes.c_size_t, _S, ctypes.POINTER(_P),
                                      ctypes.POINTER(_I), _E]),
    "cis2_chat_render_opts": (_I, [_P, _P, _I, ctypes.POINTER(ChatOpts), _P, ctypes.POINTER(_P),
                                   ctypes.POINTER(ctypes.c_size_t), _E]),
}

lib, path, how = _load()
for _name, (_res, _args) in PROTOTYPES.items():
    try:
        _f = getattr(lib, _name)
    except AttributeError:
        raise ImportError("cis2: %s (%s) lacks %s: not a libcis2 ABI %d" %
                          (path, how, _name, ABI)) from None
    _f.restype, _f.argtypes = _res, _args
version = lib.cis2_version().decode()


def err_buf():
    return ctypes.create_string_buffer(ERR_LEN)


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _unsafe(c):
    """src/core/strbuf.c unsafe_cp: controls, DEL, line/paragraph separators, bidi marks."""
    return (c < 0x20 or 0x7F <= c <= 0x9F or c in (0x061C, 0x200E, 0x200F, 0xFEFF) or
            0x2028 <= c <= 0x202E or 0x2066 <= c <= 0x2069)


def _escape_char(ch):
    c = ord(ch)
    if not _unsafe(c):
        return ch
    return _NAMED.get(ch) or ("\\x%02x" % c if c < 0x80 else "\\u%04x" % c)


def sanitize(b):
    r"""A library message as `cis2` prints it on stderr (cis2_sb_escape,
    CIS2_ESC_SANITIZE): one line, whatever a path or a file's key in it holds —
    newline, CR and tab as \n \r \t, other controls and bidi marks as \xNN or
    \uNNNN, each byte that is not UTF-8 as \xNN."""
    out, i = [], 0
    while i < len(b):
        try:
            text, bad, i = b[i:].decode("utf-8"), "", len(b)
        except UnicodeDecodeError as e:
            text, bad = b[i:i + e.start].decode("utf-8"), "\\x%02x" % b[i + e.start]
            i += e.start + 1
        out.append("".join(map(_escape_char, text)) + bad)
    return "".join(out)


def err_text(buf):
    return sanitize(buf.value)
