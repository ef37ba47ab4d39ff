"""The simulated GPU behind ``pytest --simulate-gpu``: the tracer's simulator, run in pytest's
own process, with its events filed under the test (or the collector) that was running.

Imported only when a simulation is asked for: it imports torch. Nothing here simulates: the
machine is ``trace.runner.instrumented`` (the simulated GPU of ``torchdev-lint trace``, or its
machine without a GPU), and each device problem is worded by ``trace.verdicts``, which also
names the static finding that predicted it. What is left here is pytest's side: whose events
these are, what a failed test shows, what the simulator cannot do (a skip, not a failure), and
the summary at the end of the session.
"""

from __future__ import annotations

import itertools
import os
import re
import sys
import threading
import warnings

import pytest
import torch

from torchdev_lint.integrations.pytest_plugin import SimulatedGPUWarning, wants_simulation
from torchdev_lint.integrations.pytest_report import ATTRIBUTE, SILENT_CODES, Problem
from torchdev_lint.trace import runner, session, sim, sites, verdicts
from torchdev_lint.trace.finding_lines import FindingLines, file_lines, unobserved_lines
from torchdev_lint.trace.runtime import NO_CUDA_TEXT, NUMPY_TEXT, NotSimulatedError, Runtime, SimulatedDeviceError

STRICT_FAILURE = ("torchdev-lint: this test passed, but a device bug that raises nothing here was confirmed "
                  "(failed by --simulate-gpu-strict, or because warnings are errors):")
EVIDENCE_TITLE = {"sim": "torchdev-lint: the simulated GPU's evidence", "real": "torchdev-lint: the GPU's evidence",
                  "cpu-only": "torchdev-lint: what a machine without a GPU does"}

# What the simulated GPU cannot do, recognised by the error's text: the test is skipped with
# the reason, never failed (a real GPU might well pass it).
MULTI_GPU = "the simulated GPU has one device (cuda:0): code for several GPUs is not simulated"
REAL_CUDA = ("this test reached the real CUDA runtime, which the simulated GPU does not replace "
             "(another process, a C++ extension, or a torch API the simulator does not cover)")
ACCELERATOR_REGISTRY = ("this code asked torch's C++ accelerator registry (torch.device(0), an index alone, or an "
                        "accelerator API the simulator does not patch), which the simulated GPU does not reach "
                        "(torch.device('cuda', 0) is simulated)")
NOT_SIMULATED = (
    ("invalid device ordinal", MULTI_GPU),
    ("torch.cuda.device_count() is", MULTI_GPU),
    ("NCCL", "NCCL (communication between GPUs) is not simulated"),
    ("nccl", "NCCL (communication between GPUs) is not simulated"),
    ("with arguments from the 'CPU' backend", "this operator has no CPU kernel: custom CUDA kernels are "
                                              "not simulated"),
    ("CUDA_HOME", "building a CUDA extension needs the CUDA toolkit: custom CUDA kernels are not simulated"),
    ("nvcc", "building a CUDA extension needs the CUDA toolkit: custom CUDA kernels are not simulated"),
    ("CUDA graph", "CUDA graphs are not simulated"),
    ("ATen_cuda", "this CUDA API (a CUDA generator of torch._C's own class or made before the simulation, "
                  "legacy torch.cuda tensor types) is not simulated"),
    ("type torch.cuda.", "the legacy torch.cuda tensor types are not simulated"),
    ("not linked with support for cuda devices", REAL_CUDA),
    (NO_CUDA_TEXT, REAL_CUDA),
    ("Found no NVIDIA driver", REAL_CUDA),
    ("No CUDA GPUs are available", REAL_CUDA),
    # a CUDA build of torch (the default wheel) on a machine without a GPU or its driver
    ("CUDA driver version is insufficient", REAL_CUDA),
    ("no CUDA-capable device is detected", REAL_CUDA),
    ("NVIDIA driver on your system is too old", REAL_CUDA),
    ("CUDA driver initialization failed", REAL_CUDA),
    ("CUDA error:", REAL_CUDA),
    ("Cannot access accelerator device when none is available", ACCELERATOR_REGISTRY),
)
# Errors of the real CUDA runtime, whatever their text (torch 2.8+ raises torch.AcceleratorError).
REAL_CUDA_ERRORS = ("AcceleratorError", "CudaError")
# Packages that only work with a GPU: a test the simulation un-skipped may import them.
GPU_ONLY_PACKAGES = {"triton", "apex", "flash_attn", "xformers", "pycuda", "cupy", "tensorrt", "pynvml",
                     "nvidia", "cuda"}
