"""A resident checker never acts with more than its caller may (issue 38): with one alive from
a run that may do more (root with every capability, more groups), a run that may do less gives
the same exit status, output and files on disk as with TORCHDEV_LINT_DAEMON=0. The privileges
are dropped for real, with setpriv and unshare, so most cases need root."""

import itertools
import os
import shutil
import stat
import subprocess
import sys

import pytest

import test_daemon
from test_daemon import BUG, SERVED, served_run, wait_for

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/status"),
                                reason="the resident checker needs Linux's /proc")

# Root without the capabilities that let it read, list, enter and write what its modes forbid.
NO_FILE_ACCESS = ["setpriv", *(f"--{each}=-dac_override,-dac_read_search"
                               for each in ("inh-caps", "ambient-caps", "bounding-set"))]
checker = test_daemon.checker  # a project and a resident checker of the test's own (root's) context
NOT_SERVED = "torchdev-lint: not served by the resident checker: "
GROUP = 54321  # a group the test process is not in


def can(command):
    try:
        return subprocess.run(command, capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def needs_root(what):
    return pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                              reason=f"{what} needs root and setpriv to drop privileges for real")


@pytest.fixture(scope="module")
def dropped(tmp_path_factory):
    """Skip unless NO_FILE_ACCESS makes root unable to read a mode-000 file of its own (a
    container may lack those capabilities to drop, or setpriv the right to drop them)."""
    path = tmp_path_factory.mktemp("premise") / "secret.py"
    path.write_text("x = 1\n")
    path.chmod(0)
    if can([*NO_FILE_ACCESS, "cat", str(path)]) or not can([*NO_FILE_ACCESS, "true"]):
        pytest.skip("setpriv cannot make root unable to read a mode-000 file here")


fresh = itertools.count()


def outcome(prefix, args, env, build, base, program=("-m", "torchdev_lint")):
    """One run of ``torchdev-lint -v ARGS`` through ``prefix`` on a fresh copy of the case:
    (status, stdout, stderr without the lines about the resident checker, files on disk),
    and those lines."""
    where = base / str(next(fresh))
    where.mkdir(parents=True)
    build(where)
    process = subprocess.run([*prefix, sys.executable, *program, "-v", *args], cwd=where, env=env,
                             capture_output=True, timeout=180)
    lines = process.stderr.decode().splitlines(keepends=True)
    about = [line for line in lines if line.startswith((f"torchdev-lint: {SERVED}", NOT_SERVED))]
    rest = "".join(line for line in lines if line not in about)
    return (process.returncode, process.stdout.decode(), rest, files(where)), about


def files(root):
    """Every path under ``root`` with its mode and content (of the cache, whose entries are
    named by the run's paths, only its own mode)."""
    found = {}
    for directory, names, others in os.walk(root):
        for name in [*names, *others]:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            content = None
            if stat.S_ISREG(info.st_mode):
                with open(path, "rb") as handle:
                    content = handle.read()
            found[os.path.relpath(path, root)] = (stat.S_IMODE(info.st_mode), content)
        if ".torchdev_lint_cache" in names:
            names.remove(".torchdev_lint_cache")
    return found


def until_served(prefix, args, env, build, base):
    """The runs through ``prefix`` up to the first that a resident checker serves."""
    runs = []

    def served():
        runs.append(outcome(prefix, args, env, build, base))
        return any(SERVED in line for line in runs[-1][1])

    assert wait_for(served), runs[-1]
    return runs


def same_with_a_checker_alive(checker, tmp_path, prefix, args, build, served_later=True):
    """The runs through ``prefix`` with the privileged checker alive (and, ``served_later``,
    until one is served: by a checker of the caller's own) are each the run made in-process;
    return that run."""
    project, _, env = checker
    served_run(["--no-cache", "bug.py"], env, project)  # the privileged checker is up and current
    on = {**env, "TORCHDEV_LINT_DAEMON_IDLE": "30"}  # the caller's own checkers leave soon
    alone, _ = outcome(prefix, args, {**on, "TORCHDEV_LINT_DAEMON": "0"}, build, tmp_path)
    runs = [outcome(prefix, args, on, build, tmp_path)]
    if served_later:
        runs += until_served(prefix, args, on, build, tmp_path)
    assert [result for result, _ in runs] == [alone] * len(runs)
    return alone


def unreadable_file(root):
    (root / "m.py").write_text(BUG)
    (root / "m.py").chmod(0)


def unlistable_directory(root):
    (root / "pkg").mkdir()
    (root / "pkg" / "m.py").write_text(BUG)
    (root / "pkg").chmod(0o300)  # may enter, may not list


def unenterable_directory(root):
    (root / "pkg").mkdir()
    (root / "pkg" / "m.py").write_text(BUG)
    (root / "pkg").chmod(0o600)  # may list, may not enter


def unwritable_directory(root):
    (root / "pkg").mkdir()
    (root / "pkg" / "m.py").write_text(BUG)
    (root / "pkg").chmod(0o500)


