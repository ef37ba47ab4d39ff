"""``torchdev-lint trace``: run a program and confirm or refute the static findings.

Never imports torch or the program into this process: the program runs in a child process
(``session.run``), and only the static linter runs here.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import socket
import sys
from dataclasses import dataclass

from torchdev_lint.trace import INSTALL_HINT, TESTED_TORCH_VERSIONS

EXIT_CLEAN, EXIT_CONFIRMED, EXIT_ERROR = 0, 1, 2
DEFAULT_TIMEOUT = 300.0

USAGE = "torchdev-lint trace [OPTIONS] SCRIPT [ARGS...]\n       torchdev-lint trace [OPTIONS] -m MODULE [ARGS...]"
DESCRIPTION = f"""\
Run a Python program under instrumentation, in a child process, and give each static finding
in the program's own files a verdict: confirmed (with the evidence: where, which devices), not
confirmed (the code ran and the bug did not bite, and why) or not reached. Device mismatches
that no rule predicted are reported as TDL100, CUDA requests that fail without a GPU as TDL101.
This EXECUTES the program.

Modes: on a machine with CUDA the program runs on the real GPU; without one, on a simulated GPU
(values computed on the CPU, placement tracked as on cuda:0). When the program has hardcoded
CUDA findings (TDL001/TDL002) or used the GPU, it then runs a second time as a machine without
a GPU would (`cpu-only`, keeping going), to show where it fails there (--single-run: not).
`-m torch.distributed.run ...` (torchrun) traces its rank-0 worker alone, in a world of one; a
program with a TDL011 finding then also runs as two ranks of one gloo group on two simulated GPUs
(--single-run: not), to see whether they share a device.

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
    parser.add_argument("--no-verdicts", action="store_true",
                        help="do not keep the verdicts for the linter (docs/verdicts.md)")
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


LAUNCHERS = {"torch.distributed.run": "torchrun", "torch.distributed.launch": "torch.distributed.launch"}
# torchrun options that take no value; every other option takes one (``--opt value`` or ``--opt=value``).
_LAUNCHER_FLAGS = {"--standalone", "-m", "--module", "--no-python", "--no_python", "--run-path", "--run_path",
                   "--use-env", "--use_env", "--virtual-local-rank", "--virtual_local_rank"}


@dataclass
class Launch:
    """A ``torchrun`` command line, as the worker it would start: rank 0 of a one-process world."""

    launcher: str
    target: str
    module: bool
    args: list[str]
    nproc: str

    def env(self, port: int) -> dict:
        return {"RANK": "0", "LOCAL_RANK": "0", "GROUP_RANK": "0", "ROLE_RANK": "0", "WORLD_SIZE": "1",
                "LOCAL_WORLD_SIZE": "1", "ROLE_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port), "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0",
                "TORCHELASTIC_RUN_ID": "torchdev-lint-trace"}

    @property
    def note(self) -> str:
        return (f"{self.launcher} (--nproc-per-node={self.nproc}) was traced as its rank-0 worker alone, in a "
                "one-process world (WORLD_SIZE=1): other ranks and the launcher itself were not run")


