"""The verdicts of the project's tests flow back into the linter (docs/verdicts.md).

The first tests write a verdict store the way ``pytest --simulate-gpu`` does (its ``Recording``)
and check what each way in shows: no torch needed. The last ones run a real ``pytest
--simulate-gpu`` on a small project (torch needed; a CPU build is enough)."""

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

from torchdev_lint import verdict_store

NET = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.scale = torch.ones(2)

    def forward(self, x):
        return self.lin(x) * self.scale
"""
# `self.scale` (line 9) is a possible TDL006 finding (nothing in the file moves `Net` to a
# device), so the default output leaves it out unless a test confirmed it.
TEST_ID = "tests/test_net.py::test_forward"
EVIDENCE = "the plain attribute self.scale stayed on cpu when Net.to() moved the module to cuda:0"
HEADLINE = f"confirmed by {TEST_ID} on a simulated GPU"
PROJECT = "[tool.torchdev-lint]\n"


def env():
    return {**os.environ, "PYTHONPATH": str(ROOT), "TORCHDEV_LINT_DAEMON": "0"}


def cli(*args, cwd):
    done = subprocess.run([sys.executable, "-m", "torchdev_lint", "--no-daemon", *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, env=env(), timeout=300)
    return done.returncode, done.stdout, done.stderr


def record(root: Path, path: str, confirm=(), ran=(), problems=(), lines_recorded=True):
    """Record in ``root``'s store as a test session does: ``confirm``: (code, line, test);
    ``ran``: (line, test); ``problems``: (code, line, test, evidence)."""
    recording = verdict_store.Recording(str(root))
    full = str(root / path)
    recording.file(full, lines_recorded=lines_recorded)
    if path == "net.py" and (confirm or ran):  # the session records the static findings it knew
        recording.finding(full, {"code": "TDL006", "name": "unregistered-tensor-attribute", "line": 9, "column": 9,
                                 "end_line": 9, "end_column": 35, "message": "...", "confidence": "possible"})
    for code, line, test in confirm:
        recording.confirm(full, code, line, 9, test, "sim", EVIDENCE)
    for line, test in ran:
        recording.ran(full, line, "sim", test)
    for code, line, test, evidence in problems:
        recording.problem(full, code, line, 16, test, "sim", evidence, message=evidence.split(": ")[0])
    store = verdict_store.VerdictStore(root / ".torchdev_lint_cache")
    return recording.save(store)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PROJECT)
    (tmp_path / "net.py").write_text(NET)
    return tmp_path


def test_a_possible_finding_confirmed_by_a_test_shows_in_the_default_output(project):
    status, out, _ = cli("net.py", cwd=project)
    assert status == 0 and "TDL006" not in out  # static alone: possible, left out
    record(project, "net.py", confirm=[("TDL006", 9, TEST_ID)])
    status, out, _ = cli("--show-evidence", "net.py", cwd=project)
    assert status == 1
    assert f"net.py:9:9: TDL006" in out and f"({HEADLINE})" in out
    assert f"= evidence: net.py:9:9: {HEADLINE}: {EVIDENCE}" in out
    assert "Verdicts of the tests on a simulated GPU: 1 confirmed (1 of them possible, shown for that)." in out
    # --no-verdicts: the static analysis alone again
    status, out, _ = cli("--no-verdicts", "net.py", cwd=project)
    assert status == 0 and "TDL006" not in out and "Verdicts" not in out


def test_every_entry_point_shows_the_same_confirmed_finding(project):
    record(project, "net.py", confirm=[("TDL006", 9, TEST_ID)])
    _, out, _ = cli("--format", "json", "net.py", cwd=project)
    (finding,) = json.loads(out)
    assert (finding["code"], finding["line"], finding["column"]) == ("TDL006", 9, 9)
    assert finding["confidence"] == "possible"  # the static tier is kept; the verdict says why it shows
    assert finding["verdict"]["status"] == "confirmed" and finding["verdict"]["by"] == TEST_ID
    assert finding["evidence"][-1]["message"] == f"{HEADLINE}: {EVIDENCE}"

    _, out, _ = cli("--format", "sarif", "net.py", cwd=project)
    (result,) = json.loads(out)["runs"][0]["results"]
    assert result["ruleId"] == "TDL006" and HEADLINE in result["message"]["text"]
    assert result["properties"]["verdict"]["status"] == "confirmed"
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 9

    _, out, _ = cli("--format", "github", "net.py", cwd=project)
    assert "file=net.py,line=9,col=9" in out and HEADLINE in out
    _, out, _ = cli("--format", "gitlab", "net.py", cwd=project)
    (issue,) = json.loads(out)
    assert issue["check_name"] == "TDL006" and HEADLINE in issue["description"]

    flake8 = subprocess.run([sys.executable, "-m", "flake8", "--select", "TDL", "net.py"], cwd=project,
                            capture_output=True, text=True, env=env(), timeout=300)
    assert f"net.py:9:9: TDL006" in flake8.stdout and HEADLINE in flake8.stdout, flake8.stdout + flake8.stderr
    no_verdicts = subprocess.run([sys.executable, "-m", "flake8", "--select", "TDL", "--tdl-no-verdicts", "net.py"],
                                 cwd=project, capture_output=True, text=True, env=env(), timeout=300)
    assert "TDL006" not in no_verdicts.stdout

    # pre-commit runs the hook's entry with the staged files' names
    import yaml

    (hook,) = [h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text()) if h["id"] == "torchdev-lint"]
    entry = hook["entry"].split()
    assert entry[0] == "torchdev-lint"
    done = subprocess.run([sys.executable, "-m", "torchdev_lint", *entry[1:], *hook["args"], "net.py"], cwd=project,
                          capture_output=True, text=True, env={**env(), "CI": "1"}, timeout=300)
    assert done.returncode == 1 and "net.py:9:9: TDL006" in done.stdout and HEADLINE in done.stdout


def test_the_language_server_shows_the_confirmed_finding_until_the_buffer_changes(project):
    pytest.importorskip("pygls")
    import asyncio

    from test_server import in_server

    record(project, "net.py", confirm=[("TDL006", 9, TEST_ID)])

    async def scenario(session):
        uri = session.open(project / "net.py", NET)
        (diagnostic,) = await session.next_diagnostics(uri)
        assert diagnostic.code == "TDL006" and HEADLINE in diagnostic.message
        assert diagnostic.range.start.line == 8 and diagnostic.range.start.character == 8
        assert diagnostic.severity == 2  # a warning, as a certain finding: the test showed it
        assert any(HEADLINE in info.message for info in diagnostic.related_information)
        session.change(uri, 2, NET + "\n# edited\n")  # another text: the test never ran it
        assert list(await asyncio.wait_for(session.next_diagnostics(uri), 60)) == []

    in_server(project, scenario)


def test_a_possible_finding_that_ran_clean_stays_hidden_and_says_so(project):
    record(project, "net.py", ran=[(9, f"tests/test_net.py::test_{i}") for i in range(12)])
    status, out, _ = cli("net.py", cwd=project)
    assert status == 0 and "TDL006" not in out
    assert "1 ran clean (1 of them possible, not shown)" in out
    status, out, _ = cli("--preview", "--show-evidence", "net.py", cwd=project)
    assert "net.py:9:9: TDL006" in out
    assert "= evidence: net.py:9:9: ran in 12 tests on cuda:0 (a simulated GPU) without a device problem" in out


def test_a_device_problem_found_by_a_test_shows_at_its_line_until_the_file_changes(project):
    evidence = ("aten.mul at net.py:12 mixed cuda:0 and cpu tensors: the cpu operand (2) is torch.ones at "
                "net.py:9, created without device=")
    record(project, "net.py", problems=[("TDL100", 12, TEST_ID, evidence)])
    status, out, _ = cli("--format", "concise", "net.py", cwd=project)
    assert status == 1
    assert out.startswith("net.py:12:16: TDL100 aten.mul at net.py:12 mixed cuda:0 and cpu tensors "
                          f"(found by {TEST_ID} on a simulated GPU)")
    # `--ignore TDL100` and `--select TDL100` name it as any rule's code
    assert "TDL100" not in cli("--ignore", "TDL100", "net.py", cwd=project)[1]
    status, out, _ = cli("--select", "TDL100", "--format", "concise", "net.py", cwd=project)
    assert status == 1 and out.startswith("net.py:12:16: TDL100")
    # `# noqa: TDL100` silences it, as any finding
    (project / "net.py").write_text(NET.replace("* self.scale", "* self.scale  # noqa: TDL100"))
    record(project, "net.py", problems=[("TDL100", 12, TEST_ID, evidence)])
    assert "TDL100" not in cli("net.py", cwd=project)[1]
    # the file changes: its verdicts are gone
    (project / "net.py").write_text(NET + "\n")
    status, out, _ = cli("net.py", cwd=project)
    assert status == 0 and "TDL100" not in out


def test_a_cached_result_does_not_hide_a_verdict_recorded_after_it(project):
    assert cli("net.py", cwd=project)[0] == 0  # stored in the result cache
    assert cli("net.py", cwd=project)[0] == 0  # answered from it
    record(project, "net.py", confirm=[("TDL006", 9, TEST_ID)])
    status, out, _ = cli("net.py", cwd=project)
    assert status == 1 and HEADLINE in out


def _record_worker(root: str, worker: int) -> None:
    record(Path(root), "net.py", ran=[(9, f"tests/test_net.py::test_{worker}_{i}") for i in range(20)])


def test_concurrent_writers_merge_and_never_leave_a_partial_file(project):
    """pytest-xdist workers end their sessions at once: every worker's tests are kept."""
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_record_worker, args=(str(project), n)) for n in range(6)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
        assert w.exitcode == 0
    store = verdict_store.VerdictStore(project / ".torchdev_lint_cache")
    entry = store.lookup(NET)
    assert len(entry.ran(9)["sim"]) == 6 * 20
    data = json.loads(store.path.read_text())
    assert data["version"] == verdict_store.VERSION
    assert not [p for p in store.directory.iterdir() if p.name.startswith(".tmp-verdicts-")]


