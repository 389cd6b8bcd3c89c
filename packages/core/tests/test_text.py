"""Text columns: a column of strings as int64 ids of a fixed length, over a vocabulary learned
from the training rows (most frequent first; 0 padding, 1 unknown), also in parts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deepsharp.core import (
    DataError,
    DeepSharpWarning,
    FileFormatError,
    Pipeline,
    read_csv,
    scan_csv,
)
from deepsharp.core.data.summaries import TokenCounts
from deepsharp.core.data.text import Text

MESSAGES = [
    {"message": "Win a FREE prize now! Call now.", "label": "spam"},
    {"message": "are we still on for lunch?", "label": "ham"},
    {"message": "Call me when you are free", "label": "ham"},
    {"message": "", "label": "ham"},
    {"message": None, "label": "ham"},
]


def learned(**settings: Any) -> Pipeline:
    return Pipeline().text("message", **settings).target("label").learn(MESSAGES)


def test_words_are_ids_most_frequent_first_padded_with_0_at_the_end() -> None:
    pipe = learned(length=8, vocabulary=100)
    column = pipe._columns[0]
    assert isinstance(column, Text)
    # Counts: call 2, free 2, now 2, are 2; then the words seen once, each tie by its text.
    assert column.tokens[:4] == ["are", "call", "free", "now"]
    ids = pipe.features(MESSAGES)
    assert ids.dtype == np.int64 and ids.shape == (5, 8)
    lookup = {token: 2 + i for i, token in enumerate(column.tokens)}
    assert ids[0].tolist() == [lookup[w] for w in "win a free prize now call now".split()] + [0]
    assert ids[3].tolist() == [0] * 8 and ids[4].tolist() == [0] * 8  # empty and missing


def test_a_word_outside_the_vocabulary_is_1_and_a_long_text_keeps_its_first_words() -> None:
    pipe = learned(length=3, vocabulary=6)  # padding, unknown and the 4 most frequent words
    assert pipe._columns[0].tokens == ["are", "call", "free", "now"]  # type: ignore[attr-defined]
    ids = pipe.features([{"message": "now is the time to call", "label": "ham"}])
    assert ids.tolist() == [[5, 1, 1]]


def test_padding_at_the_start_puts_the_ids_last() -> None:
    pipe = learned(length=6, padding="start")
    ids = pipe.features([{"message": "call now", "label": "ham"}])
    assert ids.tolist() == [[0, 0, 0, 0, 3, 5]]


def test_characters_are_tokens_of_their_own_case_kept() -> None:
    rows = [{"message": "abca", "label": "x"}, {"message": "aB", "label": "y"}]
    pipe = Pipeline().text("message", tokens="characters", length=5).target("label").learn(rows)
    assert pipe._columns[0].tokens == ["a", "B", "b", "c"]  # type: ignore[attr-defined]
    assert pipe.features([{"message": "cab?", "label": "x"}]).tolist() == [[5, 2, 4, 1, 0]]


def test_a_value_that_is_not_text_is_refused_naming_row_and_column() -> None:
    rows = [{"message": "hello", "label": "x"}, {"message": [3.5], "label": "y"}]
    with pytest.raises(DataError, match=r"row 2 \(counting from 1\), column 'message': .*3\.5"):
        Pipeline().text("message").target("label").learn(rows)
    pipe = learned()
    with pytest.raises(DataError, match=r"row 1 .*column 'message': expected text.*\['a'\]"):
        pipe.features([{"message": ["a"], "label": "x"}])


def test_a_dataframe_column_of_numbers_is_refused_as_text() -> None:
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame({"message": [1.0, 2.0], "label": ["x", "y"]})
    with pytest.raises(DataError, match=r"row 1 .*column 'message': expected text, found 1\.0"):
        Pipeline().text("message").target("label").learn(frame)


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"tokens": "letters"}, "tokens is 'words' or 'characters', not 'letters'"),
        ({"length": 0}, "length must be a whole number of 1 to 1,048,576, not 0"),
        ({"vocabulary": 2}, "vocabulary must be a whole number of 3 to 16,777,216, not 2"),
        ({"length": 2.0}, "length must be a whole number of 1 to 1,048,576, not 2.0"),
        ({"padding": "left"}, "padding is 'end' or 'start', not 'left'"),
    ],
)
def test_settings_are_checked_where_the_column_is_declared(
    settings: dict[str, Any], said: str
) -> None:
    with pytest.raises(ValueError, match=said):
        Pipeline().text("message", **settings)


def test_the_vocabulary_is_recorded_in_the_recipe_and_read_back() -> None:
    pipe = learned(length=7, vocabulary=9, padding="start")
    recorded = json.loads(json.dumps(pipe.to_json()))
    entry = recorded["columns"][0]
    assert entry["tokens"] == "words" and entry["length"] == 7 and entry["vocabulary"] == 9
    assert entry["learned"]["vocabulary"] == pipe._columns[0].tokens  # type: ignore[attr-defined]
    again = Pipeline.from_json(recorded)
    assert again.features(MESSAGES).tobytes() == pipe.features(MESSAGES).tobytes()
    entry["learned"]["vocabulary"] = [f"w{i}" for i in range(8)]
    with pytest.raises(FileFormatError, match=r"columns\[0\].learned.vocabulary: 8 tokens"):
        Pipeline.from_json(recorded)


def test_a_text_column_learned_in_parts_learns_what_it_learns_at_once(tmp_path: Path) -> None:
    path = tmp_path / "messages.csv"
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    lines = ["message,label"]
    for i in range(300):
        picked = rng.choice(words, size=int(rng.integers(0, 9)), p=_zipf(len(words)))
        lines.append(f"{' '.join(picked)},{i % 2}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    whole = Pipeline().text("message", length=5, vocabulary=30).target("label")
    whole.learn(read_csv(path))
    parts = Pipeline().text("message", length=5, vocabulary=30).target("label")
    learning = parts.learning(["message", "label"])
    for part in scan_csv(path, read_rows=7).parts(learning.reads):
        learning.add(part)
    learning.finish()
    assert parts.to_json() == whole.to_json()


def test_rows_in_memory_count_their_tokens_in_the_table_a_scan_counts_in() -> None:
    """As docs/sequences.md says (trial AA found the page promising exact counts for rows in
    memory): past the table's 131,072 distinct tokens, a token as rare as its bound may be
    left out where a free place would have taken it; one more frequent is kept."""
    rows = [
        {"m": " ".join(f"w{i:06d}" for i in range(r * 1000, (r + 1) * 1000))} for r in range(140)
    ]
    rows[0]["m"] += " zz"
    rows[1]["m"] += " zz"  # 'zz' twice, 140,000 other words once each
    pipeline = Pipeline().text("m", vocabulary=5).learn(rows)
    assert pipeline.to_json()["columns"][0]["learned"]["vocabulary"] == ["zz"]


def _zipf(count: int) -> np.ndarray:
    weights = 1.0 / np.arange(1, count + 1)
    return np.asarray(weights / weights.sum())


def test_token_counts_are_exact_within_their_table_and_bounded_past_it() -> None:
    rng = np.random.default_rng(1)
    draws = rng.zipf(1.3, 200_000) % 50_000
    exact = TokenCounts(limit=100_000)
    small = TokenCounts(limit=1_000)
    largest = 0
    for start in range(0, len(draws), 5_000):
        part = [f"t{v}" for v in draws[start : start + 5_000]]
        exact.add(part)
        small.add(part)
        largest = max(largest, len(small.counts))
    truth = dict(zip(*np.unique([f"t{v}" for v in draws], return_counts=True), strict=True))
    assert exact.exact and exact.counts == {k: int(v) for k, v in truth.items()}
    assert not small.exact and largest <= 1_000
    ranked = sorted(truth, key=lambda t: (-truth[t], t))
    assert small.most_frequent(20) == ranked[:20]
    # Each count kept lies below the true one by at most the rows over the table's size.
    assert all(0 <= truth[t] - c <= len(draws) / 1_001 for t, c in small.counts.items())


def test_text_and_numbers_feed_inputs_of_their_own() -> None:
    rows = [{"message": "call now", "length": str(i), "label": str(i % 2)} for i in range(3)]
    pipe = (
        Pipeline()
        .text("message", length=4, input="words")
        .number("length", input="numbers")
        .target("label")
        .learn(rows)
    )
    features = pipe.features(rows)
    assert features["words"].dtype == np.int64 and features["numbers"].dtype == np.float32
    with pytest.raises(ValueError, match="makes float32 values and column 'message' int64"):
        Pipeline().text("message").number("length")


def _spam_csv(path: Path, count: int) -> Path:
    import csv

    from deepsharp.core.samples import spam

    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["label", "message"])
        writer.writerows([row["label"], row["message"]] for row in spam.rows()[:count])
    return path


def test_a_scanned_file_of_messages_trains_and_serves_them_in_parts(tmp_path: Path) -> None:
    from deepsharp.core import (
        LSTM,
        Adam,
        BinaryCrossEntropy,
        Dense,
        Embedding,
        FitOptions,
        Network,
        TrainedNetwork,
        fit,
    )

    path = _spam_csv(tmp_path / "sms.csv", 1200)
    recipe = Pipeline().text("message", length=24, vocabulary=2000, padding="start")
    recipe.target("label")
    run = fit(
        recipe,
        scan_csv(path, read_rows=256, buffer_rows=512),
        Network([Embedding(2000, 16), LSTM(16), Dense(1)]),
        BinaryCrossEntropy(),
        Adam(0.01),
        FitOptions(seed=1, epochs=4, progress=False),
    )
    assert run.report.measures["accuracy"] > 0.9
    run.trained.save(tmp_path / "sms.safetensors")
    served = TrainedNetwork.load(tmp_path / "sms.safetensors")
    parts = np.concatenate(list(served.predict_parts(scan_csv(path, read_rows=100))))
    assert parts.tobytes() == run.trained.predict(read_csv(path)).tobytes()


def test_ids_given_to_a_network_that_takes_numbers_are_refused_saying_embedding_first() -> None:
    from deepsharp.core import (
        Adam,
        BinaryCrossEntropy,
        ConfigurationError,
        Dense,
        Embedding,
        FitOptions,
        Flatten,
        Network,
        ShapeError,
        fit,
    )

    pipeline = Pipeline().text("message", length=6, vocabulary=20).target("label")
    rows = MESSAGES * 4
    with pytest.raises(
        ConfigurationError, match=r"'message' gives int64 ids, .* an Embedding first"
    ):
        fit(
            pipeline,
            rows,
            Network([Dense(4), Dense(1)]),
            BinaryCrossEntropy(),
            Adam(),
            FitOptions(seed=0, epochs=1, progress=False),
        )
    with pytest.raises(ShapeError, match="Embedding takes int64 values, and follows Dense"):
        Network([Dense(4), Embedding(20, 3), Flatten(), Dense(1)])
    run = fit(
        pipeline,
        rows,
        Network([Embedding(20, 3), Flatten(), Dense(1)]),
        BinaryCrossEntropy(),
        Adam(),
        FitOptions(seed=0, epochs=1, progress=False),
    )
    assert run.trained.predict(MESSAGES[:2]).shape == (2, 1)


def test_words_are_cut_before_they_are_lowered_and_accents_typed_apart_join_their_letter() -> None:
    """Before: 'İstanbul' lowered to 'i' + a combining dot + 'stanbul' and was cut in two; an
    accent typed apart from its letter was cut off ('cafe' + U+0301 read as 'cafe')."""
    from deepsharp.core.data.text import words

    assert words("İstanbul") == ["i̇stanbul"]
    assert words("cafe\u0301 café") == ["café", "café"]
    pipeline = Pipeline().text("t", length=3).learn([{"t": "café latte"}])
    ids = pipeline.features([{"t": "CAFE\u0301"}, {"t": "café"}])
    assert ids[0].tolist() == ids[1].tolist() and 1 not in ids[0]  # one known word, not unknown


def test_a_capital_with_no_composed_form_lowers_to_the_word_of_its_small_letter() -> None:
    """Failed before (trial TX4): 'J' and a combining caron lowered to 'j' and the caron apart,
    another token than 'ǰ', the small letter's one character."""
    from deepsharp.core.data.text import words

    assert words("J\u030cuice ǰuice") == ["ǰuice", "ǰuice"]
    # each word lowered alone: a capital sigma before a stop is no word's last (a review)
    assert words("ΟΔΟΣ.ΑΘΗΝΑ Α.Σ") == ["οδος", "αθηνα", "α", "σ"]  # noqa: RUF001


