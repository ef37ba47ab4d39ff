"""A checkpoint the repository ships says where its tensors were saved: TDL004 reads it
instead of guessing from the project's savers. A load of a file saved on a GPU fails on a
machine without one, whatever the project's code says; one saved on the CPU loads anywhere.
The file is read without running it."""

from __future__ import annotations

import io
import json
import pickle
import textwrap
import zipfile
from pathlib import Path

import pytest

from torchdev_lint import cli
from torchdev_lint.checkpoints import storage_locations


class _Storage:
    """Stands for a tensor's storage in a checkpoint written without torch."""


def checkpoint(path: Path, *locations: str) -> Path:
    """A zip checkpoint as torch.save writes it: a state dict whose storages were on ``locations``."""

    class Saver(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, _Storage):
                return ("storage", "FloatStorage", str(id(obj)), obj.location, 4)
            return None

    storages = []
    for where in locations:
        storage = _Storage()
        storage.location = where
        storages.append(storage)
    data = io.BytesIO()
    Saver(data, protocol=2).dump({f"layer{i}.weight": s for i, s in enumerate(storages)})
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("net/data.pkl", data.getvalue())
        archive.writestr("net/version", "3\n")
    return path


def test_the_devices_of_a_checkpoint_are_read_from_its_records(tmp_path):
    assert storage_locations(checkpoint(tmp_path / "gpu.pth", "cuda:0", "cuda:0", "cpu")) == ["cuda:0", "cpu"]
    assert storage_locations(checkpoint(tmp_path / "cpu.pth", "cpu")) == ["cpu"]
    # a file object is read from where it stands, as torch.load reads it, and left there
    handle = io.BytesIO(b"HEAD" + (tmp_path / "gpu.pth").read_bytes())
    handle.seek(4)
    assert storage_locations(handle) == ["cuda:0", "cpu"]
    assert handle.tell() == 4


@pytest.mark.parametrize("content", [
    b"version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 123\n",  # an LFS pointer
    pickle.dumps({"epoch": 3}),  # a plain pickle
    b"\x00\x01binary" * 100,
    b"",
])
def test_what_is_no_checkpoint_says_nothing(tmp_path, content):
    path = tmp_path / "x.pth"
    path.write_bytes(content)
    assert storage_locations(path) is None


def test_a_truncated_checkpoint_says_nothing(tmp_path):
    path = checkpoint(tmp_path / "gpu.pth", "cuda:0")
    path.write_bytes(path.read_bytes()[:40])
    assert storage_locations(path) is None


class _Harm:
    def __reduce__(self):
        import os
        return (os.remove, (self.victim,))


