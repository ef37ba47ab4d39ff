"""``torchdev-lint trace``: run a program and confirm or refute the static findings.

Never imports torch or the program into this process: the program runs in a child process
(``session.run``), and only the static linter runs here.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import sys

from torchdev_lint.trace import INSTALL_HINT, TESTED_TORCH_VERSIONS

EXIT_CLEAN, EXIT_CONFIRMED, EXIT_ERROR = 0, 1, 2
DEFAULT_TIMEOUT = 300.0
HARDCODED = ("TDL001", "TDL002")

USAGE = "torchdev-lint trace [OPTIONS] SCRIPT [ARGS...]\n       torchdev-lint trace [OPTIONS] -m MODULE [ARGS...]"
DESCRIPTION = f"""\
Run a Python program under instrumentation, in a child process, and give each static finding
in the program's own files a verdict: confirmed (with the evidence: where, which devices), not
confirmed (the code ran and the bug did not bite, and why) or not reached. Device mismatches
that no rule predicted are reported as TDL100. This EXECUTES the program.

Modes: on a machine with CUDA the program runs on the real GPU; without one, on a simulated GPU
(values computed on the CPU, placement tracked as on cuda:0). When the program has hardcoded
CUDA findings (TDL001/TDL002), it then runs a second time as a machine without a GPU would
(`cpu-only`, keeping going), to show where it fails there (--single-run: not).