TRITON = "Triton kernels need a real GPU: they are not simulated"
SPARSE = "sparse tensors are not simulated: the simulated GPU does not track their device"

# A dtype error where the test entered autocast("cuda"): the CPU's autocast stands in for it and
# casts a slightly different list of ops (torch.mv, for one, is not on it).
DTYPE_ERROR = re.compile(r"dtype|scalar type|type \(.*\) should be the same")
AUTOCAST = ("autocast('cuda') is simulated by the CPU's autocast, which casts a different list of ops than "
            "a GPU's: this dtype error may be the simulator's")
# A device error where the test made fake tensors (make_fx, torch.export): the simulator takes
# such traces on the CPU, so devices baked into a traced graph are the CPU's.
FAKE_TRACING = ("fake tensors (make_fx, torch.export) are traced on the CPU by the simulated GPU, so a traced graph "
                "holds the CPU's devices: this device error may be the simulator's")

# Events that confirm no finding by themselves in a test that passed: a CUDA request on the
# simulated GPU (on a machine without one it is the problem), a limit of the run, an optimizer
# made, a file saved, a device chosen (TDL011 is judged over the tracer's rank runs only), a
# factory without device= whose result met nothing, `.numpy()` of a CPU tensor.
_INERT = ("limit", "optimizer-created", "save", "set-device", "factory-while-accelerated")
INERT = {"sim": frozenset({"cuda-request", *_INERT}), "real": frozenset({"cuda-request", *_INERT}),
         "cpu-only": frozenset(_INERT)}

_TRACER = os.path.dirname(os.path.abspath(runner.__file__)) + os.sep
OUTCOME_RANK = {"passed": 0, "skipped": 1, "failed": 2}


def not_simulated(excinfo) -> str | None:
    """Why a failure comes from something the simulated GPU does not model, or None."""
    error = excinfo.value
    if isinstance(error, ImportError):
        name = (getattr(error, "name", None) or "").split(".")[0]
        if name in GPU_ONLY_PACKAGES:
            return f"needs {name}, a package for real GPUs that is not installed here"
    for entry in excinfo.traceback:
        if f"{os.sep}triton{os.sep}" in str(entry.path):
            return TRITON
    seen: set[int] = set()
    while error is not None and id(error) not in seen:  # the chain: `raise ... from` wrappers
        seen.add(id(error))
        # the simulator's own mark: a CPU kernel missing for a GPU's dtype, NotSimulatedError
        reason = getattr(error, "_tdl_not_simulated", None)
        if reason is None and isinstance(error, NotSimulatedError):
            reason = error.reason
        if isinstance(reason, str) and reason:
            return f"not simulated: {reason}"
        reason = not_simulated_text(str(error))
        if reason is not None:
            return reason
        if type(error).__name__ in REAL_CUDA_ERRORS:
            return REAL_CUDA
        error = error.__cause__ or error.__context__
    if isinstance(excinfo.value, SimulatedDeviceError) and _sparse_tensor_in(excinfo.tb):
        return SPARSE
    return None


def not_simulated_text(text: str) -> str | None:
    """NOT_SIMULATED's reason for an error's text, or None."""
    for needle, reason in NOT_SIMULATED:
        if needle in text:
            return reason
    return None


def _sparse_tensor_in(tb) -> bool:
    """Whether a frame of the failure held a sparse tensor: it has no storage to carry the
    simulated device, so a mismatch it is part of may be the simulator's own."""
    while tb is not None:
        for value in tb.tb_frame.f_locals.values():
            if isinstance(value, torch.Tensor) and value.layout is not torch.strided:
                return True
        tb = tb.tb_next
    return False


