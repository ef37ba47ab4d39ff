"""Recall of torchdev-lint on lines that humans changed in real device-fix commits.

    python benchmarks/real-fixes/recall.py [--mirrors DIR] [--map OWNER/NAME=GITDIR ...]
                                           [--tsv fixes.tsv] [--python PY] [--pythonpath DIR]
                                           [-j N] [--json OUT] [-- EXTRA LINTER ARGS...]

For every fix commit in ``fixes.tsv`` (one row per bug line: repo, fix_commit,
parent_commit, path, line, bug_class, note) this extracts the PARENT commit's tree
(``git archive PARENT | tar -x``) into a temporary directory, once per parent, and runs
the linter at the root of that tree the way a user would::

    python -m torchdev_lint --no-cache --no-daemon --format json --exit-zero -q . [EXTRA]

with the tree as the working directory, in three configurations: the default output,
``--preview``, and ``--target-devices cpu,cuda``. A recorded line is a *hit* when a
finding (any TDL code) on the same path covers the statement that holds the line: the
innermost simple statement, or the header of a compound statement (``if``/``for``/``def``
...), as Python's ``ast`` reads the parent's file; a line of a file that does not parse is
its own span. The codes that hit are printed. If the CLI rejects ``--target-devices``
that column reads "not available".

Git directories: ``--map owner/name=/path/to/git-dir`` (repeatable) wins; otherwise the
first of ``DIR/owner+name/repo``, ``DIR/owner+name``, ``DIR/owner+name.git`` that is a git
directory, with ``DIR`` from ``--mirrors`` (default ``/work/.mirror``, where the ``fetch``
tool leaves bare snapshots). A repository that cannot be found, or a parent commit missing
from it, is reported and its lines count as "n/a" (left out of the recall).

``--python`` picks the interpreter that runs the linter (default: this one);
``--pythonpath DIR`` puts a source tree of torchdev_lint first on ``PYTHONPATH`` (e.g. an
exported commit: ``git archive HEAD | tar -x -C /tmp/tdl``) so a clean commit is measured
rather than whatever is installed.
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONFIGS = OrderedDict(
    [
        ("default", []),
        ("preview", ["--preview"]),
        ("target cpu,cuda", ["--target-devices", "cpu,cuda"]),
    ]
)
NOT_AVAILABLE = "not available"


def git_dir_for(repo: str, mirrors: Path, mapping: dict[str, str]) -> Path | None:
    if repo in mapping:
        return Path(mapping[repo])
    flat = repo.replace("/", "+")
    for cand in (mirrors / flat / "repo", mirrors / flat, mirrors / (flat + ".git")):
        if (cand / "HEAD").exists() and (cand / "objects").exists():
            return cand
    return None


def has_commit(git_dir: Path, commit: str) -> bool:
    r = subprocess.run(
        ["git", "--git-dir", str(git_dir), "cat-file", "-e", commit + "^{commit}"],
        capture_output=True,
    )
    return r.returncode == 0


def extract(git_dir: Path, commit: str, into: Path) -> list[str]:
    """``git archive COMMIT | tar -x``; when the snapshot lacks a blob (fetched snapshots
    leave out files of 4 MiB and more), write the tree blob by blob instead, skipping the
    missing ones. Returns the paths that could not be written."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.Popen(
        ["git", "--git-dir", str(git_dir), "archive", "--format=tar", commit],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    tar = subprocess.run(["tar", "-x", "-C", str(into)], stdin=archive.stdout, capture_output=True)
    archive.stdout.close()
    if archive.wait() == 0 and tar.returncode == 0:
        return []
    return _extract_blobwise(git_dir, commit, into)


