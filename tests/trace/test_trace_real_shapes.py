"""Shapes of real programs that the tracer got wrong: DDP under torchrun, hardcoded devices
used lines later, CUDA requests no rule predicts, legacy CUDA tensor types, checkpoints saved
and loaded by the same (or an earlier traced) run, device errors other than a mixed
elementwise op, --keep-going after TDL005, torch's decorated error messages, programs that
cannot be traced, programs that never touch the GPU."""

import io

import pytest
from tracehelp import DATA, ROOT, expected_lines

from torchdev_lint.trace import cli


def assert_expected(result, program, codes=None):
    """Every `# expect: CODE` line of the program has that verdict; nothing else is confirmed."""
    expected = [(line, status, code) for line, status, code in expected_lines(program)
                if codes is None or code in codes]
    for line, status, code in expected:
        got = [f["status"] for f in result.at(line, code)]
        assert status in got, (line, code, status, result.stdout)
    wanted = {(line, code) for line, status, code in expected if status == "confirmed"}
    extra = [f for f in result.confirmed if (f["line"], f["code"]) not in wanted
             and (codes is None or f["code"] in codes)]
    assert not extra, extra


@pytest.mark.traces("ddp-torchrun")
def test_torchrun_is_traced_as_its_rank_zero_worker_without_a_false_mismatch(traced):
    result = traced("ddp-torchrun")
    sim, cpu_only = result.report["runs"]
    assert sim["command"] == "python testdata/trace/ddp_train.py"  # the script itself, not the launcher
    assert sim["outcome"] == {"kind": "exit", "status": 0}, result.program_output
    assert "ddp=True" in result.program_output
    limits = " ".join(sim["limits"])
    assert "torchrun (--nproc-per-node=2) was traced as its rank-0 worker alone" in limits
    assert "DistributedDataParallel ran as the module it wraps" in limits
    assert "gloo" in limits
    assert not [f for f in result.findings if f["code"] == "TDL100"], result.stdout
    assert_expected(result, DATA / "ddp_train.py")
    [device] = result.at(17, "TDL002")
    assert "torch.cuda.set_device() at testdata/trace/ddp_train.py:18" in device["evidence"]


@pytest.mark.traces("hardcoded-uses")
def test_no_gpu_run_confirms_where_the_device_is_used_and_reports_unpredicted_requests(traced):
    result = traced("hardcoded-uses")
    assert [r["mode"] for r in result.report["runs"]] == ["sim", "cpu-only"]
    assert_expected(result, DATA / "hardcoded_uses.py")
    [definition] = result.at(14, "TDL002")
    # the use of `device`, not the .to(args.device) that ran between
    assert "`device` was then used by torch.zeros(device='cuda:0') at testdata/trace/hardcoded_uses.py:18" \
        in definition["evidence"]
    [load] = result.at(21, "TDL002")
    assert load["evidence"].startswith("on a machine without a GPU, this line raises RuntimeError: Attempting to "
                                       "deserialize object on a CUDA device")
    assert "--single-run" not in result.stdout  # it was never passed
    for line, what in ((15, ".to(cuda:0)"), (16, ".pin_memory()")):
        [request] = result.at(line, "TDL101")
        assert request["status"] == "confirmed" and request["name"] == "fails-without-gpu"
        assert what in request["evidence"]
    assert result.returncode == 1


@pytest.mark.traces("legacy")
def test_legacy_cuda_tensor_types_are_simulated(traced):
    result = traced("legacy")
    sim = result.report["runs"][0]
    assert "torch.cuda.FloatTensor True True" in result.program_output  # .type(), isinstance, .is_cuda
    assert "torch.cuda.LongTensor" in result.program_output
    assert sim["outcome"]["type"] == "SimulatedDeviceError" and sim["outcome"]["site"]["line"] == 24
    assert_expected(result, DATA / "legacy_types.py")
    [noise] = result.at(19, "TDL101")
    assert "torch.cuda.FloatTensor(...)" in noise["evidence"]
    # the cast to a CUDA type is TDL001's static finding, which the run confirms
    [cast] = result.at(21, "TDL001")
    assert cast["status"] == "confirmed"