def _torch_test_cases_keep_our_modes() -> None:
    """torch's own ``TestCase.tearDown`` pops the torch-function modes pushed since its
    ``setUp`` saved the stack's length. A subclass whose ``setUp`` skips ``super().setUp()``
    (torchani's) compares with the class default, 0, and pops the simulator's mode: that test
    fails with "torch function mode stack was leaked" and every later one runs half simulated.
    The default becomes the length with the simulator's modes on, so only a test's own
    leaked modes are popped. Nothing is imported: a suite that does not use that class is
    left alone."""
    common = sys.modules.get("torch.testing._internal.common_utils")
    case = getattr(common, "TestCase", None)
    if isinstance(getattr(case, "_prev_torch_function_mode_stack_len", None), int):
        case._prev_torch_function_mode_stack_len = torch._C._len_torch_function_stack()


def _hide_tracer_frames(item) -> None:
    """End a failure's traceback at the program's line, not in the simulator's frames (pytest
    rebuilds tracebacks from the raw frames, so the filter it applies is wrapped; before the
    test runs, since a unittest test's error reaches the report without a call.excinfo)."""
    original = getattr(item, "_traceback_filter", None)
    if original is None or getattr(original, "_tdl", False):
        return

    def traceback_filter(excinfo):
        entries = [e for e in original(excinfo) if not str(e.path).startswith(_TRACER)]
        if not entries:
            return original(excinfo)
        return type(excinfo.traceback)([*entries[:-1], entries[-1].with_repr_style(None)])

    traceback_filter._tdl = True
    item._traceback_filter = traceback_filter


class MemoryRecorder:
    """The tracer's recorder, in memory: each event is filed under the test (or collector) that
    was running, and repeats within one test are counted, not kept."""

    def __init__(self):
        self.owner: str | None = None
        self.pid = os.getpid()
        self.last_seq = 0
        self._seq = itertools.count(1)
        self._seen: dict[tuple, dict] = {}
        self._by_owner: dict[str | None, list[dict]] = {}
        self._lock = threading.Lock()

    def write(self, record: dict) -> None:
        """The tracer's start/end records: pytest reports outcomes itself."""

    def event(self, key: tuple, record: dict) -> bool:
        if os.getpid() != self.pid:  # a forked DataLoader worker: its memory is its own
            return False
        with self._lock:
            key = (self.owner, *key)
            known = self._seen.get(key)
            if known is not None:
                known["count"] += 1
                return False
            self.last_seq = next(self._seq)
            record = {"type": "event", "seq": self.last_seq, **record, "count": 1}
            self._seen[key] = record
            self._by_owner.setdefault(self.owner, []).append(record)
            return True

    def events(self, owner: str | None) -> list[dict]:
        return list(self._by_owner.get(owner, ()))

    def owners(self) -> list[str | None]:
        return list(self._by_owner)


class SimulatedGPU:
    """What the ``simulated_gpu`` fixture gives a test."""

    def __init__(self, simulation: Simulation, owner: str):
        self.mode = simulation.mode
        self._simulation = simulation
        self._owner = owner

    def events(self) -> list[dict]:
        """The simulator's events during this test (the tracer's dictionaries: ``kind``,
        ``site`` as [path, line, end_line, col, end_col], ...)."""
        return self._simulation.recorder.events(self._owner)


