"""Runtime sites carry the column of the expression that ran: from ``co_positions`` on Python
3.11+, from the source on 3.10 (``sites.positions_310``). No torch here."""

from __future__ import annotations

import sys

import pytest

from torchdev_lint.trace import sites

SEEN: list = []


def here():
    frame = sys._getframe(2)
    SEEN.append(sites.position(frame.f_code, frame.f_lasti, frame.f_lineno))
    return 1


def call(*args, **kwargs):
    return here()


class Operand:
    def __matmul__(self, other):
        return here()

    def __getitem__(self, index):
        return here()

    def numpy(self):
        return here()


def program(x, w):
    first = call(1, call(2))
    second = (x @ w) + x[call(0)]
    checked = x.numpy() is not None  # (no assert: pytest rewrites those)
    spread = call(1,
                  2)
    inner = [call(i) for i in range(1)]
    return first, second, checked, spread, inner


def expected():
    line = program.__code__.co_firstlineno
    return [
        (line + 1, line + 1, 20, 27),   # call(2), evaluated first
        (line + 1, line + 1, 12, 28),   # call(1, call(2))
        (line + 2, line + 2, 14, 19),   # x @ w
        (line + 2, line + 2, 25, 32),   # call(0)
        (line + 2, line + 2, 23, 33),   # x[call(0)]
        (line + 3, line + 3, 14, 23),   # x.numpy()
        (line + 4, line + 5, 13, 20),   # a call spread over two lines
    ]


def test_a_site_has_the_column_of_the_call_operator_or_subscript_that_ran():
    SEEN.clear()
    program(Operand(), Operand())
    assert SEEN[:7] == expected()


def test_in_a_comprehension_python_3_10_keeps_the_line_only():
    SEEN.clear()
    program(Operand(), Operand())
    line = program.__code__.co_firstlineno + 6
    if sys.version_info >= (3, 11):
        assert SEEN[7] == (line, line, 13, 20)
    else:
        assert SEEN[7] == (line, line, 0, 0)


@pytest.mark.skipif(sys.version_info >= (3, 11), reason="Python 3.11+ has co_positions")
def test_python_3_10_positions_come_from_the_source():
    positions = sites.positions_310(program.__code__)
    assert sum(p is not None for p in positions) == 8  # the 7 above and the + of line 2


def decorate(function):
    return function


@decorate
def decorated(x, w):
    return x @ w


def fails():
    raise ValueError("the program's own error")


def test_a_decorated_function_has_its_columns_too():
    """Its code starts at the decorator (co_firstlineno), its ``def`` a line later."""
    SEEN.clear()
    decorated(Operand(), Operand())
    line = decorated.__code__.co_firstlineno + 2
    assert SEEN == [(line, line, 11, 16)]


def test_a_raise_has_the_column_of_its_statement():
    """Where a program's own exception is reported (the tracer's outcome site)."""
    with pytest.raises(ValueError) as caught:
        fails()
    frame = caught.tb.tb_next
    line = fails.__code__.co_firstlineno + 1
    assert sites.position(frame.tb_frame.f_code, frame.tb_lasti, frame.tb_lineno)[:3] == (line, line, 4)


def asserting(x, w):
    assert (x @ w) == 1  # pytest rewrites this module's asserts: their message's operators come after


def test_an_assert_that_pytest_rewrote_has_its_columns():
    """A test's own line, as the pytest plugin reports it."""
    SEEN.clear()
    asserting(Operand(), Operand())
    line = asserting.__code__.co_firstlineno + 1
    assert SEEN == [(line, line, 12, 17)]