def test_a_decimal_a_fraction_and_bytes_in_a_text_column_are_read_as_a_category_reads_them() -> (
    None
):
    """Failed before (trial TX4): refused, saying a text column takes numbers."""
    from decimal import Decimal
    from fractions import Fraction

    rows = [{"t": "42 1/3 café", "y": 1}]
    pipeline = Pipeline().text("t", length=4).target("y").learn(rows)
    given = [
        {"t": Decimal("42"), "y": 1},
        {"t": Fraction(1, 3), "y": 1},
        {"t": "café".encode(), "y": 1},
    ]
    assert [row[0] for row in pipeline.features(given).tolist()] != [1, 1, 1]
    assert 1 not in pipeline.features(given)[:, 0]


def test_words_keep_the_vowel_signs_and_viramas_of_indic_scripts() -> None:
    """Before: Python's \\w leaves out the marks of Devanagari, Tamil and other scripts (vowel
    signs, viramas): 'हिन्दी भाषा' was cut into ['ह', 'न', 'द', 'भ', 'ष'], and two other
    messages, 'हुन्दा भूषा', got the same ids."""
    from deepsharp.core.data.text import words

    assert words("हिन्दी भाषा") == ["हिन्दी", "भाषा"]
    assert words("தமிழ் மொழி") == ["தமிழ்", "மொழி"]
    assert words("ก้า 한국어, naïve") == ["ก้า", "한국어", "naïve"]
    pipeline = Pipeline().text("t", length=4).learn([{"t": "हिन्दी भाषा"}, {"t": "हुन्दा भूषा"}])
    ids = pipeline.features([{"t": "हिन्दी भाषा"}, {"t": "हुन्दा भूषा"}])
    assert ids[0].tolist() != ids[1].tolist()


