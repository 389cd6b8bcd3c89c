"""The errors a new user meets first: each says what was wrong, where (the user's own row, the
argument, the file) and what to do."""

from __future__ import annotations

import datetime
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deepsharp.core import (
    SGD,
    Adam,
    BinaryCrossEntropy,
    Checkpoint,
    ConfigurationError,
    Conv2D,
    CrossEntropy,
    DataError,
    DeepSharpWarning,
    Dense,
    EngineUnavailableError,
    FileFormatError,
    FitOptions,
    Flatten,
    MeanSquaredError,
    Network,
    Pipeline,
    Relu,
    Run,
    ShapeError,
    StateError,
    StepDecay,
    TrainedNetwork,
    Trainer,
    TrainingDivergedError,
    scan_csv,
)
from deepsharp.core import fit as fit_run
from deepsharp.core.cli import main
from deepsharp.core.engine import available_engines, make_engine
from deepsharp.engines.light import LightEngine


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


@pytest.mark.parametrize("dtype", ["Int64", "string"])
def test_a_bad_value_in_a_dataframe_whose_index_holds_pandas_na_is_named(dtype: str) -> None:
    """Failed before (trial AE): an index of nullable numbers or text holding NA (set_index on
    such a column) turned the row's DataError into pandas' 'boolean value of NA is ambiguous'."""
    pandas = pytest.importorskip("pandas")
    pipeline = Pipeline().number("a").learn([{"a": 1.0}, {"a": 2.0}])
    index = pandas.Index(pandas.array([5, None, 7] if dtype == "Int64" else ["x", None, "z"]))
    frame = pandas.DataFrame({"a": [1.0, "oops", 3.0]}, index=index.astype(dtype))
    with pytest.raises(DataError, match=r"^row 2 \(counting from 1; DataFrame index <NA>\)"):
        pipeline.features(frame)


def test_one_row_of_a_dataframe_as_a_series_is_refused_saying_how_to_give_it() -> None:
    """Before (trial AE): 'row 1 (counting from 1) is of type float, not a mapping', of a
    DataFrame's row given as the Series df.iloc[0]."""
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0]})
    pipeline = Pipeline().number("a").number("b").learn(frame)
    with pytest.raises(DataError, match=r"not a pandas Series: .* df\.iloc\[\[i\]\]"):
        pipeline.features(frame.iloc[0])
    assert pipeline.features(frame.iloc[[0]]).tolist() == pipeline.features(frame)[:1].tolist()


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


def _fit_arrays(data: Any, loss: Any = None, network: Network | None = None, **options: Any) -> Run:
    return fit_run(
        None,
        data,
        network or _network(),
        BinaryCrossEntropy() if loss is None else loss,
        SGD(0.1),
        FitOptions(seed=1, epochs=1, **options),
    )


def test_string_labels_with_binary_cross_entropy_say_how_to_make_them_numbers() -> None:
    x, y = _arrays()
    labels = np.where(y[:, 0] > 0, "yes", "no")
    with pytest.raises(DataError, match=r"not labels such as 'no', 'yes'.*labels == 'yes'"):
        _fit_arrays((x, labels))
    with pytest.raises(DataError, match=r"not labels such as .*kind='classes'"):
        _fit_arrays((x, labels), CrossEntropy(), Network([Dense(2)]))


def test_a_loss_or_optimizer_class_instead_of_an_instance_says_to_call_it() -> None:
    x, y = _arrays()
    with pytest.raises(ConfigurationError, match=r"the loss is the class BinaryCrossEntropy.*\(\)"):
        _fit_arrays((x, y), BinaryCrossEntropy)
    with pytest.raises(ConfigurationError, match=r"Trainer: the optimizer is the class SGD"):
        Trainer(_network(), BinaryCrossEntropy(), SGD)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("engine", "says"),
    [
        (5, r"engine is a spec string such as 'light'.*not 5 \(int\)"),
        ("gpu", r"engine 'gpu': no engine named 'gpu' is installed"),
        ("ligth:float32", r"did you mean 'light'\?"),
    ],
)
def test_fit_options_check_the_engine_where_they_are_made(engine: Any, says: str) -> None:
    with pytest.raises(EngineUnavailableError, match=says):
        FitOptions(seed=1, engine=engine)


