"""Habits users bring from PyTorch, Keras or pandas that would train a network wrongly without
a word: each refused, saying what to do (trial X3)."""

from __future__ import annotations

import numpy as np
import pytest

from deepsharp.core import (
    Adam,
    BinaryCrossEntropy,
    ConfigurationError,
    CrossEntropy,
    DataError,
    Dense,
    FitOptions,
    Network,
    Relu,
    Trainer,
    fit,
)


def _rows() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((60, 4)).astype(np.float32)
    return x, (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0)


def test_a_frame_that_holds_the_target_column_given_as_targets_is_refused() -> None:
    # Trial X3: fit(None, (frame, frame["label"])) trained on the answer, test accuracy 1.0.
    pandas = pytest.importorskip("pandas")
    x, y = _rows()
    frame = pandas.DataFrame(x, columns=["a", "b", "c", "d"])
    frame["label"] = y
    network = Network([Dense(8), Relu(), Dense(3)])
    options = FitOptions(seed=0, epochs=1, progress=False)
    said = r"hold the target column 'label'.*frame.drop\(columns=\['label'\]\), frame\['label'\]"
    with pytest.raises(DataError, match=said):
        fit(None, (frame, frame["label"]), network, CrossEntropy(), Adam(0.01), options)
    run = fit(None, (frame.drop(columns=["label"]), frame["label"]), network, CrossEntropy(),
              Adam(0.01), options)  # fmt: skip
    assert run.report.epochs_run == 1


@pytest.mark.parametrize(
    ("loss", "outputs", "link"),
    [
        (CrossEntropy(from_logits=False), 3, "softmax"),
        (BinaryCrossEntropy(from_logits=False), 1, "sigmoid"),
    ],
)
def test_a_loss_of_probabilities_on_a_network_ending_in_weights_alone_is_refused(
    loss: CrossEntropy | BinaryCrossEntropy, outputs: int, link: str
) -> None:
    # Trial X3: from_logits=False on a network ending in a plain Dense trained on its outputs
    # as probabilities (clipped, logged), and served "probabilities" below 0.
    said = rf"from_logits=False\) takes probabilities, and the network ends in layer 'dense_1'.*activation='{link}'"
    with pytest.raises(ConfigurationError, match=said):
        Trainer(Network([Dense(8), Relu(), Dense(outputs)], inputs=4), loss, Adam(0.01))
    with Trainer(
        Network([Dense(8), Relu(), Dense(outputs, activation=link)], inputs=4), loss, Adam(0.01)
    ) as trainer:
        assert trainer.network.ends_in == link


def test_a_layer_set_not_to_train_is_refused() -> None:
    # Trial X3: layer.trainable = False (Keras's) was taken and ignored: the "frozen" slots
    # trained on.
    layer = Dense(8)
    layer.trainable = True
    with pytest.raises(ConfigurationError, match="trainable = False: deepsharp's layers have no"):
        layer.trainable = False
    assert layer.trainable is True


def test_a_run_shown_as_a_cell_s_last_value_is_a_line_however_many_epochs() -> None:
    # Trial NB: repr(Run) and repr(Report) (what a notebook shows of fit(...) as a cell's last
    # line) held every epoch's record: 25 KB after 200 epochs.
    x, y = _rows()
    run = fit(None, (x, y), Network([Dense(3)]), CrossEntropy(), Adam(0.01),
              FitOptions(seed=0, epochs=60, patience=100, progress=False))  # fmt: skip
    assert repr(run.report).startswith("Report(60 epochs on light")
    assert "best epoch" in repr(run.report) and "accuracy=" in repr(run.report)
    assert repr(run).startswith("Run(TrainedNetwork(Network([Dense(units=3)]")
    assert len(repr(run)) < 400


@pytest.mark.parametrize("name", ["cuda", "gpu", "CUDA"])
def test_a_card_named_as_pytorch_names_it_is_offered_the_torch_engine_s_spec(name: str) -> None:
    # Trial X3: engine="cuda" said no engine of that name, with no "did you mean".
    from deepsharp.core import EngineUnavailableError
    from deepsharp.core.engine import make_engine

    with pytest.raises(EngineUnavailableError, match="did you mean 'torch:cuda:0'"):
        make_engine(name)


