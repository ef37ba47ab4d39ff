"""File-system oddities: named pipes, symbolic links, unlistable directories, CR-only
newlines, leftovers of a killed --fix, a closed standard input."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUG = "import torch\nx = torch.zeros(1).cuda()\n"
FIXED_LINE = "x = torch.zeros(1).to(device)"


def run(*args, cwd, timeout=60, prefix=(), isolated=True, **options):
    try:
        process = subprocess.run(
            [*prefix, sys.executable, "-m", "torchdev_lint", *(["--isolated"] if isolated else []), "--no-cache", "--preview",
             *map(str, args)],
            cwd=cwd, capture_output=True, text=True, timeout=timeout,
            env={**os.environ, "PYTHONPATH": str(ROOT)}, **options,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"torchdev-lint {' '.join(map(str, args))} still running after {timeout} s")
    return process.returncode, process.stdout, process.stderr


@pytest.mark.parametrize("how", ["walked", "named"])
def test_a_named_pipe_is_one_line_and_never_opened(tmp_path, how):
    os.mkfifo(tmp_path / "x.py")
    (tmp_path / "bug.py").write_text(BUG)
    status, out, err = run(*(["."] if how == "walked" else ["x.py", "bug.py"]), cwd=tmp_path)
    assert status == 2 and "bug.py:2:5: TDL001" in out
    assert err.strip() == "torchdev-lint: x.py: error: not a regular file (a named pipe): not read"


def make_links(tmp_path):
    (tmp_path / "shared").mkdir()
    (tmp_path / "tree").mkdir()
    (tmp_path / "shared" / "util.py").write_text(BUG)
    (tmp_path / "tree" / "util.py").symlink_to("../shared/util.py")
    (tmp_path / "tree" / "pkg").symlink_to("../shared", target_is_directory=True)
    return tmp_path / "tree" / "util.py", tmp_path / "shared" / "util.py"


def test_fix_through_a_link_fixes_its_target_inside_the_checked_paths(tmp_path):
    link, target = make_links(tmp_path)
    status, out, err = run("--fix", ".", cwd=tmp_path)
    assert status == 0, out + err
    assert link.is_symlink() and os.readlink(link) == "../shared/util.py"
    assert FIXED_LINE in target.read_text()
    assert [p.name for p in target.parent.iterdir()] == ["util.py"]  # no temporary left


def test_a_link_to_outside_the_checked_paths_is_left_and_said(tmp_path):
    link, target = make_links(tmp_path)
    status, out, err = run("--fix", "tree", cwd=tmp_path)
    assert status == 2
    assert link.is_symlink() and target.read_text() == BUG
    (line,) = err.strip().splitlines()
    assert line.startswith("torchdev-lint: tree/util.py: error: fix not written: a link to ")
    assert "outside the paths checked" in line
    # The directory link is not followed: its file is reported once, through the file link.
    assert "tree/pkg" not in out


# Root reads every directory through its capabilities CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH;
# setpriv runs the command with both dropped, so the permission bits apply to it too.
DROP_DAC = ["setpriv", "--inh-caps=-dac_override,-dac_read_search",
            "--bounding-set=-dac_override,-dac_read_search"]


def unprivileged(locked: Path) -> list[str]:
    """A command prefix under which ``locked`` (mode 0) cannot be listed: none for a normal
    user, setpriv for root; the test is skipped only where neither holds."""
    prefix = DROP_DAC if os.geteuid() == 0 and shutil.which("setpriv") else []
    probe = subprocess.run([*prefix, sys.executable, "-c", "import os, sys; os.listdir(sys.argv[1])", str(locked)],
                           capture_output=True)
    if probe.returncode == 0:
        pytest.skip("this user lists every directory, and cannot drop the capabilities that allow it")
    return prefix


@pytest.mark.parametrize("how", ["walked", "named"])
@pytest.mark.parametrize("configured", [False, True], ids=["isolated", "configured"])
def test_an_unlistable_directory_is_reported(tmp_path, how, configured):
    """Also where settings are looked up per directory (the search for the nearest
    pyproject.toml and for virtual environments looks into the directory too)."""
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "hidden.py").write_text(BUG)
    (tmp_path / "bug.py").write_text(BUG)
    locked.chmod(0)
    try:
        prefix = unprivileged(locked)
        status, out, err = run(*(["."] if how == "walked" else ["locked", "bug.py"]), cwd=tmp_path, prefix=prefix,
                               isolated=not configured)
    finally:
        locked.chmod(0o755)
    assert status == 2 and "bug.py:2:5: TDL001" in out
    assert "hidden.py" not in out
    (line,) = err.strip().splitlines()
    assert line == "torchdev-lint: locked: error: cannot list directory: Permission denied"


@pytest.mark.parametrize("configured", [False, True], ids=["isolated", "configured"])
@pytest.mark.parametrize("how", ["named", "walked"])
def test_a_file_in_a_directory_that_cannot_be_entered_is_one_line_and_the_rest_is_checked(
        tmp_path, configured, how):
    """`chmod a-x sub`: its names can be listed, but nothing in it looked at (not even
    whether it is a file, which the search for its settings asks first)."""
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "inner.py").write_text(BUG)
    (tmp_path / "good.py").write_text(BUG)
    sub.chmod(0o644)
    try:
        prefix = DROP_DAC if os.geteuid() == 0 and shutil.which("setpriv") else []
        probe = subprocess.run([*prefix, sys.executable, "-c", "import os, sys; os.stat(sys.argv[1])",
                                str(sub / "inner.py")], capture_output=True)
        if probe.returncode == 0:
            pytest.skip("this user enters every directory, and cannot drop the capabilities that allow it")
        status, out, err = run(*(["sub/inner.py", "good.py"] if how == "named" else ["."]), cwd=tmp_path,
                               prefix=prefix, isolated=not configured)
    finally:
        sub.chmod(0o755)
    assert status == 2, err
    assert "Traceback" not in err
    assert "good.py:2:5: TDL001" in out and "inner.py" not in out
    (line,) = err.strip().splitlines()
    assert line.startswith("torchdev-lint: sub/inner.py: error: cannot read: Permission denied"), line


def test_cr_only_newlines_keep_their_last_cr(tmp_path):
    path = tmp_path / "mac.py"
    path.write_bytes(BUG.replace("\n", "\r").encode())
    status, out, err = run("--fix", "mac.py", cwd=tmp_path)
    assert status == 0, out + err
    assert path.read_bytes() == (
        'import torch\rdevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\r'
        f"{FIXED_LINE}\r"
    ).encode()


def test_temporaries_of_a_killed_fix_are_removed_by_the_next_run(tmp_path):
    (tmp_path / "a.py").write_text(BUG)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    stale = tmp_path / f".a.py.tdl-{dead}-x1y2.tmp"
    live = tmp_path / f".a.py.tdl-{os.getpid()}-x1y2.tmp"  # a run still writing it
    unrelated = tmp_path / ".a.py.other.tmp"
    for path in (stale, live, unrelated):
        path.write_text("partial")
    status, _, _ = run(".", cwd=tmp_path)
    assert status == 1
    assert not stale.exists() and live.exists() and unrelated.exists()


def test_closed_standard_input_is_one_line(tmp_path):
    status, out, err = run("-", cwd=tmp_path, preexec_fn=lambda: os.close(0))
    assert status == 2 and "Traceback" not in err
    assert err.strip().splitlines()[0] == "torchdev-lint: -: error: cannot read standard input: it is closed"
