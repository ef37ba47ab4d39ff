"""pytest plugin: run a project's own tests on the tracer's simulated GPU.

pytest loads this module in every environment where torchdev-lint is installed (the ``pytest11``
entry point), so it must cost nothing when unused: it only adds an option, an ini setting, a
marker and a fixture, and imports neither torch nor the tracer. The simulation itself lives in
``pytest_simulation`` and is imported only when asked for:

* ``pytest --simulate-gpu`` (or ``simulate_gpu = true`` in the ini file): the whole session,
  collection included, runs on a simulated GPU (``--simulate-gpu=cpu-only``: as a machine
  without any GPU);
* ``@pytest.mark.simulate_gpu`` or the ``simulated_gpu`` fixture: one test, from its setup to
  its teardown.

Under pytest-xdist each worker simulates its own tests, and the controller (which runs none)
only prints the summary, from the data the workers put on their reports (``pytest_report``).
"""

from __future__ import annotations

import copy
import importlib.util
import os
import sys

import pytest

from torchdev_lint.trace import INSTALL_HINT

OPTION = "--simulate-gpu"
MODES = {"sim": "sim", "gpu": "sim", "true": "sim", "yes": "sim", "on": "sim", "1": "sim",
         "cpu-only": "cpu-only", "real": "real", "false": None, "no": None, "off": None, "0": None, "": None}
PLUGIN_NAME = "torchdev-lint-simulated-gpu"
SUMMARY_NAME = "torchdev-lint-device-summary"


class SimulatedGPUWarning(UserWarning):
    """A device bug the simulation confirmed that raises nothing where the test ran (a discarded
    move, a GPU checkpoint loaded without map_location, optimizer state left behind), so the test
    passed. Here, not in the heavy module, so that ``filterwarnings`` can name it without torch."""


def pytest_addoption(parser):
    group = parser.getgroup("torchdev-lint", "torchdev-lint simulated GPU")
    group.addoption(
        OPTION, dest="simulate_gpu", metavar="MODE", nargs="?", const="sim", default=None,
        help="run the tests on torchdev-lint's simulated GPU: torch.cuda.is_available() is true, "
             "values are computed on the CPU, device mismatches fail with the file:line where each "
             "tensor got its device. --simulate-gpu=cpu-only: as a machine without a GPU "
             "(every CUDA request raises). --simulate-gpu=off: not even if the ini file asks.")
    group.addoption(
        f"{OPTION}-strict", dest="simulate_gpu_strict", action="store_true", default=False,
        help="fail a test that passed although the simulation confirmed a device bug that raises "
             "nothing (TDL003 discarded move, TDL004 GPU checkpoint without map_location, TDL005 "
             "optimizer state left behind); without it such a test passes with a warning")
    group.addoption(
        f"{OPTION}-no-verdicts", dest="simulate_gpu_no_verdicts", action="store_true", default=False,
        help="do not keep the simulated GPU's verdicts for the linter (by default each finding's "
             "verdict goes to .torchdev_lint_cache/verdicts.json; docs/verdicts.md)")
    parser.addini("simulate_gpu_verdicts", "keep the simulated GPU's verdicts for the linter "
                                           "(docs/verdicts.md)", type="bool", default=True)
    parser.addini("simulate_gpu", "run the tests on torchdev-lint's simulated GPU: true, false, "
                                  "sim or cpu-only (the --simulate-gpu option wins)", default="false")
    parser.addini("simulate_gpu_strict", "as --simulate-gpu-strict", type="bool", default=False)


def _mode(text: str | None, where: str) -> str | None:
    key = str(text).strip().lower()
    if key not in MODES:
        raise pytest.UsageError(f"{where}: expected sim, cpu-only, real or off, got {text!r}")
    return MODES[key]


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    """Start a session-wide simulation before the first conftest is imported, so that
    ``torch.cuda.is_available()`` in conftests, test modules and skipif conditions (evaluated
    at import) sees the simulated machine."""
    if OPTION in args:
        # `--simulate-gpu tests/` took `tests/` as the mode: pin the bare flag to `sim`.
        args[:] = [f"{OPTION}=sim" if a == OPTION else a for a in args]
        early_config.known_args_namespace = parser.parse_known_args(
            args, namespace=copy.copy(early_config.option))
    mode = session_mode(early_config, args)
    if mode is None:
        return
    if importlib.util.find_spec("torch") is None:
        raise pytest.UsageError(f"{OPTION} needs PyTorch, which is not installed here; "
                                f"install it with: {INSTALL_HINT}")
    if not _xdist_worker(early_config):
        _register_summary(early_config, mode)
    if _xdist_controller(early_config):
        return  # runs no test: its workers simulate
    from torchdev_lint.integrations import pytest_simulation

    simulation = pytest_simulation.Simulation(early_config, mode, whole_session=True)
    early_config.pluginmanager.register(simulation, PLUGIN_NAME)
    simulation.start()


