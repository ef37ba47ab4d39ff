"""The command line and the parent process: no torch, no user code imported here."""

import importlib.util
import json
import subprocess
import sys

import pytest
from tracehelp import ROOT

from torchdev_lint.trace import cli


@pytest.mark.parametrize("argv, expected", [
    (["train.py"], ([], "train.py", False, [])),
    (["--keep-going", "train.py", "--epochs", "3", "--mode", "x"],
     (["--keep-going"], "train.py", False, ["--epochs", "3", "--mode", "x"])),
    (["--timeout", "5", "--mode", "sim", "train.py", "-m"], (["--timeout", "5", "--mode", "sim"], "train.py", False, ["-m"])),
    (["-m", "pkg.train", "--lr", "1"], ([], "pkg.train", True, ["--lr", "1"])),
    (["--max-steps", "2", "-mpkg", "a"], (["--max-steps", "2"], "pkg", True, ["a"])),
    (["--format", "json", "--", "--odd-name.py", "x"], (["--format", "json"], "--odd-name.py", False, ["x"])),
    (["--keep-going"], (["--keep-going"], None, False, [])),
])
def test_the_program_and_its_arguments_are_split_from_the_options(argv, expected):
    assert cli.split_argv(argv) == expected


def test_without_torch_it_says_how_to_install(monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    assert cli.main(["train.py"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'torch>=2.4'" in err


def test_usage_errors(capsys, tmp_path):
    assert cli.main([]) == 2
    assert "name a SCRIPT or -m MODULE" in capsys.readouterr().err
    assert cli.main([str(tmp_path / "missing.py")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert cli.main(["--max-steps", "0", str(tmp_path)]) == 2
    assert cli.main(["--select", "TDL999", __file__]) == 2


def test_the_parent_side_never_imports_torch():
    code = ("import sys, torchdev_lint.cli, torchdev_lint.trace.cli, torchdev_lint.trace.session, "
            "torchdev_lint.trace.verdicts, torchdev_lint.trace.report; "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_help_says_it_executes_the_program(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "EXECUTES the program" in out and "--keep-going" in out and "2.13.0" in out


@pytest.mark.traces("TDL003-bug")
def test_json_adds_status_and_evidence_to_the_static_objects(traced):
    result = traced("TDL003-bug")
    report = result.report
    finding = result.at(10, "TDL003")[0]
    static_fields = {"path", "line", "column", "end_line", "end_column", "code", "name", "message",
                     "fixable", "fix_applicability"}
    assert static_fields | {"status", "evidence"} <= set(finding)
    assert finding["status"] == "confirmed"
    assert "tdl003_bug.py:10" in finding["evidence"] and "cuda:0" in finding["evidence"]
    run = report["runs"][0]
    assert run["command"] == "python -m testdata.trace.tdl003_bug"
    assert run["mode"] == "sim" and run["torch"].startswith("2.")
    assert report["summary"] == {"confirmed": 1, "not confirmed": 0, "not reached": 0}
    # it says what it runs, before running it, on standard error
    assert "running `python -m testdata.trace.tdl003_bug`" in result.stderr
    json.dumps(report)


@pytest.mark.parametrize("select, ignore, wanted", [
    ([], [], True), (["TDL"], [], True), (["TDL1"], [], True), (["TDL003"], [], False),
    ([], ["TDL100"], False), (["TDL"], ["TDL1"], False), ([], ["TDL00"], True),
])
def test_select_and_ignore_apply_to_tdl100(select, ignore, wanted):
    assert cli.wants_mismatches(select, ignore) is wanted