def test_a_line_run_only_by_tests_that_put_nothing_on_the_gpu_cannot_tell_and_unobserved_lines_have_no_verdict():
    entry = verdict_store.FileVerdicts({"lines_recorded": True, "unobserved": [4],
                                        "lines": {"9": {verdict_store.GPU_UNUSED: [TEST_ID]}}})
    verdict = entry.verdict("TDL006", 9)
    assert verdict.status == verdict_store.CANNOT_TELL and "the tests put nothing on the GPU" in verdict.headline
    assert entry.verdict("TDL002", 4) is None  # a line without a call the recording could not see
    assert entry.verdict("TDL002", 5).status == verdict_store.NOT_REACHED
    merged = verdict_store.merge({"lines_recorded": True, "unobserved": [4, 5]}, {"lines_recorded": True})
    assert "unobserved" not in merged  # a run that could see every line decides


def test_an_entry_for_old_content_is_dropped_when_the_store_is_written(project):
    record(project, "net.py", confirm=[("TDL006", 9, TEST_ID)])
    (project / "net.py").write_text(NET + "\n")
    record(project, "other.py" if (project / "other.py").write_text("x = 1\n") else "other.py")
    data = json.loads((project / ".torchdev_lint_cache" / "verdicts.json").read_text())
    assert [entry["path"] for entry in data["files"].values()] == ["other.py"]


