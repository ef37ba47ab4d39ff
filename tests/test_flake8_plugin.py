"""The flake8 plugin, tested by running the real flake8 in a subprocess and comparing what
it reports with the CLI's JSON output, finding for finding.

Toy sources with no CPU path have possible findings only since confidence tiers: the tests
that use them run in the preview tier (flake8's `--tdl-preview`, the CLI's `--preview`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import torchdev_lint.rules  # noqa: F401  (registers the rules)
from torchdev_lint.flake8_plugin import PARSE_ERROR_CODE, TorchDevLintChecker
from torchdev_lint.rule import Rule

ROOT = Path(__file__).resolve().parent.parent
TESTDATA = ROOT / "testdata"
# Tab-separated, so that messages (which contain colons) split cleanly.
FORMAT = "%(path)s\t%(row)d\t%(col)d\t%(code)s\t%(text)s"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def flake8(*args, cwd=ROOT, isolated=True) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "flake8", f"--format={FORMAT}", *map(str, args)]
    if isolated:  # no setup.cfg / tox.ini / .flake8 from around the test
        command.insert(3, "--isolated")
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=ENV)


def flake8_findings(process: subprocess.CompletedProcess) -> list[tuple]:
    assert process.returncode in (0, 1), process.stderr
    rows = []
    for line in process.stdout.splitlines():
        path, row, col, code, text = line.split("\t")
        rows.append((os.path.normpath(path), int(row), int(col), code, text))
    return sorted(rows)


def cli_findings(*args, cwd=ROOT) -> list[tuple]:
    """The CLI's findings as flake8 shows them: a possible one's message ends with
    ``(possible)``, as in the CLI's text output."""
    process = subprocess.run(
        [sys.executable, "-m", "torchdev_lint", "--isolated", "--format", "json", *map(str, args)],
        cwd=cwd, capture_output=True, text=True, env=ENV,
    )
    assert process.returncode in (0, 1), process.stderr
    return sorted(
        (os.path.normpath(f["path"]), f["line"], f["column"], f["code"],
         f["message"] + (" (possible)" if f["confidence"] == "possible" else ""))
        for f in json.loads(process.stdout)
    )


@pytest.fixture(scope="module", autouse=True)
def plugin_installed():
    version = subprocess.run(
        [sys.executable, "-m", "flake8", "--version"], capture_output=True, text=True, env=ENV
    )
    assert "torchdev-lint" in version.stdout, (
        "flake8 does not see the plugin; reinstall the package (pip install -e .) so that "
        f"its flake8.extension entry point is registered:\n{version.stdout}{version.stderr}"
    )


@pytest.fixture(scope="module")
def examples(tmp_path_factory) -> Path:
    """Every registered rule's VALID and INVALID examples, one file each: a rule added to the
    registry is compared here without any change to the plugin or this test."""
    directory = tmp_path_factory.mktemp("examples")
    for code, rule in sorted(Rule.registry.items()):
        for kind, cases in (("valid", rule.VALID), ("invalid", rule.INVALID)):
            for index, case in enumerate(cases):
                (directory / f"{code}_{kind}_{index}.py").write_text(
                    textwrap.dedent(case.code), encoding="utf-8"
                )
    return directory


@pytest.fixture
def testdata_findings() -> list[tuple]:
    """What the CLI finds in testdata/, found again for each test: a module-wide copy could
    go stale while the working tree changes under a long test run."""
    found = cli_findings("testdata")
    assert found, "testdata/ is meant to have bugs"
    return found


def test_testdata_same_findings_as_cli(testdata_findings):
    assert flake8_findings(flake8("--select", "TDL", "testdata")) == testdata_findings


def test_plugin_codes_are_on_by_default(testdata_findings):
    rows = flake8_findings(flake8("testdata"))
    assert set(testdata_findings) <= set(rows)


