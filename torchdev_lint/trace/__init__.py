"""Runtime tracing: run a program under instrumentation and confirm or refute the static findings.

The parent side (``cli``, ``session``, ``verdicts``, ``report``) never imports torch nor the
user's code; the child side (``runner``, ``sim``, ``hooks``, ``coverage``) runs in a separate
process started by ``session`` and is the only place torch is imported.
"""

# The torch versions the simulator's use of torch internals is tested with: CI runs 2.13.0,
# benchmarks/torch_versions/run.sh the others (docs/trace.md, "Tested torch versions"); the
# selfcheck (python -m torchdev_lint.trace.selfcheck) checks the internals it relies on.
TESTED_TORCH_VERSIONS = ("2.4.1", "2.8.0", "2.13.0", "2.14.1")

# The tracer only adds torch to what is installed (the trace extra is torch>=2.4, the oldest
# tested); torchdev-lint itself is not on PyPI to install an extra from.
INSTALL_HINT = "pip install 'torch>=2.4'"
