"""benchmarks/precision/precision.py: the numbers the first-look protocol records."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = importlib.util.spec_from_file_location("precision", ROOT / "benchmarks" / "precision" / "precision.py")
precision = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(precision)

# A script with a CPU path that loads weights, in a project whose training saves them from the
# GPU (TRAIN): its loads are certain TDL004 findings, in the default tier, and so is the
# hardcoded .cuda() the script runs (TDL001).
SCRIPT = """\
import argparse
import torch
device = "cuda" if torch.cuda.is_available() else "cpu"
parser = argparse.ArgumentParser()
parser.add_argument("--weights")
args = parser.parse_args()
model = torch.nn.Linear(2, 2).to(device)
model.load_state_dict(torch.load(args.weights))
"""
TRAIN = """\
import torch
def snapshot(model, device, out):
    torch.save(model.to(device).state_dict(), out)
"""
EXTRA = """\
head = torch.nn.Linear(2, 2)
head.load_state_dict(torch.load(args.weights + ".head"))


def warm_up():
    return torch.zeros(1).cuda()


def build(net):
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    net.to(device)
    return opt


warm_up()
"""


def setup(tmp_path, monkeypatch, labels):
    checkout = tmp_path / "repos" / "someone+demo"
    checkout.mkdir(parents=True)
    # TDL004 at 8 and 10, TDL001 at 14 (the script chooses the CPU and runs it: certain), TDL005 at 18
    # (an optimizer with no state yet: possible)
    (checkout / "a.py").write_text(SCRIPT + EXTRA)
    (checkout / "b.py").write_text(SCRIPT)  # TDL004 at 8
    (checkout / "train.py").write_text(TRAIN)
    registry = tmp_path / "registry.tsv"
    registry.write_text("repo\tcommit\trole\tfirst_used\tjudged_with\tnote\nsomeone/demo\tabc\tfirst-look\t-\t-\t-\n")
    table = tmp_path / "labels"
    table.mkdir()
    rows = ["\t".join(precision.LABEL_COLUMNS)]
    rows += [f"someone/demo\tabc\t{path}\t\t{line}\t{code}\t{verdict}\twhy" for path, line, code, verdict in labels]
    (table / "someone+demo.tsv").write_text("\n".join(rows) + "\n")
    monkeypatch.setattr(precision, "REGISTRY", registry)
    monkeypatch.setattr(precision, "LABELS", table)
    return checkout


def test_report_counts_verdicts_and_never_counts_an_unjudged_finding_as_right(tmp_path, monkeypatch, capsys):
    setup(tmp_path, monkeypatch, [("a.py", 8, "TDL004", "right"), ("a.py", 10, "TDL004", "wrong")])
    precision.main(["report", str(tmp_path / "repos")])
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("TDL004"))
    assert row.split() == ["TDL004", "1", "1", "0", "1", "0.50", "0.50"]


def test_judge_prints_every_default_finding_with_an_empty_verdict(tmp_path, monkeypatch, capsys):
    checkout = setup(tmp_path, monkeypatch, [])
    precision.main(["judge", str(checkout), "someone/demo", "--commit", "abc"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split("\t") == precision.LABEL_COLUMNS
    # the default tier: certain findings only, not the possible TDL005
    assert [tuple(line.split("\t")[2:7]) for line in lines[1:]] == [
        ("a.py", "", "8", "TDL004", ""), ("a.py", "", "10", "TDL004", ""), ("a.py", "", "14", "TDL001", ""),
        ("b.py", "", "8", "TDL004", "")]
    precision.main(["judge", str(checkout), "someone/demo", "--commit", "abc", "--preview"])
    lines = capsys.readouterr().out.splitlines()
    assert [tuple(line.split("\t")[2:7]) for line in lines[1:]] == [
        ("a.py", "", "8", "TDL004", ""), ("a.py", "", "10", "TDL004", ""), ("a.py", "", "14", "TDL001", ""),
        ("a.py", "", "18", "TDL005", ""), ("b.py", "", "8", "TDL004", "")]


def test_a_seeded_sample_is_the_same_every_time():
    findings = [{"path": f"f{i}.py", "line": i, "code": "TDL004"} for i in range(100)]
    first = precision.sample("owner/repo", findings)
    assert len(first) == precision.SAMPLE and first == precision.sample("owner/repo", list(reversed(findings)))