def test_fit_options_take_every_engine_spec_and_engine_without_making_one() -> None:
    # Every installed engine's spec (the test engine where its package is installed).
    installed = [f"{name}:cpu" if name == "torch" else name for name in available_engines()]
    for engine in (
        None,
        "light",
        "light:float32",
        *installed,
        "deepsharp.engines.light:LightEngine",
    ):
        assert FitOptions(seed=1, engine=engine).engine == engine
    engine = LightEngine()
    assert FitOptions(seed=1, engine=engine).engine is engine


def test_arguments_the_wrong_way_round_are_said_by_shape_not_dumped() -> None:
    x, y = _arrays()
    with pytest.raises(DataError, match=r"x has shape \(20,\) and y \(20, 3\).*wrong way round"):
        _fit_arrays((y[:, 0], x))
    with pytest.raises(TypeError) as refused:
        fit_run(x, y, _network(), BinaryCrossEntropy(), SGD(0.1), FitOptions(seed=1))  # type: ignore[arg-type]
    message = str(refused.value)
    assert "ndarray of shape (20, 3) and dtype float32" in message
    assert "fit(None, (x, y), " in message and len(message) < 300


def test_one_row_without_its_batch_axis_is_told_to_add_it(trained: TrainedNetwork) -> None:
    x, _ = _arrays()
    with pytest.raises(DataError, match=r"not of shape \(3,\): a single row .* x\[None\]"):
        trained.predict(x[0])
    assert trained.predict(x[0][None]).shape == (1, 1)


def test_channels_last_images_are_told_to_transpose() -> None:
    images = np.zeros((8, 6, 6, 1), np.float32)
    y = (np.arange(8) % 2).astype(np.float32)
    network = Network([Conv2D(2, 3), Flatten(), Dense(1)], inputs=(1, 6, 6))
    with pytest.raises(ShapeError, match=r"channels-last .* x\.transpose\(0, 3, 1, 2\)"):
        _fit_arrays((images, y), network=network)
    with pytest.warns(DeepSharpWarning, match=r"channels-last .* x\.transpose\(0, 3, 1, 2\)"):
        Network([Conv2D(2, 3), Flatten(), Dense(1)]).build((28, 28, 3))


def test_a_diverging_run_says_where_and_what_to_try_without_numpy_warnings() -> None:
    x, y = _arrays()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a NumPy RuntimeWarning would fail the run here
        with pytest.raises(TrainingDivergedError) as refused:
            fit_run(
                None,
                (x * 1e3, y * 1e3),
                _network(),
                MeanSquaredError(),
                SGD(10.0),
                FitOptions(seed=1, epochs=5, batch_size=4),
            )
    message = str(refused.value)
    assert re.search(r"loss turned (nan|inf|-inf) at epoch \d+", message)
    assert "try a smaller learning rate than SGD's 10 (say 1)" in message


@pytest.mark.parametrize(
    ("scale_x", "scale_y", "engine", "said"),
    [
        (1.0, 1e22, "light", r"its features or its targets \(scale them\), or, with a layer"),
        (1e5, 1.0, "light:mixed_float16", r"beyond float16's range \(65,504\) overflows"),
    ],
)
def test_a_run_diverging_before_any_update_does_not_blame_the_learning_rate(
    scale_x: float, scale_y: float, engine: str, said: str
) -> None:
    x, y = _arrays()
    with pytest.raises(TrainingDivergedError) as refused, np.errstate(all="ignore"):
        fit_run(
            None,
            (x * scale_x, y * scale_y),
            _network(),
            MeanSquaredError(),
            SGD(0.01),
            FitOptions(seed=1, epochs=2, batch_size=4, engine=engine),
        )
    message = str(refused.value)
    assert "epoch 1, step 1, before any update" in message and "not the learning rate" in message
    assert re.search(said, message) and "smaller learning rate" not in message