def test_pandas_missing_markers_and_numpy_nans_in_a_text_column_are_all_padding() -> None:
    """Before (trial PL): pd.NA and np.float32('nan') in rows as dicts were refused as no text
    (a frame's were padding, as every other kind of column takes them as missing)."""
    pandas = pytest.importorskip("pandas")
    learned = Pipeline().text("t", length=4, vocabulary=10).learn([{"t": "a b"}])
    missing = [pandas.NA, np.float32("nan"), np.float16("nan"), None, float("nan")]
    assert learned.features([{"t": value} for value in missing]).tolist() == [[0] * 4] * 5
    assert learned.features([{"t": "NA"}]).tolist() == [[1, 0, 0, 0]]  # text: an unknown word


def test_a_frame_s_text_column_missing_throughout_is_all_padding() -> None:
    """Failed before (trial TX): pandas reads a column of empty fields as float64 NaN, and the
    text column refused it ("row 1: expected text, found nan"); a number is refused at its own
    row, not row 1."""
    pandas = pytest.importorskip("pandas")
    learned = Pipeline().text("t", length=4, vocabulary=10).learn([{"t": "a b"}])
    assert learned.features(pandas.DataFrame({"t": [np.nan, np.nan]})).tolist() == [[0] * 4] * 2
    with pytest.raises(DataError, match=r"row 2 \(counting from 1\), column 't': expected text"):
        Pipeline().text("t").learn(pandas.DataFrame({"t": [np.nan, 3.0]}))  # numbers alone


