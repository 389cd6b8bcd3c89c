"""How the files beside this one were made, by deepsharp 0.1.0 before format 3 (network and
trained files of format 1, a checkpoint of format 2). Kept as a record; the tests only read the
files. Run from the repository's root on that deepsharp."""

import json
from pathlib import Path

import numpy as np

from deepsharp.core import (
    Adam,
    BinaryCrossEntropy,
    Conv2D,
    CrossEntropy,
    Dense,
    Dropout,
    FitOptions,
    Flatten,
    MaxPool2D,
    Network,
    Relu,
    Tanh,
    fit,
)
from deepsharp.core.samples import titanic


def made() -> None:
    out = Path("packages/core/tests/earlier_files")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 1, 8, 8)).astype(np.float32)
    y = (x.mean(axis=(1, 2, 3)) > 0).astype(np.int64)

    def network() -> Network:
        return Network(
            [
                Conv2D(4, 3, padding="same"),
                Relu(),
                MaxPool2D(2),
                Flatten(),
                Dense(8),
                Tanh(),
                Dropout(0.1),
                Dense(2),
            ]
        )

    net = network()
    options = FitOptions(seed=3, epochs=3, checkpoint_dir=str(out / "run"), progress=False)
    run = fit(None, (x, y), net, CrossEntropy(), Adam(0.01), options)
    run.trained.save(out / "images.trained.safetensors")
    net.save(out / "images.network.safetensors")
    np.save(out / "images_rows.npy", x[:5])
    expected = {"images": run.trained.predict(x[:5]).tolist()}
    options = FitOptions(seed=42, epochs=2, progress=False)
    trun = fit(
        titanic.pipeline(),
        titanic.rows(),
        titanic.network(),
        BinaryCrossEntropy(),
        Adam(0.01),
        options,
    )
    trun.trained.save(out / "titanic.trained.safetensors")
    expected["titanic"] = trun.trained.predict(titanic.rows()[:5]).tolist()
    # Resumed from the checkpoint to epoch 5 (patience 50): the predictions of the same rows.
    options = FitOptions(seed=3, epochs=5, progress=False, patience=50)
    resumed = fit(
        None, (x, y), network(), CrossEntropy(), Adam(0.01), options, resume_from=out / "run"
    )
    expected["resumed"] = resumed.trained.predict(x[:5]).tolist()
    expected["resumed_best_epoch"] = resumed.report.best_epoch
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")


if __name__ == "__main__":
    made()
