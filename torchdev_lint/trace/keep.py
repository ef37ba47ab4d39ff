"""Keep a trace's verdicts for the linter (docs/verdicts.md): which finding lines each run
reached, what it confirmed, and each device problem no finding predicted. Parent side: plain
data, no torch."""

from __future__ import annotations

import os

from torchdev_lint import verdict_store
from torchdev_lint.trace.verdicts import CONFIRMED, RUNTIME_CODES, TracedFinding, Where


def record(findings, traced: list[TracedFinding], runs, where: Where, root: str, program: str,
           cache_dir: str | None = None) -> int:
    """Merge one trace into the project's verdict store; how many files were recorded.
    ``findings``: the static findings (every tier) of the program's files; ``program``: how the
    evidence names the run (``python train.py --epochs 1``)."""
    from torchdev_lint import config

    try:
        project = config.Resolver(None).for_path(root).root
    except (config.UsageError, OSError):
        project = root
    store = verdict_store.VerdictStore.for_root(project, cache_dir)
    recording = verdict_store.Recording(str(store.directory.parent))  # entry paths: from the cache's project
    finished = [r for r in runs if r.error is None and not r.killed]
    for f in findings:
        real = os.path.realpath(f.path)
        recording.file(real, lines_recorded=bool(finished))
        recording.finding(real, f.to_json())
        for run in finished:
            if run.executed(real, f.line, f.end_line) is not None:
                # Each line of the finding that ran: the linter matches findings by their lines.
                for line in range(f.line, f.end_line + 1):
                    if run.executed(real, line, line) is not None:
                        recording.ran(real, line, run.mode or "sim", program)
    by = f"`{program}`"
    for t in traced:
        if t.status != CONFIRMED:
            continue
        real = os.path.realpath(os.path.join(where.cwd, t.path))
        if t.code in RUNTIME_CODES:
            recording.problem(real, t.code, t.line, t.column, by, t.mode or "sim", t.evidence, message=t.message,
                              name=t.name, end_line=t.end_line, end_column=t.end_column)
        else:
            recording.confirm(real, t.code, t.line, t.column, by, t.mode or "sim", t.evidence)
    return recording.save(store)
