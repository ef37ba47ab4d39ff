"""``torchdev-lint``: the command line."""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torchdev_lint.rules  # noqa: F401  (registers the rules)
from torchdev_lint import __version__, cache, config, docs, files, output, pool, progress, runner
from torchdev_lint.engine import FileResult, lint_file
from torchdev_lint.finding import FileError, Finding
from torchdev_lint.fixer import applicable, fix_file
from torchdev_lint.rule import Rule

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchdev-lint",
        description="Find and fix PyTorch device-placement bugs. "
        "Run `torchdev-lint trace SCRIPT` to confirm findings by executing a program.",
    )
    parser.add_argument("paths", nargs="*", default=["."], help="files or directories; '-' reads standard input")
    parser.add_argument("--select", help="comma-separated rule codes or prefixes to enable (e.g. TDL001,TDL00)")
    parser.add_argument("--extend-select", help="codes or prefixes to enable on top of the configured ones")
    parser.add_argument("--ignore", help="comma-separated rule codes or prefixes to disable")
    parser.add_argument("--format", choices=list(output.FORMATS), default="text", help="output format")
    parser.add_argument("--exit-zero", action="store_true", help="exit 0 even when problems are found")
    parser.add_argument("--fix", action="store_true", help="apply safe fixes in place")
    parser.add_argument("--unsafe-fixes", action="store_true", help="also apply unsafe fixes")
    parser.add_argument("--diff", action="store_true", help="print the diff of what --fix would change; write nothing")
    parser.add_argument("--stdin-filename", help="the path to show for '-' (standard input)")
    parser.add_argument("--config", type=Path, help="use this pyproject.toml instead of the nearest one")
    parser.add_argument("--isolated", action="store_true", help="ignore all configuration files")
    parser.add_argument("--explain", metavar="CODE", help="print a rule's documentation and exit")
    parser.add_argument("-q", "--quiet", action="store_true", help="print findings only, no summary or progress")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="say on stderr which files were checked and which came from the cache")
    parser.add_argument("-j", "--jobs", type=int, metavar="N",
                        help="check files in N processes (default: one per core)")
    parser.add_argument("--cache-dir", type=Path, metavar="DIR",
                        help=f"where to keep results between runs (default: {cache.DIRNAME} in the project root)")
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    parser.add_argument("--version", action="version", version=f"torchdev-lint {__version__}")
    return parser