def test_a_run_diverging_at_float32_s_edge_blames_the_values_not_the_learning_rate() -> None:
    """Failed before (trial AB): targets near 1e19 (a squared error near 1e38) diverge whatever
    the learning rate, and the error said to try a smaller one (Adam's 1e-12: 'say 1e-13') and
    to look at the features, never at the targets."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20, 3)).astype(np.float32)
    y = np.full(20, 1e19) + np.arange(20) * 1e17
    with pytest.raises(TrainingDivergedError) as refused, np.errstate(all="ignore"):
        fit_run(None, (x, y), Network([Dense(1)]), MeanSquaredError(), Adam(1e-12),
                FitOptions(seed=0, epochs=2))  # fmt: skip
    message = str(refused.value)
    assert re.search(r"The loss was already 1\.\d+e\+38 at epoch 1, near float32's", message)
    assert "scale the targets" in message and "smaller learning rate" not in message


def test_predict_on_the_command_line_with_a_network_trained_on_arrays_says_what_to_do(
    trained: TrainedNetwork, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = tmp_path / "arrays.safetensors"
    trained.save(saved)
    rows = tmp_path / "rows.csv"
    rows.write_text("a,b,c\n1,2,3\n")
    assert main(["predict", str(saved), str(rows)]) == 1
    said = capsys.readouterr().err
    assert f"{saved} was trained on arrays" in said
    assert "the command line cannot read" in said and str(rows) in said
    assert "TrainedNetwork.load(" in said and ".predict(x)" in said
    assert "Part" not in said  # no internal names
    with pytest.raises(DataError, match=r"trained on arrays .*predict\(x\)"):
        list(trained.predict_parts(scan_csv(rows)))


def test_the_command_line_calls_what_the_network_gives_predictions(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for command in (["--help"], ["predict", "--help"]):
        with pytest.raises(SystemExit):
            main(command)
        said = capsys.readouterr().out
        assert "answer" not in said.lower()
    flat = " ".join(said.split())  # argparse wraps its lines
    assert "the predictions as CSV" in flat and "write the predictions to FILE" in flat


def _mistakes() -> list[tuple[Any, type, str]]:
    from deepsharp.core import CosineDecay, ReduceOnPlateau

    x, y = _arrays()

    def callback_class() -> None:
        fit_run(None, (x, y), _network(), MeanSquaredError(), SGD(0.1), FitOptions(seed=1),
                callbacks=[ReduceOnPlateau])  # fmt: skip

    def misspelt_slot() -> None:
        network = Network([Dense(2)], inputs=3)
        network.set_slots({"dense.weights": np.ones((3, 2)), "dense.bais": np.ones(2)})

    def one_output_classes() -> None:
        classes = (x[:, 0] > 0).astype(np.int64)
        fit_run(None, (x, classes), Network([Dense(1)]), CrossEntropy(), SGD(0.1),
                FitOptions(seed=1))  # fmt: skip

    def one_output_seven_classes() -> None:  # it advised two classes' ways (trial CL)
        classes = np.arange(len(x)) % 7
        fit_run(None, (x, classes), Network([Dense(1)]), CrossEntropy(), SGD(0.1),
                FitOptions(seed=1))  # fmt: skip

    def several_outputs() -> None:
        from deepsharp.core import Input

        a = Input(3)
        Network(inputs=a, outputs=[Dense(1)(a), Dense(2)(a)])

    def channels_last() -> None:
        images, classes = np.zeros((20, 8, 8, 1), np.float32), np.arange(20) % 2
        network = Network([Conv2D(2, 3), Flatten(), Dense(2)])
        fit_run(None, (images, classes), network, CrossEntropy(), SGD(0.1), FitOptions(seed=1))

    def complex_features() -> None:
        fit_run(None, (x.astype(np.complex64) * 1j, y), _network(), MeanSquaredError(), SGD(0.1),
                FitOptions(seed=1))  # fmt: skip

    return [
        (complex_features, DataError, r"^the features are complex numbers \(complex64\).*x\.real, x\.imag"),
        (several_outputs, ConfigurationError, r"one output, and outputs= holds 2: .*Concatenate"),
        (channels_last, ShapeError, r"channels-last images .* x\.transpose\(0, 3, 1, 2\)"),
        (one_output_classes, ConfigurationError, r"one output a row, and CrossEntropy .* BinaryCrossEntropy\(\)"),
        (one_output_seven_classes, ConfigurationError, r"one output a row, and the targets hold 7 classes: .*Dense\(7\)"),
        (lambda: Network([Dense(2)], inputs=(None, 5)), ValueError, r"without the batch axis \(\(5,\)\)"),
        (lambda: Network([Dense(3), Relu]), TypeError, r"the class Relu, not a layer: .* Relu\(\.\.\.\)"),
        (lambda: Dense(4, activation=Relu()), ValueError, r"not the layer Relu: give activation='relu'"),
        (callback_class, TypeError, r"the class ReduceOnPlateau, not a callback"),
        (misspelt_slot, ShapeError, r"slots \['dense\.bais'\] are not the network's"),
        (lambda: CosineDecay(0.01, 10).rate(-5), ValueError, "a whole number of 0 or more, not -5"),
        (
            lambda: BinaryCrossEntropy().targets(np.array([[0.9], [0.1]]), 1),
            DataError,
            r"soft targets .*label_smoothing=",
        ),
    ]  # fmt: skip


@pytest.mark.parametrize("case", range(12))
def test_a_class_given_for_an_instance_and_other_slips_say_what_to_write(case: int) -> None:
    made, error, said = _mistakes()[case]
    with pytest.raises(error, match=said):
        made()


def test_an_array_pipeline_refuses_ids_beyond_int64_s_range_naming_them() -> None:
    """Failed before: a trained network's pipeline of arrays wrapped 2**63 (uint64) to
    -9223372036854775808 and the network then named that id, which the user never gave."""
    from deepsharp.core.data.features import array_features

    with pytest.raises(
        DataError,
        match=r"row 2, feature \[2\] \(each counting from 1\): 9223372036854775808 is beyond int64's range",
    ):
        array_features(np.array([[1, 2], [3, 2**63]], np.uint64))
    assert array_features(np.array([[1, 2**63 - 1]], np.uint64)).tolist() == [[1, 2**63 - 1]]


def test_float16_features_are_checked_without_numpy_s_overflow_warning() -> None:
    """Failed before (trial AB): every fit on clean float16 arrays let out NumPy's
    'overflow encountered in cast' (float32's largest value cast to float16 for the check)."""
    from deepsharp.core.data.features import array_features

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        made = array_features(np.array([[0.5, -2.0], [65504.0, 1.0]], np.float16))
        assert made.dtype == np.float32 and made.tolist() == [[0.5, -2.0], [65504.0, 1.0]]
        with pytest.raises(
            DataError, match=r"row 2, feature \[1\] \(each counting from 1\): inf, beyond"
        ):
            array_features(np.array([[1.0, 2.0], [np.inf, 1.0]], np.float16))
        with pytest.raises(
            DataError, match=r"row 1, feature \[2\] \(each counting from 1\): missing \(nan\)"
        ):
            array_features(np.array([[1.0, np.nan]], np.float16))


def test_dates_and_times_among_arrays_of_features_are_refused_as_a_number_column_refuses_them() -> (
    None
):
    """Failed before (trial AE): a pipeline of no columns (fit(None, (x, y))) took a
    DataFrame's datetime64 or timedelta column, or NumPy's dates, as counts since 1970 in
    float32 and trained on them, where the guide says a date is refused everywhere."""
    pd = pytest.importorskip("pandas")
    from deepsharp.core.data.features import array_features

    frames = [
        pd.DataFrame({"x": [1.0, 2.0], "when": pd.date_range("2020-01-01", periods=2)}),
        pd.DataFrame({"wait": pd.to_timedelta([1, 2], unit="D")}),
        pd.DataFrame({"when": pd.date_range("2020-01-01", periods=2, tz="UTC")}),
    ]
    for frame, name in zip(frames, ["when", "wait", "when"], strict=True):
        with pytest.raises(DataError, match=rf"column '{name}' holds dates or times"):
            array_features(frame)
    with pytest.raises(
        DataError, match=r"row 1, feature \[1\] \(each counting from 1\): np\.datetime64.* a date"
    ):
        array_features(np.array([["2020-01-01"], ["2020-01-02"]], "datetime64[D]"))
    with pytest.raises(
        DataError,
        match=r"row 1, feature \[2\] \(each counting from 1\): datetime\.date\(2020, 1, 1\)",
    ):
        array_features([[1.0, datetime.date(2020, 1, 1)]])


@pytest.mark.parametrize("spec", ["light", "light:float32"])
def test_ids_beyond_int64_s_range_are_refused_by_put_not_wrapped(spec: str) -> None:
    """Failed before: 2**63 + 5 as uint64 was put as -9223372036854775803 (hashed token ids kept
    as uint64 read other rows, silently)."""
    engine = make_engine(spec)
    within = np.array([3, 2**63 - 1], np.uint64)
    assert engine.get(engine.put(within)).tolist() == [3, 2**63 - 1]
    with pytest.raises(DataError, match=r"9223372036854775813 at \[1\] is beyond int64's range"):
        engine.put(np.array([3, 2**63 + 5, 2**64 - 1], np.uint64))


def test_predict_and_export_refuse_what_is_no_loss_as_fit_does(tmp_path: Path) -> None:
    """Failed before: a name or a class without parentheses raised an AttributeError or a
    TypeError from inside the library (export/model.py), where fit says what to write."""
    from deepsharp.core.random import Generator

    network = Network([Dense(3)], inputs=5)
    network.initialize(Generator(0))
    rows = np.ones((2, 5), np.float32)
    with pytest.raises(TypeError, match=r"predict: the loss must be a Loss, not 'mse'"):
        network.predict(rows, "mse")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"write MeanSquaredError\(\.\.\.\)"):
        network.predict(rows, MeanSquaredError)  # type: ignore[arg-type]
    with pytest.raises(
        ConfigurationError, match=r"export_onnx: the loss is the class CrossEntropy"
    ):
        network.export_onnx(tmp_path / "x.onnx", loss=CrossEntropy)  # type: ignore[arg-type]
    assert not (tmp_path / "x.onnx").exists()