@pytest.mark.traces("roundtrip", "earlier-save", "TDL004-bug")
def test_checkpoint_provenance_decides_tdl004(traced):
    same_run = traced("roundtrip")
    [load] = same_run.at(24, "TDL004")
    assert load["status"] == "not confirmed"
    assert "saved and loaded by this run on cuda:0" in load["evidence"]
    assert "torch.save at testdata/trace/checkpoint_roundtrip.py:13" in load["evidence"]
    [through_files] = same_run.at(29, "TDL004")  # open() file objects, as word_language_model does
    assert through_files["status"] == "not confirmed"
    assert "saved and loaded by this run on cuda:0" in through_files["evidence"]
    assert "roundtrip.pt.file" in through_files["evidence"]

    earlier = traced("earlier-save")  # loads the file the traced run above wrote
    [load] = earlier.at(17, "TDL004")
    assert load["status"] == "not confirmed"
    assert "an earlier run of torchdev-lint trace wrote on the simulated GPU" in load["evidence"]
    assert "roundtrip.pt" in load["evidence"]

    elsewhere = traced("TDL004-bug")  # a GPU checkpoint written before, without the tracer
    [load] = elsewhere.at(17, "TDL004")
    assert load["status"] == "confirmed"
    assert "gpu_saved.pt (written before this run, not by it) holds storages saved on cuda:0" in load["evidence"]


@pytest.mark.traces("own-tags", "own-tags-cpu-only")
def test_a_checkpoint_tagged_cuda_by_the_program_itself_is_confirmed_though_this_run_wrote_it(traced):
    result = traced("own-tags")  # on the simulated GPU, then as a machine without one
    [load] = result.at(21, "TDL004")
    assert load["status"] == "confirmed", result.stdout
    assert "written in this run by torch.save at testdata/trace/tdl004_own_tags.py:17" in load["evidence"]

    plain = traced("own-tags-cpu-only")  # as the plain program runs on a CPU-only machine
    assert plain.report["runs"][0]["outcome"]["site"]["line"] == 21
    [load] = plain.at(21, "TDL004")
    assert load["status"] == "confirmed", plain.stdout
    assert "fails on a machine without a GPU" in load["evidence"]
    assert "Attempting to deserialize object on a CUDA device" in load["evidence"]


@pytest.mark.traces("meta", "rules-tdl008", "device-errors")
def test_device_errors_other_than_a_mixed_elementwise_op_confirm_their_findings(traced):
    meta = traced("meta")
    assert_expected(meta, DATA / "meta_device.py")
    assert "meta_device.py:15" in meta.at(14, "TDL008")[0]["evidence"]
    assert "Tensor on device cpu is not on the expected device meta!" in meta.report["runs"][0]["outcome"]["message"]
    assert "nothing to confirm" not in meta.stdout  # the meta device is not the CPU
    assert not [f for f in meta.findings if f["code"] == "TDL100"], meta.stdout

    embedding = traced("rules-tdl008")  # embedding's CUDA code checks its indices in index_select
    [arange] = embedding.at(20, "TDL008")
    assert arange["status"] == "confirmed", embedding.stdout
    assert "aten.embedding at testdata/rules/tdl008_before.py:21" in arange["evidence"]
    assert embedding.report["runs"][0]["outcome"]["message"].startswith(
        "Expected all tensors to be on the same device, but got index is on cpu, different from other tensors on cuda:0")

    errors = traced("device-errors")
    assert_expected(errors, DATA / "device_errors.py")
    assert "torch.zeros at testdata/trace/device_errors.py:15" in errors.at(15, "TDL008")[0]["evidence"]
    assert "index_select" in errors.at(17, "TDL008")[0]["evidence"]
    [discarded] = errors.at(24, "TDL003")
    assert ".numpy() at testdata/trace/device_errors.py:25 read it on cuda:0" in discarded["evidence"]


@pytest.mark.traces("TDL005-keep-going")
def test_keep_going_after_stale_optimizer_state_reports_no_spurious_mismatch(traced):
    result = traced("TDL005-keep-going")
    assert not [f for f in result.findings if f["code"] == "TDL100"], result.stdout
    [adagrad] = result.at(30, "TDL005")
    assert adagrad["status"] == "confirmed"
    assert "the state stayed on cpu" in adagrad["evidence"]


@pytest.mark.traces("ansi")
def test_evidence_is_one_clean_sentence_and_the_full_message_is_in_json(traced):
    result = traced("ansi")
    run = result.report["runs"][0]
    [mismatch] = [f for f in result.findings if f["code"] == "TDL100"]
    for text in (mismatch["evidence"], run["summary"], run["outcome"]["message"]):
        assert "\x1b" not in text and "\n" not in text and "=====" not in text, text
    assert ("RuntimeError: Expected all tensors to be on the same device, but found at least two devices, "
            "cuda:0 and cpu!") in mismatch["evidence"]
    assert "Check the model" not in mismatch["evidence"]
    assert "Second line of details" in mismatch["error"] and "\x1b" not in mismatch["error"]
    assert "Second line of details" in run["outcome"]["full_message"]


