"""The spam sample: the shipped SMS Spam Collection, the run's accuracy and confusion counts,
its file and its commands.

One run of the sample (through `deepsharp sample spam --save FILE`, about 20-40 s on two cores)
serves every test that needs a trained network.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deepsharp.core import Run, TrainedNetwork
from deepsharp.core.cli import main
from deepsharp.core.samples import data_path, spam

pytestmark = pytest.mark.once  # the sample's runs: the same on every Python


def test_the_shipped_file_is_the_published_one() -> None:
    digest = hashlib.sha256(data_path("SMSSpamCollection").read_bytes()).hexdigest()
    assert digest == spam.SHA256


def test_rows_are_the_5574_messages_747_of_them_spam() -> None:
    rows = spam.rows()
    assert len(rows) == 5574
    assert sum(row["label"] == "spam" for row in rows) == 747
    assert {row["label"] for row in rows} == {"ham", "spam"}
    assert rows[1] == {"label": "ham", "message": "Ok lar... Joking wif u oni..."}


def test_the_pipeline_makes_word_ids_padded_before_the_message() -> None:
    rows = spam.rows()
    pipe = spam.pipeline().learn(rows)
    ids = pipe.features(rows[1:2])
    assert ids.dtype == np.int64 and ids.shape == (1, spam.LENGTH)
    assert (ids[0, :-6] == 0).all() and (ids[0, -6:] > 1).all()  # ok lar joking wif u oni
    assert pipe.classes == ["ham", "spam"]
    assert pipe.features(rows).max() == spam.VOCABULARY - 1


@dataclass
class Sampled:
    run: Run
    printed: str
    saved: Path


@pytest.fixture(scope="module")
def sampled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sampled]:
    """`deepsharp sample spam --save FILE`, keeping the Run the command made."""
    saved = tmp_path_factory.mktemp("spam") / "spam.safetensors"
    made: list[Run] = []
    real_run = spam.run

    def keeping(*args: Any, **kwargs: Any) -> Run:
        result = real_run(*args, **kwargs)
        made.append(result)
        return result

    buffer = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(buffer):
        patch.setattr(spam, "run", keeping)
        assert main(["sample", "spam", "--no-progress", "--save", str(saved)]) == 0
    assert len(made) == 1
    yield Sampled(made[0], buffer.getvalue(), saved)


def test_spam_reaches_98_percent_on_its_test_messages_with_the_confusion_counts(
    sampled: Sampled,
) -> None:
    report = sampled.run.report
    assert report.test_rows == 837 and report.measures["accuracy"] >= 0.98
    found = re.search(
        r"test messages: (\d+) spam called spam, (\d+) ham called spam, (\d+) spam called ham, "
        r"(\d+) ham called ham",
        sampled.printed,
    )
    assert found is not None, sampled.printed
    counts = [int(c) for c in found.groups()]
    assert sum(counts) == 837
    assert (counts[0] + counts[3]) / 837 == pytest.approx(report.measures["accuracy"], abs=1e-12)
    assert f"saved the trained network to {sampled.saved}" in sampled.printed


def test_the_saved_network_predicts_the_same_bits(sampled: Sampled) -> None:
    loaded = TrainedNetwork.load(sampled.saved)
    messages = spam.rows()[:100]
    before = sampled.run.trained.predict(messages)
    assert loaded.predict(messages).tobytes() == before.tobytes()


def test_deepsharp_predict_reads_a_csv_of_messages(
    sampled: Sampled, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = [
        "WINNER!! You have won a 1000 cash prize. Call 09061701461 to claim now",
        "Sorry, I'll call you later, I'm in a meeting",
        "",
    ]
    path = tmp_path / "messages.csv"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["message"])
        writer.writerows([m] for m in messages)
    assert main(["predict", str(sampled.saved), str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "label=spam" and len(lines) == 4  # the chance of spam
    chances = [float(line) for line in lines[1:]]
    assert chances[0] > 0.5 > chances[1]


def test_a_short_run_is_the_same_run_again_and_resumes_bit_for_bit(tmp_path: Path) -> None:
    whole = spam.run(epochs=2, patience=50, progress=False)
    again = spam.run(epochs=2, patience=50, progress=False)
    spam.run(epochs=1, patience=50, progress=False, checkpoint_dir=tmp_path)
    resumed = spam.run(epochs=2, patience=50, progress=False, resume_from=tmp_path)
    kept, _ = whole.trained.network.values()
    for run in (again, resumed):
        slots, _ = run.trained.network.values()
        assert all(slots[name].tobytes() == kept[name].tobytes() for name in kept)
        assert run.report.notes[-1] == whole.report.notes[-1]  # the confusion counts