def test_an_empty_checkpoint_folder_is_refused() -> None:
    """Failed before: checkpoint_dir='' (os.environ.get('CKPT', '')) wrote, locked and pruned
    checkpoints in the working folder."""
    with pytest.raises(ValueError, match="checkpoint_dir is empty"):
        FitOptions(seed=0, checkpoint_dir="", checkpoint_every=1)


def test_complex_features_and_targets_are_refused_everywhere_fit_refuses_them() -> None:
    """Failed before: Network.predict and Trainer.step took complex features, and every path
    complex targets, keeping the real parts (NumPy's ComplexWarning at most), where fit and
    TrainedNetwork.predict refused complex features."""
    import warnings

    from deepsharp.core import Adam, Trainer
    from deepsharp.core.random import Generator

    network = Network([Dense(2)], inputs=3)
    network.initialize(Generator(0))
    z = np.array([[1 + 5j, 2, 3]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning on the way to the refusal
        with pytest.raises(DataError, match=r"^the features: complex numbers.*x\.real, x\.imag"):
            network.predict(z, MeanSquaredError())
        with pytest.raises(DataError, match=r"^the features: complex numbers"):
            network.predict(list(z), MeanSquaredError())
        with Trainer(network, MeanSquaredError(), Adam(), seed=0) as trainer:
            with pytest.raises(DataError, match=r"complex numbers"):
                trainer.step(z, np.ones((1, 2)))
            with pytest.raises(DataError, match=r"^MeanSquaredError: the targets are complex"):
                trainer.step(np.ones((1, 3)), np.array([[1 + 2j, 1]]))
        with pytest.raises(DataError, match=r"^CrossEntropy: the targets are complex"):
            CrossEntropy().targets(np.array([1 + 0j, 0]), 2)
        with pytest.raises(DataError, match=r"^BinaryCrossEntropy: the targets are complex"):
            BinaryCrossEntropy().targets([[1j], [0]], 1)
        x, y = _arrays()
        with pytest.raises(DataError, match=r"^MeanSquaredError: the targets are complex"):
            fit_run(None, (x, y * 1j), _network(), MeanSquaredError(), SGD(0.1),
                    FitOptions(seed=1))  # fmt: skip


def test_predict_reshapes_only_rows_whose_values_keep_their_order() -> None:
    """Failed before: rows of (3, 2) for a network of (2, 3) rows were reshaped and predicted,
    every row's values moved (a transposed layout read as another); flat rows, and rows that
    differ only by axes of length 1, are still reshaped."""
    from deepsharp.core import Flatten
    from deepsharp.core.random import Generator

    network = Network([Flatten(), Dense(2)], inputs=(2, 3))
    network.initialize(Generator(0))
    rows = np.arange(12, dtype=np.float32).reshape(2, 2, 3)
    expected = network.predict(rows, MeanSquaredError())
    for same in (rows.reshape(2, 6), rows.reshape(2, 1, 2, 3), rows.reshape(2, 2, 1, 3)):
        assert np.array_equal(network.predict(same, MeanSquaredError()), expected)
    with pytest.raises(ShapeError, match=r"\(2, 3\).*\(3, 2\)|\(3, 2\).*\(2, 3\)"):
        network.predict(rows.reshape(2, 3, 2), MeanSquaredError())


_SCRIPT = """
import numpy as np
from deepsharp.core import SGD, Dense, FitOptions, Layer, MeanSquaredError, Network, fit
from deepsharp.core.autodiff import functions as ops

class Doubler(Layer):
    def forward(self, x, slots, context):
        return ops.mul(x, 2.0)

x, y = np.ones((8, 3), np.float32), np.ones((8, 1), np.float32)
for layers in ([Dense(2), Dense(1)], [Dense(2), Doubler(), Dense(1)]):
    network = Network(layers, inputs=3)
    run = fit(None, (x, y), network, MeanSquaredError(), SGD(0.1), FitOptions(seed=0, epochs=1))
    run.trained.save("trained.safetensors")
    network.save("network.safetensors")
"""


def test_saving_a_layer_class_of_the_script_being_run_warns_that_nothing_else_reads_it(
    tmp_path: Path,
) -> None:
    """Before: a file naming '__main__.Doubler' was written silently; no other script, nor the
    command line, could read it."""
    import subprocess
    import sys

    ran = subprocess.run(
        [sys.executable, "-c", _SCRIPT], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr
    warned = [line for line in ran.stderr.splitlines() if "UserWarning" in line]
    assert len(warned) == 2, ran.stderr  # the second network's two files, not the first's
    assert all("names '__main__.Doubler', defined in the script being run" in w for w in warned)
    assert "trained.safetensors" in warned[0] and "network.safetensors" in warned[1]


def test_one_callback_or_hook_not_in_a_list_is_refused_naming_the_list_to_write() -> None:
    """Before: TypeError: Value after * must be an iterable, not ReduceOnPlateau (and 'StepHook'
    object is not iterable), naming neither the argument nor what to write."""
    from deepsharp.core import ReduceOnPlateau, StepHook

    x, y = np.ones((8, 3), np.float32), np.ones((8, 1), np.float32)
    network = Network([Dense(1)], inputs=3)
    options = FitOptions(seed=0, epochs=1, progress=False)
    given: dict[str, Any]
    for given, said in (
        ({"callbacks": ReduceOnPlateau()}, r"callbacks=\[ReduceOnPlateau\(\.\.\.\)\]"),
        ({"hooks": StepHook()}, r"hooks=\[StepHook\(\.\.\.\)\]"),
    ):
        with pytest.raises(TypeError, match=f"fit: .* is a list of them, not .*: give {said}"):
            fit_run(None, (x, y), network, MeanSquaredError(), SGD(0.1), options, **given)
    with pytest.raises(TypeError, match=r"Trainer: hooks is a list of them"):
        Trainer(network, MeanSquaredError(), SGD(0.1), hooks=StepHook())  # type: ignore[arg-type]
    run = fit_run(None, (x, y), network, MeanSquaredError(), SGD(0.1), options, hooks=(StepHook(),))
    assert len(run.report.history) == 1  # a tuple (or any iterable) of them is taken
    run = fit_run(None, (x, y), network, MeanSquaredError(), SGD(0.1), options, callbacks=None)
    assert len(run.report.history) == 1  # None is none


def test_a_number_target_read_as_binary_says_to_declare_it_a_number() -> None:
    """Failed before: a price column under .target('price') advised kind='classes' only."""
    rows = [{"size": float(i), "price": float(i * 3 + 1)} for i in range(40)]
    with pytest.raises(DataError, match=r"declare \.target\('price', kind='number'\) for a number"):
        Pipeline().number("size").target("price").learn(rows)
    with pytest.raises(DataError, match=r"kind='classes'\) for more than two\)$"):
        Pipeline().number("size").target("c").learn(
            [{"size": 1.0, "c": c} for c in ("red", "blue", "green")]
        )


@pytest.mark.parametrize(
    ("rate", "named"),
    [
        (1.2, "SGD's 1.2 (say 0.12)"),
        (80.0, "SGD's 80 (say 8)"),
        (StepDecay(80.0, 1_000_000, 0.5), "SGD's 80, the rate it ended at (say 8)"),
    ],
)
def test_a_loss_grown_past_1e30_from_moderate_rows_names_the_learning_rate(
    rate: Any, named: str
) -> None:
    """Failed before (trial BK): targets of spread 3.6 under SGD(1.2) grew to 2.9e37 on the
    way to inf, and the message said the values overflow "whatever the learning rate". Trial
    BM: under SGD(80) the loss blew up within epoch 1 (a validation loss of 4.95e30), and the
    message of this round's first mend then named the values alone. Trial CC: a schedule's rate
    was not named."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 3)).astype(np.float32)
    y = (x @ np.array([1.0, 2.0, 3.0])).astype(np.float32)
    with pytest.raises(TrainingDivergedError) as refused, np.errstate(all="ignore"):
        fit_run(None, (x, y), Network([Dense(1)]), MeanSquaredError(), SGD(rate),
                FitOptions(seed=0, epochs=80, patience=100, progress=False))  # fmt: skip
    message = str(refused.value)
    assert re.search(
        r"The loss reached [\d.e+]+ at epoch \d+, from [\d.]+ before any update", message
    )
    assert f"try a smaller learning rate than {named}" in message
    assert "steps too large carry a loss there" in message and "or scale the targets" in message
    assert "whatever the learning rate" not in message


def test_a_validation_loss_huge_at_the_first_epoch_names_scaling_the_values() -> None:
    """Failed before (trial BL): the first epoch's training loss was read alone, and a
    validation loss of 3.2e33 at epoch 1 was said to have grown from 0.5 "at epoch 1"."""
    import types

    from deepsharp.core.training.checkpoint import EpochRecord
    from deepsharp.core.training.loop import _diverged

    run = types.SimpleNamespace(
        best_epoch=1,
        history=[EpochRecord(1, 0.5, 3.2e33, 0.1), EpochRecord(2, 0.4, 3.1e33, 0.1)],
        trainer=types.SimpleNamespace(optimizer=SGD(0.01), state=None, restore=lambda best: None),
        best=None,
    )
    for first in (None, 0.5):  # resumed, or a first batch of moderate rows (trial BN)
        run.first_loss = first
        with pytest.raises(TrainingDivergedError) as refused:
            _diverged(run, "the loss turned inf at epoch 3, step 4")  # type: ignore[arg-type]
        said = str(refused.value)
        assert "The loss reached 3.2e+33 at epoch 1" in said and "scale the targets" in said


def test_a_convolution_over_an_image_column_s_flat_rows_names_the_input_shape_to_give() -> None:
    """Before (trial AP): the Conv2D's refusal of rows of shape (16,) said nothing of the image
    column's shape, nor of Network(..., inputs=shape), which makes the run work."""
    rows = [{"img": list(np.random.default_rng(i).random(16)), "y": str(i % 2)} for i in range(40)]
    pipeline = Pipeline().image("img", (1, 4, 4)).target("y")
    network = Network([Conv2D(2, 3), Flatten(), Dense(1)])
    with pytest.raises(ShapeError, match=re.escape("Network([...], inputs=(1, 4, 4))")):
        fit_run(pipeline, rows, network, BinaryCrossEntropy(), Adam(0.01),
                FitOptions(seed=0, epochs=1, progress=False))  # fmt: skip
    # An image beside other columns in one input: no such hint (it would fail: a review).
    rows = [{**row, "n": str(i)} for i, row in enumerate(rows)]
    pipeline = Pipeline().image("img", (1, 4, 4)).number("n").target("y")
    with pytest.raises(ShapeError) as caught:
        fit_run(pipeline, rows, Network([Conv2D(2, 3), Flatten(), Dense(1)]),
                BinaryCrossEntropy(), Adam(0.01), FitOptions(seed=0, epochs=1, progress=False))  # fmt: skip
    assert "inputs=" not in str(caught.value)
