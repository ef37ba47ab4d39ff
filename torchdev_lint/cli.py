"""``torchdev-lint``: the command line."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from torchdev_lint.lazy import defer_import

defer_import("libcst")  # first: a run whose files all come from the cache never parses

import torchdev_lint.rules  # noqa: E402,F401  (registers the rules)
from torchdev_lint import __version__, api, cache, config, docs, files, noqa, output, pool, progress, runner, verdict_store
from torchdev_lint.engine import FileResult
from torchdev_lint.finding import FileError, Finding
from torchdev_lint.lines import split as split_lines
from torchdev_lint.fixer import applicable, fix_to_fixpoint

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchdev-lint",
        description="Find and fix PyTorch device-placement bugs. "
        "Run `torchdev-lint trace SCRIPT` to confirm findings by executing a program.",
    )
    parser.add_argument("paths", nargs="*", help="files or directories (default: .); '-' reads standard input "
                        "(the default with --stdin-filename)")
    parser.add_argument("--select", help="comma-separated rule codes or prefixes to enable (e.g. TDL001,TDL00)")
    parser.add_argument("--extend-select", help="codes or prefixes to enable on top of the configured ones")
    parser.add_argument("--ignore", help="comma-separated rule codes or prefixes to disable")
    parser.add_argument("--format", "--output-format", dest="format", default="text",
                        choices=[*output.FORMATS, *output.TEXT_STYLES],
                        help="output format (text is `full`: a code frame under each finding; "
                        "`concise`: one line each)")
    parser.add_argument("--output-file", type=Path, help="write the report to this file instead of stdout")
    parser.add_argument("--statistics", action="store_true", help="count findings per rule instead of listing them")
    parser.add_argument("--show-fixes", action="store_true", help="list what --fix fixed, per file and rule")
    parser.add_argument("--exit-zero", action="store_true", help="exit 0 even when problems are found")
    parser.add_argument("--fix", action="store_true", help="apply safe fixes in place")
    parser.add_argument("--add-noqa", action="store_true",
                        help="write `# noqa: CODES` on every line with findings (a baseline), keeping existing codes")
    parser.add_argument("--fix-only", action="store_true", help="apply fixes, report only what was fixed")
    parser.add_argument("--unsafe-fixes", action="store_true", help="also apply unsafe fixes")
    parser.add_argument("--fix-device", help="how fixes spell the default device: cuda-or-cpu (the default) "
                        "or accelerator (torch.accelerator: CUDA, MPS, XPU..., else the CPU)")
    parser.add_argument("--target-devices", metavar="DEVICES",
                        help="the machines the code must run on, e.g. cpu,cuda (a CUDA-only line is then "
                        "certain) or cuda (portability findings off); auto (the default) infers it per file")
    preview = parser.add_mutually_exclusive_group()
    preview.add_argument("--preview", action="store_true", default=None,
                         help="also report possible findings: those whose evidence is incomplete, and "
                         "rules not yet in the default tier (docs/confidence.md)")
    preview.add_argument("--no-preview", dest="preview", action="store_false",
                         help="report certain findings only, whatever the configuration says")
    parser.add_argument("--show-evidence", action="store_true",
                        help="under each finding, the steps of code that show why it holds")
    parser.add_argument("--diff", action="store_true", help="print the diff of what --fix would change; write nothing")
    parser.add_argument("--stdin-filename", help="the path to show for '-' (standard input)")
    parser.add_argument("--exclude", help="comma-separated patterns to exclude, replacing the configured ones")
    parser.add_argument("--extend-exclude", help="comma-separated patterns to exclude on top of the configured ones")
    parser.add_argument("--per-file-ignores", action="append", default=[], metavar="PATTERN:CODES",
                        help="ignore codes in matching files, e.g. 'tests/**:TDL004,TDL001' (repeatable)")
    parser.add_argument("--no-respect-gitignore", action="store_true",
                        help="also check files that .gitignore excludes")
    parser.add_argument("--show-settings", metavar="FILE", help="print the settings that govern FILE and exit")
    parser.add_argument("--show-files", action="store_true", help="print the files that would be checked and exit")
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
    parser.add_argument("--no-verdicts", action="store_true",
                        help="ignore what the project's tests recorded on a simulated GPU (docs/verdicts.md): "
                        "findings as the static analysis alone sees them")
    parser.add_argument("--no-daemon", action="store_true",
                        help="check in this process: neither use nor start the resident checker that keeps "
                        "LibCST loaded between runs (also TORCHDEV_LINT_DAEMON=0; off when CI is set)")
    parser.add_argument("--version", action="version", version=f"torchdev-lint {__version__}")
    return parser


@dataclass
class Run:
    results: list[FileResult] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    fixed: list[Finding] = field(default_factory=list)
    diffs: list[str] = field(default_factory=list)
    root: Path = field(default_factory=Path.cwd)
    stdout: str | None = None  # `--fix -`: the fixed standard input, the only thing on stdout
    sources: dict[str, files.SourceFile | FileError] = field(default_factory=dict)  # for code frames
    verdicts: verdict_store.Tally = field(default_factory=verdict_store.Tally)  # what the tests' verdicts did
    within: list[str] = field(default_factory=list)  # the paths asked for: where a link's fix may land
    _lines: dict[tuple[str, int | None], list[str]] = field(default_factory=dict)

    @property
    def findings(self) -> list[Finding]:
        return sorted((f for r in self.results for f in r.findings), key=Finding.sort_key)

    def source_line(self, finding: Finding) -> str | None:
        lines = self._lines.get((finding.path, finding.cell))
        if lines is None:
            lines = self._lines[finding.path, finding.cell] = self._split(finding)
        return lines[finding.line - 1] if 0 < finding.line <= len(lines) else None

    def _split(self, finding: Finding) -> list[str]:
        """The lines of the finding's file (or cell), split once per file: splitting the
        whole text again for every finding made the report of a big file quadratic."""
        if finding.path not in self.sources:
            # Checked in a worker or cached: read again, only for files with findings.
            self.sources[finding.path] = files.read(finding.path)
        source = self.sources[finding.path]
        if not isinstance(source, files.SourceFile):
            return []
        text = source.text
        if finding.cell is not None and source.notebook is not None:
            cell = source.notebook.data["cells"][finding.cell - 1].get("source", "")
            text = "".join(cell) if isinstance(cell, list) else str(cell)
        return split_lines(text)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["trace"]:
        from torchdev_lint.trace.cli import main as trace_main

        return trace_main(argv[1:])
    if argv[:1] == ["rules"]:
        return _list_rules(argv[1:])
    if argv[:1] == ["server"]:
        return _server(argv[1:])
    if argv[:1] == ["confirm"]:
        from torchdev_lint.confirm import main as confirm_main

        return confirm_main(argv[1:])
    args = build_parser().parse_args(argv)
    if not args.paths:
        args.paths = ["-"] if args.stdin_filename else ["."]
    try:
        return _run(args)
    except config.UsageError as error:
        print(f"torchdev-lint: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        # The reader went away (`torchdev-lint . | head`): stop quietly, as other tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FINDINGS


def _list_rules(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="torchdev-lint rules", description="List every rule.")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)
    print(docs.rule_list(args.format == "json"))
    return EXIT_CLEAN


def _server(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="torchdev-lint server",
        description="A language server (LSP) on standard input and output: diagnostics as you type, "
        "quick fixes and a source.fixAll action, with each file's pyproject.toml settings. Needs the "
        "'server' extra (pygls, lsprotocol). Editor set-ups: docs/editors.md.")
    parser.add_argument("--stdio", action="store_true",
                        help="accepted for editors that pass it: standard input and output are the only transport")
    parser.parse_args(argv)
    try:
        from torchdev_lint.integrations.server import main as server_main
    except ImportError as error:
        print(f"torchdev-lint: error: the language server needs the 'server' extra, pygls and lsprotocol "
              f"(pip install 'pygls>=2,<3' lsprotocol; see docs/editors.md): {error}", file=sys.stderr)
        return EXIT_ERROR
    return server_main()


def _overrides(args) -> config.Overrides:
    per_file = {}
    for entry in args.per_file_ignores:
        pattern, sep, codes = entry.rpartition(":")
        if not sep or not pattern:
            raise config.UsageError(f"--per-file-ignores: expected PATTERN:CODES, got '{entry}'")
        per_file[_anchored(pattern)] = config.split_codes(codes)
    return config.Overrides(
        select=config.split_codes(args.select) if args.select else None,
        extend_select=config.split_codes(args.extend_select or ""),
        ignore=config.split_codes(args.ignore or ""),
        exclude=_patterns(args.exclude) if args.exclude is not None else None,
        extend_exclude=_patterns(args.extend_exclude or ""),
        per_file_ignores=per_file,
        unsafe_fixes=args.unsafe_fixes,
        fix_device=config.check_fix_device(args.fix_device, "--fix-device") if args.fix_device else None,
        preview=args.preview,
        target_devices=("configured" if args.target_devices is None
                        else config.target_devices(args.target_devices, "--target-devices")),
    )


def _patterns(text: str) -> list[str]:
    return [_anchored(p.strip()) for p in text.split(",") if p.strip()]


def _anchored(pattern: str) -> str:
    """A command-line path pattern means a path from the working directory (as ruff's do),
    whichever configuration's root the file has."""
    return config.anchored(pattern, Path.cwd().resolve().as_posix())


def _settings(args) -> config.Settings | config.Resolver:
    """One set of settings for every file (--isolated, --config), else each file's own."""
    overrides = _overrides(args)
    if args.isolated:
        return overrides.apply(config.Settings())
    if args.config is not None:
        if not args.config.is_file():
            raise config.UsageError(f"{args.config}: no such configuration file")
        return overrides.apply(config.load(args.config))
    return config.Resolver(overrides)


def _show_settings(settings: config.Settings, path: str) -> str:
    lines = [
        f"file: {path}",
        f"configuration: {settings.source or '(none: defaults)'}",
        f"root: {settings.root}",
        f"select: {', '.join(settings.select)}",
        f"ignore: {', '.join(settings.ignore)}",
        f"rules: {', '.join(r.code for r in runner.rules_for(settings.rules, settings, path))}",
        f"exclude: {', '.join([*config.DEFAULT_EXCLUDE, *settings.exclude])}",
        f"per-file-ignores: {settings.per_file_ignores}",
        f"unsafe-fixes: {str(settings.unsafe_fixes).lower()}",
        f"fix-device: {settings.fix_device}",
        f"preview: {str(settings.preview).lower()}",
        f"target-devices: {','.join(settings.target_devices) if settings.target_devices else 'auto'}",
    ]
    return "\n".join(lines)


def _run(args) -> int:
    if args.explain:
        page = docs.explain(args.explain.upper())
        if page is None:
            raise config.UsageError(f"--explain: unknown rule code '{args.explain}'")
        print(page)
        return EXIT_CLEAN
    settings = _settings(args)
    if args.show_settings:
        print(_show_settings(settings.for_path(args.show_settings), args.show_settings))
        return EXIT_CLEAN
    real = [p for p in args.paths if p != "-"]
    # Run-wide choices (the SARIF root, the cache, the [*] marks) follow the first path's settings.
    base = _base_settings(settings, [*real, args.stdin_filename or "."])
    unsafe = base.unsafe_fixes
    fixing = args.fix or args.fix_only or args.diff

    run = Run(root=files.repository_root(real[0] if real else ".", base.root), within=real)
    paths, run.errors = files.discover(real, settings, not args.no_respect_gitignore)
    if args.show_files:
        print("\n".join(paths))
        return EXIT_ERROR if run.errors else EXIT_CLEAN
    linter = api.Linter(settings=settings, cache=_cache(args, base), jobs=_jobs(args), verdicts=_verdicts(args))
    # One project index for the run: what every file (and stdin's package) defines.
    linter.index_paths([*paths, *([args.stdin_filename] if args.stdin_filename else [])],
                       say=(lambda text: print(f"torchdev-lint: {text}", file=sys.stderr)) if args.verbose else None)
    bar = progress.Progress(len(paths)) if progress.wanted(args.quiet, args.format) else None
    checked = runner.check_paths(paths, linter.job(), linter.jobs, bar.update if bar else None)
    if bar:
        bar.close()
    stdin = _read_stdin(args.stdin_filename or "-") if "-" in args.paths else None
    if isinstance(stdin, FileError):
        run.errors.append(stdin)
    elif stdin is not None:
        run.sources[stdin.path] = stdin  # code frames quote the text read, not a file of that name
        checked.insert(0, runner.Checked(linter.check_source(stdin)))
        if (fixing and not args.diff) or args.add_noqa:
            run.stdout = stdin.file_text  # unchanged unless a fix or a directive applies
    for item in checked:
        result = item.result
        if args.verbose:
            print(f"torchdev-lint: {'cached' if item.cached else 'checked'} {result.path}", file=sys.stderr)
        if fixing and any(applicable(f, settings.for_path(result.path).unsafe_fixes) for f in result.findings):
            from_stdin = result.module is not None  # the others come without their tree
            source = stdin if from_stdin else files.read(result.path)
            if isinstance(source, files.SourceFile):
                full = result if from_stdin else linter.check_source(source)
                result = _fix(run, linter, source, full, write=not args.diff, to_stdout=from_stdin)
        if result.error:
            run.errors.append(result.error)
        elif not args.add_noqa and not args.fix_only:
            # After the cache (a cached result never hides a verdict recorded since) and after
            # fixing (a fixed file is new content: its verdicts are gone).
            from_stdin = isinstance(stdin, files.SourceFile) and result.path == stdin.path and result.module is not None
            text = (run.stdout if run.stdout is not None else stdin.file_text) if from_stdin else None
            run.verdicts.add(linter.apply_verdicts(result, text))
        # Keep the findings, not every file's tree: only files with findings stay in memory.
        result.module = result.context = None
        run.results.append(result)

    if args.add_noqa:
        from_stdin = stdin if isinstance(stdin, files.SourceFile) else None
        added = sum(_add_noqa(run, r, from_stdin if from_stdin and i == 0 else None)
                    for i, r in enumerate(run.results) if r.findings)
        for error in sorted(run.errors, key=lambda e: e.path):
            print(f"torchdev-lint: {error}", file=sys.stderr)
        print(f"Added {added} noqa directive{'s' if added != 1 else ''}.", file=sys.stderr)
        if run.stdout is not None:
            sys.stdout.write(run.stdout)
        return EXIT_ERROR if run.errors else EXIT_CLEAN
    for error in sorted(run.errors, key=lambda e: e.path):
        print(f"torchdev-lint: {error}", file=sys.stderr)
    if args.diff:
        sys.stdout.write("".join(run.diffs))
        if not args.quiet:
            print(f"Would fix {_problems(len(run.fixed))}.", file=sys.stderr)
        return EXIT_ERROR if run.errors else (EXIT_FINDINGS if run.diffs else EXIT_CLEAN)
    findings = [] if args.fix_only else run.findings
    with _report_stream(args, fixing_stdin=run.stdout is not None) as out:
        _report(args, run, findings, len(checked), out, unsafe)
    if run.stdout is not None:
        sys.stdout.write(run.stdout)
    if run.errors:
        return EXIT_ERROR
    return EXIT_FINDINGS if findings and not args.exit_zero else EXIT_CLEAN


def _base_settings(settings, paths: list[str]) -> config.Settings:
    """The settings of the first of ``paths`` that can be looked at: one in a directory this
    user cannot enter is reported by ``files.discover``, and must not end the run here."""
    for path in paths:
        try:
            return settings.for_path(path)
        except OSError:
            continue
    return settings.for_path(".")


def _cache(args, settings: config.Settings) -> cache.Cache | None:
    if args.no_cache:
        return None
    return cache.Cache(args.cache_dir or settings.root / cache.DIRNAME, cache.tool_fingerprint())


def _verdicts(args):
    """The verdict store the run reads: off with --no-verdicts, in --cache-dir when given, else
    in each file's project cache directory."""
    if args.no_verdicts:
        return False
    if args.cache_dir is not None:
        return verdict_store.VerdictStore(args.cache_dir)
    return True


def _jobs(args) -> int:
    if args.jobs is None:
        return pool.available_cores()
    if args.jobs < 1:
        raise config.UsageError(f"--jobs: expected a number of processes of at least 1, got {args.jobs}")
    return args.jobs


def _problems(count: int) -> str:
    return f"{count} problem{'s' if count != 1 else ''}"


@contextlib.contextmanager
def _report_stream(args, fixing_stdin: bool):
    """Where the report goes: --output-file, else stdout; stderr when stdout carries the
    fixed source (`--fix -`)."""
    if args.output_file is not None:
        try:
            with open(args.output_file, "w", encoding="utf-8") as handle:
                yield handle
        except OSError as error:
            raise config.UsageError(f"--output-file: {args.output_file}: {error.strerror or error}") from None
    else:
        yield sys.stderr if fixing_stdin else sys.stdout


def _report(args, run: Run, findings: list[Finding], sources: int, out, unsafe: bool) -> None:
    style = args.format if args.format in output.TEXT_STYLES else "full"
    fmt = "text" if args.format in output.TEXT_STYLES else args.format
    context = output.OutputContext(
        errors=run.errors, root=run.root, unsafe_fixes=unsafe,
        concise=style == "concise" or args.quiet, color=output.text.use_color(out),
        source_line=run.source_line, show_evidence=args.show_evidence,
        hidden=sum(r.hidden for r in run.results), set_aside=sum(r.set_aside for r in run.results),
    )
    if args.statistics and fmt == "text":
        rendered = output.text.statistics(findings, context)
    else:
        rendered = output.render(findings, fmt, context)
    if rendered:
        print(rendered.rstrip("\n") if context.concise or args.statistics else rendered, file=out)
    if fmt != "text" or args.quiet:
        if not sources and not run.errors:
            print("No Python files found.", file=sys.stderr)
        return
    if not sources and not run.errors:
        print("No Python files found.", file=sys.stderr)
    elif args.fix or args.fix_only:
        remaining = "" if args.fix_only else f", {len(findings)} remaining"
        print(f"Fixed {_problems(len(run.fixed))}{remaining}.", file=out)
        if args.show_fixes:
            print(output.text.fixes_by_file(run.fixed), file=out)
    else:
        # Files that could not be read have no result: count them among those looked at.
        looked_at = {r.path for r in run.results} | {e.path for e in run.errors}
        print(output.summary(findings, len(looked_at), context), file=out)
        if run.verdicts:
            print(run.verdicts.words(), file=out)


def _add_noqa(run: Run, result: FileResult, stdin: files.SourceFile | None) -> int:
    """Write the file's baseline directives; standard input's go to stdout, as `--fix -`."""
    source = stdin or files.read(result.path)
    if not isinstance(source, files.SourceFile):
        return 0
    if source.notebook is not None and not source.notebook.round_trips():
        run.errors.append(FileError(source.path, "noqa directives not written: the notebook's JSON "
                                    "layout could not be kept (save it with Jupyter first)"))
        return 0
    text, added = noqa.baseline(source, result.findings)
    if stdin is not None:
        run.stdout = text
    elif added:
        error = files.write_atomically(source, text, run.within)
        if error is not None:
            run.errors.append(error)
            return 0
    return added


def _read_stdin(name: str) -> files.SourceFile | FileError:
    if sys.stdin is None:  # `torchdev-lint - <&-`: no descriptor 0 at all
        return FileError(name, "cannot read standard input: it is closed")
    try:
        return files.decode(name, sys.stdin.buffer.read())
    except (OSError, ValueError) as error:
        return FileError(name, f"cannot read standard input: {getattr(error, 'strerror', None) or error}")


def _fix(run: Run, linter: api.Linter, source: files.SourceFile, result: FileResult,
         write: bool, to_stdout: bool) -> FileResult:
    unsafe = linter.settings_for(source.path).unsafe_fixes
    outcome = fix_to_fixpoint(result, linter.relint(source.path), unsafe)
    if outcome.error is not None:
        run.errors.append(outcome.error)
        if not outcome.fixed:
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
            split_lines(old, keepends=True), split_lines(new, keepends=True),
            f"a/{source.path.lstrip('/')}", f"b/{source.path.lstrip('/')}",
        )))
    elif to_stdout:
        run.stdout = new
    else:
        error = files.write_atomically(source, new, run.within)
        if error is not None:
            run.errors.append(error)
            return result
    run.fixed.extend(outcome.fixed)
    fixed = files.decode(source.path, new.encode(source.encoding))
    if not isinstance(fixed, files.SourceFile):
        return result
    run.sources[source.path] = fixed
    return linter.check_source(fixed)