@dataclass
class Run:
    results: list[FileResult] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    fixed: list[Finding] = field(default_factory=list)
    diffs: list[str] = field(default_factory=list)

    @property
    def findings(self) -> list[Finding]:
        return sorted((f for r in self.results for f in r.findings), key=Finding.sort_key)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["trace"]:
        from torchdev_lint.trace.cli import main as trace_main

        return trace_main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except config.UsageError as error:
        print(f"torchdev-lint: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        # The reader went away (`torchdev-lint . | head`): stop quietly, as other tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FINDINGS


def _settings(args) -> config.Settings:
    if args.isolated:
        return config.Settings()
    if args.config is not None:
        if not args.config.is_file():
            raise config.UsageError(f"{args.config}: no such configuration file")
        return config.load(args.config)
    real = [p for p in args.paths if p != "-"]
    start = Path(real[0]) if real else Path(args.stdin_filename or ".")
    return config.load(config.find_pyproject(start if start.exists() else Path.cwd()))


def _run(args) -> int:
    if args.explain:
        code = args.explain.upper()
        if code not in Rule.registry:
            raise config.UsageError(f"--explain: unknown rule code '{args.explain}'")
        print(docs.page(Rule.registry[code]))
        return EXIT_CLEAN
    settings = _settings(args)
    # An explicit --select replaces the configured selection, its ignores included.
    select = config.split_codes(args.select) if args.select else settings.select
    if args.extend_select:
        select = [*select, *config.split_codes(args.extend_select)]
    ignore = [*([] if args.select else settings.ignore), *config.split_codes(args.ignore or "")]
    config.check_codes(select, "--select" if args.select else "select")
    config.check_codes(ignore, "--ignore")
    for pattern, codes in settings.per_file_ignores.items():
        config.check_codes(codes, f"per-file-ignores '{pattern}'")
    rules = config.enabled_rules(select, ignore)
    unsafe = args.unsafe_fixes or settings.unsafe_fixes
    fixing = args.fix or args.diff

    run = Run()
    paths, run.errors = files.discover([p for p in args.paths if p != "-"], settings.exclude, settings.root)
    job = runner.Job(rules, settings, cache=_cache(args, settings))
    bar = progress.Progress(len(paths)) if progress.wanted(args.quiet, args.format) else None
    checked = runner.check_paths(paths, job, _jobs(args), bar.update if bar else None)
    if bar:
        bar.close()
    stdin = files.decode(args.stdin_filename or "-", sys.stdin.buffer.read()) if "-" in args.paths else None
    if isinstance(stdin, FileError):
        run.errors.append(stdin)
    elif stdin is not None:
        checked.insert(0, runner.Checked(runner.check_source(stdin, rules, settings)))
    for item in checked:
        result = item.result
        if args.verbose:
            print(f"torchdev-lint: {'cached' if item.cached else 'checked'} {result.path}", file=sys.stderr)
        if fixing and any(applicable(f, unsafe) for f in result.findings):
            from_stdin = result.module is not None  # the others come without their tree
            source = stdin if from_stdin else files.read(result.path)
            if isinstance(source, files.SourceFile):
                full = result if from_stdin else runner.check_source(source, rules, settings, job.index)
                result = _fix(run, source, full, runner.rules_for(rules, settings, source.path), unsafe,
                              write=not args.diff, to_stdout=from_stdin)
        if result.error:
            run.errors.append(result.error)
        # Keep the findings, not every file's tree: only files with findings stay in memory.
        result.module = result.context = None
        run.results.append(result)

    for error in sorted(run.errors, key=lambda e: e.path):
        print(f"torchdev-lint: {error}", file=sys.stderr)
    if args.diff:
        sys.stdout.write("".join(run.diffs))
        if not args.quiet:
            print(f"Would fix {len(run.fixed)} problem{'s' if len(run.fixed) != 1 else ''}.", file=sys.stderr)
        return EXIT_ERROR if run.errors else (EXIT_FINDINGS if run.diffs else EXIT_CLEAN)
    findings = run.findings
    rendered = output.render(findings, args.format)
    if rendered:
        print(rendered)
    if args.format == "text" and not args.quiet:
        if not checked and not run.errors:
            print("No Python files found.", file=sys.stderr)
        elif args.fix:
            print(f"Fixed {len(run.fixed)} problem{'s' if len(run.fixed) != 1 else ''}, "
                  f"{len(findings)} remaining.")
        else:
            print(output.summary(findings, len(run.results)))
    elif not checked and not run.errors:
        print("No Python files found.", file=sys.stderr)
    if run.errors:
        return EXIT_ERROR
    return EXIT_FINDINGS if findings and not args.exit_zero else EXIT_CLEAN


def _cache(args, settings: config.Settings) -> cache.Cache | None:
    if args.no_cache:
        return None
    return cache.Cache(args.cache_dir or settings.root / cache.DIRNAME, cache.tool_fingerprint())


def _jobs(args) -> int:
    if args.jobs is None:
        return pool.available_cores()
    if args.jobs < 1:
        raise config.UsageError(f"--jobs: expected a number of processes of at least 1, got {args.jobs}")
    return args.jobs


def _fix(run: Run, source: files.SourceFile, result: FileResult, rules, unsafe: bool,
         write: bool, to_stdout: bool) -> FileResult:
    outcome = fix_file(result, unsafe)
    if outcome.error is not None:
        run.errors.append(outcome.error)
        return result
    if outcome.source == source.text:
        return result
    if source.notebook is not None and not source.notebook.round_trips():
        run.errors.append(FileError(source.path, "fix not written: the notebook's JSON layout "
                                    "could not be kept (save it with Jupyter first)"))
        return result
    old, new = source.file_text, source.file_text_for(outcome.source)
    if not write:
        run.diffs.append("".join(difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True),
            f"a/{source.path.lstrip('/')}", f"b/{source.path.lstrip('/')}",
        )))
    elif to_stdout:
        sys.stdout.write(new)
    else:
        error = files.write_atomically(source, new)
        if error is not None:
            run.errors.append(error)
            return result
    run.fixed.extend(outcome.fixed)
    fixed = files.decode(source.path, new.encode(source.encoding))
    return lint_file(fixed, rules) if isinstance(fixed, files.SourceFile) else result