@needs_root("dropping file-access capabilities")
@pytest.mark.parametrize("build, args, path, said", [
    (unreadable_file, ["m.py"], "m.py", "m.py: error: cannot read: Permission denied"),
    (unlistable_directory, ["pkg"], "pkg/m.py", "pkg: error: cannot list directory: Permission denied"),
    (unenterable_directory, ["pkg"], "pkg/m.py", "pkg/m.py: error: cannot read: Permission denied"),
    (unwritable_directory, ["--fix", "pkg/m.py"], "pkg/m.py", "pkg/m.py: error: fix not written: Permission denied"),
], ids=["unreadable file", "unlistable directory", "unenterable directory", "--fix in an unwritable directory"])
def test_what_the_caller_may_not_read_or_write_stays_so(checker, tmp_path, dropped, build, args, path, said):
    status, _, err, on_disk = same_with_a_checker_alive(checker, tmp_path, NO_FILE_ACCESS,
                                                        ["--no-cache", "--preview", *args], build)
    assert status == 2 and f"torchdev-lint: {said}" in err and on_disk[path][1] == BUG.encode()


@needs_root("another group set")
def test_a_checker_with_more_groups_does_not_read_for_a_caller_with_fewer(checker, tmp_path, dropped):
    def group_only(root):
        (root / "m.py").write_text(BUG)
        os.chown(root / "m.py", 65534, GROUP)
        (root / "m.py").chmod(0o040)  # only members of GROUP may read it

    in_group = [*NO_FILE_ACCESS, f"--groups={GROUP}"]
    outside = [*NO_FILE_ACCESS, "--clear-groups"]
    project, _, env = checker
    served_run(["--no-cache", "bug.py"], env, project)
    members, _ = outcome(in_group, ["--no-cache", "--preview", "m.py"], {**env, "TORCHDEV_LINT_DAEMON": "0"},
                         group_only, tmp_path)
    assert members[0] == 1 and "TDL001" in members[1]  # the group does give access
    until_served(in_group, ["--no-cache", "--preview", "m.py"], {**env, "TORCHDEV_LINT_DAEMON_IDLE": "30"},
                 group_only, tmp_path)  # the members' checker is up
    status, _, err, _ = same_with_a_checker_alive(checker, tmp_path, outside, ["--no-cache", "--preview", "m.py"],
                                                  group_only)
    assert status == 2 and "m.py: error: cannot read: Permission denied" in err


@pytest.fixture
def mounts():
    if os.geteuid() != 0 or not can(["unshare", "-m", "sh", "-c", "mount -t tmpfs tmpfs /tmp"]):
        pytest.skip("a mount namespace of its own needs root, unshare -m and mount")


def test_a_caller_in_another_mount_namespace_is_checked_as_it_sees_its_files(checker, tmp_path, mounts):
    """Here pkg/ is an empty tmpfs with a clean file; the privileged checker sees the bug."""
    def build(root):
        (root / "pkg").mkdir()
        (root / "pkg" / "m.py").write_text(BUG)

    own_view = ["unshare", "-m", "sh", "-c", 'mount -t tmpfs tmpfs pkg && echo "x = 1" > pkg/m.py && exec "$@"', "sh"]
    # Each run has a namespace of its own, so no later run is served by the checker it starts.
    status, out, _, on_disk = same_with_a_checker_alive(checker, tmp_path, own_view, ["--no-cache", "--preview", "pkg"],
                                                        build, served_later=False)
    assert status == 0 and "TDL" not in out and on_disk["pkg/m.py"][1] == BUG.encode()


def test_a_caller_with_another_umask_is_served_and_creates_files_under_its_own(checker, tmp_path):
    def build(root):
        (root / "m.py").write_text(BUG)

    strict = ["sh", "-c", 'umask 077 && exec "$@"', "sh"]
    status, _, _, on_disk = same_with_a_checker_alive(checker, tmp_path, strict, ["--preview", "--fix", "m.py"], build)
    assert status == 0 and on_disk[".torchdev_lint_cache"][0] == 0o700 and on_disk["m.py"][1] != BUG.encode()


LIAR = ("import json, os, sys\nfrom torchdev_lint import launcher\n"
        "launcher.context = lambda pid='self': json.loads(os.environ['TDL_TEST_CLAIM'])\n"
        "sys.exit(launcher.main())\n")


@needs_root("dropping file-access capabilities")
def test_a_caller_that_claims_the_checkers_context_is_judged_by_what_the_kernel_says(checker, tmp_path, dropped):
    """The checker reads its caller's context from /proc/PID, not only from the request."""
    project, _, env = checker
    served_run(["--no-cache", "bug.py"], env, project)
    claim = subprocess.run([sys.executable, "-c", "import json; from torchdev_lint.launcher import context; "
                            "print(json.dumps(context()))"], env=env, capture_output=True, text=True, check=True)
    args = ["--no-cache", "--preview", "m.py"]
    alone, _ = outcome(NO_FILE_ACCESS, args, {**env, "TORCHDEV_LINT_DAEMON": "0"}, unreadable_file, tmp_path)
    lied, about = outcome(NO_FILE_ACCESS, args, {**env, "TDL_TEST_CLAIM": claim.stdout}, unreadable_file, tmp_path,
                          program=("-c", LIAR))
    assert about == [f"{NOT_SERVED}the caller's capability sets differ\n"]
    assert lied == alone and alone[0] == 2


def test_a_caller_with_a_smaller_file_size_limit_has_no_larger_file_written(checker, tmp_path):
    """A resource limit; needs no root."""
    large = BUG + "# padding\n" * 200

    def build(root):
        (root / "m.py").write_text(large)

    small_files = ["sh", "-c", 'ulimit -f 1 && exec "$@"', "sh"]  # one block: 512 or 1024 bytes
    status, _, err, on_disk = same_with_a_checker_alive(checker, tmp_path, small_files,
                                                        ["--no-cache", "--preview", "--fix", "m.py"], build)
    assert status == 2 and "m.py: error: fix not written: File too large" in err
    assert on_disk["m.py"][1] == large.encode()
