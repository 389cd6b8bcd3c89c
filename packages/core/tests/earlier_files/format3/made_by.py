"""How the files beside this one were made, by deepsharp 0.1.0 at commit cde9346 (network and
trained files of format 3, a checkpoint of version 4), when LSTM and GRU read the padding an
Embedding marks as tokens. Kept as a record; the tests only read the files. Run from the
repository's root on that deepsharp."""

import json
from pathlib import Path

from deepsharp.core import (
    GRU,
    LSTM,
    Adam,
    BinaryCrossEntropy,
    Dense,
    Embedding,
    FitOptions,
    Network,
    Pipeline,
    fit,
)
from deepsharp.core.samples import spam

OUT = Path("packages/core/tests/earlier_files/format3")


def network() -> Network:
    return Network([Embedding(40, 4), LSTM(3, return_sequences=True), GRU(3), Dense(1)], inputs=30)


def pipeline() -> Pipeline:
    return Pipeline().text("message", length=30, vocabulary=40).target("label")


def made() -> None:
    rows = spam.rows()[:60]
    options = FitOptions(seed=3, epochs=2, checkpoint_dir=str(OUT / "run"), progress=False)
    run = fit(pipeline(), rows, network(), BinaryCrossEntropy(), Adam(0.01), options)
    run.trained.save(OUT / "texts.trained.safetensors")
    expected = {"texts": run.trained.predict(rows[:6]).tolist()}
    options = FitOptions(seed=3, epochs=3, progress=False)
    resumed = fit(
        pipeline(),
        rows,
        network(),
        BinaryCrossEntropy(),
        Adam(0.01),
        options,
        resume_from=OUT / "run",
    )
    expected["resumed"] = resumed.trained.predict(rows[:6]).tolist()
    (OUT / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")


if __name__ == "__main__":
    made()
