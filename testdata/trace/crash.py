"""A program that fails on its own: `python crash.py raise` or `python crash.py exit`."""
import sys

import torch


def fail():
    raise ValueError("the program's own error")


print("tensor sum", torch.ones(3).sum().item())
if sys.argv[1:] == ["raise"]:
    fail()
elif sys.argv[1:] == ["exit"]:
    print("leaving with status 3", file=sys.stderr)
    sys.exit(3)
