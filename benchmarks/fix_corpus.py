"""Run ``--fix --unsafe-fixes`` over copies of real repositories and check the result.

    python benchmarks/fix_corpus.py [--diffs] [--preview] DIR [DIR...]

For each DIR: copy it to a temporary directory, lint it, fix it, then check that every
changed file still compiles (a notebook: still parses as JSON), that no name a fix introduced (``device``, ``torch``) is read
at import time before the statement that binds it (``unbound_introductions``), re-lint it
(no finding still marked fixable: the mark promised a fix), and run the fix a second time
(which must change nothing). Prints a table, and with ``--diffs`` a few diffs to read by eye.
``--preview`` fixes the possible findings too (docs/confidence.md). Every fix that moves a
value (makes a buffer, a ``ModuleList``/``ModuleDict``, adds ``device=``) is listed with the
evidence its finding carries.
"""

from __future__ import annotations

import argparse
import builtins
import difflib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import libcst as cst

from torchdev_lint.analysis import tree
from torchdev_lint.analysis.devices import bindings, reads


def _names_read(module: cst.Module) -> set[str]:
    names: set[str] = set()

    def enter(node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Attribute):
            tree.walk(node.value, enter)
            return False
        if isinstance(node, cst.Arg):  # `f(map_location=...)` names a parameter, reads nothing
            tree.walk(node.value, enter)
            return False
        if isinstance(node, cst.Name):
            names.add(node.value)
        return True

    tree.walk(module, enter)
    return names


def _bound_anywhere(module: cst.Module) -> set[str]:
    """Names bound in any scope: the module, each function, lambda and class body."""
    names = set(bindings(module))

    def enter(node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            names.update(bindings(node))
        return True

    tree.walk(module, enter)
    return names


def unbound_introductions(before: str, after: str) -> list[str]:
    """What a fix may have broken by binding order: names it introduced (read in ``after``,
    absent from ``before``) that nothing binds at module level, and module-level statements
    it added or changed that read, at import time, a name bound only further down."""
    old, new = cst.parse_module(before), cst.parse_module(after)
    problems = []
    for name in sorted(_names_read(new) - _names_read(old) - _bound_anywhere(new)):
        if not hasattr(builtins, name):
            problems.append(f"`{name}` is never bound")
    unchanged = {old.code_for_node(s) for s in old.body}
    first = {}
    for index, statement in enumerate(new.body):
        for name in bindings_of(statement):
            first.setdefault(name, index)
    for index, statement in enumerate(new.body):
        if new.code_for_node(statement) in unchanged:
            continue
        for name in sorted(n for n, at in first.items() if at > index and reads(statement, n)):
            line = new.code_for_node(statement).strip().splitlines()[0]
            problems.append(f"`{name}` is read (`{line}`) before it is bound")
    return problems


def bindings_of(statement: cst.CSTNode) -> set[str]:
    return set(bindings(cst.Module(body=[statement])))


# Rules whose fixes move a value: a buffer, a module container, a factory's device.
VALUE_MOVING = ("TDL006", "TDL007", "TDL008")
TIER: list[str] = []  # ["--preview"] to check the possible findings too


def lint_json(directory: Path) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-m", "torchdev_lint", "--isolated", "--no-cache", "--format", "json", "--exit-zero",
         *TIER, "."],
        cwd=directory, capture_output=True, text=True,
    ).stdout
    return json.loads(out)


def fix(directory: Path) -> None:
    subprocess.run([sys.executable, "-m", "torchdev_lint", "--isolated", "--no-cache", "--fix",
                    "--unsafe-fixes", "-q", *TIER, "."], cwd=directory, capture_output=True)


def snapshot(directory: Path) -> dict[Path, bytes]:
    """Every file --fix may write: Python sources and notebooks."""
    return {p: p.read_bytes() for pattern in ("*.py", "*.ipynb") for p in directory.rglob(pattern) if p.is_file()}


def still_valid(path: Path, data: bytes) -> None:
    """Raise SyntaxError (or ValueError for a notebook) when the fixed file no longer loads."""
    if path.suffix == ".ipynb":
        json.loads(data)
    else:
        compile(data, str(path), "exec")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--diffs", action="store_true", help="print a few diffs per repository")
    parser.add_argument("--preview", action="store_true", help="fix possible findings too")
    parser.add_argument("dirs", nargs="+", type=Path, metavar="DIR")
    args = parser.parse_args()
    TIER[:] = ["--preview"] if args.preview else []
    show_diffs = args.diffs
    print("| repository | findings | marked fixable | fixed | remaining | files changed | do not compile | "
          "introduced names unbound | second --fix changed |")
    print("|---|---|---|---|---|---|---|---|---|")
    for source in args.dirs:
        with tempfile.TemporaryDirectory() as temp:
            work = Path(temp) / source.name
            shutil.copytree(source, work, ignore=shutil.ignore_patterns(".git"), symlinks=True)
            before = snapshot(work)
            findings = lint_json(work)
            fix(work)
            after = snapshot(work)
            changed = [p for p in after if after[p] != before.get(p)]
            broken, unbound = [], []
            for path in changed:
                try:
                    still_valid(path, after[path])
                except (SyntaxError, ValueError) as error:
                    broken.append(f"{path.relative_to(work)}: {error}")
                    continue
                if path.suffix == ".ipynb":
                    continue
                unbound += [f"{path.relative_to(work)}: {problem}" for problem in unbound_introductions(
                    before[path].decode("utf-8", "replace"), after[path].decode("utf-8", "replace"))]
            remaining = lint_json(work)
            fix(work)
            second = [p for p, data in snapshot(work).items() if data != after.get(p)]
            by_code: dict[str, int] = {}
            for finding in findings:
                by_code[finding["code"]] = by_code.get(finding["code"], 0) + 1
            marked = sum(1 for finding in findings if finding["fixable"])  # what `--unsafe-fixes` promises
            print(f"| {source.name} | {len(findings)} | {marked} | {len(findings) - len(remaining)} | "
                  f"{len(remaining)} | {len(changed)} | {len(broken)} | {len(unbound)} | {len(second)} |",
                  flush=True)
            for line in broken:
                print("   BROKEN", line)
            for line in unbound:
                print("   UNBOUND", line)
            for path in second:
                print("   CHANGED AGAIN", path.relative_to(work))
            for finding in (f for f in remaining if f["fixable"]):
                print("   STILL MARKED FIXABLE", f"{finding['path']}:{finding['line']}: {finding['code']}")
            for finding in (f for f in findings if f["fixable"] and f["code"] in VALUE_MOVING):
                steps = "; ".join(f"{s['line']}: {s['message']}" for s in finding.get("evidence", [])) or "none"
                print(f"   MOVES {finding['path']}:{finding['line']} {finding['code']} "
                      f"[{finding['confidence']}] evidence: {steps}")
            for path in changed[:3] if show_diffs else ():
                diff = difflib.unified_diff(
                    before[path].decode("utf-8", "replace").splitlines(),
                    after[path].decode("utf-8", "replace").splitlines(),
                    str(path.relative_to(work)), str(path.relative_to(work)), n=1, lineterm="",
                )
                print("\n".join(list(diff)[:30]))


if __name__ == "__main__":
    main()
