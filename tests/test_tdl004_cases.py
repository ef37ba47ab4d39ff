"""TDL004: loads of files that cannot come from another machine stay silent (round trips,
files a test wrote, metadata), checkpoints from outside are still flagged."""

import textwrap

import pytest

import torchdev_lint.rules  # noqa: F401
from torchdev_lint.engine import lint_source
from torchdev_lint.rule import Rule

RULE = Rule.registry["TDL004"]


def positions(code, path="example.py"):
    return [(f.line, f.column) for f in lint_source(path, textwrap.dedent(code), [RULE]).findings]


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
    assert positions(code) == []


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