class Simulation:
    """A pytest plugin object: the simulated machine for the whole session (``--simulate-gpu``)
    or for the tests that ask for it (marker, fixture)."""

    def __init__(self, config, mode: str, whole_session: bool):
        self.config = config
        self.mode = mode
        self.whole_session = whole_session
        self.where = verdicts.Where(str(config.invocation_params.dir))
        self.recorder = MemoryRecorder()
        self.users = sites.UserFiles(str(config.rootpath))
        self.rt: Runtime | None = None
        self._machine = None
        self._saved_env: str | None = None
        self.simulated: set[str] = set()
        self.outcomes: dict[str, str] = {}
        self.exceptions: dict[str, dict] = {}
        self.unsupported: dict[str, str] = {}
        self._problems: dict[str, tuple[tuple, list[Problem]]] = {}
        self._findings: dict[str, list] = {}
        # The verdicts kept for the linter (docs/verdicts.md): which tests ran each finding line.
        self.keep = whole_session and _keeps_verdicts(config)
        self.lines: FindingLines | None = None
        self._linter = None
        self.kept: tuple[int, str] | None = None  # files recorded, and where
        self.gpu_unused: set[str] = set()  # tests that asked for no GPU (no move, no device=)

    # -- the machine ------------------------------------------------------------------------
    def start(self) -> None:
        if self.mode == "cpu-only":  # on a CUDA machine: hide the GPUs, as the tracer does
            self._saved_env = os.environ.get("CUDA_VISIBLE_DEVICES")
            os.environ["CUDA_VISIBLE_DEVICES"] = ""
        if self.rt is None:
            self.rt = Runtime(self.mode, False, self.users, self.recorder)
        if self.keep and self.lines is None:
            self.lines = FindingLines(self.users, self._finding_lines, lambda: self.recorder.owner)
            if not self.lines.start():  # no free sys.monitoring tool id: confirmations only
                self.lines = None
            elif self.lines.by_probe:
                self.rt.line_probe = self.lines.probe()  # before the modes exist: they keep it
        self._machine = runner.instrumented(self.rt)
        self._machine.__enter__()

    def stop(self) -> None:
        if self.lines is not None:
            self.lines.stop()
        machine, self._machine = self._machine, None
        if machine is not None:
            machine.__exit__(None, None, None)
        if self.mode == "cpu-only":
            if self._saved_env is None:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = self._saved_env

    @property
    def strict(self) -> bool:
        """--simulate-gpu-strict (read when needed: a session-wide simulation starts before pytest
        has parsed its options)."""
        return bool(self.config.getoption("simulate_gpu_strict") or self.config.getini("simulate_gpu_strict"))

    def handle(self, node) -> SimulatedGPU:
        return SimulatedGPU(self, node.nodeid)

    # -- pytest hooks -----------------------------------------------------------------------
    def pytest_unconfigure(self, config):
        self.stop()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        if self.keep:
            if self.lines is not None:
                self.lines.stop()
            try:
                self.kept = self._keep_verdicts()
            except Exception as error:  # noqa: BLE001 - the tests' outcome stands whatever happens here
                warnings.warn(f"torchdev-lint: the verdicts could not be kept: {error!r}")

    def pytest_terminal_summary(self, terminalreporter):
        if self.kept and self.kept[0]:
            terminalreporter.write_line(f"torchdev-lint: verdicts of {self.kept[0]} file(s) kept in {self.kept[1]} "
                                        "for the linter (docs/verdicts.md)")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_make_collect_report(self, collector):
        previous, self.recorder.owner = self.recorder.owner, collector.nodeid
        requests = self.rt.gpu_requests if self.rt is not None else 0
        outcome = yield
        if self.rt is not None and self.rt.gpu_requests == requests and self.mode != "cpu-only":
            # what collection ran (imports, unittest cases' __init__) asked for no GPU: its lines ran on the CPU
            self.gpu_unused.add(collector.nodeid)
        self.recorder.owner = previous
        report = outcome.get_result()
        if not self.whole_session:
            return
        if report.failed and self.mode == "sim":
            # an import that needs what the simulator does not model (a module-level
            # `torch.device(0)`): its tests are skipped with the reason, not failed
            reason = not_simulated_text(str(report.longrepr))
            if reason is not None:
                self.unsupported[collector.nodeid] = reason
                self.outcomes[collector.nodeid] = "skipped"
                report.outcome = "skipped"
                report.longrepr = (str(collector.path), None, f"Skipped: {reason}")
                setattr(report, ATTRIBUTE, self._data(collector.nodeid, simulated=False))
                return
        if report.failed:
            self.outcomes[collector.nodeid] = "failed"
            self._add_evidence(report, collector.nodeid)
        if report.failed or self.problems(collector.nodeid):
            setattr(report, ATTRIBUTE, self._data(collector.nodeid, simulated=False))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        simulate = self.whole_session or wants_simulation(item)
        previous, self.recorder.owner = self.recorder.owner, item.nodeid
        if simulate:
            self.simulated.add(item.nodeid)
            _hide_tracer_frames(item)
            if not self.whole_session:
                self.start()
            _torch_test_cases_keep_our_modes()
        requests = self.rt.gpu_requests if self.rt is not None else 0
        try:
            yield
        finally:
            if self.rt is not None and self.rt.gpu_requests == requests and self.mode != "cpu-only":
                self.gpu_unused.add(item.nodeid)  # its lines ran on the CPU: they cannot tell
            if simulate and not self.whole_session:
                self.stop()
            self.recorder.owner = previous

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        if item.nodeid not in self.simulated:
            return
        report = outcome.get_result()
        self._judge_phase(item, call, report)
        if call.when == "teardown":  # the test's last report carries what the summary shows
            setattr(report, ATTRIBUTE, self._data(item.nodeid, simulated=True))

    def _judge_phase(self, item, call, report) -> None:
        excinfo = call.excinfo
        if report.failed and excinfo is not None:
            reason = (not_simulated(excinfo) or self._limit_reason(item.nodeid, excinfo)) if self.mode == "sim" \
                else None
            if reason is not None:
                self.unsupported[item.nodeid] = reason
                site = self._site(excinfo)
                report.outcome = "skipped"
                report.longrepr = (site[0], site[1], f"Skipped: {reason}") if site else \
                    (str(item.path), (item.location[1] or 0) + 1, f"Skipped: {reason}")
                self.outcomes[item.nodeid] = "skipped"
                return
            self.exceptions.setdefault(item.nodeid, self._outcome(excinfo))
        if report.passed and call.when == "call":
            self._silent_problems(item, report)
        word = "failed" if report.failed else report.outcome
        if OUTCOME_RANK.get(word, 0) >= OUTCOME_RANK.get(self.outcomes.get(item.nodeid, "passed"), 0):
            self.outcomes[item.nodeid] = word
        if report.failed:
            self._add_evidence(report, item.nodeid)

    def _limit_reason(self, owner: str, excinfo) -> str | None:
        """AUTOCAST, for a dtype error in a test that entered autocast("cuda"); FAKE_TRACING,
        for a device error in a test that made fake tensors."""
        limits = {e.get("what") for e in self.recorder.events(owner) if e["kind"] == "limit"}
        message = str(excinfo.value)
        if sim.AUTOCAST_LIMIT in limits and DTYPE_ERROR.search(message):
            return AUTOCAST
        if sim.FAKE_LIMIT in limits and "device" in message.lower():
            return FAKE_TRACING
        return None

    def _silent_problems(self, item, report) -> None:
        """A test that passed although a confirmed bug bit silently (TDL003, TDL004, TDL005):
        a warning at the bug's line, or a failure in strict mode (or where warnings are errors)."""
        problems = [p for p in self.problems(item.nodeid) if p.code in SILENT_CODES]
        if not problems:
            return
        if not self.strict:
            try:
                for p in problems:
                    warnings.warn_explicit(SimulatedGPUWarning(f"{p.code} {p.name}: {p.evidence}"),
                                           SimulatedGPUWarning, p.path, p.line)
                return
            except SimulatedGPUWarning:  # -W error, filterwarnings = error: fail as strict mode does
                pass
        report.outcome = "failed"
        report.longrepr = STRICT_FAILURE + "\n" + "\n".join(p.render() for p in problems)

    def _data(self, owner: str, simulated: bool) -> dict:
        """What the summary shows of one test or collector: plain data (xdist sends it)."""
        unsupported = self.unsupported.get(owner)
        problems = [] if unsupported else self.problems(owner)  # a skip's mismatch may be the simulator's
        return {"mode": self.mode, "simulated": simulated, "outcome": self.outcomes.get(owner, "passed"),
                "problems": [p.to_data() for p in problems], "unsupported": unsupported}

    # -- evidence ---------------------------------------------------------------------------
    def _add_evidence(self, report, owner: str) -> None:
        problems = self.problems(owner)
        if problems and hasattr(report.longrepr, "addsection"):
            report.longrepr.addsection(EVIDENCE_TITLE[self.mode],
                                       "\n".join(p.render() for p in problems))

    def _site(self, excinfo) -> list | None:
        frames = sites.traceback_sites(excinfo.tb, self.users)
        return frames[0] if frames else None

    def _outcome(self, excinfo) -> dict:
        text = str(excinfo.value).strip()
        frames = sites.traceback_sites(excinfo.tb, self.users)
        return {"kind": "exception", "type": excinfo.type.__name__,
                "message": text.splitlines()[0] if text else "", "full_message": text,
                "site": frames[0] if frames else None, "stack": frames[:8]}

    def problems(self, owner: str) -> list[Problem]:
        """The device problems of one test: the tracer's confirmed verdicts of the static
        findings in the files involved, its runtime-only mismatches (TDL100), and the
        ``.numpy()`` calls or CUDA requests that no finding explains."""
        events = self.recorder.events(owner)
        outcome = self.exceptions.get(owner, {"kind": "exit", "status": 0})
        known = (len(events), outcome.get("kind"))  # a later phase of the test may add to either
        cached = self._problems.get(owner)
        if cached is not None and cached[0] == known:
            return cached[1]
        inert = INERT[self.mode]
        if outcome.get("kind") != "exception" and all(
                e["kind"] in inert or (e["kind"] == "numpy" and e.get("device") == "cpu") for e in events):
            # nothing to judge: the static findings (an index of the whole project, seconds on a
            # large one) are not needed
            self._problems[owner] = (known, [])
            return []
        run = session.Run(session.Options(target=owner, mode=self.mode), mode=self.mode,
                          events=events, outcome=outcome)
        findings = self._static_findings(_paths(events, outcome))
        problems = []
        for t in verdicts.judge(findings, [run], self.where):
            if t.status == verdicts.CONFIRMED:
                problems.append(Problem(t.path, t.line, t.column, t.code, t.name, t.evidence))
        explained = {(p.path, p.line) for p in problems}
        for e in events:
            site = e.get("site")
            if not site or (self.where.path(site[0]), site[1]) in explained:
                continue
            if e["kind"] == "numpy" and e.get("device") != "cpu" and not e.get("force"):
                text = (f"{e['what']} at {self.where(site)} ran on a {e['device']} tensor: "
                        f"TypeError: {NUMPY_TEXT.format(dev=e['device'])}")
                src = e.get("src")
                if src:
                    text += f" (the tensor got its device from {src.get('what')} at {self.where(src.get('site'))})"
                problems.append(Problem(self.where.path(site[0]), site[1], site[3] + 1, None,
                                        "numpy-on-accelerator", text))
            elif e["kind"] == "cuda-request" and self.mode == "cpu-only":
                problems.append(Problem(self.where.path(site[0]), site[1], site[3] + 1, None, "cuda-request",
                                        f"on a machine without a GPU, {e['what']} at {self.where(site)} "
                                        f"raises {verdicts.NO_CUDA}"))
            else:
                continue
            explained.add((self.where.path(site[0]), site[1]))
        self._problems[owner] = (known, problems)
        return problems

    # -- verdicts for the linter ---------------------------------------------------------------
    def _lint(self, real: str) -> list:
        """The file's static findings (every tier), through the linter's result cache."""
        from torchdev_lint import api, config, runner as lint_runner
        from torchdev_lint.cache import Cache, tool_fingerprint

        if self._linter is None:
            store = self._store()
            self._linter = api.Linter(config.Overrides(preview=True), verdicts=False,
                                      cache=Cache(store.directory, tool_fingerprint()))
        linter = self._linter
        job = lint_runner.Job(linter.rules, linter.settings, cache=linter.cache, index=linter.index_for(real))
        findings = lint_runner.check_path(real, job).result.findings
        self._findings[real] = findings
        return findings

    def _finding_lines(self, real: str) -> set[int]:
        return file_lines(self._lint(real))

    def _store(self):
        from torchdev_lint import config, verdict_store

        try:
            root = config.Resolver(None).for_path(str(self.config.rootpath)).root
        except (config.UsageError, OSError):
            root = self.config.rootpath
        return verdict_store.VerdictStore.for_root(root)

    def _keep_verdicts(self) -> tuple[int, str]:
        """Merge what this session (or xdist worker) saw into the project's verdict store."""
        from torchdev_lint import verdict_store

        store = self._store()
        recording = verdict_store.Recording(str(store.directory.parent))
        lines = self.lines
        if lines is not None:
            lines.imported()
        for real, findings in self._findings.items():
            if not findings:
                continue
            recording.file(real, lines_recorded=lines is not None and real in lines.linted)
            for f in findings:
                recording.finding(real, f.to_json())
            if lines is not None and lines.by_probe and real in lines.linted:
                recording.unobserved(real, unobserved_lines(real, findings))
        if lines is not None:
            for (real, line), owners in lines.hits.items():
                for owner in sorted(owners):
                    if owner not in self.unsupported:
                        mode = verdict_store.GPU_UNUSED if owner in self.gpu_unused else self.mode
                        recording.ran(real, line, mode, owner)
        cwd = str(self.config.invocation_params.dir)
        for owner in {*self.recorder.owners(), *self.simulated}:
            if owner is None or owner in self.unsupported:
                continue
            for p in self.problems(owner):
                real = os.path.realpath(os.path.join(cwd, p.path))
                if p.code not in (None, verdicts.MISMATCH_CODE):
                    recording.confirm(real, p.code, p.line, p.column, owner, self.mode, p.evidence)
                    continue
                code = verdicts.NO_GPU_CODE if p.name == "cuda-request" else verdicts.MISMATCH_CODE
                recording.problem(real, code, p.line, p.column, owner, self.mode, p.evidence,
                                  message=p.evidence.split(": ", 1)[0])
        count = recording.save(store)
        return count, os.path.relpath(store.path, cwd) if not os.path.relpath(store.path, cwd).startswith("..") \
            else str(store.path)

    def _static_findings(self, paths: set[str]) -> list:
        """Every tier's findings in ``paths`` (the test's run is the evidence a possible finding
        lacked), each file checked once a session, with one index per package (``_lint``)."""
        for path in sorted(paths):
            if path not in self._findings and os.path.isfile(path):
                self._lint(path)  # an unreadable file: no finding to name
        return [f for p in sorted(paths) for f in self._findings.get(p, ())]


def _keeps_verdicts(config) -> bool:
    """Whether this session keeps its verdicts (off with --simulate-gpu-no-verdicts, or the ini
    setting ``simulate_gpu_verdicts = false``). Read from the early arguments: a whole-session
    simulation starts before pytest has parsed its options."""
    namespace = getattr(config, "known_args_namespace", None) or config.option
    if getattr(namespace, "simulate_gpu_no_verdicts", False):
        return False
    try:
        return bool(config.getini("simulate_gpu_verdicts"))
    except (ValueError, KeyError):
        return True


def _paths(events: list[dict], outcome: dict) -> set[str]:
    """The program's files an event (or the failure) points at: where static findings may be."""
    paths = set()

    def add(site):
        if site:
            paths.add(site[0])

    add(outcome.get("site"))
    for e in events:
        add(e.get("site"))
        add(e.get("move_site"))
        for frame in e.get("stack") or ():
            add(frame)
        for operand in e.get("operands") or ():
            add((operand.get("origin") or {}).get("site"))
            add((operand.get("src") or {}).get("site"))
    return paths
