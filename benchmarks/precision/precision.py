"""First-look precision: judge findings on repositories the rules were never tuned on.

    python benchmarks/precision/precision.py judge  REPO_DIR OWNER/NAME [--preview] > rows.tsv
    python benchmarks/precision/precision.py report REPOS_DIR [--role ROLE] [--preview]

``judge`` lints a checkout and prints one row per finding to judge (a seeded sample of
``SAMPLE`` when there are more), in the column order of ``labels/`` with the verdict
and reason left empty. ``report`` lints every repository of ``registry.tsv`` found under
REPOS_DIR (as ``owner+name``), matches the findings to ``labels/`` by (repo, path,
cell, line, code), and prints per rule: right, wrong, debatable, unjudged, precision
(right / (right + wrong)) and strict precision (right / judged). A finding with no label
is counted as unjudged, never as right. The protocol is in README.md beside this file.
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import random
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REGISTRY = HERE / "registry.tsv"
LABELS = HERE / "labels"  # one <owner>+<name>.tsv per repository
SAMPLE = 30
LABEL_COLUMNS = ["repo", "commit", "path", "cell", "line", "code", "verdict", "reason"]
VERDICTS = ("right", "wrong", "debatable")


def lint(checkout: Path, preview: bool) -> list[dict]:
    """The findings a user would see running the CLI at the checkout's root."""
    command = [sys.executable, "-m", "torchdev_lint", "--no-cache", "--no-daemon",
               "--format", "json", "--exit-zero", "-q", "."]
    if preview:
        command.append("--preview")
    done = subprocess.run(command, cwd=checkout, capture_output=True, text=True)
    try:  # exit 2 with findings: some files could not be checked (syntax errors), as in any repo
        return json.loads(done.stdout or "[]")
    except json.JSONDecodeError:
        sys.exit(f"{checkout}: torchdev-lint exited {done.returncode}: {done.stderr.strip()[-500:]}")


def key(repo: str, path: str, cell, line, code: str) -> tuple:
    return (repo, path, str(cell or ""), str(line), code)


def read_tsv(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def sample(repo: str, findings: list[dict]) -> list[dict]:
    """Every finding, or SAMPLE of them chosen by a seed fixed by the repository's name."""
    ordered = sorted(findings, key=lambda f: (f["path"], f.get("cell") or 0, f["line"], f["code"]))
    if len(ordered) <= SAMPLE:
        return ordered
    chosen = random.Random(repo).sample(range(len(ordered)), SAMPLE)
    return [ordered[i] for i in sorted(chosen)]


def judge(args) -> None:
    checkout = Path(args.checkout)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True,
                            text=True).stdout.strip() or args.commit
    writer = csv.writer(sys.stdout, delimiter="\t", lineterminator="\n")
    writer.writerow(LABEL_COLUMNS)
    for f in sample(args.repo, lint(checkout, args.preview)):
        writer.writerow([args.repo, commit, f["path"].removeprefix("./"), f.get("cell") or "",
                         f["line"], f["code"], "", f["message"]])


def report(args) -> int:
    labels = {key(r["repo"], r["path"], r["cell"], r["line"], r["code"]): r
              for table in sorted(LABELS.glob("*.tsv")) for r in read_tsv(table)}
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    repos = 0
    for entry in read_tsv(REGISTRY):
        if args.role and entry["role"] != args.role:
            continue
        checkout = Path(args.repos_dir) / entry["repo"].replace("/", "+")
        if not checkout.is_dir():
            print(f"{entry['repo']}: no checkout at {checkout}, skipped", file=sys.stderr)
            continue
        repos += 1
        for f in lint(checkout, args.preview):
            k = key(entry["repo"], f["path"].removeprefix("./"), f.get("cell"), f["line"], f["code"])
            verdict = labels[k]["verdict"] if k in labels else "unjudged"
            counts[f["code"]][verdict] += 1
            counts["all"][verdict] += 1
            if verdict in ("wrong", "debatable") and args.verbose:
                print(f"  {verdict:9} {entry['repo']} {k[1]}:{k[3]} {k[4]}  {labels[k]['reason']}")
            if verdict == "unjudged" and args.verbose:
                print(f"  unjudged  {entry['repo']} {k[1]}:{k[3]} {k[4]}  {f['message']}")
    print(f"{repos} repositories, role={args.role or 'any'}, tier={'preview' if args.preview else 'default'}")
    print(f"{'rule':8} {'right':>5} {'wrong':>5} {'debat':>5} {'unjdg':>5} {'prec':>5} {'strict':>6}")
    for code in sorted(counts, key=lambda c: (c == "all", c)):
        c = counts[code]
        judged = c["right"] + c["wrong"] + c["debatable"]
        precision = c["right"] / (c["right"] + c["wrong"]) if c["right"] + c["wrong"] else float("nan")
        strict = c["right"] / judged if judged else float("nan")
        print(f"{code:8} {c['right']:5} {c['wrong']:5} {c['debatable']:5} {c['unjudged']:5} "
              f"{precision:5.2f} {strict:6.2f}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    j = sub.add_parser("judge", help="print the findings of one checkout to judge")
    j.add_argument("checkout")
    j.add_argument("repo", help="owner/name")
    j.add_argument("--commit", default="")
    j.add_argument("--preview", action="store_true")
    r = sub.add_parser("report", help="precision per rule over the registered repositories")
    r.add_argument("repos_dir")
    r.add_argument("--role", help="only repositories of this role (e.g. first-look)")
    r.add_argument("--preview", action="store_true")
    r.add_argument("-v", "--verbose", action="store_true", help="list wrong, debatable and unjudged")
    args = parser.parse_args(argv)
    if args.command == "judge":
        judge(args)
        return 0
    return report(args)


if __name__ == "__main__":
    sys.exit(main())
