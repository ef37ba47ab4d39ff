"""``torchdev-lint confirm [PYTEST ARGS]``: run the project's tests on a simulated GPU, then lint with
their verdicts (docs/verdicts.md).

The tests run in a child process (``python -m pytest --simulate-gpu``), in their own process
group, killed at the time limit; their output goes to standard error, so that standard output
carries the lint report alone. This process never imports torch: the child asks whether there
is a real GPU, and the linter reads the verdicts as JSON.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from torchdev_lint import verdict_store

DEFAULT_TIME_LIMIT = 1800.0
EXIT_ERROR = 2

# How test suites choose their device (docs/verdicts.md#pointing-a-suite-at-the-simulated-gpu).
_ENV_READ = re.compile(r"""(?:os\.environ(?:\.get)?\s*[(\[]|os\.getenv\s*\()\s*["']([A-Za-z0-9_]*(?:DEVICE|CUDA|GPU)"""
                       r"""[A-Za-z0-9_]*)["']""")
_DEVICE_OPTION = re.compile(r"""addoption\(\s*["'](--(?:[\w-]*-)?device)["']""")
_INDEX_ALONE = re.compile(r"torch\.device\(\s*0\s*\)")
_CUDA_SPELLING = re.compile(r"""["'](cuda(?::\d+)?)["']""")
_SKIP_DIRS = {".git", ".venv", "venv", "env", "node_modules", "build", "dist", "__pycache__", ".tox", ".nox",
              "site-packages", ".torchdev_lint_cache"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchdev-lint confirm",
        usage="torchdev-lint confirm [OPTIONS] [PYTEST ARGS...]",
        description="Run the project's tests on a simulated GPU (`pytest --simulate-gpu`; on the real GPU where "
        "there is one), keep each finding's verdict, then print the lint output with the verdicts and a summary. "
        "It EXECUTES the project's tests. Options it does not know go to pytest.")
    parser.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT, metavar="SECONDS",
                        help=f"stop the tests after this long (default {DEFAULT_TIME_LIMIT:g}; 0: no limit)")
    parser.add_argument("--mode", choices=("auto", "sim", "real", "cpu-only"), default="auto",
                        help="where the tests run: sim (a simulated GPU), real (the GPU), cpu-only (as a machine "
                        "without a GPU); auto (default): real where torch sees a GPU, else sim")
    parser.add_argument("--lint", default=".", metavar="PATHS",
                        help="comma-separated paths to lint afterwards (default: .)")
    parser.add_argument("--format", "--output-format", dest="format", default="text",
                        help="the lint output's format (as torchdev-lint --format)")
    parser.add_argument("--preview", action="store_true", help="lint with possible findings too")
    parser.add_argument("--show-evidence", action="store_true", help="print each finding's evidence")
    parser.add_argument("--no-detect", action="store_true",
                        help="set no environment variable and add no pytest option for the suite's device")
    parser.add_argument("--cache-dir", type=Path, metavar="DIR",
                        help="where the verdicts are kept (default: .torchdev_lint_cache in the project root)")
    return parser


def main(argv: list[str], *, cwd: str | None = None) -> int:
    args, pytest_args = build_parser().parse_known_args(argv)
    if pytest_args[:1] == ["--"]:
        pytest_args = pytest_args[1:]
    root = Path(cwd or os.getcwd()).resolve()
    err = sys.stderr
    store = _store(args, root)
    env = dict(os.environ)
    env[verdict_store.ENV_DIR] = str(store.directory)
    mode = args.mode if args.mode != "auto" else ("real" if _gpu_here() else "sim")
    said = [] if args.no_detect else detect(root, env, pytest_args)
    command = [sys.executable, "-m", "pytest", f"--simulate-gpu={mode}", *pytest_args]
    limit = args.time_limit if args.time_limit and args.time_limit > 0 else None
    machine = {"sim": "a simulated GPU", "real": "the real GPU", "cpu-only": "a machine without a GPU"}[mode]
    print(f"torchdev-lint confirm: running the project's tests on {machine}: `{' '.join(command[2:])}` in {root}. "
          f"This EXECUTES the project's code"
          + (f" (time limit {limit:g} s)." if limit else " (no time limit)."), file=err)
    for line in said:
        print(f"torchdev-lint confirm: {line}", file=err)
    err.flush()
    started = time.monotonic()
    status, killed = _run(command, root, env, limit)
    seconds = time.monotonic() - started
    if killed:
        print(f"torchdev-lint confirm: the tests were interrupted at the time limit ({limit:g} s): the lint "
              "output below has the verdicts pytest kept when it ended its session (none if it had to be "
              "killed); raise --time-limit or choose fewer tests", file=err)
    elif status not in (0, 1, 5):
        print(f"torchdev-lint confirm: pytest exited with status {status} (an interrupted run, an internal "
              "or a usage error): the lint output below has no new verdicts", file=err)
    from torchdev_lint import cli

    lint = [*[p for p in args.lint.split(",") if p], "--format", args.format, "--cache-dir", str(store.directory)]
    lint += ["--preview"] if args.preview else []
    lint += ["--show-evidence"] if args.show_evidence else []
    result = cli.main(lint)
    sys.stdout.flush()
    counts = tally(store, [root / p for p in args.lint.split(",") if p])
    print(f"torchdev-lint confirm: the tests ran {seconds:.0f} s (pytest exit status {status}); "
          f"{summary(counts)}", file=err)
    if killed or status not in (0, 1, 5):
        return EXIT_ERROR
    return result


def _store(args, root: Path) -> verdict_store.VerdictStore:
    if args.cache_dir is not None:
        return verdict_store.VerdictStore(args.cache_dir)
    from torchdev_lint import config

    try:
        project = config.Resolver(None).for_path(str(root)).root
    except (config.UsageError, OSError):
        project = root
    return verdict_store.VerdictStore.for_root(project)


# The device files a GPU driver makes on Linux: NVIDIA's, WSL's GPU bridge, ROCm's.
_GPU_DEVICE_FILES = ("/dev/nvidiactl", "/dev/nvidia[0-9]*", "/dev/dxg", "/dev/kfd")


def _gpu_here() -> bool:
    """Whether torch here sees a GPU (asked in a child: this process never imports torch). A
    build made for neither CUDA nor ROCm (its ``torch/version.py`` says so), or a Linux machine
    without a GPU driver's device files, sees none: no child, whose import of torch costs
    seconds of CPU."""
    if _cpu_only_build() or (sys.platform.startswith("linux")
                             and not any(glob.glob(pattern) for pattern in _GPU_DEVICE_FILES)):
        return False
    try:
        done = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                              capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.stdout.strip() == "True"


def _cpu_only_build() -> bool:
    """Whether the torch the child would import is a build without CUDA and ROCm, read from its
    ``version.py`` (``cuda = None``, ``hip = None``: ``torch.cuda.is_available()`` is False
    there whatever the machine has). False when in doubt."""
    import ast
    import importlib.machinery

    try:
        # The child runs `python -c`: the working directory comes first on its path.
        spec = importlib.machinery.PathFinder.find_spec("torch", [os.getcwd(), *sys.path[1:]])
        locations = list(spec.submodule_search_locations or ()) if spec is not None else []
        if len(locations) != 1:
            return False
        with open(os.path.join(locations[0], "version.py"), encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
    except (OSError, ValueError, SyntaxError, ImportError):
        return False
    values = {}
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target.id, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        else:
            continue
        values[target] = value
    return all(isinstance(values.get(name), ast.Constant) and values[name].value is None for name in ("cuda", "hip"))


def _interrupted(signum, frame) -> None:
    raise KeyboardInterrupt


def _run(command: list[str], root: Path, env: dict, limit: float | None) -> tuple[int, bool]:
    """Run pytest in a process group of its own; ended at the time limit, and with this
    process: Ctrl-C or a SIGTERM (a CI job cancelled) ends the tests too."""
    process = subprocess.Popen(command, cwd=root, env=env, stdout=sys.stderr.fileno(), stderr=sys.stderr.fileno(),
                               start_new_session=True)
    main_thread = threading.current_thread() is threading.main_thread()
    handler = signal.signal(signal.SIGTERM, _interrupted) if main_thread else None
    try:
        return process.wait(timeout=limit), False
    except subprocess.TimeoutExpired:
        _kill(process, signal.SIGINT)  # pytest ends its session on an interrupt: the verdicts so far are kept
        try:
            return process.wait(timeout=60), True
        except subprocess.TimeoutExpired:
            _kill(process, signal.SIGKILL)
            return process.wait(), True
    except KeyboardInterrupt:
        _kill(process, signal.SIGKILL)
        raise
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, handler if handler is not None else signal.SIG_DFL)


def _kill(process, sig) -> None:
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def test_files(root: Path, limit: int = 2000) -> list[Path]:
    """The suite's files (conftest.py, test_*.py, *_test.py and what lies under tests/ or test/)."""
    out = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = [d for d in subdirs if d not in _SKIP_DIRS and not d.startswith(".")]
        in_tests = any(part in ("tests", "test", "unittests") for part in Path(directory).relative_to(root).parts)
        for name in names:
            if name.endswith(".py") and (in_tests or name == "conftest.py" or name.startswith("test")
                                         or name.endswith("_test.py")):
                out.append(Path(directory) / name)
                if len(out) >= limit:
                    return out
    return out


def detect(root: Path, env: dict, pytest_args: list[str]) -> list[str]:
    """Point the common ways a suite chooses its device at the (simulated) GPU: set the
    environment variables it reads (``TEST_DEVICE=cuda``, ``USE_CUDA=1``), add ``--device cuda``
    where a conftest defines that option; say what was done, and what is not simulated."""
    said = []
    names: dict[str, tuple[Path, str]] = {}
    options: dict[str, Path] = {}
    index_alone: list[Path] = []
    for path in test_files(root):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for name in _ENV_READ.findall(text):
            names.setdefault(name, (path, text))
        if path.name == "conftest.py":
            for option in _DEVICE_OPTION.findall(text):
                options.setdefault(option, path)
        if _INDEX_ALONE.search(text):
            index_alone.append(path)
    for name, (path, text) in sorted(names.items()):
        where = path.relative_to(root)
        if name in env:
            said.append(f"{where} reads ${name}; it is set already ({name}={env[name]}), left as it is")
            continue
        value = _cuda_spelling(text) if "DEVICE" in name.upper() else "1"
        if name.upper() in ("CUDA_VISIBLE_DEVICES",):
            continue
        env[name] = value
        said.append(f"{where} reads ${name}: set {name}={value} for the tests")
    for option, path in sorted(options.items()):
        if any(a == option or a.startswith(option + "=") for a in pytest_args):
            continue
        pytest_args += [option, "cuda"]
        said.append(f"{path.relative_to(root)} defines the pytest option {option}: added `{option} cuda`")
    if index_alone:
        said.append(f"{index_alone[0].relative_to(root)} uses torch.device(0) (an index alone), which the simulated "
                    "GPU does not reach: such tests are skipped with that reason (torch.device('cuda', 0) is "
                    "simulated)")
    if not said:
        said.append("no device variable or option found in the tests: tests that check torch.cuda.is_available() "
                    "see a GPU; others run as they are written")
    return said


def _cuda_spelling(text: str) -> str:
    """How the file that reads a device variable spells the GPU: ``"cuda"`` unless it only
    names ``"cuda:0"`` (a suite that checks the value against its own list rejects another)."""
    spelled = _CUDA_SPELLING.findall(text)
    return "cuda" if "cuda" in spelled or not spelled else spelled[0]


def tally(store: verdict_store.VerdictStore, paths: list[Path]) -> dict[str, int]:
    """Over the recorded files under ``paths`` as they are now: each static finding (every tier)
    by status, and the device problems no finding predicted."""
    from torchdev_lint import files

    counts = {status: 0 for status in verdict_store.STATUSES}
    counts["unobserved"] = 0
    counts["new problems"] = 0
    counts["findings"] = 0
    roots = [p.resolve() for p in paths]
    base = store.directory.parent
    for entry in store.files().values():
        path = entry.get("path")
        if not path:
            continue
        full = (base / path).resolve()
        if not any(full == r or r in full.parents for r in roots):
            continue
        source = files.read(str(full))
        if not isinstance(source, files.SourceFile):
            continue
        now = store.lookup(source.file_text)
        if now is None or now.data is not entry and now.data != entry:
            continue
        for finding in now.findings():
            counts["findings"] += 1
            verdict = now.verdict(finding.get("code"), int(finding.get("line", 0)), finding.get("end_line"))
            if verdict is None and now.lines_recorded():
                counts["unobserved"] += 1  # a line without a call: the recording cannot see it run
            else:
                counts[verdict.status if verdict else verdict_store.NOT_REACHED] += 1
        counts["new problems"] += len(now.runtime())
    return counts


def summary(counts: dict[str, int]) -> str:
    return (f"of {counts['findings']} static findings (every tier) in the files the tests ran: "
            f"{counts[verdict_store.CONFIRMED]} confirmed, {counts[verdict_store.INVOLVED]} in a device problem, "
            f"{counts[verdict_store.RAN_CLEAN]} ran clean, {counts[verdict_store.CANNOT_TELL]} ran where their bug "
            f"cannot show, {counts[verdict_store.NOT_REACHED]} not reached"
            + (f", {counts['unobserved']} on a line without a call (not recorded)" if counts.get("unobserved") else "")
            + f"; {counts['new problems']} new device "
            "problem(s) no finding predicted (TDL100/TDL101)")
