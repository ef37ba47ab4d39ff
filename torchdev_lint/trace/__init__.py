"""Runtime tracing: run a program under instrumentation and confirm or refute the static findings.

The parent side (``cli``, ``session``, ``verdicts``, ``report``) never imports torch nor the
user's code; the child side (``runner``, ``sim``, ``hooks``, ``coverage``) runs in a separate
process started by ``session`` and is the only place torch is imported.
"""

# The torch versions the simulator's use of torch internals is tested with
# (tests/trace/test_sim_smoke.py checks the internals it relies on).
TESTED_TORCH_VERSIONS = ("2.13.0",)

INSTALL_HINT = "pip install 'torchdev-lint[trace]'"