def _extract_blobwise(git_dir: Path, commit: str, into: Path) -> list[str]:
    listing = subprocess.run(
        ["git", "--git-dir", str(git_dir), "ls-tree", "-r", "-z", "--full-tree", commit],
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    entries = []
    for item in listing:
        if not item:
            continue
        meta, path = item.split(b"\t", 1)
        mode, kind, sha = meta.split()
        if kind == b"blob":
            entries.append((mode, sha, path.decode("utf-8", "surrogateescape")))
    cat = subprocess.Popen(
        ["git", "--git-dir", str(git_dir), "cat-file", "--batch"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    missing = []
    for mode, sha, path in entries:
        cat.stdin.write(sha + b"\n")
        cat.stdin.flush()
        head = cat.stdout.readline().split()
        if len(head) < 3 or head[1] == b"missing":
            missing.append(path)
            continue
        data = cat.stdout.read(int(head[2]))
        cat.stdout.read(1)
        target = into / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if mode == b"120000":
            try:
                os.symlink(data.decode("utf-8", "surrogateescape"), target)
            except OSError:
                pass
        else:
            target.write_bytes(data)
            if mode == b"100755":
                target.chmod(0o755)
    cat.stdin.close()
    cat.wait()
    return missing


def statement_span(source: str, line: int) -> tuple[int, int]:
    """The lines of the innermost statement holding ``line`` (a compound one: its header)."""
    try:
        module = ast.parse(source)
    except (SyntaxError, ValueError):
        return line, line
    best = (line, line)
    best_size = None

    def visit(node: ast.AST) -> None:
        nonlocal best, best_size
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.stmt):
                visit(child)
                continue
            start = child.lineno
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and child.decorator_list:
                start = min(d.lineno for d in child.decorator_list)
            end = child.end_lineno or start
            if not start <= line <= end:
                continue
            body = getattr(child, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                header_end = max(start, body[0].lineno - 1)
                if line <= header_end:
                    span = (start, header_end)
                    size = span[1] - span[0]
                    if best_size is None or size <= best_size:
                        best, best_size = span, size
                    continue
                visit(child)
                continue
            span = (start, end)
            size = end - start
            if best_size is None or size <= best_size:
                best, best_size = span, size
            visit(child)  # e.g. a lambda or comprehension cannot hold statements, but be thorough

    visit(module)
    return best


def run_linter(tree: Path, args: list[str], python: str, env: dict[str, str]) -> tuple[list[dict] | None, str]:
    """Findings (None when there are none to read) and what went wrong, if anything. A file
    that does not parse makes the CLI exit 2 after printing the other files' findings: those
    findings count, and the error is passed on as a note."""
    cmd = [python, "-m", "torchdev_lint", "--no-cache", "--no-daemon", "--format", "json", "--exit-zero", "-q", ".", *args]
    r = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, env=env)
    err = r.stderr.strip()
    if r.returncode != 0 and "--target-devices" in args and not r.stdout.strip() and (
        "unrecognized arguments" in err or "target-devices" in err or "target_devices" in err
    ):
        return None, NOT_AVAILABLE
    try:
        findings = json.loads(r.stdout)
    except json.JSONDecodeError:
        return None, f"linter exited {r.returncode}, no JSON: {err[-400:]}"
    if not isinstance(findings, list):
        return None, f"linter exited {r.returncode}, unexpected JSON: {r.stdout[:200]!r}"
    return findings, (f"linter exited {r.returncode}: {err[-300:]}" if r.returncode != 0 else "")


def norm(path: str) -> str:
    p = os.path.normpath(path).replace(os.sep, "/")
    return p[2:] if p.startswith("./") else p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tsv", default=str(HERE / "fixes.tsv"))
    ap.add_argument("--mirrors", default="/work/.mirror", help="folder of fetched bare git directories")
    ap.add_argument("--map", action="append", default=[], metavar="OWNER/NAME=GITDIR")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--pythonpath", default=None, help="a torchdev_lint source tree to put first on PYTHONPATH")
    ap.add_argument("-j", "--jobs", type=int, default=4, help="parent trees linted at once")
    ap.add_argument("--json", default=None, help="also write per-line results here")
    ap.add_argument("--only", default=None, help="comma-separated config names to run (default, preview, target)")
    opts = ap.parse_args(argv)

    mapping = dict(m.split("=", 1) for m in opts.map)
    mirrors = Path(opts.mirrors)
    env = dict(os.environ)
    if opts.pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (opts.pythonpath, env.get("PYTHONPATH")) if p)
    configs = OrderedDict(CONFIGS)
    if opts.only:
        keep = [k.strip() for k in opts.only.split(",")]
        configs = OrderedDict((k, v) for k, v in configs.items() if any(k.startswith(w) for w in keep))

    with open(opts.tsv, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    for r in rows:
        r["line"] = int(r["line"])
    parents: OrderedDict[tuple[str, str], list[dict]] = OrderedDict()
    for r in rows:
        parents.setdefault((r["repo"], r["parent_commit"]), []).append(r)

    version = subprocess.run(
        [opts.python, "-m", "torchdev_lint", "--version"], capture_output=True, text=True, env=env
    ).stdout.strip()
    print(f"{version or 'torchdev-lint ?'}; {len(rows)} lines, "
          f"{len({r['fix_commit'] for r in rows})} fix commits, {len({r['repo'] for r in rows})} repositories; "
          f"extra args: {' '.join(extra) or '-'}", flush=True)

    results: dict[int, dict[str, object]] = {}  # id(row) -> config -> hit codes / None (miss) / "n/a"
    details: dict[int, dict[str, list]] = {}  # id(row) -> config -> the findings that hit
    notes: list[str] = []
    unavailable: set[str] = set()

    def work(key: tuple[str, str]) -> None:
        repo, parent = key
        lines = parents[key]
        git_dir = git_dir_for(repo, mirrors, mapping)
        if git_dir is None or not has_commit(git_dir, parent):
            why = "no git directory" if git_dir is None else f"parent {parent[:10]} missing in {git_dir}"
            notes.append(f"{repo}: {why}; {len(lines)} line(s) n/a")
            for r in lines:
                results[id(r)] = {c: "n/a" for c in configs}
            return
        with tempfile.TemporaryDirectory(prefix="realfix-") as tmp:
            tree = Path(tmp) / "tree"
            t0 = time.time()
            missing = extract(git_dir, parent, tree)
            if missing:
                py = [m for m in missing if m.endswith(".py")]
                notes.append(f"{repo}@{parent[:10]}: {len(missing)} file(s) absent from the snapshot"
                             + (f", {len(py)} Python: {', '.join(py[:3])}" if py else " (none Python)"))
            spans = {}
            for r in lines:
                try:
                    src = (tree / r["path"]).read_text(encoding="utf-8", errors="replace")
                except FileNotFoundError:
                    src = ""
                    notes.append(f"{repo}@{parent[:10]}: {r['path']} not in the parent tree")
                spans[id(r)] = statement_span(src, r["line"])
            for name, args in configs.items():
                findings, err = run_linter(tree, [*args, *extra], opts.python, env)
                if findings is not None and err:
                    notes.append(f"{repo}@{parent[:10]} [{name}]: {err} (its JSON findings are used)")
                if findings is None:
                    if err == NOT_AVAILABLE:
                        unavailable.add(name)
                    else:
                        notes.append(f"{repo}@{parent[:10]} [{name}]: {err}")
                    for r in lines:
                        results.setdefault(id(r), {})[name] = "n/a"
                    continue
                by_path = defaultdict(list)
                for fd in findings:
                    by_path[norm(fd["path"])].append(fd)
                for r in lines:
                    lo, hi = spans[id(r)]
                    hits = [
                        fd for fd in by_path.get(norm(r["path"]), [])
                        if fd["line"] <= hi and (fd.get("end_line") or fd["line"]) >= lo
                    ]
                    codes = sorted({f"{fd['code']}" + ("?" if fd.get("confidence") == "possible" else "") for fd in hits})
                    results.setdefault(id(r), {})[name] = codes or None
                    details.setdefault(id(r), {})[name] = [
                        {k: fd.get(k) for k in ("code", "line", "confidence", "message")}
                        | {"evidence": [e.get("message") for e in fd.get("evidence") or []]}
                        for fd in hits
                    ]
            print(f"  {repo}@{parent[:10]}: {len(lines)} line(s), {time.time() - t0:.0f}s", file=sys.stderr, flush=True)

    def guarded(key: tuple[str, str]) -> None:
        try:
            work(key)
        except Exception as e:  # one broken tree must not lose the others' results
            notes.append(f"{key[0]}@{key[1][:10]}: {type(e).__name__}: {e}; its lines are n/a")
            for r in parents[key]:
                results[id(r)] = {c: "n/a" for c in configs}

    with ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
        list(pool.map(guarded, parents))

    # Per-line listing.
    names = list(configs)
    print()
    print("Per line (hit: the TDL codes reported on the line's statement; '?' = a possible finding; '-' = miss)")
    header = ["repo", "commit", "path:line", "class", *names]
    table = []
    for r in rows:
        res = results.get(id(r), {})
        cells = []
        for n in names:
            v = res.get(n, "n/a")
            if n in unavailable:
                cells.append(NOT_AVAILABLE)
            elif v == "n/a":
                cells.append("n/a")
            elif v:
                cells.append("hit " + ",".join(v))
            else:
                cells.append("-")
        table.append([r["repo"], r["fix_commit"][:10], f"{r['path']}:{r['line']}", r["bug_class"], *cells])
    widths = [max(len(str(x)) for x in col) for col in zip(header, *table)]
    for line in [header, *table]:
        print("  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip())

    # Recall overall and per class.
    classes = sorted({r["bug_class"] for r in rows})
    print()
    print("Recall (lines hit / lines measured)")
    header = ["class", "lines", *names]
    out = []
    for cls in [*classes, "ALL"]:
        sel = [r for r in rows if cls == "ALL" or r["bug_class"] == cls]
        cells = []
        for n in names:
            if n in unavailable:
                cells.append(NOT_AVAILABLE)
                continue
            measured = [r for r in sel if results.get(id(r), {}).get(n, "n/a") != "n/a"]
            hit = [r for r in measured if results[id(r)][n]]
            cells.append(f"{len(hit)}/{len(measured)}" + (f" ({len(hit) / len(measured):.2f})" if measured else ""))
        out.append([cls, str(len(sel)), *cells])
    widths = [max(len(str(x)) for x in col) for col in zip(header, *out)]
    for line in [header, *out]:
        print("  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip())
    for n in notes:
        print("note:", n)

    if opts.json:
        dump = []
        for r in rows:
            res = results.get(id(r), {})
            dump.append({
                **r,
                "results": {n: (NOT_AVAILABLE if n in unavailable else res.get(n, "n/a")) for n in names},
                "findings": details.get(id(r), {}),
            })
        Path(opts.json).write_text(json.dumps(dump, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