The program's own output goes to standard error (or --program-output); the report goes to
standard output. Exit status: 0 nothing confirmed, 1 a finding confirmed, 2 usage error or the
program could not be traced. Needs PyTorch ({INSTALL_HINT}); tested with torch
{', '.join(TESTED_TORCH_VERSIONS)}."""

# Options that take a value (the rest are flags); used to find where the program's argv begins.
_VALUED = {"--mode", "--timeout", "--max-steps", "--format", "--select", "--ignore", "--program-output",
           "--devices"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="torchdev-lint trace", usage=USAGE, description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("auto", "sim", "real", "cpu-only"), default="auto",
                        help="real: the GPU; sim: a simulated GPU; cpu-only: a machine without GPU; "
                             "auto (default): real if CUDA is available, else sim. After a real or sim "
                             "run, a program with TDL001/TDL002 findings runs again as cpu-only "
                             "(--single-run: not)")
    parser.add_argument("--single-run", action="store_true",
                        help="never run the program a second time as a machine without a GPU")
    parser.add_argument("--keep-going", action="store_true",
                        help="record each device error and continue, to find every bug in one run")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"stop the program after this long (default {DEFAULT_TIMEOUT:g}; 0: no limit)")
    parser.add_argument("--max-steps", type=int, metavar="N", help="stop after N optimizer steps")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="report format")
    parser.add_argument("--select", help="comma-separated rule codes or prefixes to report")
    parser.add_argument("--ignore", help="comma-separated rule codes or prefixes not to report")
    parser.add_argument("--program-output", metavar="FILE",
                        help="write the program's stdout and stderr to FILE (default: standard error)")
    parser.add_argument("--devices", type=int, default=1, help=argparse.SUPPRESS)  # simulated GPU count
    parser.add_argument("-m", dest="module", metavar="MODULE", help="run a module, as python -m does")
    return parser


def split_argv(argv: list[str]) -> tuple[list[str], str | None, bool, list[str]]:
    """(tracer options, target, target is a module, the program's arguments)."""
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            if i + 1 < len(argv):
                return argv[:i], argv[i + 1], False, argv[i + 2:]
            return argv[:i], None, False, []
        if token == "-m":
            if i + 1 < len(argv):
                return argv[:i], argv[i + 1], True, argv[i + 2:]
            return argv[:i + 1], None, True, []
        if token.startswith("-m") and len(token) > 2 and not token.startswith("--"):
            return argv[:i], token[2:], True, argv[i + 1:]
        if token.startswith("-"):
            i += 2 if token in _VALUED else 1
            continue
        return argv[:i], token, False, argv[i + 1:]
    return argv, None, False, []


def wants_mismatches(select: list[str], ignore: list[str], code: str = "TDL100") -> bool:
    """Whether runtime-only TDL100 findings are reported under --select/--ignore (prefixes)."""
    return (not select or any(code.startswith(c) for c in select)) and not any(code.startswith(c) for c in ignore)


def _codes(text: str | None) -> list[str]:
    return [c.strip().upper() for c in (text or "").split(",") if c.strip()]


def main(argv: list[str], *, stdout=None, stderr=None, cwd: str | None = None) -> int:
    """Run ``torchdev-lint trace ARGV``; the report goes to ``stdout``, messages (and by default
    the program's output) to ``stderr``. ``cwd``: the directory the command runs from (the
    program's working directory, what relative paths mean): the current one by default."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    cwd = os.path.abspath(cwd or os.getcwd())
    options, target, is_module, program_args = split_argv(list(argv))
    parser = build_parser()
    args = parser.parse_args(options)
    if target is None:
        parser.print_usage(err)
        print("torchdev-lint trace: error: name a SCRIPT or -m MODULE to run", file=err)
        return EXIT_ERROR
    if args.max_steps is not None and args.max_steps < 1:
        print("torchdev-lint trace: error: --max-steps must be at least 1", file=err)
        return EXIT_ERROR
    if importlib.util.find_spec("torch") is None:
        print("torchdev-lint trace needs PyTorch, which is not installed in this environment "
              f"({sys.executable}).\nInstall it with:  {INSTALL_HINT}", file=err)
        return EXIT_ERROR
    script = os.path.join(cwd, target)
    if not is_module and not os.path.exists(script):
        print(f"torchdev-lint trace: error: {target}: no such file", file=err)
        return EXIT_ERROR

    from torchdev_lint import config
    from torchdev_lint.trace import session, verdicts

    select, ignore = _codes(args.select), _codes(args.ignore)
    mismatch_wanted = wants_mismatches(select, ignore)
    static_select = [c for c in select if c != verdicts.MISMATCH_CODE] if select else None
    if select and not static_select:
        static_select = ["TDL9999"]  # only TDL100 asked for: no static rule
    static_ignore = [c for c in ignore if c != verdicts.MISMATCH_CODE]
    try:
        if static_select and static_select != ["TDL9999"]:
            config.check_codes(static_select, "--select")
        config.check_codes(static_ignore, "--ignore")
    except config.UsageError as error:
        print(f"torchdev-lint trace: error: {error}", file=err)
        return EXIT_ERROR

    root = cwd if is_module else os.path.dirname(os.path.abspath(script))
    timeout = args.timeout if args.timeout and args.timeout > 0 else None
    base = session.Options(target=target, args=program_args, module=is_module, mode=args.mode,
                           keep_going=args.keep_going, max_steps=args.max_steps, timeout=timeout,
                           root=root, devices=args.devices, cwd=cwd)
    where = verdicts.Where(cwd)
    output = open(os.path.join(cwd, args.program_output), "w", encoding="utf-8") if args.program_output else None
    try:
        return _trace(args, base, output, out, err, where, static_select, static_ignore, mismatch_wanted)
    except KeyboardInterrupt:  # the child's process group is already killed (session.run)
        print("torchdev-lint trace: interrupted", file=err)
        return 130
    finally:
        if output is not None:
            output.close()


def _trace(args, base, output, out, err, where, static_select, static_ignore, mismatch_wanted) -> int:
    from torchdev_lint.api import check_paths
    from torchdev_lint.trace import report, session, verdicts

    runs = [_run(base, output, err)]
    if runs[0].error:
        print(f"torchdev-lint trace: error: {runs[0].error}", file=err)
        return EXIT_ERROR
    files = [f for f in runs[0].files if os.path.exists(f)]
    findings, errors = check_paths(files, static_select, static_ignore) if files else ([], [])
    if static_select == ["TDL9999"]:
        findings = []
    for error in errors:
        print(f"torchdev-lint: {error}", file=err)
    if not args.single_run and runs[0].mode != "cpu-only" and any(f.code in HARDCODED for f in findings):
        second = session.Options(**{**base.__dict__, "mode": "cpu-only", "keep_going": True})
        runs.append(_run(second, output, err, why="again as a machine without a GPU, for the "
                                                  "hardcoded-device findings"))
    traced = verdicts.judge(findings, runs, where, ignore_mismatch=not mismatch_wanted)
    if args.format == "json":
        print(report.render_json(traced, runs, where), file=out)
    else:
        print(report.render_text(traced, runs, where), file=out)
    return EXIT_CONFIRMED if any(t.status == verdicts.CONFIRMED for t in traced) else EXIT_CLEAN


def _run(options, output, err, why: str | None = None):
    from torchdev_lint.trace import report, session

    head = ["python", "-m", options.target] if options.module else ["python", options.target]
    mode = report.MODE_WORDS.get(options.mode, options.mode)
    limits = []
    if options.timeout:
        limits.append(f"time limit {options.timeout:g} s")
    if options.max_steps:
        limits.append(f"at most {options.max_steps} optimizer steps")
    if options.keep_going:
        limits.append("keep going after device errors")
    print(f"torchdev-lint trace: running `{shlex.join([*head, *options.args])}` {why or mode}"
          + (f" ({', '.join(limits)})" if limits else ""), file=err)
    try:
        err.flush()
    except (AttributeError, OSError, ValueError):
        pass
    return session.run(options, output if output is not None else err)