# -- a real pytest --simulate-gpu session -------------------------------------------------------------

LOSS = """\
import torch
from torch import nn


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.scale = torch.ones(2)

    def forward(self, x):
        return self.lin(x) * self.scale


class Weighted(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.beta = torch.ones(num_classes)

    def forward(self, x, labels):
        return (x.sum(1) * self.beta[labels]).mean()


def cpu_only(t):
    return t.cuda()
"""
TESTS = """\
import torch
from pkg.loss import Scaled, Weighted

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def test_scaled():
    model = Scaled().to(DEVICE)
    model(torch.randn(3, 2, device=DEVICE))


def test_weighted():
    loss = Weighted(3)
    loss(torch.randn(4, 2, device=DEVICE), torch.tensor([0, 1, 2, 0], device=DEVICE))
"""


@pytest.fixture
def suite(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "pyproject.toml").write_text(PROJECT + "[tool.pytest.ini_options]\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "loss.py").write_text(LOSS)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_loss.py").write_text(TESTS)
    return tmp_path


def simulate(root: Path, *extra):
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--simulate-gpu",
                           *extra, "tests"], cwd=root, capture_output=True, text=True,
                          env={**env(), "PYTHONPATH": os.pathsep.join([str(ROOT), str(root)])}, timeout=600)
    return done.stdout + done.stderr