@pytest.mark.traces("cpu-program")
def test_a_program_that_never_touches_the_gpu_says_so(traced):
    result = traced("cpu-program")
    [run] = result.report["runs"]  # no second run: there is nothing a machine without a GPU would do differently
    assert run["touched_accelerator"] is False
    assert result.report["files"] == ["testdata/trace/crash.py"]
    assert result.returncode == 0


def test_text_report_names_limits_files_and_a_cpu_only_program(tmp_path):
    program = tmp_path / "cpu_program.py"
    program.write_text("import torch\nprint(torch.ones(2).sum().item())\n")
    out, err = io.StringIO(), io.StringIO()
    status = cli.main(["--mode", "sim", "--program-output", str(tmp_path / "out.txt"), str(program)],
                      stdout=out, stderr=err, cwd=str(tmp_path))
    assert status == 0, err.getvalue()
    assert "  the program ran on the CPU only: nothing to confirm\n" in out.getvalue()
    assert "Files checked: cpu_program.py\n" in out.getvalue()


def test_a_program_with_a_syntax_error_could_not_be_traced(tmp_path):
    program = tmp_path / "broken.py"
    program.write_text("import torch\nx = torch.ones(2).cuda(\n")
    out, err = io.StringIO(), io.StringIO()
    status = cli.main(["--mode", "sim", "--program-output", str(tmp_path / "out.txt"), str(program)],
                      stdout=out, stderr=err, cwd=str(tmp_path))
    assert status == 2
    errors = [line for line in err.getvalue().splitlines() if line.startswith("torchdev-lint trace: error:")]
    assert errors == [errors[0]] and "the program could not be traced: it raised SyntaxError at broken.py:2" \
        in errors[0], err.getvalue()


def test_torchrun_command_lines_are_read_as_their_worker():
    launch = cli.launch_of("torch.distributed.run", True,
                           ["--standalone", "--nnodes", "1", "--nproc_per_node=4", "train.py", "--lr", "3"])
    assert (launch.target, launch.module, launch.args, launch.nproc) == ("train.py", False, ["--lr", "3"], "4")
    launch = cli.launch_of("torch.distributed.launch", True, ["--nproc_per_node", "2", "-m", "pkg.train"])
    assert (launch.target, launch.module, launch.args) == ("pkg.train", True, ["--local-rank=0"])
    assert cli.launch_of("train", True, ["x.py"]) is None
    assert cli.launch_of(str(ROOT / "torchrun"), False, ["--standalone", "x.py"]).target == "x.py"


def test_a_program_that_fails_before_using_a_gpu_is_not_called_cpu_only(tmp_path):
    program = tmp_path / "needs_torchrun.py"
    program.write_text("import os\nimport torch\nrank = int(os.environ['RANK'])\nprint(torch.ones(2).cuda())\n")
    out, err = io.StringIO(), io.StringIO()
    cli.main(["--mode", "sim", "--program-output", str(tmp_path / "out.txt"), str(program)],
             stdout=out, stderr=err, cwd=str(tmp_path))
    text = out.getvalue()
    assert "  the program raised KeyError at needs_torchrun.py:3" in text
    assert "  the program stopped before it used a GPU: this run confirms nothing\n" in text
    assert "ran on the CPU only" not in text


@pytest.mark.traces("torch-func", "torch-func-bug")
def test_torch_func_transforms_and_fake_tracing_keep_the_simulated_device(traced):
    """Tensors that torch.func wraps (jvp over jacrev, functional_call) are on their wrapped
    tensor's device, and fake tracing is taken on the CPU (a fake CUDA leaf that requires grad
    would abort the process): no device problem where a GPU has none, and the limit is said;
    a CPU tensor that meets the GPU inside a transform still fails, as on a GPU."""
    clean = traced("torch-func")
    assert clean.report["runs"][0]["outcome"] == {"kind": "exit", "status": 0}, clean.stdout + clean.stderr
    assert clean.findings == []
    assert "fake tensors (make_fx, torch.export)" in clean.stdout
    bug = traced("torch-func-bug")
    [mixed] = bug.at(37, "TDL100")
    assert "mixed cuda:0 and cpu tensors" in mixed["evidence"], bug.stdout
