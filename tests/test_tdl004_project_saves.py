"""TDL004 across files: a load of a file that the project's own CPU-only code writes (its
preprocessing scripts) is silent; the same load is flagged as soon as any code that writes
or feeds that file may hold tensors on an accelerator, or the file may come from elsewhere."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from torchdev_lint import cli

# A preprocessing pipeline that never names a device: the stats are computed on the CPU.
PIPELINE = {
    "prep/stats.py": """
        import torch

        def dump_stats(speaker_to_values, out_prefix):
            path = f"{out_prefix}.speaker_stats.pt"
            stats = {s: torch.tensor(v).mean() for s, v in speaker_to_values.items()}
            torch.save(stats, path)
    """,
    "prep/run.py": """
        from stats import dump_stats

        def main(values, prefix):
            dump_stats(values, prefix)
    """,
    "data/dataset.py": """
        import torch

        class SpeakerDataset:
            def __init__(self, manifest):
                self.stats = torch.load(f"{manifest}.speaker_stats.pt")
    """,
}
LOAD = ("data/dataset.py", 6, 22)


def findings(capsys, root: Path, paths=(".",), cache=("--no-cache",)) -> list[tuple[str, int, int]]:
    """The TDL004 findings of a run over ``paths`` under ``root``: (file, line, column), in the
    preview tier: these loads show no CPU path, so a flagged one is possible; a load the
    project's own CPU code writes is not even that."""
    cli.main(["--format", "json", "--isolated", "--preview", *cache, "--select", "TDL004",
              *(str(root / p) for p in paths)])
    return sorted(
        (Path(f["path"]).relative_to(root).as_posix(), f["line"], f["column"])
        for f in json.loads(capsys.readouterr().out)
    )


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_a_file_the_projects_cpu_code_writes_loads_anywhere(project, capsys):
    write(project, PIPELINE)
    assert findings(capsys, project) == []


def test_the_same_load_is_flagged_when_the_writer_is_not_in_the_run(project, capsys):
    # Linting the dataset alone: nothing in the index says where the file comes from.
    write(project, PIPELINE)
    assert findings(capsys, project, ["data/dataset.py"]) == [LOAD]


@pytest.mark.parametrize("change", [
    # The saving module places tensors itself.
    ("prep/stats.py", "stats = {", "stats = {s: v.cuda() for s, v in speaker_to_values.items()} or {"),
    # A caller of the saving function names a device: it may hand over GPU tensors.
    ("prep/run.py", "dump_stats(values, prefix)", "dump_stats({k: v.to('cuda') for k, v in values.items()}, prefix)"),
    # The saving module re-saves what it loaded without `map_location`: the devices of
    # the loaded file stay in the saved one.
    ("prep/stats.py", "stats = {", "stats = torch.load(out_prefix + '.raw') or {", ("prep/stats.py", 6, 13)),
    # Another module writes a file of that name some other way.
    ("prep/run.py", "dump_stats(values, prefix)",
     "dump_stats(values, prefix)\n    accelerator.save(values, f'{prefix}.speaker_stats.pt')"),
])
def test_flagged_when_anything_that_writes_or_feeds_the_file_may_be_on_a_gpu(project, change, capsys):
    write(project, PIPELINE)
    name, old, new, *also = change
    path = project / name
    path.write_text(path.read_text().replace(old, new))
    assert findings(capsys, project) == sorted([LOAD, *also])


def test_a_caller_of_a_caller_counts(project, capsys):
    # Data reaches the saving function through `run.main`, called by a training script
    # that works on the GPU.
    write(project, PIPELINE)
    write(project, {"prep/train.py": """
        import torch
        from run import main

        def train(values, prefix):
            main({k: v.cuda() for k, v in values.items()}, prefix)
    """})
    assert findings(capsys, project) == [LOAD]


def test_a_chain_of_cpu_files_is_followed(project, capsys):
    # The stats are computed from shards that another CPU-only script wrote: loading the
    # shards, and then the stats, is safe.
    write(project, PIPELINE)
    write(project, {
        "prep/shards.py": """
            import torch

            def main(out_dir, rank, n, values):
                torch.save(torch.tensor(values), f"{out_dir}/shard_{rank}_{n}.pt")
        """,
        "prep/stats.py": PIPELINE["prep/stats.py"].replace(
            "stats = {", "shards = [torch.load(f'{out_prefix}/shard_{r}_{n}.pt') for r in range(n)]\n"
            "            stats = {"),
    })
    assert findings(capsys, project) == []


def test_a_file_name_the_code_does_not_spell_out_is_not_matched(project, capsys):
    # `{}.pt`: every checkpoint of the project has such a name.
    write(project, {
        "prep/save.py": "import torch\n\ndef dump(x, name):\n    torch.save(x, f'{name}.pt')\n",
        "load.py": "import torch\n\ndef read(name):\n    return torch.load(f'{name}.pt')\n",
    })
    assert findings(capsys, project) == [("load.py", 4, 12)]


def test_a_cached_result_is_not_reused_once_the_writer_changes(project, capsys, tmp_path_factory):
    # The loading file is unchanged; only the saving one starts placing tensors on a GPU.
    cache = ("--cache-dir", str(tmp_path_factory.mktemp("cache")))
    write(project, PIPELINE)
    assert findings(capsys, project, cache=cache) == []
    stats = project / "prep/stats.py"
    stats.write_text(stats.read_text().replace("torch.tensor(v)", "torch.tensor(v).cuda()"))
    assert findings(capsys, project, cache=cache) == [LOAD]


def test_a_path_of_thousands_of_pieces_is_read_without_failing(project, capsys):
    # Hostile input: a save whose path is a chain of 900 concatenations still leaves the
    # run with its findings (the load's file name is not spelled by the save).
    pieces = " + ".join(['"a"'] * 900)
    write(project, {
        "prep/save.py": f"import torch\n\ndef dump(x):\n    torch.save(x, {pieces} + '.pt')\n",
        "load.py": "import torch\n\ndef read():\n    return torch.load('aaaa.pt')\n",
    })
    assert findings(capsys, project) == [("load.py", 4, 12)]
