"""deepsharp for scikit-learn: a network as a classifier or a regressor, for `Pipeline`,
`GridSearchCV` and `cross_val_score` (needs scikit-learn: `pip install 'deepsharp[sklearn]'`).

    from sklearn.model_selection import GridSearchCV
    from deepsharp.sklearn import NetworkClassifier

    search = GridSearchCV(NetworkClassifier(), {"optimizer__learning_rate": [0.001, 0.01]})
    search.fit(x, y)
"""

from deepsharp.sklearn.estimators import NetworkClassifier, NetworkRegressor

__all__ = ["NetworkClassifier", "NetworkRegressor"]


def __dir__() -> list[str]:
    return sorted(__all__)