def _xdist_worker(config) -> bool:
    """Whether this process is a pytest-xdist worker. Once its config is made, a worker's has
    ``workerinput``; before (when the initial conftests load) only the environment says so:
    pytest-xdist sets PYTEST_XDIST_WORKER in the worker, which execnet starts as ``python -c``.
    Every process a test starts inherits that variable, so a pytest run from a test of an xdist
    run (``python -m pytest``, pytester) is no worker for all that."""
    if hasattr(config, "workerinput"):
        return True
    if getattr(config, "_tdl_configured", False):
        return False
    return "PYTEST_XDIST_WORKER" in os.environ and sys.argv[:1] == ["-c"]


def _xdist_controller(config) -> bool:
    """Whether this process hands its tests to pytest-xdist workers (``-n N``, ``--tx``)."""
    if _xdist_worker(config):
        return False
    namespace = getattr(config, "known_args_namespace", config.option)
    if getattr(namespace, "collectonly", False):  # xdist leaves --collect-only to this process
        return False
    return bool(getattr(namespace, "numprocesses", None) or getattr(namespace, "tx", None))


def _register_summary(config, mode: str | None) -> None:
    if not config.pluginmanager.has_plugin(SUMMARY_NAME):
        from torchdev_lint.integrations.pytest_report import Summary

        config.pluginmanager.register(Summary(mode), SUMMARY_NAME)


def session_mode(config, args: list[str]) -> str | None:
    """The mode the command line or the ini file asks for, None when none."""
    chosen = None
    for a in args:
        if a == "--":
            break
        if a.startswith(f"{OPTION}="):
            chosen = a.split("=", 1)[1]
    if chosen is not None:
        return _mode(chosen, OPTION)
    return _mode(config.getini("simulate_gpu"), "simulate_gpu (ini)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "simulate_gpu: run this test on torchdev-lint's simulated GPU (from its setup to its "
                   "teardown); see `pytest --simulate-gpu` for the whole session")
    config._tdl_configured = True  # from here on, `workerinput` alone tells a worker
    summary = config.pluginmanager.get_plugin(SUMMARY_NAME)
    if _xdist_worker(config):
        if summary is not None:  # taken for no worker at start: the controller prints the summary
            config.pluginmanager.unregister(summary, SUMMARY_NAME)
    elif _xdist_controller(config):  # its workers may simulate marked tests: it prints their summary
        _register_summary(config, None)
    elif summary is None and config.pluginmanager.has_plugin(PLUGIN_NAME):
        _register_summary(config, config.pluginmanager.get_plugin(PLUGIN_NAME).mode)


def wants_simulation(item) -> bool:
    return item.get_closest_marker("simulate_gpu") is not None or "simulated_gpu" in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(session, config, items):
    """Without a session-wide simulation, start the per-test machinery only if a collected
    test asks for it (one look at each test, once)."""
    if config.pluginmanager.has_plugin(PLUGIN_NAME):
        return
    if any(wants_simulation(item) for item in items):
        from torchdev_lint.integrations import pytest_simulation

        config.pluginmanager.register(pytest_simulation.Simulation(config, "sim", whole_session=False),
                                      PLUGIN_NAME)
        if not _xdist_worker(config):
            _register_summary(config, None)


@pytest.fixture
def simulated_gpu(request):
    """The simulated GPU this test runs on: ``.mode`` and ``.events()`` (what the simulator
    recorded during this test, as the tracer's event dictionaries)."""
    simulation = request.config.pluginmanager.get_plugin(PLUGIN_NAME)
    if simulation is None:  # requested dynamically (request.getfixturevalue)
        pytest.fail("the simulated_gpu fixture must be named in the test's signature or usefixtures "
                    "(or run pytest --simulate-gpu)", pytrace=False)
    return simulation.handle(request.node)
