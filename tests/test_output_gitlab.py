"""``--format gitlab``: GitLab's code-quality report, checked against the fields GitLab reads
(https://docs.gitlab.com/ci/testing/code_quality/#code-quality-report-format)."""

import json

from test_cli import BUGGY, write

SEVERITIES = {"info", "minor", "major", "critical", "blocker"}


def check_report(report):
    """The shape GitLab requires of each issue."""
    assert isinstance(report, list)
    for issue in report:
        assert isinstance(issue["description"], str) and issue["description"]
        assert isinstance(issue["check_name"], str) and issue["check_name"]
        assert isinstance(issue["fingerprint"], str) and issue["fingerprint"]
        assert issue["severity"] in SEVERITIES
        assert isinstance(issue["location"]["path"], str)
        assert not issue["location"]["path"].startswith("/")
        assert isinstance(issue["location"]["lines"]["begin"], int)
    assert len({issue["fingerprint"] for issue in report}) == len(report)


def test_gitlab_report_fields_and_stable_fingerprints(tmp_path, run_cli):
    """In the preview tier: BUGGY has no CPU path, so its findings are possible."""
    write(tmp_path / "pkg" / "train.py", BUGGY + "model.cuda()\n")
    status, out, _ = run_cli("--isolated", "--preview", "--no-cache", "--format", "gitlab", ".", cwd=tmp_path)
    assert status == 1
    report = json.loads(out)
    check_report(report)
    assert [(i["check_name"], i["location"]["path"], i["location"]["lines"]["begin"]) for i in report] == [
        ("TDL001", "pkg/train.py", 4), ("TDL004", "pkg/train.py", 5), ("TDL001", "pkg/train.py", 6)]
    assert report[0]["description"].startswith("TDL001 `.cuda()`")

    # Code added above the findings moves them, not their identity in GitLab's eyes.
    write(tmp_path / "pkg" / "train.py", "import os\n\n" + BUGGY + "model.cuda()\n")
    _, moved, _ = run_cli("--isolated", "--preview", "--no-cache", "--format", "gitlab", ".", cwd=tmp_path)
    moved = json.loads(moved)
    assert [i["location"]["lines"]["begin"] for i in moved] == [6, 7, 8]
    assert [i["fingerprint"] for i in moved] == [i["fingerprint"] for i in report]


def test_gitlab_report_of_a_clean_tree_is_an_empty_list(tmp_path, run_cli):
    write(tmp_path / "ok.py", "x = 1\n")
    status, out, _ = run_cli("--isolated", "--no-cache", "--format", "gitlab", ".", cwd=tmp_path)
    assert status == 0 and json.loads(out) == []