def test_a_simulated_session_keeps_its_verdicts_and_a_second_run_keeps_them(suite):
    out = simulate(suite)
    assert "2 failed" in out and "verdicts of 1 file(s) kept in .torchdev_lint_cache/verdicts.json" in out
    status, text, _ = cli("--format", "json", "--preview", "pkg/loss.py", cwd=suite)
    found = {(f["code"], f["line"]): f for f in json.loads(text)}
    # the attribute the module move left behind met the moved input: TDL006 confirmed
    assert found["TDL006", 9]["verdict"]["status"] == "confirmed"
    assert found["TDL006", 9]["verdict"]["by"] == "tests/test_loss.py::test_scaled"
    # the loss was never moved: a mismatch no rule's criterion covers, at its line
    assert found["TDL100", 21]["verdict"]["by"] == "tests/test_loss.py::test_weighted"
    assert found["TDL006", 18]["verdict"]["status"] == "in a device problem"
    assert found["TDL001", 25]["verdict"]["status"] == "not reached"

    status, default, _ = cli("pkg/loss.py", cwd=suite)
    assert "pkg/loss.py:9:9: TDL006" in default and "(confirmed by tests/test_loss.py::test_scaled on a " \
                                                     "simulated GPU)" in default
    assert "pkg/loss.py:21:" in default and "TDL100" in default

    simulate(suite)  # a second run: the same verdicts, the same tests (not counted twice)
    _, again, _ = cli("--format", "json", "--preview", "pkg/loss.py", cwd=suite)
    assert json.loads(again) == json.loads(text)

    (suite / "pkg" / "loss.py").write_text(LOSS.replace("return t.cuda()", "return t.cuda()  # edited"))
    _, edited, _ = cli("--format", "json", "--preview", "pkg/loss.py", cwd=suite)
    assert all("verdict" not in f for f in json.loads(edited)) and "TDL100" not in edited


RECORDED = """\
import torch
from torch import nn

EVAL_DEVICE = "cuda"


class Heads(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.heads = {}
        self.scale = torch.ones(2)

    def forward(self, x):
        return self.lin(x) * self.scale.to(x.device)


def helper(x):
    return x.sum()


def outer(x):
    y = helper(x) + torch.zeros(1).cuda()
    return y


def never(x):
    return x.cuda()


def load(path):
    return torch.load(path)


def at_import(path):
    return torch.load(path)


def in_fixture(path):
    return torch.load(path)


def in_unittest(x):
    return x.cuda()
"""
RECORDED_TESTS = """\
import os
import tempfile
import unittest
import pytest
import torch
from pkg.rec import Heads, at_import, in_fixture, in_unittest, load, outer
from pkg import unused

_SAVED = os.path.join(tempfile.mkdtemp(), "saved.pt")
torch.save({"w": torch.ones(1)}, _SAVED)
FIXTURE = at_import(_SAVED)  # runs while pytest collects the file


def test_load(tmp_path):
    torch.save({"w": torch.ones(2).cuda()}, tmp_path / "w.pt")
    assert load(tmp_path / "w.pt")["w"].sum() == 2


def test_load_on_the_cpu(tmp_path):
    torch.save({"w": torch.ones(2)}, tmp_path / "w.pt")
    assert load(tmp_path / "w.pt")["w"].sum() == 2


def test_heads():
    Heads().cuda()(torch.randn(3, 2).cuda())


def test_outer():
    outer(torch.ones(2).cuda())


@pytest.fixture
def loaded(tmp_path):
    torch.save({"w": torch.ones(1)}, tmp_path / "f.pt")
    yield in_fixture(tmp_path / "f.pt")


def test_fixture(loaded):
    assert loaded["w"].sum() == 1


class TestUnit(unittest.TestCase):
    def test_unit(self):
        in_unittest(torch.ones(2))
"""


