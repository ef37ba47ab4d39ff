"""From runtime events to a verdict per static finding, plus runtime-only TDL100 findings.

Parent side: plain data, no torch. A finding and an event match when they are in the same
file and their line ranges overlap (an event's site is the range of the call instruction,
which ``co_positions`` gives as the whole call expression, like the static finding's range).

Verdicts:
* ``confirmed``: the bug bit in this run (or, for TDL001/TDL002/TDL004, the run shows exactly
  where a machine without a GPU fails), with evidence: what, where, which devices;
* ``not confirmed``: the code ran and the bug did not bite, with why;
* ``not reached``: the code never ran.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

from torchdev_lint.trace.session import Run

CONFIRMED = "confirmed"
NOT_CONFIRMED = "not confirmed"
NOT_REACHED = "not reached"
STATUS_ORDER = {CONFIRMED: 0, NOT_CONFIRMED: 1, NOT_REACHED: 2}

MISMATCH_CODE = "TDL100"
MISMATCH_NAME = "device-mismatch"

# The origin a storage carries -> the rule whose finding explains a mismatch involving it.
ORIGIN_CODES = {
    "discarded-to-result": "TDL003",
    "optimizer-state-before-move": "TDL005",
    "unregistered-tensor-attribute": "TDL006",
    "unregistered-submodule-container": "TDL007",
    "factory-without-device": "TDL008",
}
ORIGIN_WORDS = {
    "discarded-to-result": "whose move result was discarded",
    "optimizer-state-before-move": "optimizer state created before the model moved",
    "unregistered-tensor-attribute": "a plain tensor attribute that the module move left behind",
    "unregistered-submodule-container": "a submodule in a plain container that the module move left behind",
    "factory-without-device": "created without device=",
}
NO_CUDA = "AssertionError: Torch not compiled with CUDA enabled"
CUDA_LOAD = ("RuntimeError: Attempting to deserialize object on a CUDA device but "
             "torch.cuda.is_available() is False")
FOREACH_PREFIX = "Tensors of the same index must be on the same device"
MISMATCH_PREFIXES = ("Expected all tensors to be on the same device", FOREACH_PREFIX)


@dataclass
class Verdict:
    status: str
    evidence: str
    mode: str | None = None


@dataclass
class TracedFinding:
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    code: str
    name: str
    message: str
    fixable: bool
    fix_applicability: str | None
    status: str
    evidence: str
    mode: str | None = None
    events: list[dict] = field(default_factory=list)

    def sort_key(self) -> tuple:
        return (self.path, self.line, self.column, self.code)

    def to_json(self) -> dict:
        return {
            "path": self.path, "line": self.line, "column": self.column,
            "end_line": self.end_line, "end_column": self.end_column, "code": self.code,
            "name": self.name, "message": self.message, "fixable": self.fixable,
            "fix_applicability": self.fix_applicability, "status": self.status,
            "evidence": self.evidence, "mode": self.mode,
        }


class Where:
    """Renders sites for evidence: ``train.py:41`` (relative to the current directory)."""

    def __init__(self, cwd: str | None = None):
        self.cwd = cwd or os.getcwd()

    def path(self, path: str) -> str:
        relative = os.path.relpath(path, self.cwd)
        return path if relative.startswith("..") else relative

    def __call__(self, site) -> str:
        if not site:
            return "an unknown place"
        return f"{self.path(site[0])}:{site[1]}"


def _overlaps(site, path: str, first: int, last: int) -> bool:
    return bool(site) and site[0] == path and site[1] <= last and first <= site[2]


class Judge:
    """Verdicts for one run."""

    def __init__(self, run: Run, findings, where: Where):
        self.run = run
        self.where = where
        self.findings = findings
        self.device_word = {"sim": "the simulated GPU", "real": "the GPU"}.get(run.mode or "", "this machine")

    # -- helpers ----------------------------------------------------------------------------
    def _at(self, kind: str, f, path: str, stack: bool = False) -> list[dict]:
        out = []
        for e in self.run.of_kind(kind):
            if _overlaps(e.get("site"), path, f.line, f.end_line) or (
                    stack and any(_overlaps(s, path, f.line, f.end_line) for s in e.get("stack") or [])):
                out.append(e)
        return out

    def _mismatches_from(self, origin_kind: str, path: str, f) -> list[dict]:
        out = []
        for e in self.run.of_kind("mismatch"):
            for operand in e.get("operands", []):
                origin = operand.get("origin") or {}
                if origin.get("kind") == origin_kind and _overlaps(origin.get("site"), path, f.line, f.end_line):
                    out.append(e)
                    break
        return out

    def _later_use(self, mismatches: list[dict]) -> str:
        if not mismatches:
            return ""
        m = mismatches[0]
        more = f" (and {len(mismatches) - 1} more place{'s' if len(mismatches) > 2 else ''})" if len(mismatches) > 1 else ""
        devices = " and ".join(m.get("devices", []))
        stop = "; the program stopped there" if m.get("raised") else ""
        return f"; it then met {devices} tensors in {m.get('op')} at {self.where(m.get('site'))}{more}{stop}"

    def _not_reached(self, f, path: str) -> Verdict:
        outcome = self.run.outcome
        why = "this line never ran"
        if self.run.killed:
            why += f" (the run was killed at the {self.run.options.timeout:g} s limit; lines are only known for a run that ends)"
        elif outcome.get("kind") == "stopped":
            why += f" before the tracer stopped the program ({stop_words(outcome, self.run)})"
        elif outcome.get("kind") == "exception":
            why += f" before the program stopped with {outcome.get('type')} at {self.where(outcome.get('site'))}"
        return Verdict(NOT_REACHED, why)

    # -- per rule ---------------------------------------------------------------------------
    def verdict(self, f, path: str) -> Verdict:
        method: Callable = getattr(self, f"_judge_{f.code}", self._judge_generic)
        verdict = method(f, path)
        if verdict is None:
            if self.run.executed(path, f.line, f.end_line) is None:
                verdict = self._not_reached(f, path)
            else:
                verdict = Verdict(NOT_CONFIRMED, "this line ran, but nothing it did showed the bug in this run")
        verdict.mode = self.run.mode
        return verdict

    def _judge_generic(self, f, path):
        if self.run.executed(path, f.line, f.end_line) is None:
            return None
        return Verdict(NOT_CONFIRMED, f"this line ran; the tracer has no runtime check for {f.code} yet")

    def _hardcoded(self, f, path, direct_only: bool):
        run = self.run
        requests = self._at("cuda-request", f, path)
        if run.mode == "cpu-only":
            if requests:
                e = requests[0]
                if e.get("raised"):
                    return Verdict(CONFIRMED, f"on a machine without a GPU, {e['what']} at {self.where(e['site'])} "
                                              f"raises {NO_CUDA}; the program stops there")
                return Verdict(CONFIRMED, f"on a machine without a GPU, {e['what']} at {self.where(e['site'])} "
                                          f"raises {NO_CUDA} (the tracer went on on the CPU to find the next one)")
            ran = run.executed(path, f.line, f.end_line)
            if ran is not None and not direct_only:
                later = [e for e in run.of_kind("cuda-request") if e["seq"] > ran]
                if later:
                    e = later[0]
                    verb = "raises" if e.get("raised") else "would raise"
                    return Verdict(CONFIRMED, f"this line ran on a machine without a GPU; the next CUDA request, "
                                              f"{e['what']} at {self.where(e['site'])}, {verb} {NO_CUDA}")
            if ran is not None:
                return Verdict(NOT_CONFIRMED, "this line ran on a machine without a GPU and made no CUDA request "
                                              "(its receiver held no tensors, or the device was not used)")
            return None
        if requests:
            e = requests[0]
            return Verdict(NOT_CONFIRMED, f"{e['what']} ran at {self.where(e['site'])} and worked on "
                                          f"{self.device_word} ({e.get('target')}); the bug shows only where "
                                          "CUDA is missing (a cpu-only run shows it: drop --single-run)")
        if run.executed(path, f.line, f.end_line) is not None:
            return Verdict(NOT_CONFIRMED, f"this line ran on {self.device_word} without error; the bug shows only "
                                          "where CUDA is missing (a cpu-only run shows it: drop --single-run)")
        return None

    def _judge_TDL001(self, f, path):
        return self._hardcoded(f, path, direct_only=True)

    def _judge_TDL002(self, f, path):
        return self._hardcoded(f, path, direct_only=False)

    def _judge_TDL003(self, f, path):
        discards = self._at("discarded-move", f, path)
        new = [e for e in discards if e.get("new")]
        if new:
            e = new[0]
            text = (f"{e['what']} at {self.where(e['site'])} produced a new tensor on {e['dst']} that was "
                    f"dropped; the tensor stayed on {e['src']}")
            return Verdict(CONFIRMED, text + self._later_use(self._mismatches_from("discarded-to-result", path, f)))
        if discards:
            e = discards[0]
            return Verdict(NOT_CONFIRMED, f"{e['what']} at {self.where(e['site'])} returned the tensor itself "
                                          f"(it was already on {e['dst']}): nothing was lost in this run")
        if self.run.executed(path, f.line, f.end_line) is not None:
            return Verdict(NOT_CONFIRMED, "this line ran, but its receiver was not a tensor (no tensor move happened)")
        return None

    def _judge_TDL004(self, f, path):
        loads = self._at("load", f, path)
        if not loads:
            return None
        for e in loads:
            accel = [loc for loc in e.get("locations", []) if not loc.startswith("cpu")]
            if not accel:
                continue
            where = self.where(e["site"])
            saved = ", ".join(accel)
            if self.run.mode == "cpu-only":
                if e.get("error"):
                    return Verdict(CONFIRMED, f"{e['api']} at {where} fails on a machine without a GPU: the "
                                              f"checkpoint holds storages saved on {saved}: {e['error']}")
                return Verdict(CONFIRMED, f"{e['api']} at {where} would fail on a machine without a GPU: the "
                                          f"checkpoint holds storages saved on {saved} (mapped to cpu to keep going)")
            return Verdict(CONFIRMED, f"{e['api']} at {where} restored storages saved on {saved} onto {saved} "
                                      f"({self.device_word}); on a machine without CUDA this load raises "
                                      f"{CUDA_LOAD}")
        e = loads[0]
        if e.get("error") and not e.get("locations"):
            return Verdict(NOT_CONFIRMED, f"{e['api']} at {self.where(e['site'])} failed before reading any "
                                          f"storage: {e['error']}")
        return Verdict(NOT_CONFIRMED, f"the checkpoint that {e['api']} at {self.where(e['site'])} read holds only "
                                      "cpu storages, so it loads anywhere (one saved from a GPU would not)")

    def _judge_TDL005(self, f, path):
        moves = self._at("optimizer-before-move", f, path, stack=True)
        bad = [m for m in moves if m.get("outcome") != "followed"]
        if bad:
            m = bad[0]
            where_opt, where_move = self.where(m["site"]), self.where(m.get("move_site"))
            if m["outcome"] == "params-replaced":
                text = (f"{m['move']} at {where_move} replaced {m['replaced']} of the parameters that the "
                        f"{m['optimizer']} built at {where_opt} holds: it keeps updating the old ones")
                orphan = [e for e in self._at("orphaned-step", f, path, stack=True) if e.get("no_grad")]
                if orphan:
                    text += (f"; after optimizer.step() at {self.where(orphan[0].get('step_site'))} none of its "
                             "parameters had a gradient: training does nothing")
                return Verdict(CONFIRMED, text)
            text = (f"the {m['optimizer']} built at {where_opt} already held state "
                    f"({', '.join(m.get('stale', []))}) when {m['move']} at {where_move} moved its parameters "
                    f"from {m.get('src')} to {m.get('dst')}: the state stayed on {', '.join(m.get('stale_devices', []))}")
            later = self._mismatches_from("optimizer-state-before-move", path, f)
            text += self._later_use(later)
            outcome = self.run.outcome
            if not later and str(outcome.get("message", "")).startswith(FOREACH_PREFIX):
                # a real GPU refuses the mixed state before any kernel runs
                text += f"; the program then failed at {self.where(outcome.get('site'))}: {outcome['message']}"
            return Verdict(CONFIRMED, text)
        if moves:
            m = moves[0]
            where_opt, where_move = self.where(m["site"]), self.where(m.get("move_site"))
            if m.get("src") == m.get("dst"):
                return Verdict(NOT_CONFIRMED, f"{m['move']} at {where_move} did not change the device "
                                              f"({m.get('src')}) of the {m['optimizer']} built at {where_opt}")
            return Verdict(NOT_CONFIRMED, f"{m['move']} at {where_move} kept the parameters' identity "
                                          f"({m.get('src')} -> {m.get('dst')}) and the {m['optimizer']} built at "
                                          f"{where_opt} held no state yet, so it follows the move (harmless with "
                                          "torch's default flags; it bites once the optimizer has state, e.g. "
                                          "after load_state_dict or step)")
        created = self._at("optimizer-created", f, path, stack=True)
        if created:
            return Verdict(NOT_CONFIRMED, f"the {created[0]['optimizer']} was built at {self.where(created[0]['site'])}, "
                                          "but its parameters were never moved afterwards in this run")
        if self.run.executed(path, f.line, f.end_line) is not None:
            return Verdict(NOT_CONFIRMED, "this line ran, but built no torch.optim optimizer")
        return None

    def _left_behind(self, f, path, event_kind, origin_kind, noun):
        mismatches = self._mismatches_from(origin_kind, path, f)
        left = self._at(event_kind, f, path)
        if mismatches:
            m = mismatches[0]
            origin = next(o["origin"] for o in m["operands"]
                          if (o.get("origin") or {}).get("kind") == origin_kind)
            e = left[0] if left else {}
            moved = (f" when {e.get('move')} at {self.where(e.get('move_site'))} moved the module to {e.get('target')}"
                     if e else "")
            device = e.get("device", "cpu")
            text = f"{origin.get('what', noun)} ({e.get('attr', noun)}) stayed on {device}{moved}"
            return Verdict(CONFIRMED, text + self._later_use(mismatches))
        if left:
            e = left[0]
            zero = " (a 0-dim tensor mixes with accelerator tensors in elementwise ops)" if e.get("ndim") == 0 else ""
            return Verdict(NOT_CONFIRMED, f"{e['attr']} stayed on {e['device']} when {e['move']} at "
                                          f"{self.where(e.get('move_site'))} moved the module to {e['target']}, but "
                                          f"no op mixed it with {e['target']} tensors in this run{zero}")
        if self.run.executed(path, f.line, f.end_line) is not None:
            return Verdict(NOT_CONFIRMED, f"the {noun} was assigned, but no module move left it on another device "
                                          "in this run")
        return None

    def _judge_TDL006(self, f, path):
        return self._left_behind(f, path, "attribute-left-behind", "unregistered-tensor-attribute",
                                 "tensor attribute")

    def _judge_TDL007(self, f, path):
        return self._left_behind(f, path, "container-left-behind", "unregistered-submodule-container",
                                 "container of submodules")

    def _judge_TDL008(self, f, path):
        mismatches = self._mismatches_from("factory-without-device", path, f)
        if mismatches:
            origin = next(o["origin"] for o in mismatches[0]["operands"]
                          if (o.get("origin") or {}).get("kind") == "factory-without-device")
            text = f"{origin.get('what', 'the factory')} at {self.where(origin.get('site'))} made a cpu tensor (no device=)"
            return Verdict(CONFIRMED, text + self._later_use(mismatches))
        if self.run.executed(path, f.line, f.end_line) is not None:
            return Verdict(NOT_CONFIRMED, "this line ran, but its cpu result never met a tensor on another device "
                                          "in this run (the module's inputs were on the cpu too)")
        return None

    def _judge_TDL009(self, f, path):
        calls = self._at("numpy", f, path)
        bad = [e for e in calls if e.get("device") != "cpu" and not e.get("force")]
        if bad:
            e = bad[0]
            verb = "raises" if e.get("raised") else "raises on a GPU"
            return Verdict(CONFIRMED, f"{e['what']} at {self.where(e['site'])} ran on a {e['device']} tensor: "
                                      f"{verb} TypeError: can't convert {e['device']} device type tensor to numpy"
                                      + ("" if e.get("raised") else " (the tracer went on, --keep-going)"))
        if calls:
            e = calls[0]
            return Verdict(NOT_CONFIRMED, f"the tensor was on {e['device']} when {e['what']} ran at "
                                          f"{self.where(e['site'])}")
        if self.run.executed(path, f.line, f.end_line) is not None:
            return Verdict(NOT_CONFIRMED, "this line ran, but called .numpy() on no tensor")
        return None

    # -- runtime-only findings ----------------------------------------------------------------
    def mismatch_findings(self, present_codes: set[str], by_path: dict[str, list]) -> list[dict]:
        """Mismatch events that no static finding explains, one per site (cascades grouped)."""

        def explained(event) -> bool:
            for operand in event.get("operands", []):
                origin = operand.get("origin") or {}
                code = ORIGIN_CODES.get(origin.get("kind"))
                site = origin.get("site")
                if code in present_codes and site:
                    for g in by_path.get(site[0], []):
                        if g.code == code and _overlaps(site, site[0], g.line, g.end_line):
                            return True
            return False

        groups: dict[tuple, list[dict]] = {}
        for e in self.run.of_kind("mismatch"):
            if not explained(e) and e.get("site"):
                groups.setdefault((e["site"][0], e["site"][1]), []).append(e)
        outcome = self.run.outcome
        if (outcome.get("kind") == "exception" and outcome.get("site")
                and str(outcome.get("message", "")).startswith(MISMATCH_PREFIXES)):
            key = (outcome["site"][0], outcome["site"][1])
            recorded = any(e.get("site") and (e["site"][0], e["site"][1]) == key
                           for e in self.run.of_kind("mismatch"))
            # an optimizer's state left behind by a move (TDL005) fails in the foreach grouping
            stale_state = str(outcome.get("message")).startswith(FOREACH_PREFIX) and "TDL005" in present_codes and any(
                e.get("outcome") == "state-left-behind" for e in self.run.of_kind("optimizer-before-move"))
            if not recorded and not stale_state:
                groups[key] = [{"op": None, "site": outcome["site"], "devices": [], "operands": [],
                                "raised": True, "message": f"{outcome.get('type')}: {outcome.get('message')}"}]
        return [self._mismatch_finding(events) for events in groups.values()]

    def _operand_words(self, operand) -> str:
        shape = "x".join(str(n) for n in operand.get("shape", [])) or "0-dim"
        text = f"the {operand['device']} operand ({shape})"
        origin = operand.get("origin")
        if origin:
            return f"{text} is {origin.get('what', '')} at {self.where(origin.get('site'))}, " \
                   f"{ORIGIN_WORDS.get(origin.get('kind'), origin.get('kind'))}"
        src = operand.get("src")
        if src:
            return f"{text} got its device from {src.get('what')} at {self.where(src.get('site'))}"
        if operand["device"] == "cpu":
            return f"{text} was never moved to an accelerator"
        return text

    def _mismatch_finding(self, events: list[dict]) -> dict:
        first = events[0]
        site = first["site"]
        if first.get("op") is None:
            evidence = f"{first['message']} at {self.where(site)}"
            message = "Device mismatch at run time"
        else:
            ops = []
            for e in events:
                if e["op"] not in ops:
                    ops.append(e["op"])
            devices = " and ".join(first.get("devices", []))
            message = f"Device mismatch at run time: {', '.join(ops)} mixed {devices} tensors"
            seen, words = set(), []
            for e in events:
                for operand in e.get("operands", []):
                    key = (operand["device"], str(operand.get("origin")), str(operand.get("src")))
                    if key not in seen and len(words) < 4:
                        seen.add(key)
                        words.append(self._operand_words(operand))
            count = sum(e.get("count", 1) for e in events)
            evidence = f"{', '.join(ops)} at {self.where(site)} mixed {devices} tensors"
            callers = []
            for e in events:
                for frame in (e.get("stack") or [])[1:3]:
                    text = self.where(frame)
                    if text not in callers and text != self.where(site):
                        callers.append(text)
            if callers:
                evidence += f" (called from {', '.join(callers)})"
            if count > 1:
                evidence += f" ({count} times)"
            if words:
                evidence += ": " + "; ".join(words)
            if any(e.get("raised") for e in events):
                evidence += "; the program stopped there"
        return {"site": site, "message": message, "evidence": evidence, "events": events}


def stop_words(outcome: dict, run: Run) -> str:
    reason = str(outcome.get("reason", ""))
    if reason.startswith("max-steps"):
        return f"after {run.steps} optimizer step{'s' if run.steps != 1 else ''}, --max-steps"
    if reason == "timeout":
        return f"at the {run.options.timeout:g} s time limit, --timeout"
    return reason or "stopped"


def judge(findings, runs: list[Run], where: Where, ignore_mismatch: bool = False) -> list[TracedFinding]:
    """Every static finding with its verdict (the most telling over the runs), then TDL100s."""
    by_path: dict[str, list] = {}
    real_paths = {}
    for f in findings:
        real = os.path.realpath(f.path)
        real_paths[id(f)] = real
        by_path.setdefault(real, []).append(f)
    judges = [Judge(r, findings, where) for r in runs if r.error is None]
    traced: list[TracedFinding] = []
    for f in findings:
        path = real_paths[id(f)]
        verdicts = [j.verdict(f, path) for j in judges] or [Verdict(NOT_REACHED, "the program did not run")]
        best = min(verdicts, key=lambda v: STATUS_ORDER[v.status])
        data = f.to_json()
        traced.append(TracedFinding(
            path=where.path(path) if os.path.isabs(f.path) else f.path, line=f.line, column=f.column,
            end_line=f.end_line, end_column=f.end_column, code=f.code, name=f.name, message=f.message,
            fixable=f.fixable, fix_applicability=data.get("fix_applicability"), status=best.status,
            evidence=best.evidence, mode=best.mode))
    if not ignore_mismatch:
        present = {f.code for f in findings}
        seen_sites = set()
        for j in judges:
            for m in j.mismatch_findings(present, by_path):
                site = m["site"]
                key = (site[0], site[1])
                if key in seen_sites:
                    continue
                seen_sites.add(key)
                traced.append(TracedFinding(
                    path=where.path(site[0]), line=site[1], column=site[3] + 1, end_line=site[2],
                    end_column=site[4] + 1, code=MISMATCH_CODE, name=MISMATCH_NAME, message=m["message"],
                    fixable=False, fix_applicability=None, status=CONFIRMED, evidence=m["evidence"],
                    mode=j.run.mode, events=m["events"]))
    return sorted(traced, key=TracedFinding.sort_key)
