#!/usr/bin/env bash
# The Python package (python/cis2, docs/python.md): tests/t_python.py's groups
# (every call against the CLI, struct layouts, GIL release, engines on
# threads) from the build tree, then from installed copies — `pip install
# ./python` into a venv, once as a wheel bundling the library and once as a
# pure wheel finding `make install`'s prefix (dynamic loader, pkg-config) —
# and without numpy, which only Model.trace needs: numpy made unimportable in
# the build tree, and `pip install ./python` into a venv that has none.
# Interpreter: $CIS2_PYTHON, else /usr/bin/python3 (Debian's, with numpy),
# else python3 on PATH — the first that imports numpy; none: only the
# no-numpy group runs, on the first that has ctypes (none of those: SKIP).
source "$(dirname "$0")/lib.sh"
T="$TESTTMP/python"; rm -rf "$T"; mkdir -p "$T"; T=$(cd "$T" && pwd)
BUILD="${BUILD:-build}"
bin="${CIS2#./}"
abi=$(sed -n 's/^#define CIS2_ABI_VERSION  *\([0-9]*\).*/\1/p' include/cis2.h)
SO="$BUILD/libcis2.so.$abi"

PY=""; PY0=""; tried=""
for c in ${CIS2_PYTHON:-} /usr/bin/python3 python3; do
    p=$(command -v "$c" 2>/dev/null) || continue
    tried="$tried $p"
    [ -n "$PY0" ] || ! "$p" -c 'import ctypes' 2>/dev/null || PY0="$p"
    "$p" -c 'import ctypes, numpy' 2>/dev/null && { PY="$p"; break; }
done
[ -n "$PY0" ] || { skip python "no python3 with ctypes (tried:${tried:- none}; set CIS2_PYTHON)"; exit 0; }
if [ -n "$PY" ]; then
    echo "# interpreter: $PY ($("$PY" --version 2>&1), numpy $("$PY" -c 'import numpy; print(numpy.__version__)'))"
else
    echo "# interpreter: $PY0 ($("$PY0" --version 2>&1), no numpy)"
fi
[ -f "$SO" ] || { fail python.built "$SO missing (make all builds it)"; exit 0; }
lib_arch=$(readelf -h "$SO" | sed -n 's/^ *Machine: *//p')
host_arch=$(readelf -h /bin/sh | sed -n 's/^ *Machine: *//p')
if [ "$lib_arch" != "$host_arch" ]; then
    skip python "the library under test is built for '$lib_arch', this host is '$host_arch'"; exit 0
fi
# An ASan/UBSan library is loaded into an uninstrumented python: preload the
# runtimes (leak checking off: the interpreter's own allocations would report).
RUN=(env)
if nm -D "$SO" 2>/dev/null | grep -q ' U __asan_'; then
    RUN=(env "LD_PRELOAD=$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
         ASAN_OPTIONS=detect_leaks=0)
fi

