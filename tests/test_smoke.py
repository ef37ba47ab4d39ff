"""What a new user does first, end to end through the installed commands, on whichever Python and
torch run the suite: ``.ci/run`` runs this file (with the lazy-import, start-up, language-server
and deep-expression tests) on every supported Python besides the one that runs the whole suite.

Each test drives the real console scripts in a subprocess, so an interpreter-specific crash
(import machinery, recursion limits, start methods) shows here as it would to the user."""

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT, gpu_available

BIN = Path(sys.executable).parent


def _environment() -> dict:
    """This test's environment (read when the command starts: conftest gives each test its own
    verdict store), without the resident checker and without xdist's marks (the inner pytest run
    is no xdist worker)."""
    env = {**os.environ, "TORCHDEV_LINT_DAEMON": "0"}
    for name in [n for n in env if n.startswith("PYTEST_XDIST") or n == "PYTEST_CURRENT_TEST"]:
        del env[name]
    return env


def run(*command, cwd, timeout=300, env=None):
    done = subprocess.run([*map(str, command)], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**_environment(), **(env or {})})
    return done.returncode, done.stdout, done.stderr


def script(name: str) -> str:
    path = BIN / name
    if not path.exists():
        pytest.skip(f"{name} is not installed beside {sys.executable}")
    return str(path)


needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")


def test_the_readme_main_job_finds_the_bundled_bugs():
    status, out, err = run(script("torchdev-lint"), "--no-cache", "testdata/", cwd=ROOT)
    assert status == 1 and err == "", err
    # the default tier: certain findings, among them the hardcoded .cuda() of train.py (it
    # offers --cuda, off by default), and a count of the possible ones it leaves out
    findings = [line for line in out.splitlines() if line.startswith("testdata/")]
    assert any(line.startswith("testdata/project/train.py:28:5: TDL001 ") for line in findings), out
    assert any(" TDL004 " in line for line in findings) and "(possible)" not in out, out
    assert out.splitlines()[-2].startswith("Found ")
    assert "possible findings not shown (`--preview`)" in out.splitlines()[-1]
    # --preview shows the possible ones too
    status, out, err = run(script("torchdev-lint"), "--no-cache", "--preview", "testdata/", cwd=ROOT)
    assert status == 1 and err == "", err
    assert "(possible)" in out and out.splitlines()[-1].startswith("Found ")


@needs_torch
@pytest.mark.skipif(gpu_available(), reason="crashes only on a machine without a GPU")
def test_fix_makes_the_bundled_project_train_here(tmp_path):
    project = shutil.copytree(ROOT / "testdata" / "project", tmp_path / "project")
    # the script imports the project's model: the project is on its path
    status, _, err = run(sys.executable, ROOT / "testdata" / "make_gpu_checkpoint.py", "tinynet.pt", cwd=project,
                         env={"PYTHONPATH": str(project)})
    assert status == 0 and (project / "tinynet.pt").is_file(), err
    train = [sys.executable, "train.py", "--epochs", "1"]
    assert run(*train, cwd=project)[0] != 0
    # in the preview tier: checkpoint.py's load is possible (its CPU-capable caller is another
    # file), and the GPU-saved checkpoint needs its fix too
    status, out, err = run(script("torchdev-lint"), "--isolated", "--preview", "--no-cache", "--fix",
                           "--unsafe-fixes", ".", cwd=project)
    assert status == 0 and "Fixed " in out, out + err
    status, out, err = run(*train, cwd=project)
    assert status == 0 and "epoch 0: loss" in out, err


def test_flake8_reports_the_rules(tmp_path):
    # the file has a CPU path and loads weights that its export saves from the GPU, so the
    # finding is certain: flake8 reports it by default
    (tmp_path / "bug.py").write_text(textwrap.dedent("""\
        import argparse
        import torch
        parser = argparse.ArgumentParser()
        parser.add_argument("--weights")
        args = parser.parse_args()
        device = "cuda" if torch.cuda.is_available() else "cpu"
        model = torch.nn.Linear(2, 2)
        model.load_state_dict(torch.load(args.weights))
        model.to(device)


        def warm_up():
            return torch.zeros(2).cuda()


        def export(out):
            torch.save(model.to(device).state_dict(), out)


        warm_up()
        """))
    status, out, err = run(script("flake8"), "--select", "TDL", "bug.py", cwd=tmp_path)
    assert status == 1 and out.splitlines() == [
        "bug.py:8:23: TDL004 `torch.load` without `map_location`: tensors go back to the device they were saved from",
        "bug.py:13:12: TDL001 `.cuda()` hardcodes a CUDA device: this line fails on machines without one",
    ], out + err
    # a GPU-only project says so: the portability findings are off
    status, out, err = run(script("flake8"), "--select", "TDL", "--tdl-target-devices", "cuda", "bug.py",
                           cwd=tmp_path)
    assert status == 0 and out == "", out + err


@needs_torch
def test_trace_on_the_simulated_gpu_confirms_a_finding(tmp_path):
    program = shutil.copy(ROOT / "testdata" / "trace" / "tdl001_bug.py", tmp_path / "program.py")
    status, out, err = run(script("torchdev-lint"), "trace", "--mode", "sim", program, cwd=tmp_path)
    assert status == 1, out + err
    assert "program.py:5:9: TDL001 confirmed" in out
    assert "1 finding: 1 confirmed" in out


@needs_torch
def test_the_pytest_plugin_runs_a_suite_on_the_simulated_gpu(tmp_path):
    (tmp_path / "test_two.py").write_text(textwrap.dedent("""\
        import torch

        def test_moved_right():
            model = torch.nn.Linear(2, 2).to("cuda")
            assert model(torch.ones(1, 2, device="cuda")).device.type == "cuda"

        def test_forgot_the_input():
            model = torch.nn.Linear(2, 2).cuda()
            model(torch.ones(1, 2))
        """))
    status, out, err = run(sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--simulate-gpu",
                           "test_two.py", cwd=tmp_path)
    assert status == 1, out + err
    assert "1 failed, 1 passed" in out and "Expected all tensors to be on the same device" in out


@needs_torch
@pytest.mark.skipif(gpu_available(), reason="crashes only on a machine without a GPU")
def test_the_default_fix_makes_the_bundled_predict_script_run_here(tmp_path):
    """The default output's finding in the bundled project is real: GPU-saved weights crash the
    script on this machine, and the safe fix that plain `--fix` applies makes it run."""
    project = shutil.copytree(ROOT / "testdata" / "project", tmp_path / "project")
    env = {"PYTHONPATH": str(project)}
    status, _, err = run(sys.executable, ROOT / "testdata" / "make_gpu_checkpoint.py", "release.pt", cwd=project,
                         env=env)
    assert status == 0, err
    predict = [sys.executable, "predict.py", "release.pt"]
    status, _, err = run(*predict, cwd=project, env=env)
    assert status != 0 and "CUDA" in err
    status, out, err = run(script("torchdev-lint"), "--isolated", "--no-cache", "--fix", "predict.py", cwd=project)
    assert status == 0 and "Fixed 1 problem" in out, out + err
    status, out, err = run(*predict, cwd=project, env=env)
    assert status == 0 and out.startswith("["), err
