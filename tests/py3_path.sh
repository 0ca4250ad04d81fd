# Sourced by tests/run.sh and tests/lib.sh: `python3` is the interpreter PATH's python3
# resolves to, started directly. A version manager's shim (pyenv's is a bash script that
# runs pyenv, about a second a start on a 2-core machine) in front of the hundreds of
# python3 starts in one run costs minutes and checks nothing; the interpreter it picks is
# the same. Done once: the PATH is exported to every suite.
if [ -z "${CIS2_PY3_DIRECT:-}" ]; then
    export CIS2_PY3_DIRECT=1
    py3_exe=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) || py3_exe=
    if [ -n "$py3_exe" ] && [ -x "$py3_exe" ] && [ "$py3_exe" != "$(command -v python3)" ]; then
        # a link made aside and renamed into place: suites starting together never see none
        py3_dir="$(cd "$TESTTMP" && pwd)/py3"
        mkdir -p "$py3_dir" && ln -sfn "$py3_exe" "$py3_dir/.python3.$$" &&
            mv -Tf "$py3_dir/.python3.$$" "$py3_dir/python3" && export PATH="$py3_dir:$PATH"
    fi
    unset py3_exe py3_dir
fi
