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

import linecache
import os
import re
from dataclasses import dataclass, field
from typing import Callable

from torchdev_lint.trace.session import Run
from torchdev_lint.trace.text import DEVICE_ERROR, NO_GPU_ERROR, SIM_LIMIT_ERROR, sentence

CONFIRMED = "confirmed"
NOT_CONFIRMED = "not confirmed"
NOT_REACHED = "not reached"
STATUS_ORDER = {CONFIRMED: 0, NOT_CONFIRMED: 1, NOT_REACHED: 2}

MISMATCH_CODE = "TDL100"
MISMATCH_NAME = "device-mismatch"
NO_GPU_CODE = "TDL101"
NO_GPU_NAME = "fails-without-gpu"
RUNTIME_CODES = (MISMATCH_CODE, NO_GPU_CODE)
HARDCODED = ("TDL001", "TDL002")
# Rules whose bug, when it bites, crashes the program at (or through) the finding's own line.
CRASH_CONFIRMS = ("TDL003", "TDL006", "TDL007", "TDL008", "TDL009", "TDL013")
# Rules whose bug shows only where tensors are on an accelerator: a run as a machine without a
# GPU (where every tensor stays on the CPU) cannot tell them, as only it can tell HARDCODED ones
# (on the simulated GPU, a hardcoded device works).
ACCELERATOR_ONLY = ("TDL003", "TDL005", "TDL006", "TDL007", "TDL008", "TDL009", "TDL013", MISMATCH_CODE)

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


