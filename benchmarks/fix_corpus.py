"""Run ``--fix --unsafe-fixes`` over copies of real repositories and check the result.

    python benchmarks/fix_corpus.py DIR [DIR...]

For each DIR: copy it to a temporary directory, lint it, fix it, then check that every
changed file still parses and compiles, re-lint it, and run the fix a second time (which
must change nothing). Prints per-repository counts and a few diffs to read by eye.
"""

from __future__ import annotations

import difflib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def lint_json(directory: Path) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-m", "torchdev_lint", "--isolated", "--format", "json", "--exit-zero", "."],
        cwd=directory, capture_output=True, text=True,
    ).stdout
    return json.loads(out)


def snapshot(directory: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in directory.rglob("*.py") if p.is_file()}


def main() -> None:
    for source in map(Path, sys.argv[1:]):
        with tempfile.TemporaryDirectory() as temp:
            work = Path(temp) / source.name
            shutil.copytree(source, work, ignore=shutil.ignore_patterns(".git"), symlinks=True)
            before = snapshot(work)
            findings = lint_json(work)
            subprocess.run([sys.executable, "-m", "torchdev_lint", "--isolated", "--fix",
                            "--unsafe-fixes", "-q", "."], cwd=work, capture_output=True)
            after = snapshot(work)
            changed = [p for p in after if after[p] != before.get(p)]
            broken = []
            for path in changed:
                try:
                    compile(after[path], str(path), "exec")
                except SyntaxError as error:
                    broken.append(f"{path.relative_to(work)}: {error}")
            remaining = lint_json(work)
            subprocess.run([sys.executable, "-m", "torchdev_lint", "--isolated", "--fix",
                            "--unsafe-fixes", "-q", "."], cwd=work, capture_output=True)
            second = [p for p, data in snapshot(work).items() if data != after.get(p)]
            by_code: dict[str, int] = {}
            for finding in findings:
                by_code[finding["code"]] = by_code.get(finding["code"], 0) + 1
            print(f"{source.name}: {len(findings)} findings {by_code}, {len(findings) - len(remaining)} fixed, "
                  f"{len(remaining)} remaining, {len(changed)} files changed, "
                  f"{len(broken)} do not compile, second --fix changed {len(second)} files")
            for line in broken:
                print("   BROKEN", line)
            for path in changed[:3]:
                diff = difflib.unified_diff(
                    before[path].decode("utf-8", "replace").splitlines(),
                    after[path].decode("utf-8", "replace").splitlines(),
                    str(path.relative_to(work)), str(path.relative_to(work)), n=1, lineterm="",
                )
                print("\n".join(list(diff)[:30]))


if __name__ == "__main__":
    main()