def test_lines_that_ran_are_ran_clean_and_lines_never_run_not_reached(tmp_path):
    """The line recording (on Python < 3.12 from the simulator's torch calls, not a trace
    function): a finding line that ran in a test, directly or through a helper it called, is
    "ran clean"; a line no test ran is "not reached"; a line without a call that the recording
    cannot see has no verdict rather than a wrong "not reached"."""
    pytest.importorskip("torch")
    (tmp_path / "pyproject.toml").write_text(PROJECT + "[tool.pytest.ini_options]\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "rec.py").write_text(RECORDED)
    (tmp_path / "pkg" / "unused.py").write_text("import torch\n\n\ndef restore(path):\n    return torch.load(path)\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_rec.py").write_text(RECORDED_TESTS)
    out = simulate(tmp_path)
    assert "6 passed" in out, out
    _, text, _ = cli("--format", "json", "--preview", "pkg/rec.py", cwd=tmp_path)
    found = {(f["code"], f["line"]): f.get("verdict", {}).get("status") for f in json.loads(text)}
    ran = {line for (code, line), status in found.items() if status is not None and status != "not reached"}
    statuses = {line: status for (code, line), status in found.items()}
    assert statuses[32] == "ran clean", found  # torch.load without map_location (TDL004), run by test_load
    # a test that put nothing on the GPU ran the line on the CPU, where no device bug can show
    assert verdict_store.VerdictStore(tmp_path / ".torchdev_lint_cache").lookup(RECORDED).ran(32) == {
        "sim": {"tests/test_rec.py::test_load"}, "gpu-unused": {"tests/test_rec.py::test_load_on_the_cpu"}}
    assert statuses[23] == "ran where it cannot show", found  # outer's .cuda(), run by test_outer
    assert statuses[28] == "not reached", found  # never()
    assert statuses[36] == "ran where it cannot show", found  # at_import(), run by collection on the CPU
    # a module imported but never calling torch: its findings are not reached either
    _, text, _ = cli("--format", "json", "--preview", "pkg/unused.py", cwd=tmp_path)
    assert [f["verdict"]["status"] for f in json.loads(text)] == ["not reached"]
    entry = verdict_store.VerdictStore(tmp_path / ".torchdev_lint_cache").lookup(RECORDED)
    assert entry.ran(23) == {"sim": {"tests/test_rec.py::test_outer"}}
    # lines run by a fixture and by a unittest method, below the frames where pytest calls them
    assert set().union(*entry.ran(40).values()) == {"tests/test_rec.py::test_fixture"}, entry.ran(40)
    assert set().union(*entry.ran(44).values()) == {"tests/test_rec.py::TestUnit::test_unit"}, entry.ran(44)
    if sys.version_info < (3, 12):
        # EVAL_DEVICE = "cuda": no call, so the recording cannot see it run: no verdict
        assert 4 not in ran and statuses[4] is None, found




def test_no_verdicts_option_of_the_plugin_keeps_nothing(suite):
    out = simulate(suite, "--simulate-gpu-no-verdicts")
    assert "2 failed" in out and "verdicts of" not in out
    assert not (suite / ".torchdev_lint_cache" / "verdicts.json").exists()


# -- `torchdev-lint confirm` --------------------------------------------------------------------------

def test_confirm_points_the_suite_at_the_gpu_and_says_what_it_did(tmp_path):
    from torchdev_lint import confirm

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text(
        'import os\nDEVICE = os.environ.get("TEST_DEVICE", "cpu")\n'
        'def pytest_addoption(parser):\n    parser.addoption("--device", default="cpu")\n')
    (tmp_path / "tests" / "test_a.py").write_text('import os\nUSE = os.getenv("USE_CUDA")\nd = torch.device(0)\n')
    env, args = {"DEVICE": "cpu"}, ["-x"]
    said = confirm.detect(tmp_path, env, args)
    assert env["TEST_DEVICE"] == "cuda" and env["USE_CUDA"] == "1" and env["DEVICE"] == "cpu"
    assert args == ["-x", "--device", "cuda"]
    assert any("reads $TEST_DEVICE: set TEST_DEVICE=cuda" in line for line in said)
    assert any("torch.device(0)" in line for line in said)
    args = ["--device=cpu"]
    confirm.detect(tmp_path, {}, args)
    assert args == ["--device=cpu"]  # the user's choice stands


@pytest.mark.parametrize("accepted, value", [
    ('{"cpu", "cuda:0"}', "cuda:0"),  # the suite checks the value against its own spelling
    ('{"cpu", "cuda"}', "cuda"),
    ("None", "cuda"),
])
def test_confirm_spells_the_gpu_as_the_suite_does(tmp_path, accepted, value):
    from torchdev_lint import confirm

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "settings.py").write_text(
        f'import os\nPOSSIBLE = {accepted}\nDEVICE = os.environ.get("PYTEST_TORCH_DEVICE", "cpu")\n')
    env = {}
    confirm.detect(tmp_path, env, [])
    assert env["PYTEST_TORCH_DEVICE"] == value


