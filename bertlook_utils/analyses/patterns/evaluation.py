"""How well a classifier of the pattern kinds agrees with hand labels: macro-F1, folds, out-of-fold predictions.

Accuracy, macro-F1 and the confusion matrix are taken in the labels' scheme (`kinds.label_scheme`). The rules
(`patterns.cross_validate`), the boosted trees (`patterns.learn`) and the CNN (`patterns.net`) are all scored
here, on the same folds; the CNN imports nothing of the rules, so an edit to the rules keeps its cached nets.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from .kinds import KINDS, PATTERNS, in_scheme, label_scheme, to_pattern


def kind_codes(names, kinds: Sequence[str]) -> np.ndarray:
    """int64 [N]: the position of each of `names` [N] in `kinds` (an unknown name is an error)."""
    names = np.asarray(names, dtype=object)
    bad = sorted(set(names) - set(kinds))
    if bad:
        raise ValueError(f"unknown kinds {bad}; use one of {list(kinds)}")
    index = {k: i for i, k in enumerate(kinds)}
    return np.array([index[x] for x in names], dtype=np.int64)


def confusion_macro_f1(confusion: np.ndarray) -> np.ndarray:
    """Macro-F1 over the classes present in truth or prediction of confusion [..., K, K] -> [...]."""
    tp = np.diagonal(confusion, axis1=-2, axis2=-1)
    denominator = confusion.sum(-1) + confusion.sum(-2)
    present = denominator > 0
    f1 = np.where(present, 2 * tp / np.maximum(denominator, 1), 0.0)
    return f1.sum(-1) / np.maximum(present.sum(-1), 1)


def macro_f1(truth: Sequence[str], predicted: Sequence[str], kinds: Sequence[str] = KINDS) -> float:
    """Mean F1 over the kinds present in `truth` or `predicted`."""
    k = len(kinds)
    codes = kind_codes(truth, kinds) * k + kind_codes(predicted, kinds)
    return float(confusion_macro_f1(np.bincount(codes, minlength=k * k).reshape(k, k)))


def agreement(truth: Sequence[str], predicted: Sequence[str]) -> tuple[float, float, pd.DataFrame]:
    """(accuracy, macro-F1, confusion: rows = label, columns = classifier), in the scheme of `truth`
    (`label_scheme`: predicted broad counts as heterogeneous against five-way labels)."""
    truth = np.asarray(truth, dtype=object)
    scheme = label_scheme(truth)
    predicted = in_scheme(predicted, scheme)
    if truth.shape != predicted.shape:
        raise ValueError(f"truth {truth.shape} and predicted {predicted.shape} must have the same length")
    confusion = pd.crosstab(pd.Categorical(truth, scheme), pd.Categorical(predicted, scheme),
                            rownames=["label"], colnames=["classifier"], dropna=False)
    return float(np.mean(truth == predicted)), macro_f1(truth, predicted, scheme), confusion


def class_scores(truth: Sequence[str], predicted: Sequence[str]) -> pd.DataFrame:
    """Per kind of the scheme of `truth`: support (labelled maps), predicted, precision, recall, F1."""
    _, _, confusion = agreement(truth, predicted)
    c = confusion.to_numpy()
    tp, support, called = np.diag(c), c.sum(1), c.sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return pd.DataFrame({"support": support, "predicted": called, "precision": tp / called,
                             "recall": tp / support, "f1": 2 * tp / (support + called)},
                            index=pd.Index(confusion.index.astype(str), name="kind"))


def classifier_scores(truth: Sequence[str], predicted: Sequence[str]) -> dict[str, float]:
    """One classifier's row of a score table: accuracy, macro-F1 (the scheme of `truth`), "macro-F1, five kinds"
    (broad counted as heterogeneous, the paper's count) and "F1 <kind>" for each kind of the scheme of `truth`."""
    accuracy, f1, _ = agreement(truth, predicted)
    five = macro_f1(to_pattern(truth), to_pattern(predicted), PATTERNS)
    per_kind = class_scores(truth, predicted)["f1"]
    return {"accuracy": accuracy, "macro-F1": f1, "macro-F1, five kinds": five,
            **{f"F1 {kind}": float(v) for kind, v in per_kind.items()}}


def stratified_folds(labels: Sequence[str], folds: int = 5, seed: int = 0) -> np.ndarray:
    """Fold number [N] of every map: each label's maps shuffled (seeded) and dealt round the folds, the deal
    continuing from one label to the next so the folds' sizes differ by at most one."""
    labels = np.asarray(labels, dtype=object)
    if folds < 2 or folds > len(labels):
        raise ValueError(f"need 2 <= folds <= {len(labels)} (the number of maps); got {folds}")
    rng = np.random.default_rng(seed)
    fold_of = np.empty(len(labels), dtype=int)
    dealt = 0
    for kind in sorted(set(labels)):
        members = rng.permutation(np.flatnonzero(labels == kind))
        fold_of[members] = (dealt + np.arange(len(members))) % folds
        dealt += len(members)
    return fold_of


def check_folds(fold_of: Sequence[int], n: int, folds: int) -> np.ndarray:
    """fold_of [n] as an int array, after checking that it numbers every map's fold 0..folds-1, each used."""
    fold_of = np.asarray(fold_of)
    if fold_of.shape != (n,) or set(fold_of.tolist()) != set(range(folds)):
        raise ValueError(f"fold_of must give each of the {n} maps a fold 0..{folds - 1}, every fold used")
    return fold_of.astype(int)


def out_of_fold(labels: Sequence[str], predict_fold, folds: int = 5, seed: int = 0,
                fold_of: Sequence[int] | None = None, index=None) -> pd.DataFrame:
    """Out-of-fold predictions of a probabilistic classifier, with the rules' folds (`stratified_folds(labels,
    folds, seed)`, or `fold_of` [N]). predict_fold(train, test) (bool masks [N]) fits on the train rows and returns
    the test rows' probabilities [test, len(scheme)] over `label_scheme(labels)`. Returns `label`, `predicted`,
    `fold` and one probability column per kind (`p_vertical`, ...), on `index`."""
    labels = np.asarray(labels, dtype=object)
    fold_of = check_folds(fold_of, len(labels), folds) if fold_of is not None else stratified_folds(labels, folds, seed)
    scheme = label_scheme(labels)
    probabilities = np.zeros((len(labels), len(scheme)))
    for fold in range(folds):
        train, test = fold_of != fold, fold_of == fold
        probabilities[test] = predict_fold(train, test)
    result = pd.DataFrame({"label": labels, "predicted": np.asarray(scheme, dtype=object)[probabilities.argmax(1)],
                           "fold": fold_of}, index=index)
    return result.join(pd.DataFrame(probabilities, columns=[f"p_{k}" for k in scheme], index=result.index))
