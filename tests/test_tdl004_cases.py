"""TDL004: loads of files that cannot come from another machine stay silent (round trips,
files a test wrote, metadata), checkpoints from outside are still flagged."""

import textwrap

import pytest

import torchdev_lint.rules  # noqa: F401
from torchdev_lint.engine import lint_source
from torchdev_lint.rule import Rule

RULE = Rule.registry["TDL004"]


def positions(code, path="example.py"):
    return [(f.line, f.column) for f in lint_source(path, textwrap.dedent(code), [RULE], preview=True).findings]


@pytest.mark.parametrize("code", [
    # A scripted module saved to a temporary file and read back in one test.
    """
    import tempfile
    import torch
    def test_export(scripted):
        with tempfile.NamedTemporaryFile() as f:
            scripted.save(f.name)
            torch.jit.load(f.name)
    """,
    # Handed to the call that writes it, then loaded.
    """
    import torch
    def test_collate(ckpt_dir, out):
        convert_zero_checkpoint(ckpt_dir, out)
        state = torch.load(out, weights_only=False)
    """,
    # Opened through a file object made from the test's temporary path.
    """
    import torch
    def test_script(tmp_path, fs):
        out = tmp_path / "model.pt"
        with fs.open(out, "rb") as f:
            loaded = torch.jit.load(f)
    """,
    # `vocab = torch.load(...)`: the name says what the pickle holds.
    """
    import torch
    def build(args):
        vocab = torch.load(args.vocab_file)
        return vocab
    """,
])
def test_files_written_here_or_holding_metadata_are_not_flagged(code):
    # pytest collects test functions from test files only
    assert positions(code, "test_example.py" if "def test_" in code else "example.py") == []


@pytest.mark.parametrize("code, where", [
    # A path query is no write: the legacy checkpoint comes from outside.
    ("""
    import os
    import torch
    def test_legacy(path_ckpt):
        assert os.path.exists(path_ckpt)
        torch.load(path_ckpt, weights_only=False)
    """, (6, 5)),
    # Outside a test, training first does not make the loaded file ours.
    ("""
    import torch
    def resume(trainer, model, path):
        trainer.fit(model)
        return torch.load(path)
    """, (5, 12)),
    # A test helper given a checkpoint from a download cache.
    ("""
    import torch
    def test_pretrained(cache_dir):
        path = download(URL, cache_dir)
        state = torch.load(path)
    """, (5, 13)),
])
def test_checkpoints_from_outside_are_flagged(code, where):
    assert positions(code) == [where]


def test_test_files_count_as_tests_for_their_helpers():
    code = """
    import torch
    def _check(trainer, model, path):
        trainer.fit(model)
        return torch.load(path)
    """
    assert positions(code, "tests/test_saving.py") == []
    assert positions(code, "src/saving.py") == [(5, 12)]


def test_helpers_of_tests_check_files_the_tests_give_them():
    helper = """
    import torch
    def _assert_checkpoint_equal(model, output_path):
        state = torch.load(output_path, weights_only=False)
    """
    assert positions(helper, "tests/utilities/test_collate.py") == []
    assert positions(helper, "tests/helpers/checks.py") == []
    assert positions(helper, "src/checks.py") == [(4, 13)]
    # A test function's parameters are fixtures: a checkpoint from outside.
    test = """
    import torch
    def test_legacy(path_ckpt):
        torch.load(path_ckpt, weights_only=False)
    """
    assert positions(test, "tests/test_legacy.py") == [(4, 5)]


def test_tests_that_only_run_on_an_accelerator_load_their_fixtures_anywhere_they_run():
    guarded = """
    import torch
    @require_torch_accelerator
    class PipelineSlowTests:
        def get_inputs(self, device):
            return torch.load(hf_hub_download("org/test-slices", "prompt_embeds.pt")).to(device)
    """
    assert positions(guarded, "tests/pipelines/test_pipe.py") == []
    # The same load without the marker, or in library code under the same marker, is flagged.
    assert positions(guarded.replace("    @require_torch_accelerator\n", ""), "tests/pipelines/test_pipe.py") == [
        (5, 16)]
    assert positions(guarded, "src/pipe.py") == [(6, 16)]
    # A guard in library code still leaves a multi-GPU machine loading onto GPU 0.
    library = """
    import torch
    def load(path):
        if torch.cuda.is_available():
            return torch.load(path)
    """
    assert positions(library, "src/vocoder.py") == [(5, 16)]


