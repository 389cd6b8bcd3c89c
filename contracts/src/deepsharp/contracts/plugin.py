"""The pytest plugin: `--engine SPEC` picks the engines, `--contracts-report FILE` writes the worst.

Registered through the `pytest11` entry point (as anyio's plugin is). Tests that ask for
`engine`, `engine_factory`, `engine_spec` or `contract` run once per chosen engine, with the
engine's spec as their id: `test_matmul_within_totals_bound[torch:cpu]`. With no `--engine`, every
installed engine (a `deepsharp.engines` entry point) runs at the default spec it describes; the
suite names no engine of its own. An engine that does not state its precision in its identity
fails every one of them, saying so.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from deepsharp.contracts.inputs import InputsKept
from deepsharp.contracts.measure import Contract, IdentityMissing, Measurements, engine_precision
from deepsharp.core.engine import Engine, available_engines, describe_engine, make_engine
from deepsharp.core.errors import EngineUnavailableError

__all__ = ["choose_engines", "default_spec", "summary_lines"]

_MEASUREMENTS = pytest.StashKey[Measurements]()
_CHOSEN = pytest.StashKey[tuple[list[str], list[str]]]()
_HELD = pytest.StashKey[bool]()


def default_spec(name: str) -> str:
    """The spec to run for the installed engine `name` when no `--engine` is given: the default
    its entry point describes (`describe_engine(name).default_spec`, one that needs no card)."""
    return describe_engine(name).default_spec


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("deepsharp-contracts", "deepsharp engine contracts")
    group.addoption(
        "--engine",
        action="append",
        default=[],
        dest="deepsharp_engines",
        metavar="SPEC",
        help="an engine to hold to the contract (repeatable): a spec of an installed engine "
        "(light, light:float32, NAME[:OPTION]) or module:factory. Default: every installed engine "
        "that can be made, at the default spec its entry point describes.",
    )
    group.addoption(
        "--contracts-report",
        default=None,
        dest="contracts_report",
        metavar="FILE",
        help="write the worst roundings measured, per family, operation and engine, as JSON",
    )


def choose_engines(specs: list[str]) -> tuple[list[str], list[str]]:
    """The specs to run (those named, or every installed engine that can be made, at its default
    spec) and, for engines skipped, why. A named engine that cannot be made stops the run before
    any check (`pytest.UsageError`, saying why), rather than failing each of them alike."""
    if specs:
        named = list(dict.fromkeys(specs))
        for spec in named:
            try:
                make_engine(spec)
            except Exception as error:  # whatever the factory raised: said once, not 400 times
                raise pytest.UsageError(
                    f"--engine {spec}: the engine could not be made, so no check ran: "
                    f"{type(error).__name__}: {error}"
                ) from error
        return named, []
    chosen, skipped = [], []
    for name in available_engines():
        spec = name
        try:
            spec = default_spec(name)
            make_engine(spec)
        except EngineUnavailableError as error:
            skipped.append(f"{spec}: {error}")
            continue
        chosen.append(spec)
    return chosen, skipped


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_MEASUREMENTS] = Measurements()
    if config.getoption("deepsharp_engines"):
        _chosen(config)  # a named engine that cannot be made stops the run here


def _chosen(config: pytest.Config) -> tuple[list[str], list[str]]:
    if _CHOSEN not in config.stash:
        config.stash[_CHOSEN] = choose_engines(config.getoption("deepsharp_engines"))
    return config.stash[_CHOSEN]


def pytest_report_header(config: pytest.Config) -> list[str]:
    if not config.getoption("deepsharp_engines") and not config.getoption("contracts_report"):
        return []
    chosen, skipped = _chosen(config)
    lines = [f"deepsharp engines: {', '.join(chosen) or 'none'}"]
    lines += [f"  skipped {reason}" for reason in skipped]
    return lines


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Where the contract ran, after the results: the engines held to it and those skipped,
    why (the header says it too, but only where --engine or --contracts-report was given: the
    plugin is loaded by every pytest run, most of which are not the contract's)."""
    if not config.stash.get(_HELD, False):
        return
    chosen, skipped = _chosen(config)
    terminalreporter.section("deepsharp contracts")
    for line in summary_lines(chosen, skipped):
        terminalreporter.write_line(line)


def summary_lines(chosen: list[str], skipped: list[str]) -> list[str]:
    """The engines held to the contract, and each skipped with its reason."""
    if not chosen:
        lines = ["no engine was held to the contract: install one, or name one with --engine SPEC"]
    else:
        lines = [f"held to the contract: {', '.join(chosen)}"]
    return lines + [f"skipped {reason}" for reason in skipped]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "engine_spec" in metafunc.fixturenames:
        metafunc.config.stash[_HELD] = True
        chosen, _ = _chosen(metafunc.config)
        metafunc.parametrize("engine_spec", chosen, ids=chosen, indirect=True, scope="session")


@pytest.fixture(scope="session")
def engine_spec(request: pytest.FixtureRequest) -> str:
    """The spec of the engine under test (`light`, `torch:cpu`, `module:factory`, ...)."""
    spec: str = request.param
    return spec


@pytest.fixture(scope="session")
def contract(engine_spec: str, pytestconfig: pytest.Config) -> Contract:
    """The checks, bound to the engine under test and held to its precision's bounds; what
    they measure goes into the report. An engine that states no precision fails here."""
    engine = make_engine(engine_spec)
    try:
        precision = engine_precision(engine, engine_spec)
    except IdentityMissing as error:
        pytest.fail(str(error), pytrace=False)
    measurements = pytestconfig.stash[_MEASUREMENTS]
    identity: Any = engine.identity
    measurements.identities[engine_spec] = (
        identity.to_json() if hasattr(identity, "to_json") else {"name": str(identity)}
    )
    return Contract(engine_spec, measurements, precision)


@pytest.fixture(scope="session")
def engine_factory(engine_spec: str, contract: Contract) -> Callable[[], Engine]:
    """Makes a fresh engine of the kind under test, unwatched (for checks that need one
    untouched: a training step, its transfers, its memory)."""

    def factory() -> Engine:
        return make_engine(engine_spec)

    return factory


@pytest.fixture(scope="session")
def engine(engine_factory: Callable[[], Engine], contract: Contract) -> Engine:
    """One engine of the kind under test, shared by the operation checks, each of its
    operations watched to leave its inputs unchanged (`deepsharp.contracts.inputs`)."""
    watched: Engine = InputsKept(engine_factory(), contract)
    return watched


_WORKER_OUTPUT = "deepsharp_contracts"
"""Where a pytest-xdist worker hands its measurements to the controller (`-n 2`)."""


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if _MEASUREMENTS not in config.stash:
        return
    if hasattr(config, "workeroutput"):  # a pytest-xdist worker: the controller writes
        parts = config.stash[_MEASUREMENTS].parts()
        config.workeroutput[_WORKER_OUTPUT] = {"held": config.stash.get(_HELD, False), **parts}
        return
    path = config.getoption("contracts_report")
    if not path:
        return
    report = config.stash[_MEASUREMENTS].to_json()
    Path(path).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: absent without it
def pytest_testnodedown(node: Any, error: object) -> None:
    """A worker's measurements kept beside the others' (the report of `-n 2` is the report of
    one process), and whether it held an engine to the contract (the closing summary)."""
    parts = getattr(node, "workeroutput", {}).get(_WORKER_OUTPUT)
    if parts is None or _MEASUREMENTS not in node.config.stash:
        return
    node.config.stash[_MEASUREMENTS].merge(parts)
    if parts["held"]:
        node.config.stash[_HELD] = True