def test_reading_a_checkpoint_runs_none_of_its_code(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("still here")
    harm = _Harm()
    harm.victim = str(victim)
    data = pickle.dumps({"weight": harm}, protocol=2)
    path = tmp_path / "evil.pth"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("evil/data.pkl", data)
    legacy = tmp_path / "evil-legacy.pth"
    legacy.write_bytes(data + data)
    storage_locations(path)
    storage_locations(legacy)
    assert victim.read_text() == "still here"


def test_torch_saves_in_both_formats_are_read(tmp_path):
    torch = pytest.importorskip("torch")
    from torch import serialization

    state = {"w": torch.ones(2), "b": torch.zeros(3)}
    torch.save(state, tmp_path / "zip.pth")
    torch.save(state, tmp_path / "legacy.pth", _use_new_zipfile_serialization=False)
    assert storage_locations(tmp_path / "zip.pth") == ["cpu"]
    assert storage_locations(tmp_path / "legacy.pth") == ["cpu"]
    tag = serialization.location_tag
    serialization.location_tag = lambda storage: "cuda:0"  # what a GPU's save records
    try:
        torch.save(state, tmp_path / "gpu.pth")
        torch.save(state, tmp_path / "gpu-legacy.pth", _use_new_zipfile_serialization=False)
    finally:
        serialization.location_tag = tag
    assert storage_locations(tmp_path / "gpu.pth") == ["cuda:0"]
    assert storage_locations(tmp_path / "gpu-legacy.pth") == ["cuda:0"]


# A demo that offers the CPU and loads released weights: nothing in the project saves them,
# so without the file its origin is unknown (possible).
DEMO = """
    import torch
    from model import Net

    device = "cuda" if torch.cuda.is_available() else "cpu"
    net = Net()
    net.load_state_dict(torch.load("weights/net.pth"))
    net.to(device)
"""


def tdl004(capsys, root: Path) -> list[tuple[int, str, list[str]]]:
    cli.main(["--format", "json", "--isolated", "--preview", "--no-cache", "--select", "TDL004", str(root)])
    return [(f["line"], f["confidence"], [e["message"] for e in f["evidence"]])
            for f in json.loads(capsys.readouterr().out)]


@pytest.fixture
def demo(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "demo.py").write_text(textwrap.dedent(DEMO))
    (tmp_path / "model.py").write_text("import torch.nn as nn\nclass Net(nn.Linear):\n    pass\n")
    return tmp_path


def test_a_shipped_checkpoint_saved_on_a_gpu_makes_the_load_certain(capsys, demo):
    checkpoint(demo / "weights" / "net.pth", "cuda:0")
    [(line, confidence, evidence)] = tdl004(capsys, demo)
    assert (line, confidence) == (7, "certain")
    assert any("ships `weights/net.pth`" in e and "cuda:0" in e for e in evidence)
    assert not any("comes from elsewhere" in e for e in evidence)  # what it holds is read, not guessed


def test_a_shipped_checkpoint_saved_on_the_cpu_loads_anywhere(capsys, demo):
    checkpoint(demo / "weights" / "net.pth", "cpu")
    [(line, confidence, evidence)] = tdl004(capsys, demo)
    assert (line, confidence) == (7, "possible")
    assert any("all saved on the CPU" in e for e in evidence)


def test_a_load_of_a_file_the_repository_does_not_ship_is_unchanged(capsys, demo):
    [(line, confidence, evidence)] = tdl004(capsys, demo)
    assert (line, confidence) == (7, "possible")
    assert not any("ships" in e for e in evidence)


def test_a_checkpoint_found_from_the_project_root(capsys, demo):
    # a module of a package loading by a path relative to the repository's root
    (demo / "pkg").mkdir()
    (demo / "demo.py").rename(demo / "pkg" / "demo.py")
    (demo / "pkg" / "__init__.py").write_text("")
    checkpoint(demo / "weights" / "net.pth", "cuda:1")
    [(line, confidence, evidence)] = tdl004(capsys, demo)
    assert confidence == "certain" and any("cuda:1" in e for e in evidence)


def test_a_cpu_checkpoint_outweighs_the_project_saving_from_a_device(capsys, demo):
    # the project's trainer saves from the GPU, but the file the demo reads was saved on the CPU
    (demo / "train.py").write_text("import torch\nfrom model import Net\nnet = Net().cuda()\n"
                                   "torch.save(net.state_dict(), 'weights/net.pth')\n")
    checkpoint(demo / "weights" / "net.pth", "cpu")
    [(line, confidence, evidence)] = tdl004(capsys, demo)
    assert confidence == "possible" and any("all saved on the CPU" in e for e in evidence)


def test_a_path_set_again_to_the_same_literal_is_still_that_file(capsys, demo):
    # a notebook's cells each set the path again before loading: the file is still the one shipped
    (demo / "train.py").write_text("import torch\nfrom model import Net\nnet = Net().cuda()\n"
                                   "torch.save(net.state_dict(), 'weights/net.pth')\n")
    (demo / "demo.py").write_text(textwrap.dedent("""
        import torch
        from model import Net

        device = "cuda" if torch.cuda.is_available() else "cpu"
        PATH = "weights/net.pth"
        net = Net()
        PATH = "weights/net.pth"
        net.load_state_dict(torch.load(PATH))
    """))
    checkpoint(demo / "weights" / "net.pth", "cpu")
    [(line, confidence, evidence)] = tdl004(capsys, demo)
    assert (line, confidence) == (9, "possible")
    assert any("all saved on the CPU" in e for e in evidence)
    # two different files under one name: which one the load reads is not known
    (demo / "demo.py").write_text((demo / "demo.py").read_text().replace('PATH = "weights/net.pth"\nnet',
                                                                          'PATH = "weights/other.pth"\nnet'))
    [(line, confidence, evidence)] = tdl004(capsys, demo)
    assert line == 9 and not any("ships `" in e for e in evidence)  # no claim about the file it reads


@pytest.mark.parametrize("shipped, confidence", [
    (None, "certain"),  # nothing shipped: the saver may run on the GPU the training script chooses
    ("cpu", "possible"),  # what the saver wrote, shipped here, holds CPU tensors: it ran on the CPU
    ("cuda:0", "certain"),
])
def test_what_the_projects_saver_wrote_shows_where_it_ran(capsys, tmp_path, monkeypatch, shipped, confidence):
    # a resume helper loading a path it is handed; the project's only saver writes checkpoint_<epoch>.pth
    monkeypatch.chdir(tmp_path)
    (tmp_path / "checkpoints.py").write_text(textwrap.dedent("""\
        import torch
        def save_checkpoint(state, epoch):
            torch.save(state, "checkpoints/checkpoint_{}.pth".format(epoch))
        def load_checkpoint(path, model):
            model.load_state_dict(torch.load(path))
        """))
    (tmp_path / "train.py").write_text(textwrap.dedent("""\
        import sys
        import torch
        from checkpoints import save_checkpoint, load_checkpoint
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = torch.nn.Linear(2, 2)
        load_checkpoint(sys.argv[1], model)
        model.to(device)
        save_checkpoint(model.state_dict(), 600)
        """))
    if shipped is not None:
        checkpoint(tmp_path / "checkpoints" / "checkpoint_600.pth", shipped)
    found = tdl004(capsys, tmp_path)
    assert [c for _, c, _ in found] == [confidence]
    evidence = found[0][2]
    assert any("ships what the project's savers write" in e for e in evidence) is (shipped == "cpu")
    assert not (any("ran on the CPU" in e for e in evidence) and any("can hold accelerator" in e for e in evidence))


@pytest.mark.parametrize("spelled", [
    r"C:\\Users\\me\\PycharmProjects\\kws\\weights\\net.pth",  # the author's checkout on Windows
    "/home/me/kws/weights/net.pth",
])
def test_an_absolute_path_of_the_authors_checkout_finds_the_shipped_file(capsys, demo, spelled):
    (demo / "demo.py").write_text(textwrap.dedent(DEMO).replace('"weights/net.pth"', f'r"{spelled}"'))
    checkpoint(demo / "weights" / "net.pth", "cuda:0")
    [(line, confidence, evidence)] = tdl004(capsys, demo)
    assert (line, confidence) == (7, "certain")
    assert any("ships `weights/net.pth`" in e for e in evidence)
    assert not any("one machine's disk" in e for e in evidence)


def test_an_absolute_path_the_repository_does_not_hold_is_one_machines_file(capsys, demo):
    (demo / "demo.py").write_text(textwrap.dedent(DEMO).replace('"weights/net.pth"', '"/home/me/kws/other/net.pth"'))
    checkpoint(demo / "weights" / "net.pth", "cuda:0")
    [(line, confidence, evidence)] = tdl004(capsys, demo)
    assert confidence == "possible" and any("one machine's disk" in e for e in evidence)
