#!/usr/bin/env bash
# The simulator and the pytest plugin on every torch release users have (issue 30): recreate one
# virtual environment per torch version (the default PyPI wheel: a CUDA build, several GB each),
# then run the selfcheck, `pytest tests/trace` and `pytest tests/test_pytest_plugin.py` (plain and
# under `-n 2`) in each, and print a table of the results. Not part of every-commit CI (too
# many GB): run it by hand when the supported range changes.
#
#   benchmarks/torch_versions/run.sh                 # 2.4.1 2.8.0 2.13.0+cpu 2.14.1, venvs in /work/venvs
#   VENVS=~/venvs TORCH_VERSIONS="2.4.1 2.14.1" benchmarks/torch_versions/run.sh
#   SKIP_INSTALL=1 benchmarks/torch_versions/run.sh  # reuse existing venvs
#
# A version spec may name an index: "2.13.0+cpu" installs torch==2.13.0 from PyTorch's CPU index
# (set CPU_INDEX), anything else the plain PyPI wheel. PYTHON picks the interpreter (python3).
# Logs of each step go to $LOGS (default: $VENVS/logs).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENVS=${VENVS:-/work/venvs}
PYTHON=${PYTHON:-python3}
TORCH_VERSIONS=${TORCH_VERSIONS:-"2.4.1 2.8.0 2.13.0+cpu 2.14.1"}
CPU_INDEX=${CPU_INDEX:-https://download.pytorch.org/whl/cpu}
LOGS=${LOGS:-$VENVS/logs}
mkdir -p "$VENVS" "$LOGS"

venv_for() {  # the venv of a version spec; the repository's own .venv serves 2.13.0+cpu when present
    local spec=$1
    if [ "$spec" = "2.13.0+cpu" ] && [ -x "$ROOT/.venv/bin/python" ] && [ -z "${NO_REPO_VENV:-}" ]; then
        echo "$ROOT/.venv"
    else
        echo "$VENVS/torch$spec"
    fi
}

install() {
    local spec=$1 venv
    venv=$(venv_for "$spec")
    if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import torch, torchdev_lint, xdist" 2>/dev/null; then
        return 0
    fi
    [ -n "${SKIP_INSTALL:-}" ] && { echo "missing venv $venv (SKIP_INSTALL set)" >&2; return 1; }
    "$PYTHON" -m venv "$venv" || return 1
    case "$spec" in
        *+cpu) "$venv/bin/pip" install -q "torch==${spec%+cpu}" --index-url "$CPU_INDEX" || return 1 ;;
        *) "$venv/bin/pip" install -q "torch==$spec" || return 1 ;;
    esac
    "$venv/bin/pip" install -q -e "$ROOT[test]"
}

# "N passed, M failed, K skipped" from pytest's last line, or the failure of the run itself
counts() {
    local log=$1 line
    line=$(grep -E "^(=+ )?[0-9]+ (passed|failed|error|skipped)|no tests ran" "$log" | tail -1 | sed -E 's/^=+ //; s/ =+$//; s/ in [0-9.]+s.*//')
    local failed
    failed=$(grep -E "^(FAILED|ERROR) " "$log" | sed -E 's/^(FAILED|ERROR) ([^ ]+).*/\2/; s/.*:://' | tr '\n' ' ')
    echo "${line:-no result (see $log)}${failed:+ [failed: ${failed% }]}"
}

declare -A RESULT
for spec in $TORCH_VERSIONS; do
    echo "== torch $spec" >&2
    if ! install "$spec" >"$LOGS/install-$spec.log" 2>&1; then
        RESULT[$spec]="install failed (see $LOGS/install-$spec.log)"
        continue
    fi
    venv=$(venv_for "$spec")
    py="$venv/bin/python"
    cd "$ROOT" || exit 2
    actual=$("$py" -c "import torch; print(torch.__version__)" 2>/dev/null)
    "$py" -m torchdev_lint.trace.selfcheck >"$LOGS/selfcheck-$spec.json" 2>"$LOGS/selfcheck-$spec.err"
    status=$?
    warnings=$(grep -c "^selfcheck: warning:" "$LOGS/selfcheck-$spec.err")
    broken=$(grep -E '^    "[a-z_]+": "' "$LOGS/selfcheck-$spec.json" | grep -v '": "ok"' | grep -vc '": "warning: ')
    selfcheck="exit $status, $warnings warning(s), $broken broken"
    "$py" -m pytest -q -p no:cacheprovider tests/trace >"$LOGS/trace-$spec.log" 2>&1
    trace=$(counts "$LOGS/trace-$spec.log")
    "$py" -m pytest -q -p no:cacheprovider tests/test_pytest_plugin.py >"$LOGS/plugin-$spec.log" 2>&1
    plugin=$(counts "$LOGS/plugin-$spec.log")
    "$py" -m pytest -q -p no:cacheprovider -n 2 tests/test_pytest_plugin.py >"$LOGS/plugin-n2-$spec.log" 2>&1
    plugin_n2=$(counts "$LOGS/plugin-n2-$spec.log")
    RESULT[$spec]="$actual | $selfcheck | $trace | $plugin | $plugin_n2"
done

python_version=$("$PYTHON" -c "import platform; print(platform.python_version())")
echo
echo "Python $python_version, $(uname -m), GPU: $(command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | head -1 || echo none)"
echo
echo "| torch | installed | selfcheck | pytest tests/trace | pytest tests/test_pytest_plugin.py | ... -n 2 |"
echo "|---|---|---|---|---|---|"
for spec in $TORCH_VERSIONS; do
    echo "| $spec | ${RESULT[$spec]} |"
done