def test_every_rule_same_findings_as_cli(examples):
    # in each tier: certain findings by default, possible ones too in the preview tier
    assert flake8_findings(flake8("--select", "TDL", ".", cwd=examples)) == cli_findings(".", cwd=examples)
    expected = cli_findings("--preview", ".", cwd=examples)
    assert flake8_findings(flake8("--select", "TDL", "--tdl-preview", ".", cwd=examples)) == expected
    # every rule on by default showed up, so the plugin picked all of them up (opt-in
    # TDL090 judges noqa comments, which flake8 handles itself: the plugin never runs it)
    assert {row[3] for row in expected} == {c for c, r in Rule.registry.items() if not r.opt_in}


def test_the_default_tier_same_findings_as_cli():
    # the README's job: the bundled project's hardcoded `.cuda()` calls (its train.py offers
    # `--cuda`, off by default) are certain, and flake8 shows what the CLI shows
    expected = cli_findings("testdata/project")
    hardcoded = [(row[0], row[1]) for row in expected if row[3] == "TDL001"]
    assert hardcoded == [(os.path.join("testdata", "project", "train.py"), 28),
                         (os.path.join("testdata", "project", "train.py"), 39)]
    assert {row[3] for row in expected} >= {"TDL001", "TDL003", "TDL004", "TDL005"}
    assert flake8_findings(flake8("--select", "TDL", "testdata/project")) == expected


def test_columns_are_those_the_user_sees(tmp_path):
    # flake8 adds 1 to a plugin's column: the plugin must yield 0-based offsets
    (tmp_path / "a.py").write_text("import torch\ntorch.zeros(1).cuda()\ns = 'é'; torch.ones(1).cuda()\n", encoding="utf-8")
    rows = flake8_findings(flake8("--select", "TDL001", "--tdl-preview", "a.py", cwd=tmp_path))
    assert [(r[1], r[2]) for r in rows] == [(2, 1), (3, 10)]
    assert rows == cli_findings("--preview", "--select", "TDL001", "a.py", cwd=tmp_path)


def test_jobs_2_same_as_serial(examples):
    # in the preview tier, where the examples have findings of every rule
    serial = flake8_findings(flake8("--select", "TDL", "--tdl-preview", "-j", "1", ".", cwd=examples))
    parallel = flake8_findings(flake8("--select", "TDL", "--tdl-preview", "-j", "2", ".", cwd=examples))
    assert serial and parallel == serial


NOQA = """\
import torch

a = torch.zeros(3).cuda()  # noqa
b = torch.zeros(3).cuda()  # noqa: TDL001
c = torch.zeros(3).cuda()  # noqa:TDL0
d = torch.zeros(3).cuda()  # noqa: E501
e = torch.zeros(3).cuda()  # NOQA: TDL001,E501
f = torch.zeros(3).cuda()
"""


def test_noqa_is_flake8s(tmp_path):
    (tmp_path / "noqa.py").write_text(NOQA)
    rows = flake8_findings(flake8("--select", "TDL", "--tdl-preview", "noqa.py", cwd=tmp_path))
    assert [(r[1], r[3]) for r in rows] == [(6, "TDL001"), (8, "TDL001")]
    assert rows == cli_findings("--preview", "noqa.py", cwd=tmp_path)
    # the plugin yields everything and flake8 filters: --disable-noqa shows all six
    everything = flake8_findings(flake8("--select", "TDL", "--tdl-preview", "--disable-noqa", "noqa.py",
                                        cwd=tmp_path))
    assert [r[1] for r in everything] == [3, 4, 5, 6, 7, 8]


def test_noqa_with_jobs_2(tmp_path):
    for name in ("one.py", "two.py", "three.py"):
        (tmp_path / name).write_text(NOQA)
    rows = flake8_findings(flake8("--select", "TDL", "--tdl-preview", "-j", "2", ".", cwd=tmp_path))
    assert [(r[0], r[1]) for r in rows] == [
        (name, line) for name in ("one.py", "three.py", "two.py") for line in (6, 8)
    ]


