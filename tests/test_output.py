"""Output formats as tools and people consume them: one line per message, GitHub's escaping,
code frames and colour, statistics, SARIF that validates against the 2.1.0 schema."""

import io
import json
import sys
from pathlib import Path

import pytest

from torchdev_lint import cli
from torchdev_lint.output import github

SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"

MULTILINE_MOVE = """\
import torch
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model.to(
    "cpu",
)
"""
CUDA = "import torch\nx = torch.zeros(3)\ny = x.cuda()\n"
BROKEN = "def f(:\n    pass\n"


def lint(capsys, monkeypatch, tmp_path, *args, env=None):
    """The command line in the preview tier: the toy fixtures above have no CPU path (and
    TDL005 is a preview rule), so their findings are possible since confidence tiers."""
    monkeypatch.chdir(tmp_path)
    for key in ("NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(key, raising=False)
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)
    status = cli.main(["--isolated", "--preview", *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_a_message_is_one_line_even_when_it_quotes_multiline_code(tmp_path, capsys, monkeypatch):
    (tmp_path / "m.py").write_text(MULTILINE_MOVE)
    status, out, _ = lint(capsys, monkeypatch, tmp_path, "--format", "github", "m.py")
    assert status == 1
    assert out.splitlines() == [
        "::error title=torchdev-lint (TDL005),file=m.py,line=3,col=7,endLine=3,endColumn=50::"
        "TDL005 Optimizer built from `model` parameters before `model.to( \"cpu\", )` moves the model: "
        "build it after the move (possible)"  # TDL005 is a preview rule
    ]
    _, out, _ = lint(capsys, monkeypatch, tmp_path, "--format", "concise", "m.py")
    assert len(out.splitlines()) == 2  # the finding and the summary


def test_github_escapes_data_and_properties(tmp_path, capsys, monkeypatch):
    assert github.escape_data("50%\r\nnext") == "50%25%0D%0Anext"
    assert github.escape_property("a,b:c%") == "a%2Cb%3Ac%25"
    (tmp_path / "we,ird:100%.py").write_text(CUDA)
    _, out, _ = lint(capsys, monkeypatch, tmp_path, "--format", "github", "we,ird:100%.py")
    assert out.startswith("::error title=torchdev-lint (TDL001),file=we%2Cird%3A100%25.py,line=3,col=5,")


def test_text_shows_a_code_frame_and_concise_does_not(tmp_path, capsys, monkeypatch):
    (tmp_path / "m.py").write_text(CUDA)
    _, out, _ = lint(capsys, monkeypatch, tmp_path, "m.py")
    assert out.splitlines()[:4] == [
        "m.py:3:5: TDL001 [*] `.cuda()` hardcodes a CUDA device: this line fails on machines without one (possible)",
        "  |",
        "3 | y = x.cuda()",
        "  |     ^^^^^^^^",
    ]
    _, out, _ = lint(capsys, monkeypatch, tmp_path, "--output-format", "concise", "m.py")
    assert out.splitlines()[1].startswith("Found 1 problem")


def test_colour_only_when_asked_or_on_a_terminal(tmp_path, capsys, monkeypatch):
    (tmp_path / "m.py").write_text(CUDA)
    assert "\033[" not in lint(capsys, monkeypatch, tmp_path, "m.py")[1]  # captured: not a tty
    assert "\033[" in lint(capsys, monkeypatch, tmp_path, "m.py", env={"FORCE_COLOR": "1"})[1]
    both = {"FORCE_COLOR": "1", "NO_COLOR": "1"}
    assert "\033[" not in lint(capsys, monkeypatch, tmp_path, "m.py", env=both)[1]


def test_statistics_counts_per_rule(tmp_path, capsys, monkeypatch):
    (tmp_path / "a.py").write_text(CUDA)
    (tmp_path / "b.py").write_text(CUDA + "z = x.cuda()\nstate = torch.load(p)\n")
    status, out, _ = lint(capsys, monkeypatch, tmp_path, "--statistics", ".")
    assert status == 1
    assert out.splitlines()[:2] == ["3\tTDL001\t[*] hardcoded-cuda-call", "1\tTDL004\t    load-without-map-location"]


def test_fix_only_show_fixes_and_output_file(tmp_path, capsys, monkeypatch):
    (tmp_path / "m.py").write_text(CUDA + "state = torch.load(p)\n")
    status, out, _ = lint(capsys, monkeypatch, tmp_path, "--fix-only", "--show-fixes", "m.py")
    assert status == 0  # what remains is not reported
    assert out.splitlines() == ["Fixed 1 problem.", "- m.py:", "    1 × TDL001 (hardcoded-cuda-call)"]
    status, out, _ = lint(capsys, monkeypatch, tmp_path, "--output-file", "report.json", "--format", "json", "m.py")
    assert status == 1 and out == ""
    assert [f["code"] for f in json.loads((tmp_path / "report.json").read_text())] == ["TDL004"]


def test_never_all_checks_passed_when_a_file_was_not_checked(tmp_path, capsys, monkeypatch):
    (tmp_path / "ok.py").write_text("x = 1\n")
    (tmp_path / "broken.py").write_text(BROKEN)
    status, out, err = lint(capsys, monkeypatch, tmp_path, ".")
    assert status == 2
    assert "All checks passed" not in out + err
    assert "1 file could not be checked" in out


def test_rules_lists_every_code(capsys):
    from torchdev_lint.rule import Rule

    assert cli.main(["rules", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["code"] for r in rows] == [*sorted(Rule.registry), "TDL100"]
    assert rows[0]["name"] == "hardcoded-cuda-call" and rows[0]["fix"]
    assert cli.main(["rules"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("TDL001  hardcoded-cuda-call")
    assert cli.main(["--explain", "TDL100"]) == 0
    assert capsys.readouterr().out.startswith("# TDL100: runtime-device-mismatch")


def test_rule_links_follow_the_documentation_url_of_pyproject():
    """SARIF's `helpUri` and the language server's `codeDescription` are the same page,
    under `[project.urls] Documentation`, and that page is in this checkout's docs."""
    from torchdev_lint.config import tomllib  # tomli before Python 3.11
    from torchdev_lint.output import sarif
    from torchdev_lint.rule import Rule

    root = Path(__file__).parents[1]
    base = tomllib.loads((root / "pyproject.toml").read_text())["project"]["urls"]["Documentation"]
    assert base.endswith("/blob/main/docs")
    links = {r["id"]: r["helpUri"] for r in sarif.sarif([])["runs"][0]["tool"]["driver"]["rules"]}
    assert sorted(links) == sorted(Rule.registry)
    for code, link in links.items():
        assert link == f"{base}/rules/{code}.md"
        assert (root / link.split("/blob/main/", 1)[1]).is_file()
    server = pytest.importorskip("torchdev_lint.integrations.server")
    assert server.rule_page("TDL004") == links["TDL004"]


def test_sarif_is_valid_and_relative_to_srcroot(tmp_path, capsys, monkeypatch):
    jsonschema = pytest.importorskip("jsonschema")
    monkeypatch.setattr("torchdev_lint.output.sarif.docs_url", lambda: "https://example.org/docs")
    (tmp_path / "sub dir").mkdir()
    (tmp_path / "sub dir" / "my file.py").write_text(CUDA)
    (tmp_path / "broken.py").write_text(BROKEN)
    (tmp_path / "pyproject.toml").write_text("[tool.torchdev-lint]\npreview = true\n")
    monkeypatch.chdir(tmp_path)
    status = cli.main(["--format", "sarif", "."])
    log = json.loads(capsys.readouterr().out)
    assert status == 2
    jsonschema.validate(log, json.loads(SCHEMA.read_text()))
    run = log["runs"][0]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.resolve().as_uri() + "/"
    location = run["results"][0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "sub%20dir/my%20file.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": 3, "startColumn": 5, "endLine": 3, "endColumn": 13}
    rule = run["tool"]["driver"]["rules"][0]
    assert rule["helpUri"] == "https://example.org/docs/rules/TDL001.md"
    assert rule["fullDescription"]["text"]
    invocation = run["invocations"][0]
    assert invocation["executionSuccessful"] is False
    [note] = invocation["toolExecutionNotifications"]
    assert note["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "broken.py"
    assert "syntax error" in note["message"]["text"]
