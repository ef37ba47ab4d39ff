"""Rendering a trace: text for people, JSON for tools (see docs/trace.md)."""

from __future__ import annotations

import json
import shlex

from torchdev_lint.trace.session import Run
from torchdev_lint.trace.verdicts import (CONFIRMED, NOT_CONFIRMED, NOT_REACHED, TracedFinding, Where,
                                          stop_words, touched_accelerator, unsupported)

CPU_ONLY_WORDS = "the program ran on the CPU only: nothing to confirm"
STOPPED_EARLY_WORDS = "the program stopped before it used a GPU: this run confirms nothing"

MODE_WORDS = {
    "sim": "on a simulated GPU (values computed on the CPU, placement tracked as on cuda:0)",
    "real": "on the real GPU",
    "cpu-only": "as a machine without a GPU would",
    "auto": "on the GPU if there is one, else on a simulated GPU",
}


def command_line(run: Run) -> str:
    options = run.options
    head = ["python", "-m", options.target] if options.module else ["python", options.target]
    return shlex.join([*head, *options.args])


def outcome_words(run: Run, where: Where) -> str:
    outcome = run.outcome
    kind = outcome.get("kind")
    if run.error:
        return f"could not run: {run.error}"
    if kind == "exit":
        return f"exited with status {outcome.get('status', 0)}"
    if kind == "exception":
        message = outcome.get("message") or ""
        text = (f"raised {outcome.get('type')} at {where(outcome.get('site'))}"
                + (f": {message}" if message else "") + " (exit status 1)")
        if unsupported(run):
            text += "; the simulated GPU does not support what it asked for, so this run gives no verdict after it"
        return text
    if kind == "stopped":
        return f"stopped by the tracer {stop_words(outcome, run)}"
    if kind == "killed" and outcome.get("reason") == "peer":
        return "was killed: it was still waiting (in the group's start or a collective) after the other rank ended"
    if kind == "killed":
        return f"killed at the time limit ({run.options.timeout:g} s and a grace period): it did not stop"
    if kind == "interrupted":
        return "interrupted"
    return f"ended without a report from the tracer (exit status {run.returncode})"


def run_json(run: Run, where: Where) -> dict:
    outcome = dict(run.outcome)
    for key in ("site",):
        if outcome.get(key):
            site = outcome[key]
            outcome[key] = {"path": where.path(site[0]), "line": site[1], "column": site[3] + 1}
    outcome.pop("stack", None)
    return {
        "command": command_line(run),
        "mode": run.mode,
        "requested_mode": run.options.mode,
        "keep_going": run.options.keep_going,
        "torch": run.torch,
        "python": run.python,
        "outcome": outcome,
        "exit_status": run.outcome.get("status") if run.outcome.get("kind") == "exit" else (
            1 if run.outcome.get("kind") == "exception" else None),
        "optimizer_steps": run.steps,
        "seconds": run.seconds,
        "error": run.error,
        "summary": outcome_words(run, where),
        "limits": run.limits,
        "touched_accelerator": touched_accelerator(run),
    }


def render_json(traced: list[TracedFinding], runs: list[Run], where: Where, files=()) -> str:
    return json.dumps({
        "version": 1,
        "runs": [run_json(r, where) for r in runs],
        "files": [where.path(f) for f in files],
        "findings": [t.to_json() for t in traced],
        "summary": counts(traced),
    }, indent=2)


def counts(traced: list[TracedFinding]) -> dict:
    return {status: sum(1 for t in traced if t.status == status)
            for status in (CONFIRMED, NOT_CONFIRMED, NOT_REACHED)}


def render_text(traced: list[TracedFinding], runs: list[Run], where: Where, files=()) -> str:
    lines = []
    for number, run in enumerate(runs):
        extra = ", --keep-going" if run.options.keep_going else ""
        lines.append(f"Traced `{command_line(run)}` {MODE_WORDS.get(run.mode or run.options.mode, run.mode)}"
                     f" (torch {run.torch or '?'}{extra}, {run.seconds:.1f} s)")
        lines.append(f"  the program {outcome_words(run, where)}")
        if (number == 0 and run.error is None and run.mode in ("sim", "real") and not touched_accelerator(run)
                and not run.of_kind("mismatch")):  # another device (meta) met the CPU's
            ended_well = run.outcome.get("kind") == "exit" and run.outcome.get("status", 0) == 0
            lines.append(f"  {CPU_ONLY_WORDS if ended_well else STOPPED_EARLY_WORDS}")
        for limit in run.limits:
            lines.append(f"  limit: {limit}")
    if files:
        lines.append(f"Files checked: {', '.join(where.path(f) for f in files)}")
    lines.append("")
    for t in traced:
        lines.append(f"{t.path}:{t.line}:{t.column}: {t.code} {t.status}: {t.evidence}")
        lines.append(f"    {t.message}")
    summary = counts(traced)
    total = len(traced)
    if total:
        lines.append("")
        lines.append(f"{total} finding{'s' if total != 1 else ''}: {summary[CONFIRMED]} confirmed, "
                     f"{summary[NOT_CONFIRMED]} not confirmed, {summary[NOT_REACHED]} not reached.")
    else:
        lines.append("No findings in the program's files, and no device mismatch at run time.")
    return "\n".join(lines)


def untraceable(run: Run, traced: list[TracedFinding], where: Where) -> str | None:
    """One line when the program could not be traced: it failed (a syntax error, a crash, a
    feature the simulator lacks) before any finding was reached and nothing was confirmed."""
    outcome = run.outcome
    failed = outcome.get("kind") in ("exception", "crashed")
    if not failed or any(t.status != NOT_REACHED for t in traced):
        return None
    if unsupported(run):
        return (f"the program could not be traced: at {where(outcome.get('site'))} it used a feature the simulated "
                f"GPU does not support ({unsupported(run)})")
    return f"the program could not be traced: it {outcome_words(run, where)}"
