"""The Titanic passengers: who survived? 891 rows, a 14-feature recipe, a small dense network.

from deepsharp.core.samples import titanic
run = titanic.run()          # the light engine, seed 42
print(run.report)
"""

from __future__ import annotations

from typing import Any

from deepsharp.core.data.pipeline import Pipeline, read_csv
from deepsharp.core.engine import Engine
from deepsharp.core.nn.layers import Dense, Relu
from deepsharp.core.nn.losses import BinaryCrossEntropy
from deepsharp.core.nn.network import Network
from deepsharp.core.nn.optimizers import Adam
from deepsharp.core.samples import data_path
from deepsharp.core.training.loop import FitOptions, Run, fit

__all__ = ["SHA256", "describe", "network", "pipeline", "rows", "run"]

SHA256 = "4a437fde05fe5264e1701a7387ac6fb75393772ba38bb2c9c566405af5af4bd7"


def rows() -> list[dict[str, str | None]]:
    """The 891 passengers, as `read_csv` gives them."""
    return read_csv(data_path("titanic.csv"))


def pipeline() -> Pipeline:
    """Class, sex and port as categories; age (median, with a missing flag), siblings, parents
    and fare (log) as numbers; whether a cabin is known as a flag. Split 70/15/15."""
    return (
        Pipeline()
        .category("Pclass")
        .category("Sex")
        .category("Embarked")
        .number("Age", fill="median", missing_flag=True)
        .number("SibSp")
        .number("Parch")
        .number("Fare", log=True)
        .flag("Cabin")
        .target("Survived", kind="binary")
        .split(train=0.70, validation=0.15)
    )


def network() -> Network:
    """Dense 16, ReLU, Dense 1 (a logit: the loss's link makes it a probability)."""
    return Network([Dense(16), Relu(), Dense(1)])


def describe(passenger: dict[str, Any]) -> str:
    return f"{passenger['Name']}, {passenger['Age'] or 'age unknown'}, class {passenger['Pclass']}"


def run(engine: Engine | str | None = None, seed: int = 42, **options: Any) -> Run:
    """Train the sample on `engine` (the light engine when none is named). Its report ends with
    the prediction for the first passenger."""
    passengers = rows()
    result = fit(
        pipeline(),
        passengers,
        network(),
        BinaryCrossEntropy(),
        Adam(0.001),
        FitOptions(seed=seed, engine=engine, **options),
    )
    first = passengers[0]
    chance = float(result.trained.predict([first], engine)[0, 0])
    result.report.notes.append(
        f"first passenger ({describe(first)}): survival chance {chance:.3f}, "
        f"survived: {'yes' if first['Survived'] == '1' else 'no'}"
    )
    return result