def test_a_text_pandas_read_as_a_number_gives_the_csv_s_ids(tmp_path: Path) -> None:
    """Failed before (trial P): a served frame in which pandas read the column as numbers (one
    message "42") was refused, though `deepsharp predict` took the file: a number is its text."""
    pandas = pytest.importorskip("pandas")
    path = tmp_path / "m.csv"
    path.write_text("t,y\nsee you at 42,a\n42,a\n7 up,b\n", encoding="utf-8")
    pipeline = Pipeline().text("t", length=4, vocabulary=12).target("y").learn(read_csv(path))
    by_csv = pipeline.features(read_csv(path))
    assert by_csv.tolist() == pipeline.features(pandas.read_csv(path)).tolist()
    one = tmp_path / "one.csv"
    one.write_text("t,y\n42,a\n", encoding="utf-8")
    assert pandas.read_csv(one)["t"].dtype.kind == "i"
    with pytest.warns(DeepSharpWarning, match="came as numbers"):
        assert pipeline.features(pandas.read_csv(one)).tolist() == [by_csv[1].tolist()]
    assert pipeline.features([{"t": 42.0}, {"t": True}, {"t": np.int8(7)}]).tolist() == [
        by_csv[1].tolist(),
        [1, 0, 0, 0],
        [pipeline.features([{"t": "7"}]).tolist()[0][0], 0, 0, 0],
    ]


def test_a_text_column_pandas_read_as_numbers_is_warned_of_as_other_tokens(tmp_path: Path) -> None:
    """Failed before (trial T): fields '42.0' and '007' learned as text ('42' '0', '007') came
    from pandas as the numbers 42.0 and 7, read as '42' and '7': other ids, without a word."""
    pandas = pytest.importorskip("pandas")
    path = tmp_path / "codes.csv"
    path.write_text("code,label\n42.0,a\n007,b\n1e3,a\n", encoding="utf-8")
    pipeline = Pipeline().text("code", length=3, vocabulary=9).target("label")
    pipeline.learn(read_csv(path))
    as_text = pipeline.features(read_csv(path))
    with pytest.warns(DeepSharpWarning, match=r"text column 'code' came as numbers \(float64\)"
                      r".*pandas: dtype=\{'code': str\}"):  # fmt: skip
        as_numbers = pipeline.features(pandas.read_csv(path))
    assert as_numbers.tolist() != as_text.tolist()  # what the warning is of
    read = pandas.read_csv(path, dtype={"code": str})  # as it says: the same ids
    assert pipeline.features(read).tolist() == as_text.tolist()