MODELS="$T/models"
for v in tests/fixtures/*.vector; do
    python3 tools/make_model.py "$MODELS/$(basename "$v" .vector)" \
        $(sed -n 's/^#   python3 tools\/make_model.py DIR //p' "$v") >/dev/null
done
"$CIS2" run --model "$MODELS/llama" --prompt-ids 5,17,42,7,99 -n 6 --receipt "$T/llama.receipt" >/dev/null

# group NAME ENV... -- ARGS: t_python.py in its own process; a crash is a FAIL
# naming the signal and the library's last words.
group() {
    local name="$1"; shift
    local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
    local out rc
    out=$("${RUN[@]}" "${envs[@]}" TESTTMP="$T" CIS2="$CIS2" "$@" 2>"$T/$name.err"); rc=$?
    echo "$out"
    if [ $rc -ge 128 ]; then
        fail "python.$name" "crashed (signal $((rc - 128))) after $(echo "$out" | grep -c .) line(s): $(tail -2 "$T/$name.err" | tr '\n' ' ')"
    elif [ $rc -ne 0 ] && ! echo "$out" | grep -q '^FAIL'; then
        fail "python.$name" "exited $rc: $(tail -3 "$T/$name.err" | tr '\n' ' ')"
    fi
}

# --- from the build tree: python/ on PYTHONPATH. The package finds build/'s
# library by itself; other build dirs (build-asan) are named by CIS2_LIBRARY.
tree=(PYTHONPATH=python)
[ "$BUILD" = build ] || tree+=(CIS2_LIBRARY="$SO")
how=$("${RUN[@]}" "${tree[@]}" "${PY:-$PY0}" -c 'import cis2; print(cis2.library_found_by)' 2>&1)
want=$([ "$BUILD" = build ] && echo "source tree" || echo CIS2_LIBRARY)
expect_eq "python.build-tree-finds-library ($want)" "$how" "$want"
# numpy made unimportable (sys.modules["numpy"] = None before `import cis2`):
# every call but trace equals the run with numpy; trace says it needs numpy
if [ -n "$PY" ]; then
    group dump "${tree[@]}" -- "$PY" tests/t_python.py dump "$MODELS" "$T/numpy-run.json"
    group nonumpy "${tree[@]}" -- "$PY" tests/t_python.py nonumpy "$MODELS" "$T/numpy-run.json" \
        "$T/llama.receipt"
else
    group nonumpy "${tree[@]}" -- "$PY0" tests/t_python.py nonumpy "$MODELS" - "$T/llama.receipt"
    skip python "no python3 with numpy for the other groups (tried:$tried; set CIS2_PYTHON)"
    exit 0
fi
for g in api layout sampling gil threads threads-fast; do
    group "$g" "${tree[@]}" -- "$PY" tests/t_python.py "$g" "$MODELS"
done
bad=$("${RUN[@]}" CIS2_LIBRARY="$T/nonexistent.so" PYTHONPATH=python "$PY" -c 'import cis2' 2>&1 | tail -1)
case "$bad" in "ImportError: cis2: CIS2_LIBRARY=$T/nonexistent.so cannot be loaded"*)
    pass python.bad-cis2-library-is-an-import-error ;;
    *) fail python.bad-cis2-library-is-an-import-error "$bad" ;; esac

# --- installed: make install PREFIX=P, then pip install ./python into venvs
if ! "$PY" -m pip --version >/dev/null 2>&1; then
    skip python.installed "$PY has no pip (apt-get install python3-pip python3-venv)"; exit 0
fi
P="$T/prefix"
make -s --no-print-directory install BUILD="$BUILD" BIN="$bin" PREFIX="$P" >/dev/null 2>&1 \
    || { fail python.make-install "make install PREFIX=$P failed"; exit 0; }
# pip_install VENV ARGS...: Debian's pip from the system site, offline.
pip_install() {
    local venv="$1"; shift
    "$PY" -m venv --system-site-packages --without-pip "$venv" || return 1
    "$venv/bin/python" -m pip install --no-index --no-cache-dir --disable-pip-version-check \
        --quiet "$@" 2>"$venv.pip.err"
}
# A venv without --system-site-packages has no numpy: `pip install ./python`
# must not need it (numpy is the "trace" extra). Its pip is the system's, run
# for the venv's interpreter (pip --python, pip >= 22.3), offline.
if ! "$PY" -m pip --python "$PY" --version >/dev/null 2>&1; then
    skip python.pip-install-without-numpy "$("$PY" -m pip --version) has no --python (pip >= 22.3)"
elif "$PY" -m venv --without-pip "$T/venv-nonumpy" &&
        "$PY" -m pip --python "$T/venv-nonumpy/bin/python" install --no-index --no-cache-dir \
            --disable-pip-version-check --quiet --config-settings library="$PWD/$SO" ./python \
            2>"$T/venv-nonumpy.pip.err"; then
    pass python.pip-install-without-numpy
    group installed-nonumpy -- "$T/venv-nonumpy/bin/python" tests/t_python.py nonumpy-installed \
        "$MODELS" "$T/numpy-run.json" "$T/llama.receipt"
else fail python.pip-install-without-numpy "$(tail -3 "$T/venv-nonumpy.pip.err" | tr '\n' ' ')"; fi
if pip_install "$T/venv-bundled" --config-settings library="$PWD/$SO" ./python; then
    pass python.pip-install-bundled
    group installed-bundled -- "$T/venv-bundled/bin/python" tests/t_python.py installed "$MODELS" \
        bundled "$T/llama.receipt"
else fail python.pip-install-bundled "$(tail -3 "$T/venv-bundled.pip.err" | tr '\n' ' ')"; fi
if pip_install "$T/venv-pure" --config-settings bundle=0 ./python; then
    pass python.pip-install-pure
    group installed-loader LD_LIBRARY_PATH="$P/lib" -- "$T/venv-pure/bin/python" \
        tests/t_python.py installed "$MODELS" "dynamic loader" "$T/llama.receipt"
    if ldconfig -p 2>/dev/null | grep -q "libcis2.so.$abi "; then
        skip python.installed-pkg-config "a libcis2.so.$abi in the ld.so cache would be found first"
    else
        group installed-pkg-config PKG_CONFIG_PATH="$P/lib/pkgconfig" -- "$T/venv-pure/bin/python" \
            tests/t_python.py installed "$MODELS" pkg-config "$T/llama.receipt"
    fi
    out=$(cd "$T" && "${RUN[@]}" "$T/venv-pure/bin/python" -c 'import cis2' 2>&1 | tail -1)
    case "$out" in "ImportError: cis2: cannot find libcis2.so.$abi; tried "*"CIS2_LIBRARY"*)
        pass python.not-found-names-the-places-tried ;;
        *) fail python.not-found-names-the-places-tried "$out" ;; esac
else fail python.pip-install-pure "$(tail -3 "$T/venv-pure.pip.err" | tr '\n' ' ')"; fi
