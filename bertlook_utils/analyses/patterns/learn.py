"""A learned classifier (boosted trees) of Kovaleva et al.'s attention patterns over the map features.

It stands beside the transparent rules (`patterns.THRESHOLDS`, `patterns.fit_thresholds`) and the CNN of
`patterns.net`.

Gradient-boosted shallow trees (scikit-learn's HistGradientBoostingClassifier: depth 3, 200 rounds of
learning rate 0.05, classes weighted so that rare kinds count as much as macro-F1 counts them) over INPUTS,
the rules' four FEATURES and the EXTRA ones (`patterns` explains each). The settings (SETTINGS) and the
inputs were fixed before the first cross-validation and not changed after it. Inspect a fit with
`importance` (how much macro-F1 drops when one input is shuffled).

It classifies stored features of any shape ([N] or [inputs, L, H], `patterns.head_features`): pass a
`LearnedClassifier` wherever `patterns.shares_by_layer` and `patterns.classifier_shares` take thresholds
(`bootstrap` gives the refits for the latter's band). Fitting takes about 1 s on the 440 labelled maps,
classifying 41,000 maps about 0.6 s on two threads (fitting runs on one: `one_thread`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from . import EXTRA, FEATURES
from .evaluation import agreement, out_of_fold
from .kinds import KINDS, label_scheme
from ...core.threads import one_thread

INPUTS = FEATURES + EXTRA
SETTINGS = {"max_depth": 3, "learning_rate": 0.05, "max_iter": 200}


def _matrix(features: Mapping[str, np.ndarray] | pd.DataFrame) -> tuple[np.ndarray, tuple[int, ...]]:
    """features name -> array (all of one shape) -> ([maps, len(INPUTS)], that shape)."""
    missing = [k for k in INPUTS if k not in features]
    if missing:
        raise ValueError(f"features miss {missing}; compute them with patterns.head_features / labelled_features")
    columns = [np.asarray(features[k], dtype=float) for k in INPUTS]
    shape = columns[0].shape
    if any(c.shape != shape for c in columns):
        raise ValueError(f"every feature must have the same shape; got {sorted({c.shape for c in columns})}")
    return np.stack([c.ravel() for c in columns], axis=1), shape


@dataclass
class LearnedClassifier:
    """A fitted model and the kinds it names (the scheme of its labels, `kinds.label_scheme`)."""

    model: object
    kinds: tuple[str, ...]

    def probabilities(self, features: Mapping[str, np.ndarray] | pd.DataFrame) -> np.ndarray:
        """features name -> array of any shape S (the INPUTS at least) -> [*S, len(kinds)]."""
        x, shape = _matrix(features)
        # every thread (not `one_thread`): a prediction is the same whatever the number of threads, and thousands of
        # maps at once keep them busy (6,912 maps: 0.17 s on one thread, 0.09 s on two)
        p = self.model.predict_proba(x) if len(x) else np.zeros((0, len(self.model.classes_)))
        out = np.zeros((len(x), len(self.kinds)))
        out[:, [self.kinds.index(k) for k in self.model.classes_]] = p
        return out.reshape(*shape, len(self.kinds))

    def classify(self, features: Mapping[str, np.ndarray] | pd.DataFrame) -> np.ndarray:
        """features name -> array of any shape S -> kinds (object array of shape S)."""
        return np.asarray(self.kinds, dtype=object)[self.probabilities(features).argmax(-1)]


def fit(features: pd.DataFrame, labels: Sequence[str], seed: int = 0, settings: Mapping[str, float] = SETTINGS
        ) -> LearnedClassifier:
    """The classifier fitted to `labels` [N] of the maps of `features` (one row per map with the INPUTS
    columns, e.g. `patterns.labelled_features`), seeded; in the labels' scheme (six-way with broad, or five)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    labels = np.asarray(labels, dtype=object)
    if len(labels) != len(features) or not len(labels):
        raise ValueError(f"need one label per map and at least one map; got {len(labels)} labels, "
                         f"{len(features)} maps")
    scheme = label_scheme(labels)
    bad = sorted(set(labels) - set(scheme))
    if bad:
        raise ValueError(f"unknown labels {bad}; use one of {list(KINDS)}")
    x, _ = _matrix(features)
    model = HistGradientBoostingClassifier(**{**SETTINGS, **settings}, class_weight="balanced", random_state=seed)
    with one_thread():
        model.fit(x, labels)
    return LearnedClassifier(model, scheme)


def cross_validate(features: pd.DataFrame, labels: Sequence[str], folds: int = 5, seed: int = 0,
                   settings: Mapping[str, float] = SETTINGS, fold_of: Sequence[int] | None = None) -> pd.DataFrame:
    """Out-of-fold predictions with the rules' folds (`evaluation.stratified_folds(labels, folds, seed)`, or
    `fold_of` [N]): a model fitted on the other folds predicts each fold. Returns features' index with `label`,
    `predicted`, `fold` and one probability column per kind (`p_vertical`, ...)."""
    labels = np.asarray(labels, dtype=object)
    scheme = label_scheme(labels)

    def predict_fold(train: np.ndarray, test: np.ndarray) -> np.ndarray:
        model = fit(features[train], labels[train], seed, settings)
        probabilities = np.zeros((int(test.sum()), len(scheme)))
        probabilities[:, [scheme.index(k) for k in model.kinds]] = model.probabilities(features[test])
        return probabilities

    return out_of_fold(labels, predict_fold, folds, seed, fold_of, features.index)


def bootstrap(features: pd.DataFrame, labels: Sequence[str], n_boot: int = 20, seed: int = 0,
              settings: Mapping[str, float] = SETTINGS) -> list[LearnedClassifier]:
    """The classifier refitted on `n_boot` bootstrap resamples of the labelled maps (seeded), for the band of
    `patterns.classifier_shares` (about 1 s each)."""
    labels = np.asarray(labels, dtype=object)
    rng = np.random.default_rng(seed)
    picks = [rng.integers(0, len(labels), len(labels)) for _ in range(n_boot)]
    return [fit(features.iloc[pick], labels[pick], seed, settings) for pick in picks]


def importance(model: LearnedClassifier, features: pd.DataFrame, labels: Sequence[str], repeats: int = 5,
               seed: int = 0) -> pd.Series:
    """How much macro-F1 against `labels` drops, on average over `repeats` shuffles, when one input's column
    is shuffled across the maps of `features`: one value per INPUTS name, largest first."""
    labels = np.asarray(labels, dtype=object)
    base = agreement(labels, model.classify(features))[1]
    rng = np.random.default_rng(seed)
    drops = {}
    for name in INPUTS:
        scores = []
        for _ in range(repeats):
            shuffled = features.assign(**{name: rng.permutation(features[name].to_numpy())})
            scores.append(agreement(labels, model.classify(shuffled))[1])
        drops[name] = base - float(np.mean(scores))
    return pd.Series(drops, name="macro-F1 drop").sort_values(ascending=False)