@pytest.mark.parametrize("version, cpu_only", [
    ("cuda: Optional[str] = None\nhip: Optional[str] = None\n", True),
    ("cuda = None\nhip = None\n", True),
    ("cuda: Optional[str] = '12.8'\nhip: Optional[str] = None\n", False),  # a CUDA build: ask torch
    ("cuda: Optional[str] = None\nhip: Optional[str] = '6.4'\n", False),  # ROCm
    ("cuda = None\n", False),  # in doubt: ask torch
])
def test_confirm_asks_no_child_about_a_cpu_build_of_torch(tmp_path, monkeypatch, version, cpu_only):
    from torchdev_lint import confirm

    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("")
    (tmp_path / "torch" / "version.py").write_text(f"from typing import Optional\n__version__ = '2.13.0'\n{version}")
    monkeypatch.chdir(tmp_path)  # the child would import this torch (its path starts there)
    assert confirm._cpu_only_build() is cpu_only
    (tmp_path / "nvidiactl").write_text("")  # a GPU driver's device file: only torch can tell
    monkeypatch.setattr(confirm, "_GPU_DEVICE_FILES", (str(tmp_path / "nvidiactl"),))
    asked = []
    monkeypatch.setattr(confirm.subprocess, "run", lambda *a, **k: asked.append(a) or subprocess.CompletedProcess(
        a, 0, stdout="True\n"))
    assert confirm._gpu_here() is (not cpu_only)
    assert bool(asked) is (not cpu_only)


def test_confirm_asks_no_child_on_a_linux_machine_without_a_gpu_drivers_device_files(tmp_path, monkeypatch):
    from torchdev_lint import confirm

    monkeypatch.setattr(confirm, "_cpu_only_build", lambda: False)  # a CUDA build of torch
    monkeypatch.setattr(confirm.sys, "platform", "linux")
    monkeypatch.setattr(confirm, "_GPU_DEVICE_FILES", (str(tmp_path / "nvidia[0-9]*"), str(tmp_path / "dxg")))
    asked = []
    monkeypatch.setattr(confirm.subprocess, "run", lambda *a, **k: asked.append(a) or subprocess.CompletedProcess(
        a, 0, stdout="True\n"))
    assert confirm._gpu_here() is False and asked == []
    (tmp_path / "nvidia0").write_text("")
    assert confirm._gpu_here() is True and len(asked) == 1


def test_the_action_runs_confirm_before_the_annotations_when_asked():
    sys.path.insert(0, str(ROOT / "action"))
    try:
        import run as action
    finally:
        sys.path.pop(0)
    commands = action.check_commands({"INPUT_CONFIRM": "tests/ -x", "INPUT_SRC": "src"})
    assert commands[0][:2] == ["torchdev-lint", "confirm"] and commands[0][-2:] == ["tests/", "-x"]
    assert commands[0][commands[0].index("--lint") + 1] == "src"
    assert commands[-1] == ["torchdev-lint", "--format", "github", "src"]
    assert action.check_commands({})[0][1:2] != ["confirm"]


