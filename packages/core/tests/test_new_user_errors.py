"""The errors a new user meets first: each says what was wrong, where (the user's own row, the
argument, the file) and what to do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deepsharp.core import (
    SGD,
    BinaryCrossEntropy,
    Checkpoint,
    DataError,
    Dense,
    FileFormatError,
    FitOptions,
    Network,
    Pipeline,
    Relu,
    StateError,
    TrainedNetwork,
    Trainer,
)
from deepsharp.core import fit as fit_run


def _network() -> Network:
    return Network([Dense(4), Relu(), Dense(1)])


def _rows(bad: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [{"a": str(i), "t": str(i % 2)} for i in range(40)]
    rows[bad]["a"] = "oops"
    return rows


def _fit_rows(rows: Any) -> None:
    fit_run(
        Pipeline().number("a").target("t"),
        rows,
        _network(),
        BinaryCrossEntropy(),
        SGD(0.1),
        FitOptions(seed=1, epochs=1),
    )


@pytest.mark.parametrize("bad", [0, 7, 25, 39])
def test_a_bad_value_in_a_list_of_rows_names_the_user_s_row_not_its_shuffled_place(
    bad: int,
) -> None:
    with pytest.raises(DataError, match=rf"^row {bad + 1} \(counting from 1\), column 'a'"):
        _fit_rows(_rows(bad))


@pytest.mark.parametrize("bad", [0, 7, 25, 39])
def test_a_bad_value_in_a_dataframe_names_its_index_label(bad: int) -> None:
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame(_rows(bad), index=range(100, 140))
    with pytest.raises(
        DataError,
        match=rf"^row {bad + 1} \(counting from 1; DataFrame index {bad + 100}\), column 'a'",
    ):
        _fit_rows(frame)


def test_a_closed_trainer_refuses_to_step_naming_itself_and_the_way_on() -> None:
    x = np.linspace(-1, 1, 24, dtype=np.float32).reshape(8, 3)
    y = (x[:, :1] > 0).astype(np.float32)
    trainer = Trainer(_network(), BinaryCrossEntropy(), SGD(0.1))
    trainer.step(x, y)
    trainer.close()
    for attempt in (lambda: trainer.step(x, y), lambda: trainer.evaluate(x, y)):
        with pytest.raises(StateError, match=r"this Trainer of .* is closed.*make a new Trainer"):
            attempt()
    trainer.close()  # closing again does nothing
    with Trainer(_network(), BinaryCrossEntropy(), SGD(0.1)) as trainer:
        trainer.step(x, y)
    with pytest.raises(StateError, match="is closed"):
        trainer.step(x, y)


def test_a_checkpoint_dir_without_checkpoint_every_writes_every_epoch(tmp_path: Path) -> None:
    options = FitOptions(seed=1, epochs=2, checkpoint_dir=tmp_path, checkpoint_keep=5)
    assert options.checkpoint_every == 1
    x = np.linspace(-1, 1, 60, dtype=np.float32).reshape(20, 3)
    fit_run(
        None,
        (x, (x[:, :1] > 0).astype(np.float32)),
        _network(),
        BinaryCrossEntropy(),
        SGD(0.1),
        options,
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        Checkpoint.path_in(tmp_path, epoch).name for epoch in (1, 2)
    ]
    assert FitOptions(seed=1).checkpoint_every == 0  # no folder, no checkpoints


def _arrays() -> tuple[np.ndarray, np.ndarray]:
    x = np.linspace(-1, 1, 60, dtype=np.float32).reshape(20, 3)
    return x, (x[:, :1] > 0).astype(np.float32)


@pytest.fixture(scope="module")
def trained() -> TrainedNetwork:
    return fit_run(
        None, _arrays(), _network(), BinaryCrossEntropy(), SGD(0.1), FitOptions(seed=1, epochs=1)
    ).trained


def test_loading_a_file_of_the_other_kind_says_which_load_reads_it(
    trained: TrainedNetwork, tmp_path: Path
) -> None:
    trained.save(tmp_path / "trained.safetensors")
    trained.network.save(tmp_path / "network.safetensors")
    with pytest.raises(FileFormatError, match=r"load it with TrainedNetwork\.load\(path\)"):
        Network.load(tmp_path / "trained.safetensors")
    with pytest.raises(FileFormatError, match=r"load it with Network\.load\(path\)"):
        TrainedNetwork.load(tmp_path / "network.safetensors")


def test_saving_into_a_missing_folder_names_that_folder_not_a_temporary_file(
    trained: TrainedNetwork, tmp_path: Path
) -> None:
    folder = tmp_path / "not" / "made"
    for save in (trained.save, trained.network.save):
        with pytest.raises(FileNotFoundError) as refused:
            save(folder / "model.safetensors")
        message = str(refused.value)
        assert f"there is no folder {str(folder)!r}" in message
        assert ".tmp" not in message and "make it first" in message
