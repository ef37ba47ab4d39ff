"""End-to-end: the real command line in a subprocess, as a user runs it."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT

# Toy buggy code with no CPU path: since confidence tiers its findings are possible, so the
# tests of the command line's mechanics below run in the preview tier (`--preview`).
BUGGY = textwrap.dedent(
    """\
    import torch

    model = Net()
    model.cuda()
    state = torch.load("ckpt.pt")
    """
)
CLEAN = "import torch\nx = torch.zeros(2)\nx = x.to('cpu')\n"


def write(path, text, mode="w"):
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode == "wb":
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_text_output_sorted_with_summary(tmp_path, run_cli):
    write(tmp_path / "b.py", BUGGY)
    write(tmp_path / "a.py", "x = y.cuda()\n")
    write(tmp_path / "clean.py", CLEAN)
    status, out, err = run_cli("--isolated", "--preview", "--output-format", "concise", ".", cwd=tmp_path)
    assert status == 1, err
    lines = out.splitlines()
    assert lines[:3] == [
        "a.py:1:5: TDL001 [*] `.cuda()` hardcodes a CUDA device: this line fails on machines without one (possible)",
        "b.py:4:1: TDL001 [*] `.cuda()` hardcodes a CUDA device: this line fails on machines without one (possible)",
        "b.py:5:9: TDL004 [~] `torch.load` without `map_location`: "
        "tensors go back to the device they were saved from (possible)",
    ]
    assert lines[3] == ("Found 3 problems in 2 files. [*] 2 fixable with `--fix`. "
                        "[~] 1 hidden fix can be enabled with `--unsafe-fixes`.")
    assert len(lines) == 4


def test_paths_are_shown_as_typed(tmp_path, run_cli):
    write(tmp_path / "pkg" / "sub" / "m.py", "x = y.cuda()\n")
    status, out, _ = run_cli("--isolated", "--preview", "pkg/", cwd=tmp_path)
    assert out.startswith("pkg/sub/m.py:1:5: TDL001")


def test_exit_status_clean_and_exit_zero(tmp_path, run_cli):
    write(tmp_path / "clean.py", CLEAN)
    write(tmp_path / "bug.py", BUGGY)
    assert run_cli("--isolated", "--preview", "clean.py", cwd=tmp_path)[0] == 0
    assert run_cli("--isolated", "--preview", "bug.py", cwd=tmp_path)[0] == 1
    assert run_cli("--isolated", "--preview", "--exit-zero", "bug.py", cwd=tmp_path)[0] == 0


def test_json_output_is_the_documented_contract(tmp_path, run_cli):
    write(tmp_path / "bug.py", BUGGY)
    status, out, _ = run_cli("--isolated", "--preview", "--format", "json", "bug.py", cwd=tmp_path)
    assert status == 1
    findings = json.loads(out)
    assert findings[0] == {
        "path": "bug.py", "line": 4, "column": 1, "end_line": 4, "end_column": 13,
        "code": "TDL001", "name": "hardcoded-cuda-call",
        "message": "`.cuda()` hardcodes a CUDA device: this line fails on machines without one",
        "fixable": True, "fix_applicability": "safe", "cell": None,
        "confidence": "possible",
        "evidence": [{"path": "bug.py", "line": 1, "column": 1, "cell": None, "message": (
            "judged CUDA-only (target-devices auto): nothing here chooses the CPU, offers a CPU "
            "option or takes a device; --target-devices cpu,cuda says it must run without CUDA")}],
    }
    assert [f["code"] for f in findings] == ["TDL001", "TDL004"]


def test_json_output_is_an_empty_array_when_clean(tmp_path, run_cli):
    write(tmp_path / "clean.py", CLEAN)
    status, out, _ = run_cli("--isolated", "--format", "json", "clean.py", cwd=tmp_path)
    assert (status, json.loads(out)) == (0, [])


def test_github_and_sarif_formats(tmp_path, run_cli):
    write(tmp_path / "bug.py", BUGGY)
    _, out, _ = run_cli("--isolated", "--preview", "--format", "github", "bug.py", cwd=tmp_path)
    assert out.splitlines()[0].startswith("::error title=torchdev-lint (TDL001),file=bug.py,line=4,col=1,")
    _, out, _ = run_cli("--isolated", "--preview", "--format", "sarif", "bug.py", cwd=tmp_path)
    sarif = json.loads(out)
    assert sarif["version"] == "2.1.0"
    results = sarif["runs"][0]["results"]
    assert [r["ruleId"] for r in results] == ["TDL001", "TDL004"]
    assert results[0]["locations"][0]["physicalLocation"]["region"]["startLine"] == 4


@pytest.mark.parametrize(
    "args, codes",
    [
        (["--select", "TDL004"], ["TDL004"]),
        (["--select", "tdl00"], ["TDL001", "TDL004"]),
        (["--ignore", "TDL001"], ["TDL004"]),
        (["--select", "TDL001,TDL004", "--ignore", "TDL004"], ["TDL001"]),
    ],
)
def test_select_and_ignore(tmp_path, run_cli, args, codes):
    write(tmp_path / "bug.py", BUGGY)
    _, out, _ = run_cli("--isolated", "--preview", "--format", "json", *args, "bug.py", cwd=tmp_path)
    assert [f["code"] for f in json.loads(out)] == codes


@pytest.mark.parametrize("option", ["--select", "--ignore"])
def test_unknown_code_is_a_one_line_error(tmp_path, run_cli, option):
    write(tmp_path / "bug.py", BUGGY)
    status, out, err = run_cli(option, "TDL999", "bug.py", cwd=tmp_path)
    assert status == 2
    assert err.strip().count("\n") == 0 and "TDL999" in err and "Traceback" not in err


def test_pyproject_configuration(tmp_path, run_cli):
    write(tmp_path / "pyproject.toml", textwrap.dedent("""\
        [tool.torchdev-lint]
        preview = true
        ignore = ["TDL001"]
        exclude = ["vendored"]
        per-file-ignores = { "tests/*" = ["TDL004"] }
        """))
    write(tmp_path / "src" / "bug.py", BUGGY)
    write(tmp_path / "tests" / "test_bug.py", BUGGY)
    write(tmp_path / "vendored" / "bug.py", BUGGY)
    status, out, _ = run_cli("--format", "json", ".", cwd=tmp_path)
    found = [(f["path"], f["code"]) for f in json.loads(out)]
    assert found == [("src/bug.py", "TDL004")]
    # The command line overrides the configuration.
    _, out, _ = run_cli("--format", "json", "--select", "TDL001", "src", cwd=tmp_path)
    assert [f["code"] for f in json.loads(out)] == ["TDL001"]


def test_pyproject_unknown_option_is_an_error(tmp_path, run_cli):
    write(tmp_path / "pyproject.toml", "[tool.torchdev-lint]\nselcet = ['TDL001']\n")
    write(tmp_path / "bug.py", BUGGY)
    status, _, err = run_cli("bug.py", cwd=tmp_path)
    assert status == 2 and "selcet" in err


def test_cuda_only_project_turns_tdl001_off(tmp_path, run_cli):
    write(tmp_path / "pyproject.toml", '[tool.torchdev-lint]\npreview = true\nignore = ["TDL001"]\n')
    write(tmp_path / "trainer.py", "import torch\nmodel = model.cuda()\n")
    assert run_cli(".", cwd=tmp_path)[0] == 0


@pytest.mark.parametrize(
    "line, flagged",
    [
        ("model.cuda()  # noqa\n", False),
        ("model.cuda()  # noqa: TDL001\n", False),
        ("model.cuda()  # noqa: TDL004, TDL001\n", False),
        ("model.cuda()  # noqa:TDL00\n", False),
        ("model.cuda()  # noqa: TDL004\n", True),
        ("model.cuda()  # a comment\n", True),
    ],
)
def test_noqa(tmp_path, run_cli, line, flagged):
    write(tmp_path / "m.py", "import torch\n" + line)
    status, out, _ = run_cli("--isolated", "--preview", "m.py", cwd=tmp_path)
    assert ("TDL001" in out) == flagged


def test_noqa_on_a_multiline_statement(tmp_path, run_cli):
    write(tmp_path / "m.py", textwrap.dedent("""\
        import torch
        state = torch.load(
            "ckpt.pt",
        )  # noqa: TDL004
        other = torch.load(  # noqa: TDL004
            "ckpt.pt")
        third = torch.load("x")
        """))
    status, out, _ = run_cli("--isolated", "--preview", "--format", "json", "m.py", cwd=tmp_path)
    assert [f["line"] for f in json.loads(out)] == [7]


def test_stdin_with_filename(tmp_path, run_cli):
    status, out, _ = run_cli("--isolated", "--preview", "-", "--stdin-filename", "src/train.py", input=BUGGY,
                             cwd=tmp_path)
    assert status == 1
    assert out.startswith("src/train.py:4:1: TDL001")


def test_version_help_and_explain(run_cli):
    status, out, _ = run_cli("--version")
    assert status == 0 and out.startswith("torchdev-lint 0.")
    status, out, _ = run_cli("--help")
    assert status == 0 and "--select" in out and "--fix" in out
    status, out, _ = run_cli("--explain", "TDL003")
    assert status == 0 and out.startswith("# TDL003: discarded-to-result")
    assert "## Why is this bad?" in out
    status, _, err = run_cli("--explain", "TDL042")
    assert status == 2 and "TDL042" in err


def test_default_excludes(tmp_path, run_cli):
    for skipped in [".git/hooks/x.py", "build/x.py", "dist/x.py", "__pycache__/x.py",
                    "node_modules/x.py", "env1/lib/x.py", "notebooks/.ipynb_checkpoints/x-checkpoint.py", ".history/x_20221018.py"]:
        write(tmp_path / skipped, BUGGY)
    write(tmp_path / "env1" / "pyvenv.cfg", "home = /usr\n")
    write(tmp_path / "real.py", BUGGY)
    _, out, _ = run_cli("--isolated", "--preview", "--format", "json", ".", cwd=tmp_path)
    assert {f["path"] for f in json.loads(out)} == {"real.py"}


def test_static_path_never_imports_torch(tmp_path):
    write(tmp_path / "bug.py", BUGGY)
    probe = (
        "import sys\n"
        "from torchdev_lint.cli import main\n"
        f"code = main(['--isolated', '--preview', {str(tmp_path)!r}, '--fix', '--diff'])\n"
        "code = main(['--isolated', '--preview', '--format', 'json', {!r}])\n".format(str(tmp_path))
        + "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    assert out.strip().splitlines()[-1] == "False"


# -- bad input: one clear line naming the file, the other files still checked, exit 2 ------


def test_python2_syntax_error(tmp_path, run_cli):
    write(tmp_path / "old.py", 'import torch\nprint "hello"\n')
    write(tmp_path / "bug.py", BUGGY)
    status, out, err = run_cli("--isolated", "--preview", ".", cwd=tmp_path)
    assert status == 2
    assert "bug.py:4:1: TDL001" in out  # the other file is still checked
    (line,) = [l for l in err.splitlines() if "old.py" in l]
    assert line.startswith("torchdev-lint: old.py:2:") and "syntax error" in line


@pytest.mark.parametrize(
    "name, data, problem",
    [
        ("latin.py", b"x = 'caf\xe9'\n", "cannot decode as utf-8"),
        ("blob.py", b"\x7fELF\x02\x01\x01\x00\x00\x00", "binary file"),
        ("cookie.py", b"# -*- coding: klingon -*-\nx = 1\n", "encoding"),
    ],
)
def test_undecodable_files(tmp_path, run_cli, name, data, problem):
    write(tmp_path / name, data, mode="wb")
    write(tmp_path / "bug.py", BUGGY)
    status, out, err = run_cli("--isolated", "--preview", ".", cwd=tmp_path)
    assert status == 2
    assert "bug.py:4:1: TDL001" in out
    (line,) = [l for l in err.splitlines() if name in l]
    assert problem in line


def test_unreadable_path(tmp_path, run_cli):
    os.symlink(tmp_path / "gone.py", tmp_path / "dangling.py")
    write(tmp_path / "bug.py", BUGGY)
    status, out, err = run_cli("--isolated", "--preview", ".", cwd=tmp_path)
    assert status == 2 and "bug.py:4:1" in out
    assert "dangling.py: error: cannot read" in err


def test_latin1_coding_cookie_and_non_ascii_columns(tmp_path, run_cli):
    source = "# -*- coding: latin-1 -*-\nnom = 'café'; x = y.cuda()\n".encode("latin-1")
    write(tmp_path / "m.py", source, mode="wb")
    status, out, err = run_cli("--isolated", "--preview", "m.py", cwd=tmp_path)
    assert status == 1, err
    assert out.startswith("m.py:2:19: TDL001")  # columns count characters, not bytes


def test_empty_file_and_missing_path(tmp_path, run_cli):
    write(tmp_path / "empty.py", "")
    assert run_cli("--isolated", "empty.py", cwd=tmp_path)[0] == 0
    status, _, err = run_cli("--isolated", "nope.py", cwd=tmp_path)
    assert status == 2 and "nope.py: error: no such file or directory" in err


def test_no_python_files(tmp_path, run_cli):
    write(tmp_path / "notes.txt", "hello")
    status, out, err = run_cli("--isolated", ".", cwd=tmp_path)
    assert status == 0 and "No Python files found" in err


def test_deeply_nested_expression_is_an_error_not_a_crash(tmp_path, run_cli):
    write(tmp_path / "deep.py", "import torch\nx = " + "-" * 3000 + "1\ny = z.cuda()\n")
    write(tmp_path / "bug.py", BUGGY)
    status, out, err = run_cli("--isolated", "--preview", ".", cwd=tmp_path)
    assert status == 2 and "Traceback" not in err
    assert "bug.py:4:1: TDL001" in out
    assert "deep.py" in err and "nested" in err


def test_the_summary_counts_checked_files_apart_from_those_that_could_not_be_read(run_cli, tmp_path):
    (tmp_path / "ok.py").write_text("x = 1\n")
    (tmp_path / "broken.py").write_text("def f(:\n")
    code, out, err = run_cli("--no-cache", "ok.py", "missing.py", cwd=tmp_path)
    assert code == 2 and "missing.py" in err
    assert out.strip() == "No problems found in 1 file checked; 1 file could not be checked."
    code, out, _ = run_cli("--no-cache", "ok.py", "broken.py", "missing.py", cwd=tmp_path)
    assert out.strip() == "No problems found in 1 file checked; 2 files could not be checked."


@pytest.mark.parametrize("command", [[], ["rules"], ["trace"], ["server"], ["daemon"]],
                         ids=["main", "rules", "trace", "server", "daemon"])
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_every_subcommand_has_help_that_exits_0(run_cli, command, flag):
    status, out, err = run_cli(*command, flag)
    assert status == 0, err
    assert out.startswith("usage: torchdev-lint" + "".join(f" {word}" for word in command)), out
    assert err == ""


# Forces an unexpected exception in the command: loaded first by every Python that has its
# directory on PYTHONPATH (the command, a resident checker, a trace), it breaks what
# TDL_TEST_CRASH names.
CRASH_SITECUSTOMIZE = textwrap.dedent(
    """\
    import os, sys

    def boom(*args, **kwargs):
        raise RuntimeError("forced failure for a test")

    how = os.environ.get("TDL_TEST_CRASH")
    if how == "import":  # the command line cannot even be imported
        sys.modules["torchdev_lint.cli"] = None
    elif how == "check":
        from torchdev_lint import runner
        runner.check_source = boom
    elif how == "trace":
        from torchdev_lint.trace import cli
        cli._trace = boom
    """
)
INTERNAL_ERROR = "torchdev-lint: internal error (a bug in torchdev-lint, not a finding): "


def crashing(tmp_path, how, *args, cwd):
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(CRASH_SITECUSTOMIZE)
    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "TDL_TEST_CRASH": how,
           "TMPDIR": str(logs)}
    process = subprocess.run([sys.executable, "-m", "torchdev_lint", *args], cwd=cwd, env=env,
                             capture_output=True, text=True, timeout=300)
    return process.returncode, process.stdout, process.stderr, logs


@pytest.mark.parametrize("how, args, message", [
    ("import", ["ok.py"], "ModuleNotFoundError: import of torchdev_lint.cli halted; None in sys.modules"),
    ("check", ["--no-cache", "ok.py"], "RuntimeError: forced failure for a test"),
    ("trace", ["trace", "ok.py"], "RuntimeError: forced failure for a test"),
])
def test_an_internal_error_is_one_line_exit_2_and_its_traceback_kept(tmp_path, how, args, message):
    """Not exit 1 (which says: findings) and not a traceback: one line that says it is a bug
    and where its traceback is."""
    (tmp_path / "ok.py").write_text("x = 1\n")
    status, out, err, logs = crashing(tmp_path, how, *args, cwd=tmp_path)
    assert status == 2 and out == ""
    (line,) = err.splitlines()
    (kept,) = logs.glob("torchdev-lint-crash-*.txt")
    assert line == f"{INTERNAL_ERROR}{message}; the traceback is in {kept}"
    assert "Traceback (most recent call last)" in kept.read_text() and message in kept.read_text()


def test_an_internal_error_under_verbose_prints_its_traceback(tmp_path):
    (tmp_path / "ok.py").write_text("x = 1\n")
    status, out, err, logs = crashing(tmp_path, "check", "-v", "--no-cache", "ok.py", cwd=tmp_path)
    assert status == 2 and out == ""
    assert err.startswith("Traceback (most recent call last)")
    assert err.splitlines()[-1] == f"{INTERNAL_ERROR}RuntimeError: forced failure for a test; the traceback is above"
    assert not list(logs.iterdir())
