"""`deepsharp compare`: a trained file, a checkpoint or a network file compared on its rows, what
the command needs said in one line, and what it refuses."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from core_helpers import fit_titanic

from deepsharp.core import Dense, FitOptions, Network, Relu
from deepsharp.core.cli import main
from deepsharp.core.samples import data_path

ROWS = str(data_path("titanic.csv"))


@pytest.mark.once
def test_the_command_compares_a_trained_file_on_its_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = tmp_path / "titanic.safetensors"
    assert main(["sample", "titanic", "--save", str(saved), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["compare", str(saved), ROWS, "--engines", "light", "light:float32"]) == 0
    said = capsys.readouterr().out
    assert "a trained file; a fresh Adam(learning_rate=0.001" in said
    assert "the batch: the first 32 rows of" in said
    assert said.rstrip().splitlines()[-1].startswith("every operation within its bound")
    assert (
        main(["compare", str(saved), ROWS, "--engines", "light", "compare_helpers:drifting"]) == 1
    )
    said = capsys.readouterr().out
    assert "first past its bound: matmul_bias in layer 'dense' (forward, affine)" in said


@pytest.mark.once
def test_the_command_compares_a_checkpoint_and_a_network_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "checkpoints"
    run = fit_titanic(FitOptions(seed=3, epochs=2, progress=False, checkpoint_dir=folder))
    trained, network = tmp_path / "trained.safetensors", tmp_path / "network.safetensors"
    run.trained.save(trained)
    run.trained.network.save(network)
    engines = ["--engines", "light", "light:float32"]
    assert main(["compare", str(folder), ROWS, "--pipeline", str(trained), *engines]) == 0
    said = capsys.readouterr().out
    assert "a checkpoint of epoch 2; its Adam(learning_rate=0.001" in said
    assert "from its memory (step 41)" in said
    assert main(["compare", str(network), ROWS, "--pipeline", str(trained), *engines]) == 0
    numbers = tmp_path / "numbers.csv"
    rng = np.random.default_rng(0)
    lines = [",".join(f"f{i}" for i in range(15)) + ",y"]
    lines += [",".join(f"{v:.4f}" for v in rng.normal(size=15)) + f",{i % 2}" for i in range(40)]
    numbers.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert (
        main(["compare", str(network), str(numbers), "--target", "y", "--rows", "8", *engines]) == 0
    )
    said = capsys.readouterr().out
    assert "the loss: BinaryCrossEntropy(), for the network's outputs" in said
    assert "the first 8 rows" in said


def test_the_command_says_what_it_needs_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    network = tmp_path / "network.safetensors"
    fit_titanic(FitOptions(seed=0, epochs=1, progress=False)).trained.network.save(network)
    capsys.readouterr()
    assert main(["compare", str(network), ROWS, "--engines", "light", "light:float32"]) == 1
    said = capsys.readouterr().err
    assert "holds no pipeline or loss: give --pipeline TRAINED" in said and said.count("\n") == 1
    assert main(["compare", ROWS, ROWS, "--engines", "light", "light:float32"]) == 1
    assert main(["compare", str(network), ROWS, "--engines", "light", "light"]) == 1
    assert "one engine named twice" in capsys.readouterr().err
    # Before: --target (or --pipeline) with a trained file was ignored, a missing column too.
    trained = tmp_path / "trained.safetensors"
    fit_titanic(FitOptions(seed=0, epochs=1, progress=False)).trained.save(trained)
    engines = ["--engines", "light", "light:float32"]
    assert main(["compare", str(trained), ROWS, "--target", "NoSuchColumn", *engines]) == 1
    said = capsys.readouterr().err
    assert "is a trained file: its own pipeline reads the rows" in said and "--target is" in said
    both = ["--pipeline", str(trained), "--target", "Survived"]
    assert main(["compare", str(network), ROWS, *both, *engines]) == 1
    assert "--pipeline and --target each say how the rows are read" in capsys.readouterr().err


def test_the_command_refuses_a_file_of_no_rows_and_targets_that_are_not_classes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Failed before (trial CP): a header and no rows was a StopIteration traceback (with
    --pipeline and with --target), and a target of 1.5 for a network of classes was read as
    class 1, the step compared on targets the file does not hold."""
    from deepsharp.core.random import Generator

    trained = tmp_path / "trained.safetensors"
    fit_titanic(FitOptions(seed=0, epochs=1, progress=False)).trained.save(trained)
    header = tmp_path / "header.csv"
    header.write_text(Path(ROWS).read_text().splitlines()[0] + "\n")
    engines = ["--engines", "light", "light:float32"]
    assert main(["compare", str(trained), str(header), *engines]) == 1
    assert "header.csv holds a header and no rows" in capsys.readouterr().err
    network = tmp_path / "classes.safetensors"
    classes = Network([Dense(8), Relu(), Dense(3)], inputs=2)
    classes.initialize(Generator(0))
    classes.save(network)
    (tmp_path / "none.csv").write_text("a,b,y\n")
    assert (
        main(["compare", str(network), str(tmp_path / "none.csv"), "--target", "y", *engines]) == 1
    )
    assert "none.csv holds a header and no rows" in capsys.readouterr().err
    (tmp_path / "halves.csv").write_text("a,b,y\n0.1,0.2,0\n0.3,0.4,1.5\n0.5,0.6,2\n")
    assert (
        main(["compare", str(network), str(tmp_path / "halves.csv"), "--target", "y", *engines])
        == 1
    )
    said = capsys.readouterr().err
    assert "row 2 (counting from 1), column 'y': 1.5 is not a class" in said
    assert "one of 0..2" in said