WORKER = """
import io
import torch
class Launcher:
    def get_extra_results(self, trainer):
        metrics = apply_to_collection(trainer.callback_metrics, Tensor, lambda t: t.cpu())
        buffer = io.BytesIO()
        torch.save(metrics, buffer)
        return {"metrics_bytes": buffer.getvalue()}

    def update_main_process_results(self, trainer, extra):
        data = extra["metrics_bytes"]
        return torch.load(io.BytesIO(data), weights_only=True)
"""


def test_results_a_worker_moved_to_the_cpu_are_not_flagged_in_the_main_process():
    assert positions(WORKER) == []
    # Without the move to the CPU, or under another key, the bytes may hold GPU tensors.
    assert positions(WORKER.replace("lambda t: t.cpu()", "lambda t: t.detach()")) == [(13, 16)]
    assert positions(WORKER.replace('extra["metrics_bytes"]', 'extra["other_bytes"]')) == [(13, 16)]


def test_a_script_reloading_the_model_it_saved_is_a_round_trip():
    script = """
    import torch
    for epoch in range(3):
        with open(args.save, "wb") as f:
            torch.save(model, f)
    with open(args.save, "rb") as f:
        model = torch.load(f)
    """
    assert positions(script) == []
    # A file the script did not write itself is still flagged.
    assert positions(script.replace("torch.save(model, f)", "print(f)")) == [(7, 13)]
    # A save in a function defined above is not top-level code that ran before the load.
    helper = """
    import torch
    def dump(model):
        with open(path, "wb") as f:
            torch.save(model, f)
    with open(path, "rb") as f:
        model = torch.load(f)
    """
    assert positions(helper) == [(7, 13)]


# time_sequence_prediction: a pickle of one NumPy array, only ever sliced into from_numpy.
ARRAY = (
    "import torch\n"
    "import numpy as np\n"
    "def series(path):\n"
    "    data = torch.load(path)\n"
    "{uses}"
)


@pytest.mark.parametrize("uses", [
    "    return torch.from_numpy(data[3:, :-1]), torch.from_numpy(data[:3])\n",
    "    return torch.from_numpy(data)\n",
    "    x = torch.from_numpy(data[::2])\n    return x.float()\n",
])
def test_a_pickle_that_only_feeds_from_numpy_holds_no_tensor(uses):
    assert positions(ARRAY.format(uses=uses)) == []


@pytest.mark.parametrize("uses", [
    # One entry of a container: the others may be tensors.
    "    return torch.from_numpy(data[32])\n",
    "    return torch.from_numpy(data[3:, 0])\n",
    # NumPy takes CPU tensors too: a tensor saved on a GPU fails to load.
    "    return np.asarray(data)\n",
    # Any other use, or the name bound again.
    "    t = torch.from_numpy(data[3:])\n    return t, data.shape\n",
    "    return torch.as_tensor(data)\n",
    # No use at all.
    "    return None\n",
])
def test_other_uses_keep_the_finding(uses):
    assert positions(ARRAY.format(uses=uses)) == [(4, 12)]


def test_a_name_bound_again_keeps_both_findings():
    uses = "    t = torch.from_numpy(data[3:])\n    data = torch.load(path + '.2')\n    return t, data\n"
    assert positions(ARRAY.format(uses=uses)) == [(4, 12), (6, 12)]


def test_a_load_straight_into_from_numpy_holds_no_tensor():
    code = "import torch\nx = torch.from_numpy(torch.load(p))\ny = torch.as_tensor(torch.load(q))\n"
    assert positions(code) == [(3, 21)]


FIXTURE = """
import pytest
import torch

class TestMerge:
    @pytest.fixture
    def merged_path(self, tmp_path):
        model = make_model()
        path = tmp_path / "merged"
        torch.save(model.state_dict(), path)
        return path, tmp_path / "unmerged"

    def test_same_weights(self, merged_path):
        path_merged, _ = merged_path
        state_dict = torch.load(path_merged, weights_only=True)
"""


def test_a_file_a_fixture_of_the_same_file_wrote_is_a_round_trip():
    # peft's merge test: the fixture saves the state dict, the test loads it back, in one
    # process on one machine.
    assert positions(FIXTURE, "tests/test_other.py") == []