@dataclass
class Verdict:
    status: str
    evidence: str
    mode: str | None = None
    error: str | None = None  # the full error message the evidence cites (JSON only)


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
    error: str | None = None

    def sort_key(self) -> tuple:
        return (self.path, self.line, self.column, self.code)

    def to_json(self) -> dict:
        return {
            "path": self.path, "line": self.line, "column": self.column,
            "end_line": self.end_line, "end_column": self.end_column, "code": self.code,
            "name": self.name, "message": self.message, "fixable": self.fixable,
            "fix_applicability": self.fix_applicability, "status": self.status,
            "evidence": self.evidence, "mode": self.mode, "error": self.error,
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


def source(site) -> str:
    """The program's text of a site (its lines, cut to its columns)."""
    if not site:
        return ""
    lines = [linecache.getline(site[0], n) for n in range(site[1], site[2] + 1)]
    if not lines or not any(lines):
        return ""
    if len(lines) == 1:
        return lines[0][site[3]:site[4] or None]
    return lines[0][site[3]:] + "".join(lines[1:-1]) + lines[-1][:site[4] or None]


_ASSIGNED = re.compile(r"^\s*([A-Za-z_][\w.]*(?:\[[^\]]*\])?)\s*(?::[^=]+)?=(?!=)")


def assigned_name(path: str, line: int) -> str | None:
    """``device`` for ``device = "cuda"``, ``.device`` for ``self.device = ...`` (an attribute),
    ``["device"]`` for ``cfg["device"] = ...``: how a later use of the value names it; None when
    the line assigns nothing."""
    match = _ASSIGNED.match(linecache.getline(path, line))
    if not match:
        return None
    target = match.group(1)
    words = re.findall(r"\w+", target)
    if not words:
        return None
    if target.endswith("]"):
        return f'["{words[-1]}"]'
    return f".{words[-1]}" if "." in target else words[-1]


def mentions(site, name: str) -> bool:
    """Whether the site's text names ``name`` (a plain name, not the same word as an attribute)."""
    text = source(site)
    if name.startswith("["):
        word = name[2:-2]
        return bool(re.search(rf"\[\s*['\"]{re.escape(word)}['\"]\s*\]", text))
    if name.startswith("."):
        return bool(re.search(rf"\.{re.escape(name[1:])}\b", text))
    return bool(re.search(rf"(?<![\w.]){re.escape(name)}\b", text))


def touched_accelerator(run: Run) -> bool:
    """Whether the program asked for an accelerator at all (a move, a device=, a GPU checkpoint)."""
    return bool(run.of_kind("cuda-request")) or any(
        not loc.startswith("cpu") for e in run.of_kind("load") for loc in e.get("locations", []))


def unsupported(run: Run) -> str | None:
    """The error sentence when a simulated run stopped at a feature the simulator lacks."""
    outcome = run.outcome
    if run.mode == "sim" and outcome.get("kind") == "exception":
        full = outcome.get("full_message") or outcome.get("message") or ""
        if SIM_LIMIT_ERROR.search(full):
            return f"{outcome.get('type')}: {sentence(full)}"
    return None


class Judge:
    """Verdicts for one run."""

    def __init__(self, run: Run, findings, where: Where, single_run: bool = False):
        self.run = run
        self.where = where
        self.findings = findings
        self.single_run = single_run
        self.explained_requests: set[int] = set()  # cuda-request events a hardcoded finding explains
        # mismatch events a confirmed finding cites (its bug, not a TDL100 of its own), and
        # whether one was confirmed by the program's crash
        self.explained_mismatches: set[int] = set()
        self.explained_crash = False
        self._cited: list[int] = []
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
        """Mismatches (and ``.numpy()`` of an accelerator tensor) with an operand that has the
        finding's origin; each with ``origin``, that operand's."""
        out = []
        for e in self.run.of_kind("mismatch", "numpy"):
            operands = e.get("operands", []) if e["kind"] == "mismatch" else [{"origin": e.get("origin")}]
            for operand in operands:
                origin = operand.get("origin") or {}
                if origin.get("kind") == origin_kind and _overlaps(origin.get("site"), path, f.line, f.end_line):
                    out.append({**e, "origin": origin})
                    break
        return out

    def _later_use(self, mismatches: list[dict]) -> str:
        """Words for where the finding's tensor then met another device; the finding cites them
        (``verdict`` marks them explained if it is confirmed)."""
        self._cited += [m["seq"] for m in mismatches if "seq" in m]
        if not mismatches:
            return ""
        m = mismatches[0]
        more = f" (and {len(mismatches) - 1} more place{'s' if len(mismatches) > 2 else ''})" if len(mismatches) > 1 else ""
        stop = "; the program stopped there" if m.get("raised") else ""
        if m["kind"] == "numpy":
            return (f"; then {m['what']} at {self.where(m.get('site'))} read it on {m.get('device')}, which raises "
                    f"TypeError: can't convert {m.get('device')} device type tensor to numpy{more}{stop}")
        devices = " and ".join(m.get("devices", []))
        return f"; it then met {devices} tensors in {m.get('op')} at {self.where(m.get('site'))}{more}{stop}"

    def can_tell(self, code: str) -> bool:
        """Whether this run can show ``code``'s bug: hardcoded devices only where CUDA is missing,
        the accelerator-only rules only where tensors reach an accelerator."""
        if code in HARDCODED:
            return self.run.mode == "cpu-only"
        return code not in ACCELERATOR_ONLY or self.run.mode != "cpu-only"

    def _stopped(self) -> str | None:
        """How the program stopped before its end ("with TypeError at x.py:3"), or None if it ended."""
        outcome = self.run.outcome
        if outcome.get("kind") == "exception":
            return f"with {outcome.get('type')} at {self.where(outcome.get('site'))}"
        if outcome.get("kind") == "stopped":
            return f"when the tracer stopped it ({stop_words(outcome, self.run)})"
        if self.run.killed or outcome.get("kind") == "interrupted":
            return "before its end"
        return None

    def _not_reached(self, f, path: str) -> Verdict:
        outcome = self.run.outcome
        why = "this line never ran"
        if self.run.killed:
            why += f" (the run was killed at the {self.run.options.timeout:g} s limit; lines are only known for a run that ends)"
        elif outcome.get("kind") == "stopped":
            why += f" before the tracer stopped the program ({stop_words(outcome, self.run)})"
        elif unsupported(self.run):
            why += (f" before the program stopped at a feature the simulated GPU does not support, at "
                    f"{self.where(outcome.get('site'))} ({unsupported(self.run)}): no verdict from this run")
        elif outcome.get("kind") == "exception":
            why += f" before the program stopped with {outcome.get('type')} at {self.where(outcome.get('site'))}"
        return Verdict(NOT_REACHED, why)

    def _crash(self, f, path, pattern) -> dict | None:
        """The program's uncaught error, when it was raised at (or through) the finding's line and
        its message matches ``pattern``."""
        outcome = self.run.outcome
        if outcome.get("kind") != "exception":
            return None
        full = outcome.get("full_message") or outcome.get("message") or ""
        if not pattern.search(full):
            return None
        frames = [outcome.get("site"), *(outcome.get("stack") or [])]
        if any(_overlaps(site, path, f.line, f.end_line) for site in frames):
            return outcome
        return None

    def _crash_words(self, outcome) -> tuple[str, str]:
        full = outcome.get("full_message") or outcome.get("message") or ""
        return f"{outcome.get('type')}: {sentence(full)}", f"{outcome.get('type')}: {full}"

    # -- per rule ---------------------------------------------------------------------------
    def verdict(self, f, path: str) -> Verdict:
        method: Callable = getattr(self, f"_judge_{f.code}", self._judge_generic)
        self._cited = []
        verdict = method(f, path)
        if verdict is not None and verdict.status == CONFIRMED:
            self.explained_mismatches.update(self._cited)
        if (verdict is None or verdict.status != CONFIRMED) and f.code in CRASH_CONFIRMS:
            crash = self._crash(f, path, DEVICE_ERROR)
            if crash is not None:
                short, full = self._crash_words(crash)
                self.explained_crash = True
                # the device mix recorded at the finding's own line is that crash, not a second bug
                self.explained_mismatches.update(
                    e["seq"] for e in self.run.of_kind("mismatch")
                    if "seq" in e and e.get("site") and _overlaps(e["site"], path, f.line, f.end_line))
                verdict = Verdict(CONFIRMED, f"the program stopped at {self.where(crash.get('site'))}, "
                                             f"through this line, with {short}", error=full)
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
                self.explained_requests.update(e["seq"] for e in requests)
                e = requests[0]
                return Verdict(CONFIRMED, f"on a machine without a GPU, {e['what']} at {self.where(e['site'])} "
                                          f"raises {self._request_error(e)}", error=e.get("error"))
            crash = self._crash(f, path, NO_GPU_ERROR)
            if crash is not None:
                short, full = self._crash_words(crash)
                return Verdict(CONFIRMED, f"on a machine without a GPU, this line raises {short}; the program "
                                          "stops there", error=full)
            ran = run.executed(path, f.line, f.end_line)
            name = assigned_name(path, f.line) if not direct_only else None
            if ran is not None and name:
                uses = [e for e in run.of_kind("cuda-request") if e["seq"] > ran and mentions(e.get("site"), name)]
                if uses:
                    self.explained_requests.update(e["seq"] for e in uses)
                    e = uses[0]
                    more = f" (and {len(uses) - 1} more)" if len(uses) > 1 else ""
                    return Verdict(CONFIRMED, f"this line ran on a machine without a GPU; `{name}` was then used "
                                              f"by {e['what']} at {self.where(e['site'])}{more}, which raises "
                                              f"{self._request_error(e)}", error=e.get("error"))
                crash = self._crash_after(name)
                if crash is not None:
                    short, full = self._crash_words(crash)
                    return Verdict(CONFIRMED, f"this line ran on a machine without a GPU; `{name}` was then used "
                                              f"at {self.where(crash.get('site'))}, which raises {short}", error=full)
            stopped = self._stopped()
            if ran is not None and name and stopped:
                return Verdict(NOT_REACHED, f"this line ran on a machine without a GPU, but the program stopped "
                                            f"{stopped} before any use of `{name}`")
            if ran is not None:
                return Verdict(NOT_CONFIRMED, "this line ran on a machine without a GPU and its device reached no "
                                              "CUDA request (its receiver held no tensors, or the value was not "
                                              "used)")
            return None
        if self.single_run:
            later = "a second run as a machine without a GPU shows it: drop --single-run"
        else:
            later = "the bug shows only where CUDA is missing"
        if requests:
            e = requests[0]
            return Verdict(NOT_CONFIRMED, f"{e['what']} ran at {self.where(e['site'])} and worked on "
                                          f"{self.device_word} ({e.get('target')}); {later}")
        if run.executed(path, f.line, f.end_line) is not None:
            return Verdict(NOT_CONFIRMED, f"this line ran on {self.device_word} without error; {later}")
        return None

    @staticmethod
    def _request_error(e) -> str:
        error = sentence(e.get("error") or NO_CUDA)
        return error if e.get("raised") else f"{error} (the tracer went on on the CPU to find more)"

    def _crash_after(self, name: str) -> dict | None:
        """The no-GPU error the program stopped with, at a line that names ``name``."""
        outcome = self.run.outcome
        full = outcome.get("full_message") or outcome.get("message") or ""
        if outcome.get("kind") == "exception" and NO_GPU_ERROR.search(full) and mentions(outcome.get("site"), name):
            return outcome
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
            file = self.where.path(e["file"]) if e.get("file") else "the checkpoint"
            origin = e.get("provenance") or {}
            foreign = [loc for loc in accel if loc in origin.get("foreign", ())]
            if origin.get("by") == "this run" and not foreign:
                return Verdict(NOT_CONFIRMED, f"{e['api']} at {where} read {file}, which torch.save at "
                                              f"{self.where(origin.get('site'))} wrote earlier in this run: saved and "
                                              f"loaded by this run on {saved} (a machine without a GPU saves it on "
                                              "the CPU, and loads it back)")
            if origin.get("by") == "an earlier traced run":
                words = {"sim": "on the simulated GPU", "real": "on the GPU"}.get(origin.get("mode"), "")
                return Verdict(NOT_CONFIRMED, f"{e['api']} at {where} read {file}, which an earlier run of "
                                              f"torchdev-lint trace wrote {words} ({origin.get('when')}, "
                                              f"`{origin.get('command')}`, torch.save at "
                                              f"{self.where(origin.get('site'))}) with storages on {saved}: the "
                                              "tracer's own file says nothing about the checkpoints the program "
                                              "is given")
            if foreign:
                who = (f"written in this run by torch.save at {self.where(origin.get('site'))}, with location "
                       "tags its storages' devices do not explain (the program's own serialization code)")
            elif origin.get("by") == "before this run":
                who = "written before this run, not by it"
            else:
                who = "from a file object"
            about = f"{file} ({who}) holds storages saved on {saved}"
            if self.run.mode == "cpu-only":
                if e.get("error"):
                    return Verdict(CONFIRMED, f"{e['api']} at {where} fails on a machine without a GPU: {about}: "
                                              f"{sentence(e['error'])}", error=e["error"])
                return Verdict(CONFIRMED, f"{e['api']} at {where} would fail on a machine without a GPU: {about} "
                                          "(mapped to cpu to keep going)")
            return Verdict(CONFIRMED, f"{e['api']} at {where} restored storages onto {saved} "
                                      f"({self.device_word}): {about}; on a machine without CUDA this load raises "
                                      f"{CUDA_LOAD}")
        e = loads[0]
        file = self.where.path(e["file"]) if e.get("file") else "the checkpoint"
        if e.get("error") and not e.get("locations"):
            return Verdict(NOT_CONFIRMED, f"{e['api']} at {self.where(e['site'])} failed before reading any "
                                          f"storage of {file}: {sentence(e['error'])}", error=e["error"])
        return Verdict(NOT_CONFIRMED, f"{file}, which {e['api']} at {self.where(e['site'])} read, holds only "
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
            origin = m["origin"]
            e = left[0] if left else {}
            moved = (f" when {e.get('move')} at {self.where(e.get('move_site'))} moved the module to {e.get('target')}"
                     if e else "")
            device = e.get("device", "cpu")
            text = f"{origin.get('what', noun)} ({e.get('attr', noun)}) stayed on {device}{moved}"
            return Verdict(CONFIRMED, text + self._later_use(mismatches))
        if left:
            e = left[0]
            moved = (f"{e['attr']} stayed on {e['device']} when {e['move']} at {self.where(e.get('move_site'))} "
                     f"moved the module to {e['target']}")
            stopped = self._stopped()
            if stopped:
                return Verdict(NOT_REACHED, f"{moved}; the program stopped {stopped} before an op could mix it with "
                                            f"{e['target']} tensors")
            zero = " (a 0-dim tensor mixes with accelerator tensors in elementwise ops)" if e.get("ndim") == 0 else ""
            return Verdict(NOT_CONFIRMED, f"{moved}, but no op mixed it with {e['target']} tensors in this run{zero}")
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
            origin = mismatches[0]["origin"]
            text = f"{origin.get('what', 'the factory')} at {self.where(origin.get('site'))} made a cpu tensor (no device=)"
            return Verdict(CONFIRMED, text + self._later_use(mismatches))
        if self.run.executed(path, f.line, f.end_line) is None:
            return None
        if self._at("factory-while-accelerated", f, path):
            return Verdict(NOT_CONFIRMED, "this line ran, but its cpu result never met a tensor on another device "
                                          "in this run")
        stopped = self._stopped()
        if stopped:
            return Verdict(NOT_REACHED, f"this line ran only before the program put tensors on another device; it "
                                        f"stopped {stopped} before running it again")
        return Verdict(NOT_CONFIRMED, "this line ran only while the program kept its tensors on the CPU")

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

    def _judge_TDL010(self, f, path):
        # The loss keeps its CPU weight as a buffer: the mismatch happens where the loss is
        # called, with an operand made at the finding (or at its first evidence step, where
        # the weight is built on another line) by a factory without device=.
        places = [f, *[_Lines(e.line) for e in getattr(f, "evidence", ())[:1]]]
        mismatches = next((m for m in (self._mismatches_from("factory-without-device", path, p)
                                       for p in places) if m), [])
        if mismatches:
            origin = mismatches[0]["origin"]
            text = (f"the loss's weight, made by {origin.get('what', 'a factory')} at "
                    f"{self.where(origin.get('site'))} without device=, stayed on the cpu")
            return Verdict(CONFIRMED, text + self._later_use(mismatches))
        # A weight the tracer does not tag (a legacy `torch.FloatTensor`): a cpu operand in a
        # mismatch at the call the second evidence step names, inside the loss.
        calls = [_Lines(e.line) for e in getattr(f, "evidence", ())[1:2]]
        mixed = [m for c in calls for m in self._at("mismatch", c, path, stack=True) if "cpu" in m.get("devices", [])]
        if mixed:
            return Verdict(CONFIRMED, f"the loss, built here with a cpu weight, was called at "
                                      f"{self.where(mixed[0].get('site'))}" + self._later_use(mixed))
        if self.run.executed(path, f.line, f.end_line) is not None:
            return Verdict(NOT_CONFIRMED, "this line ran, but the loss's weight never met a tensor on another "
                                          "device in this run")
        return None

    def _judge_TDL012(self, f, path):
        # The copy of a Parameter is a plain tensor attribute: a module move leaves it where
        # it was made (as TDL006's attributes), and the op that meets it mixes devices.
        return self._left_behind(f, path, "attribute-left-behind", "unregistered-tensor-attribute",
                                 "copy of a Parameter")

    def _judge_TDL013(self, f, path):
        # Two decisions meet at the finding's line: a mismatch there (or in what it calls)
        # is the disagreement. They agree unless the program's options make them differ.
        mixed = self._at("mismatch", f, path, stack=True)
        if mixed:
            return Verdict(CONFIRMED, "the two device decisions disagreed in this run" + self._later_use(mixed))
        if self.run.executed(path, f.line, f.end_line) is not None:
            return Verdict(NOT_CONFIRMED, "this line ran and both decisions picked the same device in this run "
                                          "(give the program the option that asks for another device, e.g. "
                                          "`--cpu` or `--device cpu`)")
        return None

    def _judge_TDL011(self, f, path):
        # judged over the ranks' runs together (judge_ranks); a run alone cannot tell
        if self.run.executed(path, f.line, f.end_line) is None:
            return None
        why = ("drop --single-run: the tracer then runs it as two ranks" if self.single_run
               else "the tracer runs it as two ranks only where a TDL011 finding is selected")
        return Verdict(NOT_CONFIRMED, f"this line ran in one process; whether the ranks share a device shows only "
                                      f"when the program runs as several ranks ({why})")

    # -- runtime-only findings ----------------------------------------------------------------
    def mismatch_findings(self, present_codes: set[str], by_path: dict[str, list], confirmed: set) -> list[dict]:
        """Mismatch events that no static finding explains, one per site (cascades grouped).
        ``confirmed``: the (path, line) of findings already confirmed, whose crash this is."""

        def explained(event) -> bool:
            if event.get("seq") in self.explained_mismatches:  # a confirmed finding's own failure
                return True
            for operand in event.get("operands", []):
                origin = operand.get("origin") or {}
                code = ORIGIN_CODES.get(origin.get("kind"))
                site = origin.get("site")
                if code in present_codes and site:
                    for g in by_path.get(site[0], []):
                        if g.code == code and _overlaps(site, site[0], g.line, g.end_line):
                            return True
            return False

        def key(site) -> tuple:
            return (site[0], site[1])

        def call(event) -> tuple:  # the line and the lines it was called from
            return (key(event["site"]), *(key(f) for f in (event.get("stack") or [])[1:4]))

        events = [e for e in self.run.of_kind("mismatch") if e.get("site")]
        explained_calls = {call(e) for e in events if explained(e)}
        groups: dict[tuple, list[dict]] = {}
        for e in events:
            if explained(e):
                continue
            # with --keep-going, a later op of the same call on tensors computed from an explained
            # operand (an optimizer's sqrt of its stale state): the same bug, not a new one
            if call(e) in explained_calls and not any(o.get("origin") for o in e.get("operands", [])):
                continue
            groups.setdefault(key(e["site"]), []).append(e)
        outcome = self.run.outcome
        full = outcome.get("full_message") or outcome.get("message") or ""
        if (outcome.get("kind") == "exception" and outcome.get("site") and DEVICE_ERROR.search(full)
                and not unsupported(self.run)):
            where = key(outcome["site"])
            recorded = any(e.get("site") and key(e["site"]) == where for e in self.run.of_kind("mismatch", "numpy"))
            # an optimizer's state left behind by a move (TDL005) fails in the foreach grouping
            stale_state = full.startswith(FOREACH_PREFIX) and "TDL005" in present_codes and any(
                e.get("outcome") == "state-left-behind" for e in self.run.of_kind("optimizer-before-move"))
            if not recorded and not stale_state and where not in confirmed and not self.explained_crash:
                groups[where] = [{"op": None, "site": outcome["site"], "devices": [], "operands": [],
                                  "raised": True, "message": f"{outcome.get('type')}: {sentence(full)}",
                                  "error": f"{outcome.get('type')}: {full}", "stack": outcome.get("stack")}]
        return [self._mismatch_finding(events) for events in groups.values()]

    def no_gpu_findings(self, confirmed: set, finding_lines: set) -> list[dict]:
        """In the run as a machine without a GPU: each CUDA request that no hardcoded-device finding
        explains, one per line, and an uncaught no-GPU error at a line without any finding (a
        finding there, TDL004's load of a GPU checkpoint say, has its own verdict)."""
        if self.run.mode != "cpu-only":
            return []
        groups: dict[tuple, list[dict]] = {}
        for e in self.run.of_kind("cuda-request"):
            site = e.get("site")
            if site and e["seq"] not in self.explained_requests and (site[0], site[1]) not in confirmed:
                groups.setdefault((site[0], site[1]), []).append(e)
        out = []
        for events in groups.values():
            e = events[0]
            whats = []
            for other in events:
                if other["what"] not in whats:
                    whats.append(other["what"])
            out.append({"site": e["site"], "message": f"Fails without a GPU: {', '.join(whats)} asks for CUDA",
                        "evidence": f"on a machine without a GPU, {' and '.join(whats)} at {self.where(e['site'])} "
                                    f"raises {self._request_error(e)}; no static finding predicted it"
                                    + self._callers(events),
                        "events": events, "error": e.get("error")})
        outcome = self.run.outcome
        full = outcome.get("full_message") or outcome.get("message") or ""
        site = outcome.get("site")
        if outcome.get("kind") == "exception" and site and NO_GPU_ERROR.search(full):
            where = (site[0], site[1])
            if where not in groups and where not in finding_lines and not any(
                    e.get("site") and (e["site"][0], e["site"][1]) == where for e in self.run.of_kind("cuda-request")):
                short = f"{outcome.get('type')}: {sentence(full)}"
                out.append({"site": site, "message": "Fails without a GPU",
                            "evidence": f"on a machine without a GPU, the program stops at {self.where(site)} with "
                                        f"{short}; no static finding predicted it",
                            "events": [], "error": f"{outcome.get('type')}: {full}"})
        return out

    def _callers(self, events) -> str:
        callers = []
        for e in events:
            for frame in (e.get("stack") or [])[1:3]:
                text = self.where(frame)
                if text not in callers and text != self.where(e.get("site")):
                    callers.append(text)
        return f" (called from {', '.join(callers)})" if callers else ""

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
        if first.get("op") is None:  # an uncaught error that says devices differ (torch's, a library's check)
            evidence = f"{first['message']} at {self.where(site)}" + self._callers(events)
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
            evidence += self._callers(events)
            if count > 1:
                evidence += f" ({count} times)"
            if words:
                evidence += ": " + "; ".join(words)
            if any(e.get("raised") for e in events):
                evidence += "; the program stopped there"
        return {"site": site, "message": message, "evidence": evidence, "events": events, "error": first.get("error")}


def stop_words(outcome: dict, run: Run) -> str:
    reason = str(outcome.get("reason", ""))
    if reason.startswith("max-steps"):
        return f"after {run.steps} optimizer step{'s' if run.steps != 1 else ''}, --max-steps"
    if reason == "timeout":
        return f"at the {run.options.timeout:g} s time limit, --timeout"
    return reason or "stopped"


RANKS_CODE = "TDL011"  # judged over the runs of the ranks together (session.run_ranks)


def _rank_stop(run: Run, where: Where) -> str:
    """How a rank's run ended, in words for evidence ("" if it ended normally)."""
    outcome = run.outcome
    if outcome.get("kind") == "killed" and outcome.get("reason") == "peer":
        return "was stopped while it waited for the other rank, which had ended"
    stopped = Judge(run, [], where)._stopped()
    return f"stopped {stopped}" if stopped else ""


def judge_ranks(runs: list[Run], where: Where) -> Verdict:
    """TDL011 over the runs of ranks started together: confirmed when two ranks put tensors or
    modules on the same device index, with where each one first did; not confirmed when each
    used its own device; not reached when no rank started a process group or reached a GPU."""
    runs = sorted(runs, key=lambda r: r.options.rank)
    world = runs[0].options.world_size or len(runs)
    words = (f"run as {world} ranks of one process group (torchrun's environment, RANK and LOCAL_RANK "
             f"0..{world - 1}, on {world} simulated GPUs)")
    ended = "; ".join(f"rank {r.options.rank} {_rank_stop(r, where)}" for r in runs if _rank_stop(r, where))
    ended = f" ({ended})" if ended else ""
    started = {r.options.rank: r.of_kind("process-group") for r in runs if r.of_kind("process-group")}
    if not started:
        return Verdict(NOT_REACHED, f"{words}, the program started no process group{ended}", mode="sim")
    first: dict[int, dict[str, dict]] = {}  # rank -> device -> the rank's first request of it
    for r in runs:
        for e in sorted(r.of_kind("cuda-request"), key=lambda e: e["seq"]):
            target = e.get("target") or ""
            if target.startswith("cuda"):
                first.setdefault(r.options.rank, {}).setdefault(target, e)
    setters = {r.options.rank: r.of_kind("set-device") for r in runs}

    def chose(rank: int) -> str:
        events = setters.get(rank) or []
        return f"{events[0]['what']} at {where(events[0].get('site'))}" if events else "no set_device"

    ranks_on: dict[str, list[int]] = {}
    for rank, devices in sorted(first.items()):
        for device in devices:
            ranks_on.setdefault(device, []).append(rank)
    shared = sorted((d, ranks) for d, ranks in ranks_on.items() if len(ranks) > 1)
    if shared:
        device, ranks = shared[0]
        places = "; ".join(f"rank {rank} first at {first[rank][device]['what']} at "
                           f"{where(first[rank][device].get('site'))} ({chose(rank)})" for rank in ranks)
        names = " and ".join(str(rank) for rank in ranks)
        both = "both" if len(ranks) == 2 else "all"
        return Verdict(CONFIRMED, f"{words}, ranks {names} {both} put tensors on {device}: {places}; on GPUs they "
                                  f"would share GPU {device.split(':')[1]} (NCCL: \"Duplicate GPU detected\", or "
                                  f"out of memory){ended}", mode="sim")
    if len(first) < 2:
        if not first:
            return Verdict(NOT_REACHED, f"{words}, the ranks started the process group but put no tensor or module "
                                        f"on a GPU{ended}", mode="sim")
        (rank, devices), = first.items()
        device, e = next(iter(devices.items()))
        return Verdict(NOT_REACHED, f"{words}, only rank {rank} reached a GPU ({device}, first at {e['what']} at "
                                    f"{where(e.get('site'))}){ended}", mode="sim")
    each = "; ".join(f"rank {rank} on {', '.join(devices)} ({chose(rank)})" for rank, devices in sorted(first.items()))
    return Verdict(NOT_CONFIRMED, f"{words}, each rank used its own device: {each}{ended}", mode="sim")


def judge(findings, runs: list[Run], where: Where, runtime_codes=RUNTIME_CODES,
          single_run: bool = False) -> list[TracedFinding]:
    """Every static finding with its verdict (the most telling over the runs), then the
    runtime-only findings: TDL100 (a mismatch no finding explains) and TDL101 (a CUDA request
    on a machine without a GPU that no finding explains)."""
    by_path: dict[str, list] = {}
    real_paths = {}
    for f in findings:
        real = os.path.realpath(f.path)
        real_paths[id(f)] = real
        by_path.setdefault(real, []).append(f)
    judges = [Judge(r, findings, where, single_run) for r in runs if r.error is None]
    traced: list[TracedFinding] = []
    confirmed: set = set()
    ranks = [r for r in runs if r.error is None and r.options.rank is not None]
    for f in findings:
        path = real_paths[id(f)]
        if f.code == RANKS_CODE and ranks:
            best = judge_ranks(ranks, where)
        else:
            verdicts = [(j, j.verdict(f, path)) for j in judges]
            telling = [v for j, v in verdicts if j.can_tell(f.code)] or [v for _, v in verdicts] or [
                Verdict(NOT_REACHED, "the program did not run")]
            best = min(telling, key=lambda v: STATUS_ORDER[v.status])
        if best.status == CONFIRMED:
            confirmed.add((path, f.line))
        data = f.to_json()
        traced.append(TracedFinding(
            path=where.path(path) if os.path.isabs(f.path) else f.path, line=f.line, column=f.column,
            end_line=f.end_line, end_column=f.end_column, code=f.code, name=f.name, message=f.message,
            fixable=f.fixable, fix_applicability=data.get("fix_applicability"), status=best.status,
            evidence=best.evidence, mode=best.mode, error=best.error))
    present = {f.code for f in findings}
    seen_sites = set()
    mismatch_judges = [j for j in judges if j.can_tell(MISMATCH_CODE)] or judges
    for j in judges:
        runtime = []
        if MISMATCH_CODE in runtime_codes and j in mismatch_judges:
            runtime += [(MISMATCH_CODE, MISMATCH_NAME, m) for m in j.mismatch_findings(present, by_path, confirmed)]
        if NO_GPU_CODE in runtime_codes:
            runtime += [(NO_GPU_CODE, NO_GPU_NAME, m) for m in j.no_gpu_findings(
                confirmed, {(real_paths[id(f)], f.line) for f in findings})]
        for code, name, m in runtime:
            site = m["site"]
            key = (code, site[0], site[1])
            if key in seen_sites:
                continue
            seen_sites.add(key)
            traced.append(TracedFinding(
                path=where.path(site[0]), line=site[1], column=site[3] + 1, end_line=site[2],
                end_column=site[4] + 1, code=code, name=name, message=m["message"],
                fixable=False, fix_applicability=None, status=CONFIRMED, evidence=m["evidence"],
                mode=j.run.mode, events=m["events"], error=m.get("error")))
    return sorted(traced, key=TracedFinding.sort_key)


@dataclass
class _Lines:
    """A line range for ``_mismatches_from``: an evidence step of a finding (TDL010)."""

    line: int

    @property
    def end_line(self) -> int:
        return self.line
