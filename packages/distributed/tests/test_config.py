"""DataParallel is a small frozen configuration, checked when it is made, that holds no job (a
run's place in the job is an object of its own); joining or launching outside what works is
refused with a message that says what to do."""

from __future__ import annotations

import dataclasses
import pickle

import distributed_workers as workers
import pytest

from deepsharp.distributed import DataParallel, DistributedError, launch


def test_the_defaults_are_auto_and_ordered() -> None:
    config = DataParallel()
    assert (config.backend, config.reduction) == ("auto", "ordered")
    assert DataParallel("gloo", "fast", timeout=5) == DataParallel(
        backend="gloo", reduction="fast", timeout=5
    )


def test_it_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        DataParallel().backend = "nccl"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ({"backend": "mpi"}, "backend is one of 'auto', 'gloo', 'nccl'"),
        ({"reduction": "sum"}, "reduction is 'ordered'"),
        ({"timeout": 0}, "timeout is a number of seconds above 0"),
        ({"timeout": float("inf")}, "timeout"),
        ({"timeout": True}, "timeout"),
    ],
)
def test_a_bad_setting_is_refused_when_made(arguments: dict[str, object], said: str) -> None:
    with pytest.raises(ValueError, match=said):
        DataParallel(**arguments)  # type: ignore[arg-type]


def test_joining_outside_any_job_says_how_to_start_one(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(DistributedError) as caught:
        DataParallel().join()
    assert "torchrun" in str(caught.value) and "launch(function, nprocs" in str(caught.value)


@pytest.mark.parametrize("nprocs", [0, -1, True, 2.0])
def test_launch_needs_a_whole_number_of_processes(nprocs: object) -> None:
    with pytest.raises(ValueError, match="launch starts 1 or more processes"):
        launch(workers.environment, nprocs)  # type: ignore[arg-type]


def test_launch_refuses_a_function_new_processes_cannot_import() -> None:
    pytest.importorskip("torch")
    with pytest.raises(DistributedError, match="top level of a module"):
        launch(lambda: 1, 2)


def test_nccl_is_refused_where_torch_has_no_card() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a card is usable here")
    with pytest.raises(DistributedError, match="backend 'nccl'"):
        launch(workers.environment, 2, backend="nccl")


def test_it_is_settings_the_loop_takes_and_crosses_to_new_processes_as_they_are() -> None:
    from deepsharp.core import FitOptions
    from deepsharp.core.training.distribution import Distribution, Spread

    config = DataParallel(reduction="fast")
    assert isinstance(config, Spread) and not isinstance(config, Distribution)
    assert FitOptions(seed=1, distributed=config).distributed is config
    assert vars(config) == {"backend": "auto", "reduction": "fast", "timeout": 300.0}
    assert pickle.loads(pickle.dumps(config)) == config


def test_rank_and_world_size_come_from_the_job_s_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in (("RANK", "1"), ("WORLD_SIZE", "3"), ("LOCAL_RANK", "0")):
        monkeypatch.setenv(name, value)
    config = DataParallel()
    assert (config.rank, config.world_size, config.local_rank, config.writes) == (1, 3, 0, False)


def test_rank_outside_any_job_says_how_to_start_one(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(DistributedError, match="start the script with torchrun"):
        assert DataParallel().writes is not None


def test_fit_outside_any_job_says_how_to_start_one(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    from deepsharp.core import FitOptions
    from deepsharp.core.samples import titanic

    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(DistributedError, match="start the script with torchrun"):
        titanic.run(distributed=DataParallel(), progress=False)
    assert FitOptions  # the options took DataParallel; joining is what was refused


@pytest.mark.parametrize(
    ("rank", "world", "said"),
    [
        ("2", "2", "RANK='2', which must be a whole number from 0 to 1"),
        ("-1", "2", "RANK='-1', which must be a whole number from 0 to 1"),
        ("abc", "2", "RANK='abc', which must be a whole number from 0 to 1"),
        ("0", "two", "WORLD_SIZE='two', which must be a whole number from 1"),
    ],
)
def test_a_job_environment_out_of_place_is_refused_before_joining(
    monkeypatch: pytest.MonkeyPatch, rank: str, world: str, said: str
) -> None:
    """Failed before: a rank outside the world waited out the timeout and ended in torch's
    DistNetworkError ('client socket has timed out'); RANK=abc in int()'s raw ValueError."""
    pytest.importorskip("torch")
    from deepsharp.core.samples import titanic

    for name, value in (("RANK", rank), ("WORLD_SIZE", world), ("MASTER_ADDR", "127.0.0.1")):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MASTER_PORT", "29533")
    with pytest.raises(DistributedError, match=said):
        titanic.run(distributed=DataParallel(timeout=5), progress=False)
    with pytest.raises(DistributedError, match=said):
        assert DataParallel().rank is not None


def test_a_port_out_of_place_is_said_as_a_port_and_launch_s_settings_as_launch_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before (trial DS): MASTER_PORT=abc ended with advice about RANK, and launch(...,
    timeout=-1) named DataParallel's timeout."""
    pytest.importorskip("torch")
    from deepsharp.distributed import launch
    from deepsharp.distributed.job import environment_place

    for name, value in (("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "abc")):
        monkeypatch.setenv(name, value)
    with pytest.raises(DistributedError) as caught:
        environment_place()
    said = str(caught.value)
    assert "MASTER_PORT='abc'" in said and "the port rank 0 listens on" in said
    assert "RANK from 0" not in said
    with pytest.raises(ValueError, match=r"^launch's timeout is a number of seconds above 0"):
        launch(print, 2, timeout=-1)