@pytest.mark.parametrize("change", [
    # the fixture writes nothing: the file comes from elsewhere
    ("        torch.save(model.state_dict(), path)\n", ""),
    # not a fixture: a plain method of the same name
    ("    @pytest.fixture\n", ""),
    # the test does not take the fixture
    ("def test_same_weights(self, merged_path):\n        path_merged, _ = merged_path",
     "def test_same_weights(self, merged_path, given):\n        path_merged = given"),
])
def test_a_fixture_that_did_not_write_the_file_keeps_the_finding(change):
    code = FIXTURE.replace(*change)
    assert code != FIXTURE
    line = textwrap.dedent(code).splitlines().index("        state_dict = torch.load(path_merged, weights_only=True)") + 1
    assert positions(code, "tests/test_other.py") == [(line, 22)]


DATASET = """
import os
import pickle
import torch
from torch.utils import data
from six.moves import urllib


class MNISTM(data.Dataset):
    url = "https://example.org/mnist_m.pkl"
    processed_folder = "processed"
    training_file = "mnist_m_train.pt"

    def __init__(self, root, download=False):
        self.root = os.path.expanduser(root)
        if download:
            self.download()
        self.train_data, self.train_labels = torch.load(
            os.path.join(self.root, self.processed_folder, self.training_file)
        )

    def download(self):
        filename = self.url.rpartition("/")[2]
        raw = os.path.join(self.root, filename)
        with open(raw, "wb") as f:
            f.write(urllib.request.urlopen(self.url).read())
        with open(raw, "rb") as f:
            arrays = pickle.load(f)
        images = torch.ByteTensor(arrays["train"])
        labels = torch.LongTensor(arrays["labels"])
        with open(os.path.join(self.root,
                               self.processed_folder,
                               self.training_file), "wb") as f:
            torch.save((images, labels), f)
"""


def test_a_dataset_that_saves_what_it_downloaded_and_loads_it_back_is_not_flagged():
    # torchvision's old MNIST pattern: the class itself writes the file from fetched data, on
    # the CPU (the file never names a device); the paths match whatever their line breaks.
    assert positions(DATASET) == []
    # the path given straight to torch.save, not through an opened file
    direct = DATASET.replace(
        "with open(os.path.join(self.root,\n                               self.processed_folder,\n"
        "                               self.training_file), \"wb\") as f:\n"
        "            torch.save((images, labels), f)",
        "torch.save((images, labels), os.path.join(self.root, self.processed_folder, self.training_file))")
    assert direct != DATASET and positions(direct) == []


@pytest.mark.parametrize("old, new", [
    # the saved tensors come from the caller: they may be on any device
    ("def download(self):", "def download(self, images):"),
    ("images = torch.ByteTensor(arrays[\"train\"])", "images = self.images"),
    ("torch.save((images, labels), f)", "torch.save(dict(images=self.images, labels=labels), f)"),
    ("torch.save((images, labels), f)", "torch.save(torch.stack(self.images), f)"),
    # the file names a device: what it saves may be on one
    ("images = torch.ByteTensor(arrays[\"train\"])", "images = torch.ByteTensor(arrays[\"train\"]).cuda()"),
    # another file than the one loaded
    ("self.training_file), \"wb\") as f:", "\"other.pt\"), \"wb\") as f:"),
    # a module's own state: its owner may have moved it
    ("class MNISTM(data.Dataset):", "class MNISTM(torch.nn.Module):"),
])
def test_a_class_that_saves_data_it_did_not_build_itself_keeps_the_finding(old, new):
    assert old in DATASET
    assert positions(DATASET.replace(old, new)) == [(18, 46)]


def test_a_round_trip_through_file_handles_is_possible():
    """`with open(p, "wb") as f: torch.save(m, f)` then `with open(p, "rb") as f: torch.load(f)`
    in one script reads back what the run wrote, on the machine that wrote it."""
    code = """\
    import argparse, os
    import torch
    parser = argparse.ArgumentParser()
    parser.add_argument("--cuda", action="store_true")
    args = parser.parse_args()
    model = torch.nn.Linear(2, 2).to("cuda" if args.cuda else "cpu")
    def train():
        with open(os.path.join(args.work_dir, "model.pt"), "wb") as f:
            torch.save(model, f)
    train()
    with open(os.path.join(args.work_dir, "model.pt"), "rb") as f:
        model = torch.load(f)
    model.load_state_dict(model.state_dict())
    """
    (finding,) = lint_source("train.py", textwrap.dedent(code), [RULE], preview=True).findings
    assert finding.confidence.value == "possible"
    assert any(step.line == 9 and "writes a file of that name" in step.message for step in finding.evidence)
