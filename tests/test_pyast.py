"""The stdlib parser from several threads at once (the tracer's runs beside the checks)."""

import gc
import sys
import threading
import time

import pytest

from torchdev_lint import pyast

SOURCE = "\n".join(f"def f{i}(a, b):\n    return [x + a * b for x in range({i})]" for i in range(20))


@pytest.fixture
def collections_switch_threads():
    """A garbage collection in the middle of building a tree lets another thread run: the
    moment CPython 3.11's shared depth counter goes wrong (without the lock, one parse in a few
    hundred fails here)."""
    threshold = gc.get_threshold()
    switch = lambda phase, info: time.sleep(0)  # noqa: E731
    gc.set_threshold(50)
    gc.callbacks.append(switch)
    yield
    gc.callbacks.remove(switch)
    gc.set_threshold(*threshold)


def test_parses_in_four_threads_never_fail(collections_switch_threads):
    failures, trees = [], []

    def parse_many():
        for _ in range(100):
            try:
                trees.append(pyast.parse(SOURCE))
            except SystemError as error:
                failures.append(str(error))

    threads = [threading.Thread(target=parse_many) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len(trees) == 400 and all(len(tree.body) == 20 for tree in trees)


@pytest.mark.parametrize("source", [
    "x = (",                          # a syntax error
    "x = 1\0",                        # a null byte
    pytest.param("x = 1" + "+1" * 100_000, marks=pytest.mark.skipif(  # too deep for the tree's construction
        sys.version_info < (3, 11), reason="CPython 3.10 builds the tree without a depth limit")),
    "x = " + "[" * 300 + "]" * 300,   # too deep for the parser
])
def test_unparsable_text_gives_no_tree(source):
    assert pyast.parse(source) is None


def test_an_expression():
    assert pyast.parse("a.b", mode="eval").body.attr == "b"