def test_the_summary_of_a_network_not_built_says_how_to_build_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Trial X3: "?" shapes and 0 slots, with no word of why.
    Network([Dense(8), Relu(), Dense(1)]).summary()
    assert "not built yet" in capsys.readouterr().out
    Network([Dense(8), Relu(), Dense(1)], inputs=4).summary()
    assert "not built yet" not in capsys.readouterr().out


def test_a_target_label_known_in_another_case_alone_is_said_so() -> None:
    # Trial P3: 'Yes', 'yes' and 'YES' were three classes, and a row of 'yes' outside the
    # training rows was refused naming the known values, not why.
    from deepsharp.core import Pipeline

    learned = Pipeline().number("x").target("y").learn([{"x": 1, "y": "Yes"}, {"x": 2, "y": "no"}])
    with pytest.raises(DataError, match=r"'Yes' differ from it in case alone"):
        learned.targets([{"x": 1, "y": "yes"}])


def test_a_network_trained_so_before_still_serves_with_its_loss_of_probabilities() -> None:
    # Trial RV: the refusal ran at predict and evaluate too: a file saved with CrossEntropy(
    # from_logits=False) on a plain Dense end loaded and could serve nothing.
    from deepsharp.core.random import Generator

    network = Network([Dense(8), Relu(), Dense(3)], inputs=4)
    network.initialize(Generator(0))
    rows = np.ones((2, 4), np.float32)
    assert network.predict(rows, CrossEntropy(from_logits=False)).shape == (2, 3)


def test_a_frame_served_to_a_network_trained_on_an_array_is_read_by_place_and_warned_of() -> None:
    # Trial X3: a frame of the columns in another order gave other predictions, silently (as
    # scikit-learn does, it is said: the array taught no columns' names).
    pandas = pytest.importorskip("pandas")
    from deepsharp.core import DeepSharpWarning

    x, y = _rows()
    options = FitOptions(seed=0, epochs=1, progress=False)
    run = fit(None, (x, y), Network([Dense(3)]), CrossEntropy(), Adam(0.01), options)
    frame = pandas.DataFrame(x, columns=["a", "b", "c", "d"])
    with pytest.warns(DeepSharpWarning, match="read by their places"):
        assert np.array_equal(run.trained.predict(frame), run.trained.predict(x))
    named = fit(None, (frame, y), Network([Dense(3)]), CrossEntropy(), Adam(0.01), options)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeepSharpWarning)
        named.trained.predict(frame[["d", "c", "b", "a"]])  # read by name


def test_pytorch_s_ignore_index_in_targets_is_said_so() -> None:
    # Trial SQ: -100 at padded positions (PyTorch's ignore_index) was refused as any class out
    # of range, the advice to end the network otherwise.
    with pytest.raises(Exception, match="-100 is PyTorch's ignore_index"):
        CrossEntropy().targets(np.array([[1, 2, -100], [0, -100, -100]]), 9)


def test_a_loss_of_probabilities_on_weights_then_a_dropout_is_refused_too() -> None:
    # Trial S2: a Dropout after the plain Dense passed the check (it looked at the last layer
    # alone), and served "probabilities" from -55 to 71.
    from deepsharp.core import Dropout, Flatten

    with pytest.raises(ConfigurationError, match="ends in layer 'dense_1'"):
        Trainer(Network([Dense(8), Relu(), Dense(3), Dropout(0.1)], inputs=4),
                CrossEntropy(from_logits=False), Adam(0.01))  # fmt: skip
    with pytest.raises(ConfigurationError, match="ends in layer 'dense_1'"):
        Trainer(Network([Dense(8), Relu(), Dense(1), Flatten(), Dropout(0.2)], inputs=4),
                BinaryCrossEntropy(from_logits=False), Adam(0.01))  # fmt: skip
    Trainer(Network([Dense(8), Relu(), Dense(3, activation="softmax"), Dropout(0.1)], inputs=4),
            CrossEntropy(from_logits=False), Adam(0.01)).close()  # fmt: skip