def test_a_field_that_is_not_a_number_is_named_by_its_row_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Failed before (trial O): an empty target field was blamed on "every other column", in
    Python's words (NoneType), no row or column named; a network of ids was given float32
    values and told to call ids.astype('int64'), which the command line cannot."""
    from deepsharp.core import LSTM, Embedding, Input
    from deepsharp.core.random import Generator

    engines = ["--engines", "light", "light:float32"]
    network = tmp_path / "numbers.safetensors"
    numbers = Network([Dense(4), Relu(), Dense(1)], inputs=2)
    numbers.initialize(Generator(0))
    numbers.save(network)
    (tmp_path / "empty.csv").write_text("a,b,y\n0.1,0.2,1\n0.3,0.4,\n")
    assert main(["compare", str(network), str(tmp_path / "empty.csv"), "--target", "y",
                 *engines]) == 1  # fmt: skip
    said = capsys.readouterr().err
    assert "row 2 (counting from 1), column 'y': an empty field, not a number" in said, said
    (tmp_path / "text.csv").write_text("a,b,y\n0.1,0.2,1\n0.3,x,2\n")
    assert main(["compare", str(network), str(tmp_path / "text.csv"), "--target", "y",
                 *engines]) == 1  # fmt: skip
    said = capsys.readouterr().err
    assert "row 2 (counting from 1), column 'b': 'x', not a number" in said, said
    ids = Input(3, dtype="int64", name="ids")
    reader = Network(inputs=ids, outputs=Dense(1)(LSTM(2)(Embedding(10, 2)(ids))))
    reader.initialize(Generator(0))
    reader.save(tmp_path / "ids.safetensors")
    (tmp_path / "ids.csv").write_text("a,b,c,y\n1,2,3,0.5\n4,5,0,-0.5\n")
    assert main(["compare", str(tmp_path / "ids.safetensors"), str(tmp_path / "ids.csv"),
                 "--target", "y", *engines]) == 0  # fmt: skip
    (tmp_path / "half.csv").write_text("a,b,c,y\n1,2.5,3,0.5\n")
    assert main(["compare", str(tmp_path / "ids.safetensors"), str(tmp_path / "half.csv"),
                 "--target", "y", *engines]) == 1  # fmt: skip
    assert "column 'b': '2.5', not an id (a whole number)" in capsys.readouterr().err


def test_the_command_on_a_next_token_model_says_to_compare_in_python(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: it said to declare the pipeline's target, which neither fits a next-token model
    (its targets are its text shifted) nor can be done from the command line."""
    from deepsharp.core import CrossEntropy, Embedding, Input, Network, Pipeline, TrainedNetwork
    from deepsharp.core.random import Generator

    pipeline = Pipeline().text("context", tokens="characters", length=8, vocabulary=12)
    pipeline.learn([{"context": "to be or not to be"}])
    ids = Input(8, dtype="int64", name="context")
    network = Network(inputs=ids, outputs=Dense(12)(Embedding(12, 4)(ids)))
    network.initialize(Generator(0))
    TrainedNetwork(network, CrossEntropy(), pipeline).save(tmp_path / "writer.safetensors")
    (tmp_path / "lines.csv").write_text("context\nto be\nor not\n")
    argv = ["compare", str(tmp_path / "writer.safetensors"), str(tmp_path / "lines.csv")]
    assert main([*argv, "--engines", "light", "light:float32"]) == 1
    said = capsys.readouterr().err
    assert "a next-token model's targets are its text shifted by one token" in said
    assert "deepsharp.core.compare(network, loss, (ids[:, :-1], ids[:, 1:])" in said
