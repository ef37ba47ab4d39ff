"""How many bytes reach LibCST, and that the sites miss no finding (issue 39).

    python benchmarks/bench_sites.py DIR [DIR ...]

For each DIR (a project, indexed as one), every ``.py`` file is checked by each rule of the
default output alone, with ``--preview``'s findings kept (certain and possible), and without the
sites filter: a file where a rule reports must hold that rule's site (``analysis/sites.py``).
Prints the share of the bytes that the text prefilters (``Rule.wants``) let through, that the
sites let through (what LibCST parses with ``--preview``), that the default tier parses (the
sites of rules whose findings there could be certain, ``Rule.may_be_certain``), and that hold
a finding of some rule. Lists each miss (a finding without its rule's site, or a certain one
where its rule said none could be) and exits 1 when there is one.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torchdev_lint.rules  # noqa: E402,F401  (registers the rules)
from torchdev_lint import engine, pyast, runner  # noqa: E402
from torchdev_lint.analysis import sites  # noqa: E402
from torchdev_lint.finding import Confidence  # noqa: E402
from torchdev_lint.rule import Rule  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directories", nargs="+", type=Path)
    args = parser.parse_args()
    rules = [cls for _, cls in sorted(Rule.registry.items()) if not cls.preview and cls.code != "TDL090"]
    shares: collections.Counter[str] = collections.Counter()
    misses = []
    for directory in args.directories:
        paths = sorted(str(Path(d) / f) for d, _, names in os.walk(directory) for f in names if f.endswith(".py"))
        index = runner.build_index(paths, None)
        for path in paths:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            tree = pyast.parse(text)
            if tree is None:
                continue
            size = len(text.encode("utf-8", "surrogatepass"))
            shares["all"] += size
            found = sites.of_tree(tree)
            wanted = [cls for cls in rules if cls.wants(text)]
            kept = [cls for cls in wanted if found is None or cls.sites is None or not cls.sites.isdisjoint(found)]
            certain = [cls for cls in kept if found is None or cls.may_be_certain(index, path, found)]
            shares["wants"] += size if wanted else 0
            shares["sites"] += size if kept else 0
            shares["default"] += size if certain else 0
            reported = False
            for cls in wanted:
                result = engine.lint_source(path, text, [cls], index=index, preview=True, apply_noqa=False)
                if result.findings:
                    reported = True
                    if cls not in kept:
                        misses.append(f"{path}: {cls.code} at line {result.findings[0].line} has no site")
                    sure = [f for f in result.findings if f.confidence is Confidence.CERTAIN]
                    if sure and cls not in certain:
                        misses.append(f"{path}: {cls.code} at line {sure[0].line} is certain where it could not be")
            shares["findings"] += size if reported else 0
    total = shares["all"] or 1
    print(f"{shares['all'] / 1e6:.1f} MB of Python in {len(args.directories)} directories:")
    print(f"  let through by the text prefilters:  {shares['wants'] / total:.0%}")
    print(f"  let through by the sites (parsed):   {shares['sites'] / total:.0%}")
    print(f"  parsed by the default tier:          {shares['default'] / total:.0%}")
    print(f"  in files where some rule reports:    {shares['findings'] / total:.0%}")
    for miss in misses:
        print("  MISSED", miss)
    print(f"  {len(misses)} findings without their rule's site or certain where they could not be")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