def launch_of(target: str, is_module: bool, args: list[str]) -> Launch | None:
    """The worker a ``torchrun`` / ``python -m torch.distributed.run|launch`` command starts, or None."""
    if is_module:
        launcher = LAUNCHERS.get(target)
    else:
        launcher = "torchrun" if os.path.basename(target) == "torchrun" else None
    if launcher is None:
        return None
    nproc, module, use_env, i = "1", False, launcher == "torchrun", 0
    while i < len(args):
        token = args[i]
        if not token.startswith("-"):
            break
        name, has_value, value = token.partition("=")
        if name in ("-m", "--module"):
            module = True
        elif name in ("--use-env", "--use_env"):
            use_env = True
        if name not in _LAUNCHER_FLAGS and not has_value:
            value = args[i + 1] if i + 1 < len(args) else ""
            i += 1
        if name in ("--nproc-per-node", "--nproc_per_node"):
            nproc = value
        i += 1
    if i >= len(args):
        return None
    rest = args[i + 1:]
    if not use_env:  # torch.distributed.launch passes the rank as an argument
        rest = ["--local-rank=0", *rest]
    return Launch(launcher, args[i], module, rest, nproc)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


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
    launch = launch_of(target, is_module, program_args)
    if launch is not None:
        target, is_module, program_args = launch.target, launch.module, launch.args
    script = os.path.join(cwd, target)
    if not is_module and not os.path.exists(script):
        print(f"torchdev-lint trace: error: {target}: no such file", file=err)
        return EXIT_ERROR

    from torchdev_lint import config
    from torchdev_lint.trace import session, verdicts

    select, ignore = _codes(args.select), _codes(args.ignore)
    runtime_wanted = {c for c in verdicts.RUNTIME_CODES if wants_mismatches(select, ignore, c)}
    static_select = [c for c in select if c not in verdicts.RUNTIME_CODES] if select else None
    if select and not static_select:
        static_select = ["TDL9999"]  # only runtime codes asked for: no static rule
    static_ignore = [c for c in ignore if c not in verdicts.RUNTIME_CODES]
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
                           root=root, devices=args.devices, cwd=cwd, saves=session.saves_registry(),
                           env=launch.env(_free_port()) if launch else {}, notes=[launch.note] if launch else [])
    where = verdicts.Where(cwd)
    output = open(os.path.join(cwd, args.program_output), "w", encoding="utf-8") if args.program_output else None
    try:
        return _trace(args, base, output, out, err, where, static_select, static_ignore, runtime_wanted)
    except KeyboardInterrupt:  # the child's process group is already killed (session.run)
        print("torchdev-lint trace: interrupted", file=err)
        return 130
    finally:
        if output is not None:
            output.close()


def _trace(args, base, output, out, err, where, static_select, static_ignore, runtime_wanted) -> int:
    from torchdev_lint.api import check_paths
    from torchdev_lint.trace import report, session, verdicts

    runs = [_run(base, output, err)]
    if runs[0].error:
        print(f"torchdev-lint trace: error: {runs[0].error}", file=err)
        return EXIT_ERROR
    files = [f for f in runs[0].files if os.path.exists(f)]
    # Every tier: running the program is the evidence a possible finding lacked.
    findings, errors = check_paths(files, static_select, static_ignore, preview=True, verdicts=False) if files else ([], [])
    if static_select == ["TDL9999"]:
        findings = []
    for error in errors:
        print(f"torchdev-lint: {error}", file=err)
    if not args.single_run and any(f.code == verdicts.RANKS_CODE for f in findings):
        # TDL011 shows only between ranks: run the program as torchrun would start two of them
        runs += _run_ranks(base, output, err)
    hardcoded = any(f.code in verdicts.HARDCODED for f in findings)
    if not args.single_run and runs[0].mode != "cpu-only" and (hardcoded or verdicts.touched_accelerator(runs[0])):
        second = session.Options(**{**base.__dict__, "mode": "cpu-only", "keep_going": True})
        why = "for the hardcoded-device findings" if hardcoded else "to see where it needs one"
        runs.append(_run(second, output, err, why=f"again as a machine without a GPU, {why}"))
    traced = verdicts.judge(findings, runs, where, runtime_codes=runtime_wanted, single_run=args.single_run)
    if not args.no_verdicts:
        from torchdev_lint.trace import keep

        keep.record(findings, traced, runs, where, base.root, report.command_line(runs[0]))
    if args.format == "json":
        print(report.render_json(traced, runs, where, files), file=out)
    else:
        print(report.render_text(traced, runs, where, files), file=out)
    untraceable = report.untraceable(runs[0], traced, where)
    if untraceable:
        print(f"torchdev-lint trace: error: {untraceable}", file=err)
        return EXIT_ERROR
    return EXIT_CONFIRMED if any(t.status == verdicts.CONFIRMED for t in traced) else EXIT_CLEAN


def _run_ranks(base, output, err):
    from torchdev_lint.trace import session

    ranks = session.rank_options(base, _free_port())
    head = ["python", "-m", base.target] if base.module else ["python", base.target]
    limit = f" (time limit {base.timeout:g} s each)" if base.timeout else ""
    print(f"torchdev-lint trace: running `{shlex.join([*head, *base.args])}` again as {len(ranks)} ranks of one "
          f"process group on {len(ranks)} simulated GPUs, for the every-process-on-gpu-zero finding{limit}", file=err)
    try:
        err.flush()
    except (AttributeError, OSError, ValueError):
        pass
    return session.run_ranks(ranks, output if output is not None else err)


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
