"""A program that fails on its own: `python crash.py raise`, `python crash.py exit`, or
`python crash.py ansi` (a device error with terminal colours, a banner and several lines)."""
import sys

import torch


def fail():
    raise ValueError("the program's own error")


print("tensor sum", torch.ones(3).sum().item())
if sys.argv[1:] == ["raise"]:
    fail()
elif sys.argv[1:] == ["ansi"]:
    raise RuntimeError("\x1b[31m=====\x1b[0m\n\x1b[1mExpected all tensors to be on the same device\x1b[0m, but found "
                       "at least two devices, cuda:0 and cpu! Check the model.\nSecond line of details\n=====")
elif sys.argv[1:] == ["exit"]:
    print("leaving with status 3", file=sys.stderr)
    sys.exit(3)