def test_confirm_runs_the_tests_and_prints_the_verdicts(suite):
    done = subprocess.run([sys.executable, "-m", "torchdev_lint", "confirm", "--mode", "sim", "--time-limit", "300",
                           "-p", "no:cacheprovider", "tests"], cwd=suite, capture_output=True, text=True,
                          env={**env(), "PYTHONPATH": os.pathsep.join([str(ROOT), str(suite)])}, timeout=600)
    assert done.returncode == 1
    assert "This EXECUTES the project's code (time limit 300 s)" in done.stderr
    assert "pkg/loss.py:9:9: TDL006" in done.stdout and "confirmed by tests/test_loss.py::test_scaled" in done.stdout
    assert "2 failed" in done.stderr  # pytest's own output goes to standard error
    assert ("1 confirmed, 1 in a device problem, 0 ran clean, 0 ran where their bug cannot show, 1 not reached; "
            "1 new device problem(s)") in done.stderr


def test_a_terminated_confirm_ends_its_tests(tmp_path):
    """The tests run in a process group of their own (Ctrl-C is handled by confirm): a SIGTERM
    (a cancelled CI job) must end them too, not leave pytest running."""
    import signal
    import time

    (tmp_path / "test_slow.py").write_text(
        "import os, pathlib, time\ndef test_slow():\n"
        "    pathlib.Path('pid').write_text(str(os.getpid()))\n    time.sleep(120)\n")
    confirm = subprocess.Popen([sys.executable, "-m", "torchdev_lint", "confirm", "--mode", "sim", "--no-detect",
                                "-p", "no:cacheprovider", "test_slow.py"], cwd=tmp_path,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**env(), "PYTHONPATH": str(ROOT)})
    pid_file = tmp_path / "pid"
    deadline = time.monotonic() + 120
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline and confirm.poll() is None
        time.sleep(0.2)
    confirm.send_signal(signal.SIGTERM)
    confirm.wait(timeout=60)
    pytest_pid = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pytest_pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.kill(pytest_pid, signal.SIGKILL)
    pytest.fail("pytest outlived the confirm run it belonged to")


HARDCODED_SCRIPT = """\
import torch
device = "cuda" if torch.cuda.is_available() else "cpu"
x = torch.ones(2).to(device)
y = torch.ones(2).cuda()
"""


@pytest.mark.parametrize("mode, shown", [
    ("cpu-only", False),  # ran clean on a machine without a GPU: the failure it claims did not happen
    ("sim", True),  # a run with a (simulated) GPU cannot show a hardcoded .cuda()'s failure
])
def test_a_certain_finding_a_run_without_a_gpu_refuted_leaves_the_default_output(tmp_path, mode, shown):
    (tmp_path / "pyproject.toml").write_text(PROJECT)
    (tmp_path / "run.py").write_text(HARDCODED_SCRIPT)
    status, out, _ = cli("run.py", cwd=tmp_path)
    assert status == 1 and "run.py:4:5: TDL001" in out  # certain by the analysis alone
    recording = verdict_store.Recording(str(tmp_path))
    recording.file(str(tmp_path / "run.py"), lines_recorded=True)
    recording.ran(str(tmp_path / "run.py"), 4, mode, "run.py")
    recording.save(verdict_store.VerdictStore(tmp_path / ".torchdev_lint_cache"))
    status, out, _ = cli("run.py", cwd=tmp_path)
    assert ("run.py:4:5: TDL001" in out) is shown and status == (1 if shown else 0)
    if not shown:
        assert "1 ran clean (1 of them possible, not shown)" in out
        status, out, _ = cli("--preview", "--show-evidence", "--format", "json", "run.py", cwd=tmp_path)
        (finding,) = json.loads(out)
        assert finding["confidence"] == "possible" and finding["verdict"]["status"] == "ran clean"
