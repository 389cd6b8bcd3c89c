"""Files written by deepsharp 0.1.0 before format 3 (network/trained format 1, checkpoint format 2)."""
import json
import numpy as np
from pathlib import Path
from deepsharp.core import *
from deepsharp.core.samples import titanic

out = Path("packages/core/tests/earlier_files")
rng = np.random.default_rng(0)
# A chain with every kind of slot-bearing layer and a convolution.
x = rng.normal(size=(60, 1, 8, 8)).astype(np.float32)
y = (x.mean(axis=(1, 2, 3)) > 0).astype(np.int64)
net = Network([Conv2D(4, 3, padding="same"), Relu(), MaxPool2D(2), Flatten(), Dense(8), Tanh(), Dropout(0.1), Dense(2)])
run = fit(None, (x, y), net, CrossEntropy(), Adam(0.01), FitOptions(seed=3, epochs=3, checkpoint_dir=str(out / "run"), progress=False))
run.trained.save(out / "images.trained.safetensors")
net.save(out / "images.network.safetensors")
probe = x[:5]
expected = {"images": run.trained.predict(probe).tolist()}
np.save(out / "images_rows.npy", probe)
# The Titanic sample's pipeline and network, trained briefly.
trun = fit(titanic.pipeline(), titanic.rows(), titanic.network(), BinaryCrossEntropy(), Adam(0.01), FitOptions(seed=42, epochs=2, progress=False))
trun.trained.save(out / "titanic.trained.safetensors")
expected["titanic"] = trun.trained.predict(titanic.rows()[:5]).tolist()
(out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
print(sorted(p.name for p in out.rglob("*")))

# Then, resumed from the checkpoint to epoch 5 (patience 50) on the same deepsharp, its
# predictions of the same five rows recorded as "resumed" (and its best epoch).