def test_select_and_ignore_options():
    # in the preview tier, where testdata/ has findings of several rules in one file
    def found(*args):
        return {(row[0], row[3]) for row in flake8_findings(flake8(*args, "--tdl-preview", "testdata"))}

    everything = {(row[0], row[3]) for row in cli_findings("--preview", "testdata")}
    train = os.path.normpath("testdata/project/train.py")
    assert {"TDL001", "TDL004"} <= {code for _, code in everything}
    assert found("--select", "TDL", "--extend-ignore", "TDL001") == {
        f for f in everything if f[1] != "TDL001"
    }
    with_e501 = found("--select", "E501", "--extend-select", "TDL004")
    assert {f for f in with_e501 if f[1] != "E501"} == {f for f in everything if f[1] == "TDL004"}
    assert any(code == "E501" for _, code in with_e501)
    assert found("--select", "TDL", "--per-file-ignores", f"{train}:TDL001,TDL004") == {
        f for f in everything if not (f[0] == train and f[1] in ("TDL001", "TDL004"))
    }


def test_settings_from_flake8_config(tmp_path):
    # a CUDA-only project turns TDL001 off in its flake8 configuration (and asks for the
    # preview tier there: checkpoint.py's load is possible, its caller being another file)
    project = tmp_path / "project"
    shutil.copytree(TESTDATA / "project", project)
    (tmp_path / ".flake8").write_text(
        "[flake8]\nselect = TDL\nextend-ignore = TDL001\ntdl-preview = true\n"
        "per-file-ignores =\n    project/checkpoint.py: TDL004\n"
    )
    rows = flake8_findings(flake8("project", cwd=tmp_path, isolated=False))
    everything = {(r[0], r[3]) for r in cli_findings("--preview", "project", cwd=tmp_path)}
    checkpoint = os.path.normpath("project/checkpoint.py")
    assert ("project/train.py", "TDL001") in everything and (checkpoint, "TDL004") in everything
    assert {(r[0], r[3]) for r in rows} == {
        f for f in everything if f[1] != "TDL001" and f != (checkpoint, "TDL004")
    }


def _modules_after(flake8_args: list[str]) -> dict[str, bool]:
    script = textwrap.dedent(f"""
        import json, sys
        from flake8.main import cli
        try:
            cli.main({flake8_args!r})
        except SystemExit:
            pass
        loaded = lambda name: name in sys.modules
        print(json.dumps({{name: loaded(name) for name in
              ("torchdev_lint.flake8_plugin", "libcst", "torchdev_lint.rules", "torch")}}))
    """)
    process = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=ENV, cwd=ROOT)
    assert process.returncode == 0, process.stderr
    return json.loads(process.stdout.splitlines()[-1])


def test_version_does_not_import_libcst_or_torch():
    assert _modules_after(["--version"]) == {
        "torchdev_lint.flake8_plugin": True, "libcst": False, "torchdev_lint.rules": False, "torch": False
    }


def test_linting_never_imports_torch():
    assert _modules_after(["--isolated", "--select", "TDL", "-j", "1", "--quiet", "testdata"]) == {
        "torchdev_lint.flake8_plugin": True, "libcst": True, "torchdev_lint.rules": True, "torch": False
    }


def test_file_libcst_cannot_parse_is_reported_not_skipped():
    # flake8 runs tree plugins only on files its own parser accepts, so this is for what
    # LibCST rejects and CPython accepts; called directly because no such input is known.
    checker = TorchDevLintChecker(None, ["import torch\n", "x = (torch.zeros(1).cuda()\n"], "bad.py")
    (row,) = list(checker.run())
    assert row[2].startswith(f"{PARSE_ERROR_CODE} torchdev-lint could not check this file: syntax error")
    assert row[0] >= 1 and row[1] >= 0
