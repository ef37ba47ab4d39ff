"""The tracer's verdict on TDL011 (every rank of a process group on GPU 0): with a TDL011
finding, the program runs again as two ranks of one group (torchrun's environment, gloo between
them, two simulated GPUs), and the finding is confirmed where both ranks put tensors on the
same device, refuted where each used its own, and not reached where no group started. A
program without the finding runs once, as before."""

import importlib.util
import json
import shutil

import pytest

from conftest import ROOT

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")

RULES = ROOT / "testdata" / "rules"


def trace(run_cli, *args):
    status, out, err = run_cli("trace", "--format", "json", *args)
    return status, json.loads(out), err


def test_two_ranks_on_cuda0_confirm_the_finding(tmp_path, run_cli):
    program = shutil.copy(RULES / "tdl011_before.py", tmp_path / "program.py")
    status, report, err = trace(run_cli, "-m", "torch.distributed.run", "--nproc_per_node=2", program)
    assert status == 1, report
    (finding,) = [f for f in report["findings"] if f["code"] == "TDL011"]
    assert (finding["line"], finding["status"], finding["mode"]) == (17, "confirmed", "sim")
    evidence = finding["evidence"]
    assert "ranks 0 and 1 both put tensors on cuda:0" in evidence
    assert "rank 0 first at .cuda() at " in evidence and "rank 1 first at .cuda() at " in evidence
    assert evidence.count("program.py:17 (no set_device)") == 2
    ranks = [r for r in report["runs"] if any("run as rank" in limit for limit in r["limits"])]
    assert [r["outcome"] for r in ranks] == [{"kind": "exit", "status": 0}] * 2
    assert "run as rank 1 of 2" in " ".join(ranks[1]["limits"])
    assert "gloo backend (asked: nccl) between the 2 ranks" in " ".join(ranks[0]["limits"])
    assert not [f for f in report["findings"] if f["code"] == "TDL100"]


def test_each_rank_on_its_own_device_refutes_the_finding(tmp_path, run_cli):
    # the rule flags it (it cannot see getattr(torch.cuda, "set_device")); the ranks show it is fine
    program = shutil.copy(RULES / "tdl011_ok.py", tmp_path / "program.py")
    status, report, err = trace(run_cli, "--mode", "sim", program)
    (finding,) = [f for f in report["findings"] if f["code"] == "TDL011"]
    assert finding["status"] == "not confirmed", finding
    assert "each rank used its own device" in finding["evidence"]
    assert "rank 0 on cuda:0 (torch.cuda.set_device(0) at " in finding["evidence"]
    assert "rank 1 on cuda:1 (torch.cuda.set_device(1) at " in finding["evidence"]


def test_the_rules_fix_runs_once_without_ranks(tmp_path, run_cli):
    program = shutil.copy(RULES / "tdl011_after.py", tmp_path / "program.py")
    status, report, err = trace(run_cli, "--mode", "sim", "--single-run", "-m", "torch.distributed.run",
                                "--nproc_per_node=2", program)
    assert status == 0, report
    assert report["findings"] == []
    assert len(report["runs"]) == 1 and report["runs"][0]["outcome"] == {"kind": "exit", "status": 0}


def test_no_process_group_is_not_reached(tmp_path, run_cli):
    program = tmp_path / "program.py"
    program.write_text('import os\nimport torch\nlocal_rank = int(os.environ.get("LOCAL_RANK", "0"))\n'
                       'x = torch.ones(2).cuda()\nprint(x.device)\n')
    status, report, err = trace(run_cli, "--mode", "sim", "--single-run", program)
    (finding,) = [f for f in report["findings"] if f["code"] == "TDL011"]
    assert finding["status"] == "not confirmed"  # --single-run: no ranks, one process cannot tell
    assert "drop --single-run" in finding["evidence"]
    status, report, err = trace(run_cli, "--mode", "sim", program)
    (finding,) = [f for f in report["findings"] if f["code"] == "TDL011"]
    assert finding["status"] == "not reached", finding
    assert "the program started no process group" in finding["evidence"]


# -- the judge alone, on recorded runs (no torch) ------------------------------------------

def _rank(rank, events, outcome=None):
    from torchdev_lint.trace.session import Options, Run

    run = Run(Options(target="t.py", rank=rank, world_size=2), mode="sim",
              outcome=outcome or {"kind": "exit", "status": 0})
    run.events = [{"seq": i + 1, **e} for i, e in enumerate(events)]
    return run


GROUP = {"kind": "process-group", "site": ["/w/t.py", 3, 3, 0, 20], "what": "init_process_group()"}


def _request(line, target):
    return {"kind": "cuda-request", "site": ["/w/t.py", line, line, 0, 9], "what": ".cuda()", "target": target}


def test_judge_ranks_cases():
    from torchdev_lint.trace.verdicts import CONFIRMED, NOT_CONFIRMED, NOT_REACHED, Where, judge_ranks

    where = Where("/w")
    both = judge_ranks([_rank(0, [GROUP, _request(5, "cuda:0")]), _rank(1, [GROUP, _request(6, "cuda:0")])], where)
    assert both.status == CONFIRMED
    assert "rank 0 first at .cuda() at t.py:5" in both.evidence and "rank 1 first at .cuda() at t.py:6" in both.evidence
    own = judge_ranks([_rank(0, [GROUP, _request(5, "cuda:0")]), _rank(1, [GROUP, _request(5, "cuda:1")])], where)
    assert own.status == NOT_CONFIRMED
    none = judge_ranks([_rank(0, [_request(5, "cuda:0")]), _rank(1, [_request(5, "cuda:0")])], where)
    assert none.status == NOT_REACHED and "no process group" in none.evidence
    idle = judge_ranks([_rank(0, [GROUP]), _rank(1, [GROUP])], where)
    assert idle.status == NOT_REACHED and "put no tensor or module on a GPU" in idle.evidence
    crash = {"kind": "exception", "type": "ValueError", "site": ["/w/t.py", 4, 4, 0, 5]}
    one = judge_ranks([_rank(0, [GROUP, _request(5, "cuda:0")]),
                       _rank(1, [GROUP], crash)], where)
    assert one.status == NOT_REACHED
    assert "only rank 0 reached a GPU" in one.evidence and "rank 1 stopped with ValueError at t.py:4" in one.evidence


def test_interrupting_the_tracer_ends_every_rank(tmp_path):
    """The ranks run in sessions of their own, so Ctrl-C never reaches them: the tracer itself
    must end them (else they run on, orphaned, until their time limit)."""
    import os
    import signal
    import sys
    import threading
    import time

    from torchdev_lint.trace import session

    waiting = tmp_path / "wait.py"
    waiting.write_text("import time\ntime.sleep(60)\n")
    options = session.rank_options(session.Options(target=str(waiting), cwd=str(tmp_path)), port=1)
    ranks = []
    real_popen = session.subprocess.Popen

    def remember(*args, **kwargs):
        process = real_popen([sys.executable, str(waiting)], **{k: v for k, v in kwargs.items()
                                                                 if k in ("start_new_session", "cwd")})
        ranks.append(process)
        return process

    interrupt = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    started = time.monotonic()
    # Ctrl-C as a plain run gets it, whatever an earlier test of this process left installed
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(session.subprocess, "Popen", remember)
            interrupt.start()
            with pytest.raises(KeyboardInterrupt):
                session.run_ranks(options)
    finally:
        signal.signal(signal.SIGINT, handler)
    assert time.monotonic() - started < 20
    assert len(ranks) == 2 and all(process.poll() is not None for process in ranks)
