"""Recall of torchdev-lint on device-chosen-twice bugs that people found by reading real code.

    python benchmarks/device-chosen-twice/recall.py CHECKOUTS [CHECKOUTS ...] [--tsv bugs.tsv]

``bugs.tsv`` holds one row per bug (``verdict`` bug or likely-bug) or per candidate that
turned out not to be one (``near-miss``): where two device decisions meet, the line of each
decision, and why. The repositories are first-look repositories of the precision registry,
pinned at the commit there; each CHECKOUTS folder holds extracted trees named
``owner+name`` (as the precision protocol leaves them).

For each repository the linter runs twice at its root, as a user would: the default output
and ``--preview``. A bug counts as *caught* by a tier when a finding of that tier (any code)
sits on one of its three lines; a near-miss counts as *flagged* the same way. Printed: each
row with the codes that landed on it, then the totals per tier, and how many of the bugs
TDL013 itself flags.
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _findings(tree: Path, preview: bool) -> list[dict]:
    command = [sys.executable, "-m", "torchdev_lint", "--no-cache", "--no-daemon", "--format", "json",
               "--exit-zero", "-q", *(["--preview"] if preview else []), "."]
    done = subprocess.run(command, cwd=tree, capture_output=True, text=True)
    return json.loads(done.stdout or "[]")


def _spots(row: dict) -> set[tuple[str, int]]:
    spots = set()
    for column in ("meeting", "machine_decision", "user_decision"):
        path, _, line = row[column].rpartition(":")
        spots.add((path, int(line)))
    return spots


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="+", type=Path)
    parser.add_argument("--tsv", type=Path, default=HERE / "bugs.tsv")
    args = parser.parse_args(argv)
    rows = list(csv.DictReader(args.tsv.open(encoding="utf-8"), delimiter="\t"))
    cache: dict[tuple[str, bool], list[dict]] = {}
    totals: collections.Counter = collections.Counter()
    for row in rows:
        folder = row["repo"].replace("/", "+")
        tree = next((c / folder for c in args.checkouts if (c / folder).is_dir()), None)
        kind = "bug" if row["verdict"] in ("bug", "likely-bug") else "near-miss"
        if tree is None:
            print(f"n/a      {row['repo']}: no checkout")
            totals[kind, "n/a"] += 1
            continue
        hits = {}
        for preview in (False, True):
            if (row["repo"], preview) not in cache:
                cache[row["repo"], preview] = _findings(tree, preview)
            hits[preview] = sorted({f"{f['code']}:{f['line']}" for f in cache[row["repo"], preview]
                                    if (f["path"].removeprefix("./"), f["line"]) in _spots(row)})
        tier = "default" if hits[False] else "preview" if hits[True] else "missed"
        totals[kind, tier] += 1
        totals[kind, "TDL013"] += any(h.startswith("TDL013:") for h in hits[True])
        totals[kind, "all"] += 1
        print(f"{tier:8} {kind:9} {row['repo']} {row['meeting']}  {' '.join(hits[True])}")
    for kind in ("bug", "near-miss"):
        print(f"{kind}s: {totals[kind, 'all']}; a default finding on their lines {totals[kind, 'default']}, "
              f"only --preview {totals[kind, 'preview']}, none {totals[kind, 'missed']}; "
              f"TDL013 on {totals[kind, 'TDL013']}; no checkout {totals[kind, 'n/a']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
