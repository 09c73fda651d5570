"""Kovaleva et al.'s attention patterns, told apart by four transparent features of a map, fitted to hand labels.

Six kinds (KINDS): Kovaleva's five PATTERNS plus "broad", a near-uniform map, which her five-way taxonomy
counts as heterogeneous (`to_pattern`). Kept apart here because a broad map is no sign of "linguistic" work.

    vertical           most of every row goes to the same few columns ([CLS], [SEP], "." ...)
    diagonal           most of every row goes to the token itself or its neighbours (offsets -1, 0, +1)
    vertical+diagonal  both at once
    block              rows spread over a stretch of nearby tokens (a segment of a pair, a sentence, a clause)
    broad              rows spread over nearly every token
    heterogeneous      none of these

Features of one map A [n, n] (rows sum to 1); "real" tokens are those that are neither [CLS] nor [SEP]:
    stripes   mass on the STRIPE_COLUMNS columns that receive the most attention overall (mean over rows),
              rescaled so that a uniform map gives 0 and a map on <= STRIPE_COLUMNS columns gives 1
    diagonal  over real rows, the mass on real tokens at offsets -1, 0, +1, minus what the row would put there
              by chance: the mass it gives real tokens of its own segment, spread evenly over them (a map
              uniform within each segment gives 0, however short the segments; identity gives ~1)
    locality  1 - (mean distance |i - j| of a row's attention to real tokens) / (the same for a row spread evenly
              over all real tokens), averaged over real rows weighted by their mass on real tokens: 0 for a
              uniform map, about 0.5 for a map uniform within each half of a pair, near 1 for a diagonal
    entropy   row entropy divided by ln n, the mean over rows (0 = one token, 1 = uniform)
and, used by no rule but by the learned classifier of `patternlearn` (EXTRA; the last six are means over real
rows of a property of the row's attention to real tokens, renormalised, weighted by the row's mass on real tokens):
    within    (pairs) the share of a real row's attention to real tokens that stays in its own segment; 0 for singles
    first     mass on the first column ([CLS]), the mean over rows
    sinks     mass on the other [CLS]/[SEP] columns, the mean over rows
    near      mass at offsets -1, 0, +1
    spread    entropy / ln(real tokens)
    peak      the largest weight
    half_band the distance |i - j| within which the row keeps half its mass, over the number of real tokens
    in_unit   mass inside the row's own unit (a sentence: split at "." "?" "!" ";" and at segments), against a
              row spread evenly (0) and a row kept inside its unit (1); 0 where the unit is the whole input
    far       mass beyond offset 1
    far_local `locality` of the mass beyond offset 1 alone (0 when there is none)

`classify_features` applies these rules, in order, with thresholds t (`fit_thresholds` fits them to the hand
labels of data/patterns/labels.csv; `cross_validate` reports how well that procedure does on labels it did not
see, the thresholds refitted inside every training fold):

    1. diagonal >= t.diagonal:  stripes >= t.mix_stripes -> vertical+diagonal, else diagonal
    2. locality >= t.block                               -> block
    3. stripes >= t.vertical                             -> vertical
    4. entropy >= t.broad                                -> broad
    5. otherwise                                         -> heterogeneous

Block comes before vertical because the label conventions call blocks with a [CLS] column block.
Labels written without the "broad" kind (data/patterns/README.md, before it existed) count near-uniform maps
as heterogeneous: against such labels, predictions are compared in the five-way scheme and the broad threshold
is not fitted (it stays BROAD_DEFAULT).

The kinds and the labels' schemes are `patterns.kinds`; scoring against the labels (macro-F1, folds,
out-of-fold predictions) is `patterns.evaluation`, which the learned classifiers (`patterns.learn`,
`patterns.net`) share without depending on these rules.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from ...core.cache import DATA_DIR
from ...core.conventions import check_attention
from ...engine.extract import Batch, RowReducer, reduce
from ...core.intervals import wilson_interval
from ...core.models import Encoded, Encoder
from .evaluation import check_folds, confusion_macro_f1, kind_codes, stratified_folds
from .kinds import KINDS, label_scheme, to_pattern
# re-exported: notebook 08 and its student copies, already handed out, call them as patterns.<name>
from .evaluation import agreement, class_scores, classifier_scores, macro_f1  # noqa: F401
from .kinds import PATTERNS  # noqa: F401

FEATURES = ("stripes", "diagonal", "locality", "entropy")
# computed beside FEATURES: used by no rule, read by the learned model (`patternlearn`); tools/pattern_sheets.py drew
# block candidates with `within`
EXTRA = ("within", "first", "sinks", "near", "spread", "peak", "half_band", "in_unit", "far", "far_local")
SENTENCE_ENDS = (".", "?", "!", ";")
STRIPE_COLUMNS = 3
SAMPLES = ("random", "targeted")
LABELS_PATH = DATA_DIR / "patterns" / "labels.csv"
BROAD_DEFAULT = 0.9  # entropy / ln n above which an otherwise unpatterned map is broad, when no label says

# Candidate thresholds searched by fit_thresholds (all combinations), set before any fit on these features. A map
# uniform within each half of a pair has locality 0.49-0.58 (8 to 64 tokens): block stops below, so that this
# block by construction stays a block whatever the labels.
GRID = {
    "diagonal": tuple(np.round(np.arange(0.02, 0.301, 0.02), 2)),
    "mix_stripes": tuple(np.round(np.arange(0.1, 0.601, 0.05), 2)),
    "block": tuple(np.round(np.arange(0.1, 0.451, 0.05), 2)),
    "vertical": tuple(np.round(np.arange(0.1, 0.601, 0.05), 2)),
    "broad": tuple(np.round(np.arange(0.6, 0.951, 0.05), 2)),
}

# fit_thresholds on the 440 maps of data/patterns/labels.csv (six-way labels): agreement 0.74, macro-F1 0.65
# in-sample; 5-fold cross-validated 0.73 and 0.63. Refit (`fit_thresholds(labelled_features(...))`) whenever the
# labels change; these are the defaults, e.g. for models without labels.
THRESHOLDS = {"diagonal": 0.06, "mix_stripes": 0.3, "block": 0.4, "vertical": 0.2, "broad": 0.95}


# -- features ---------------------------------------------------------------------------------------
def batch_features(attn: torch.Tensor, valid: torch.Tensor, special: torch.Tensor, segment: torch.Tensor,
                   unit: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """The FEATURES of every map of a padded batch, and the EXTRA ones.

    attn [B, L, H, T, T] (padded columns 0, padded rows ignored); valid, special (is [CLS] or [SEP]) bool [B, T];
    segment [B, T] (0/1); unit [B, T]: sentence numbers (`sentence_units`; the segments when None).
    Returns name -> float tensor [B, L, H]."""
    attn = attn.float()
    T = attn.shape[-1]
    validf = valid.float()
    n = validf.sum(1)  # [B]
    rows = validf[:, None, None, :]  # [B, 1, 1, T]: weights of the rows
    # stripes
    column_mass = (attn * validf[:, None, None, :, None]).sum(3) / n[:, None, None, None]  # [B, L, H, T]
    k = min(STRIPE_COLUMNS, T)
    chance = (k / n).clamp_max(1)[:, None, None]
    top = column_mass.topk(k, dim=-1).values.sum(-1)
    stripes = ((top - chance) / (1 - chance).clamp_min(1e-6)).clamp_min(0)
    # diagonal, against the row's own mass on its segment spread evenly over it
    real = valid & ~special  # [B, T]
    realf = real.float()
    position = torch.arange(T)
    distance = (position[:, None] - position[None, :]).abs().float()  # [T, T]
    near = (distance <= 1).float()[None] * realf[:, None, :]  # [B, T, T]: real columns at offsets -1..1
    same = (segment[:, :, None] == segment[:, None, :]).float() * realf[:, None, :]  # real columns, own segment
    size = same.sum(-1).clamp_min(1)  # [B, T]
    expected_share = (near * same).sum(-1) / size  # [B, T]: share of the segment's columns that are near
    on_near = (attn * near[:, None, None]).sum(-1)  # [B, L, H, T]
    on_segment = (attn * same[:, None, None]).sum(-1)
    real_rows = realf[:, None, None, :]
    n_real = realf.sum(1).clamp_min(1)[:, None, None]
    diagonal = ((on_near - expected_share[:, None, None] * on_segment) * real_rows).sum(-1) / n_real
    # locality: mean distance of the row's real-token attention, against a row spread over all real tokens
    spread_distance = (distance[None] * realf[:, None, :]).sum(-1) / n_real[:, 0, 0, None]  # [B, T]
    on_real = (attn * realf[:, None, None, None, :]).sum(-1)  # [B, L, H, T]
    weighted = (attn * (distance[None] * realf[:, None, :])[:, None, None]).sum(-1)  # sum_j a_ij |i - j|
    ratio = weighted / spread_distance.clamp_min(1e-6)[:, None, None]
    mass = (on_real * real_rows).sum(-1)
    locality = torch.where(mass > 1e-6, ((on_real - ratio) * real_rows).sum(-1) / mass.clamp_min(1e-6),
                           torch.zeros_like(mass))
    # entropy
    row_entropy = -(attn * attn.clamp_min(1e-12).log()).sum(-1)  # [B, L, H, T]
    entropy = (row_entropy * rows).sum(-1) / n[:, None, None] / n.clamp_min(2).log()[:, None, None]
    # within (reported): of a real row's attention to real tokens, the share that stays in its own segment
    share = on_segment / on_real.clamp_min(1e-12)
    is_pair = (segment.amax(1) > 0).float()[:, None, None]
    within = (share * real_rows).sum(-1) / n_real * is_pair
    return {"stripes": stripes, "diagonal": diagonal, "locality": locality, "entropy": entropy, "within": within,
            **_row_features(attn, valid, special, segment if unit is None else unit, distance)}


def _row_features(attn: torch.Tensor, valid: torch.Tensor, special: torch.Tensor, unit: torch.Tensor,
                  distance: torch.Tensor) -> dict[str, torch.Tensor]:
    """The EXTRA features but within (see the module's docstring) of batch_features' maps: name -> [B, L, H]."""
    realf = (valid & ~special).float()  # [B, T]
    n = valid.float().sum(1)[:, None, None]
    n_real = realf.sum(1)[:, None, None]
    first = attn[..., 0].mul(valid.float()[:, None, None]).sum(-1) / n
    sinks = (attn * (special.float() * valid.float())[:, None, None, None]).sum(-1).mul(valid.float()[:, None, None]
                                                                                         ).sum(-1) / n - first
    a = attn * realf[:, None, None, None, :] * realf[:, None, None, :, None]  # real rows, real columns
    mass = a.sum(-1)  # [B, L, H, T]
    total = mass.sum(-1).clamp_min(1e-12)  # [B, L, H]
    p = a / mass.clamp_min(1e-12)[..., None]  # rows renormalised over real tokens

    def mean(per_row: torch.Tensor) -> torch.Tensor:  # [B, L, H, T] -> the mass-weighted mean over real rows
        return (per_row * mass).sum(-1) / total

    near = mean((p * (distance <= 1).float()).sum(-1))
    spread = mean(-(p * p.clamp_min(1e-12).log()).sum(-1)) / n_real.clamp_min(2).log()
    peak = mean(p.amax(-1))
    by_distance = torch.zeros_like(p).scatter_add_(-1, distance.long().expand_as(p), p)  # [..., T]: mass at |i - j| = d
    half_band = mean((by_distance.cumsum(-1) < 0.5).float().sum(-1)) / n_real.clamp_min(1)
    same = (unit[:, :, None] == unit[:, None, :]).float() * realf[:, None, :]  # [B, T, T]: real columns, own unit
    expected = same.sum(-1) / realf.sum(1, keepdim=True).clamp_min(1)  # [B, T]
    inside = (p * same[:, None, None]).sum(-1)
    whole = expected[:, None, None] > 1 - 1e-6
    in_unit = mean(torch.where(whole, torch.zeros_like(inside),
                               (inside - expected[:, None, None]) / (1 - expected[:, None, None]).clamp_min(1e-6)))
    beyond = (distance > 1).float()  # [T, T]
    far_mass = (a * beyond).sum(-1)  # [B, L, H, T]
    far_spread = (distance * beyond * realf[:, None, :]).sum(-1) / (beyond * realf[:, None, :]).sum(-1).clamp_min(1)
    far_distance = (a * distance * beyond).sum(-1) / far_spread.clamp_min(1e-6)[:, None, None]
    kept = (far_mass > 1e-6 * mass).float()
    far_total = (far_mass * kept).sum(-1)
    far_local = torch.where(far_total > 1e-12, ((far_mass - far_distance) * kept).sum(-1) / far_total.clamp_min(1e-12),
                            torch.zeros_like(far_total))
    return {"first": first, "sinks": sinks, "near": near, "spread": spread, "peak": peak, "half_band": half_band,
            "in_unit": in_unit, "far": far_mass.sum(-1) / total, "far_local": far_local}


def sentence_units(tokens: Sequence[str], segment_ids: Sequence[int]) -> list[int]:
    """A unit number per token: a new unit after every SENTENCE_ENDS token and at every new segment."""
    units, current = [], 0
    for i, (_, segment) in enumerate(zip(tokens, segment_ids)):
        if i and (tokens[i - 1] in SENTENCE_ENDS or segment != segment_ids[i - 1]):
            current += 1
        units.append(current)
    return units


def _units(inputs: Sequence, width: int) -> torch.Tensor:
    """`sentence_units` of each input (objects with tokens and segment_ids), padded with -1: [B, width]."""
    return torch.tensor([(sentence_units(x.tokens, x.segment_ids) + [-1] * width)[:width] for x in inputs])


def encoded_features(enc: Encoded) -> dict[str, np.ndarray]:
    """The features of every head of one input: name -> [L, H]."""
    check_attention(enc.attn)
    special = torch.tensor([t in (enc.cls_token, enc.sep_token) for t in enc.tokens])[None]
    feats = batch_features(torch.from_numpy(np.asarray(enc.attn, dtype=np.float32))[None],
                           torch.ones(1, enc.n_tokens, dtype=torch.bool), special,
                           torch.tensor(list(enc.segment_ids))[None], _units([enc], enc.n_tokens))
    return {name: value[0].numpy() for name, value in feats.items()}


def map_features(attn_map: np.ndarray, tokens: Sequence[str], segment_ids: Sequence[int],
                 cls_token: str = "[CLS]", sep_token: str = "[SEP]") -> dict[str, float]:
    """The features of one map attn_map [n, n] (rows summing to 1) over `tokens` with `segment_ids`."""
    attn_map = np.asarray(attn_map, dtype=np.float32)
    n = len(tokens)
    if attn_map.shape != (n, n) or len(segment_ids) != n:
        raise ValueError(f"attn_map must be [n, n] and segment_ids [n] for the n = {n} tokens; "
                         f"got {attn_map.shape} and {len(segment_ids)} segment ids")
    feats = encoded_features(Encoded(list(tokens), list(range(n)), list(tokens), list(segment_ids),
                                     attn_map[None, None], cls_token, sep_token))
    return {name: float(value[0, 0]) for name, value in feats.items()}


# -- rules ------------------------------------------------------------------------------------------
def _check_thresholds(t: Mapping[str, float]) -> dict[str, float]:
    missing = sorted(set(GRID) - set(t))
    if missing:
        raise ValueError(f"thresholds miss {missing}; give all of {list(GRID)} (e.g. from fit_thresholds)")
    return {k: float(t[k]) for k in GRID}


def classify_features(features: Mapping[str, np.ndarray], thresholds: Mapping[str, float] | None = None
                      ) -> np.ndarray:
    """The six-way kind of every map: features name -> array (any shape, e.g. [N] or [N, L, H]) -> array of
    KINDS names of that shape."""
    t = _check_thresholds(THRESHOLDS if thresholds is None else thresholds)
    stripes, diagonal = np.asarray(features["stripes"]), np.asarray(features["diagonal"])
    locality, entropy = np.asarray(features["locality"]), np.asarray(features["entropy"])
    is_diagonal = diagonal >= t["diagonal"]
    conditions = [is_diagonal & (stripes >= t["mix_stripes"]), is_diagonal, locality >= t["block"],
                  stripes >= t["vertical"], entropy >= t["broad"]]
    choices = ["vertical+diagonal", "diagonal", "block", "vertical", "broad"]
    return np.select(conditions, choices, default="heterogeneous").astype(object)


def map_kind(attn_map: np.ndarray, tokens: Sequence[str], segment_ids: Sequence[int],
             thresholds: Mapping[str, float] | None = None, cls_token: str = "[CLS]", sep_token: str = "[SEP]") -> str:
    """One of KINDS (broad apart) for one map attn_map [n, n] over `tokens` and `segment_ids`."""
    feats = map_features(attn_map, tokens, segment_ids, cls_token, sep_token)
    return str(classify_features({k: np.array(v) for k, v in feats.items()}, thresholds))


def classify_map(attn_map: np.ndarray, tokens: Sequence[str], segment_ids: Sequence[int],
                 thresholds: Mapping[str, float] | None = None, cls_token: str = "[CLS]",
                 sep_token: str = "[SEP]") -> str:
    """One of Kovaleva's five PATTERNS (broad counts as heterogeneous) for one map attn_map [n, n]."""
    return str(to_pattern(map_kind(attn_map, tokens, segment_ids, thresholds, cls_token, sep_token)))


# -- fitting ------------------------------------------------------------------------------------------
def fit_thresholds(features: pd.DataFrame, labels: Sequence[str], grid: Mapping[str, Sequence[float]] = GRID
                   ) -> dict[str, float]:
    """The grid point whose rules agree best (macro-F1) with `labels`, in the labels' scheme; ties go to the
    first point in grid order. Against five-way labels broad is not fitted: it is BROAD_DEFAULT.

    features: one row per map with the FEATURES columns; labels [N]."""
    labels = np.asarray(labels, dtype=object)
    if len(labels) != len(features) or not len(labels):
        raise ValueError(f"need one label per map and at least one map; got {len(labels)} labels, "
                         f"{len(features)} maps")
    scheme = label_scheme(labels)
    grid = {k: np.asarray(grid[k] if "broad" in scheme or k != "broad" else (BROAD_DEFAULT,), dtype=float)
            for k in GRID}
    code = {k: i for i, k in enumerate(KINDS)}
    heterogeneous = code["heterogeneous"]
    broad = code["broad"] if "broad" in scheme else heterogeneous
    K = len(KINDS)
    truth = kind_codes(labels, scheme)  # [N] (scheme is a prefix of KINDS)
    f = {k: features[k].to_numpy(dtype=float) for k in FEATURES}
    above = lambda name, key: f[name][None, :] >= grid[key][:, None]  # noqa: E731  [values, N]
    # rules 2-5 for every (block, vertical, broad) point, and the two outcomes of rule 1 for every mix_stripes
    # point, as cells of per-point confusion matrices: point * K * K + truth * K + predicted
    rest = np.where(above("locality", "block")[:, None, None], code["block"],
                    np.where(above("stripes", "vertical")[None, :, None], code["vertical"],
                             np.where(above("entropy", "broad")[None, None], broad, heterogeneous)))
    rest = rest.reshape(-1, len(labels))  # [Nb * Nv * Nr, N]
    mixed = np.where(above("stripes", "mix_stripes"), code["vertical+diagonal"], code["diagonal"])  # [Nm, N]
    cells = lambda predicted: (np.arange(len(predicted))[:, None] * K * K + truth * K + predicted)  # noqa: E731
    rest_cells, mixed_cells = cells(rest), cells(mixed)
    shape = (len(grid["block"]), len(grid["vertical"]), len(grid["broad"]))
    best, best_score = None, -1.0
    for d, is_diagonal in enumerate(above("diagonal", "diagonal")):
        on_mixed = np.bincount(mixed_cells[:, is_diagonal].ravel(), minlength=mixed.shape[0] * K * K)
        on_rest = np.bincount(rest_cells[:, ~is_diagonal].ravel(), minlength=rest.shape[0] * K * K)
        confusion = on_mixed.reshape(-1, 1, K, K) + on_rest.reshape(1, -1, K, K)  # [Nm, Nb * Nv * Nr, K, K]
        scores = confusion_macro_f1(confusion)
        i = int(np.argmax(scores))
        if scores.flat[i] > best_score + 1e-12:
            m, rule = np.unravel_index(i, scores.shape)
            b, v, r = np.unravel_index(rule, shape)
            best_score = float(scores.flat[i])
            best = {"diagonal": grid["diagonal"][d], "mix_stripes": grid["mix_stripes"][m],
                    "block": grid["block"][b], "vertical": grid["vertical"][v], "broad": grid["broad"][r]}
    return {k: float(v) for k, v in best.items()}


def cross_validate(features: pd.DataFrame, labels: Sequence[str], folds: int = 5, seed: int = 0,
                   grid: Mapping[str, Sequence[float]] = GRID, fold_of: Sequence[int] | None = None) -> pd.DataFrame:
    """Out-of-fold predictions: the thresholds are refitted on the other folds for every fold
    (`stratified_folds(labels, folds, seed)`, or the fold numbers 0..folds-1 of `fold_of` [N] when given).
    Returns features' index with `label`, `predicted` (six-way kind), `fold`; `.attrs["thresholds"]` holds
    each fold's thresholds."""
    labels = np.asarray(labels, dtype=object)
    fold_of = check_folds(fold_of, len(labels), folds) if fold_of is not None else stratified_folds(labels, folds, seed)
    predicted = np.empty(len(labels), dtype=object)
    fitted = []
    for fold in range(folds):
        train, test = fold_of != fold, fold_of == fold
        t = fit_thresholds(features[train], labels[train], grid)
        predicted[test] = classify_features({k: features[k].to_numpy()[test] for k in FEATURES}, t)
        fitted.append(t)
    result = pd.DataFrame({"label": labels, "predicted": predicted, "fold": fold_of}, index=features.index)
    result.attrs["thresholds"] = fitted
    return result


def bootstrap_thresholds(features: pd.DataFrame, labels: Sequence[str], n_boot: int = 100, seed: int = 0,
                         grid: Mapping[str, Sequence[float]] = GRID) -> list[dict[str, float]]:
    """Thresholds refitted on `n_boot` bootstrap resamples of the labelled maps (seeded): how far the fit moves
    when the labels are redrawn, for `classifier_shares`' sensitivity band."""
    labels = np.asarray(labels, dtype=object)
    rng = np.random.default_rng(seed)
    fits = []
    for _ in range(n_boot):
        pick = rng.integers(0, len(labels), len(labels))
        fits.append(fit_thresholds(features.iloc[pick], labels[pick], grid))
    return fits


# -- over many inputs -------------------------------------------------------------------------------
class PatternFeatures(RowReducer):
    """The FEATURES (and EXTRA) of every head's map for every input, to classify later with any thresholds:
    `arrays` name -> [N inputs, L, H]."""

    name = "pattern-features"

    def update(self, batch: Batch) -> None:
        feats = batch_features(batch.attn, batch.valid, batch.sinks, batch.segment,
                               _units(batch.inputs, batch.valid.shape[1]))
        self.add(**{k: v.numpy() for k, v in feats.items()})


def head_features(encoder: Encoder, items: Sequence, batch_size: int = 32, progress: bool = True,
                  **reduce_options) -> dict[str, np.ndarray]:
    """The features of every head on every input (texts or (a, b) pairs): name -> [N, L, H]; one cached
    streaming pass (`extract.reduce`; reduce_options such as cache_dir go to it)."""
    reducer = reduce(encoder, list(items), [PatternFeatures()], batch_size=batch_size, progress=progress,
                     desc=f"pattern features of {encoder.name}", **reduce_options)[0]
    return reducer.arrays


def classify_with(features: Mapping[str, np.ndarray], classifier=None) -> np.ndarray:
    """The kind of every map by `classifier`: thresholds for the rules (None: THRESHOLDS), or a fitted
    classifier with a `classify(features)` method (`patternlearn.LearnedClassifier`). Same shape as the features."""
    if hasattr(classifier, "classify"):
        return classifier.classify(features)
    return classify_features(features, classifier)


def shares_by_layer(features: Mapping[str, np.ndarray], thresholds=None) -> pd.DataFrame:
    """The share of each kind per layer over inputs and heads: features name -> [N, L, H]; `thresholds` as in
    `classify_with` (rules or a learned classifier); rows = layers (1-indexed), columns = KINDS, rows sum to 1."""
    kinds = classify_with(features, thresholds)  # [N, L, H]
    if kinds.ndim != 3 or not kinds.size:
        raise ValueError(f"features must be [inputs, layers, heads] arrays with at least one input; got {kinds.shape}")
    shares = np.stack([(kinds == k).mean(axis=(0, 2)) for k in KINDS], axis=1)
    return pd.DataFrame(shares, columns=list(KINDS), index=pd.Index(range(1, kinds.shape[1] + 1), name="layer"))


def classifier_shares(features: Mapping[str, np.ndarray], thresholds, threshold_sets: Sequence,
                      level: float = 0.95) -> pd.DataFrame:
    """The share of each kind per layer (and over all layers, layer "all") with `thresholds`, and its
    sensitivity band: the central `level` range of the shares over `threshold_sets` (e.g. from
    `bootstrap_thresholds`). Thresholds or learned classifiers (`classify_with`; `patternlearn.bootstrap`
    for the band). Long frame: layer, kind, share, low, high."""
    if not threshold_sets:
        raise ValueError("give at least one set of thresholds for the band (e.g. bootstrap_thresholds(...))")

    def with_all(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.copy()
        frame.index = frame.index.astype(object)
        frame.loc["all"] = frame.mean()  # every layer has the same number of maps
        return frame

    point = with_all(shares_by_layer(features, thresholds))
    sets = np.stack([with_all(shares_by_layer(features, t)).to_numpy() for t in threshold_sets])
    tail = (1 - level) / 2
    low, high = np.quantile(sets, tail, axis=0), np.quantile(sets, 1 - tail, axis=0)
    rows = [{"layer": layer, "kind": kind, "share": point.iloc[i, j], "low": low[i, j], "high": high[i, j]}
            for i, layer in enumerate(point.index) for j, kind in enumerate(point.columns)]
    return pd.DataFrame(rows)


def map_similarity(before: Encoder, after: Encoder, items: Sequence, batch_size: int = 32,
                   progress: bool = True) -> np.ndarray:
    """Per head, the cosine similarity of the flattened maps of two encoders on the same inputs, averaged
    over inputs: [L, H]. The encoders must share a tokenizer (a model and its fine-tuned copy)."""
    from tqdm.auto import tqdm

    if (before.n_layers, before.n_heads) != (after.n_layers, after.n_heads):
        raise ValueError("the two encoders have different numbers of layers or heads")
    items = list(items)
    total = None
    bar = tqdm(total=len(items), desc="map similarity", unit="input", disable=not progress)
    pairs = zip(before.attention_batches(items, batch_size), after.attention_batches(items, batch_size))
    for (prep_a, attn_a, valid), (_, attn_b, _) in pairs:
        # padded rows are not zero: zero them so that the flattened maps hold only real rows
        rows = valid[:, None, None, :, None].float()
        a, b = (attn_a * rows).flatten(3), (attn_b * rows).flatten(3)
        cos = (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1)).clamp_min(1e-12)  # [B, L, H]
        total = cos.sum(0) if total is None else total + cos.sum(0)
        bar.update(len(prep_a))
    bar.close()
    return (total / len(items)).numpy()


# -- the hand labels --------------------------------------------------------------------------------
def load_labels(path: Path | str = LABELS_PATH) -> pd.DataFrame:
    """The hand labels: map_id, variant, input, layer, head (1-indexed), label (one of KINDS), sample (random
    or targeted; "random" for every map when the file has no such column) and task (from the input id,
    "topic/6" -> "topic")."""
    labels = pd.read_csv(path, comment="#")
    missing = sorted({"map_id", "variant", "input", "layer", "head", "label"} - set(labels.columns))
    if missing:
        raise ValueError(f"{path}: missing columns {missing}")
    bad = sorted(set(labels["label"]) - set(KINDS))
    if bad:
        raise ValueError(f"{path}: unknown labels {bad}; use one of {KINDS}")
    if "sample" not in labels:
        labels["sample"] = "random"
    bad = sorted(set(labels["sample"]) - set(SAMPLES))
    if bad:
        raise ValueError(f"{path}: unknown samples {bad}; use one of {SAMPLES}")
    if not labels["map_id"].is_unique or labels["layer"].min() < 1 or labels["head"].min() < 1:
        raise ValueError(f"{path}: map ids must be unique and layers and heads 1-indexed")
    return labels.assign(task=labels["input"].str.partition("/")[0])


def labelled_maps(labels: pd.DataFrame, encoders: Mapping[str, Encoder], inputs: Mapping[str, object],
                  batch_size: int = 16) -> list[Encoded]:
    """Regenerate every labelled map: one `Encoded` per row of `labels` (in order) whose attn is that map alone,
    [1, 1, n, n].

    encoders: variant -> Encoder (e.g. "pretrained", "topic", "next_paragraph"); inputs: input id -> the text
    or (a, b) pair."""
    maps: dict[int, Encoded] = {}
    for variant, group in labels.groupby("variant", sort=True):
        if variant not in encoders:
            raise ValueError(f"labels need the model variant {variant!r}; give it in `encoders`")
        ids = sorted(set(group["input"]))
        missing = [i for i in ids if i not in inputs]
        if missing:
            raise ValueError(f"unknown input ids {missing[:5]}: give their texts in `inputs`")
        encoded = dict(zip(ids, encoders[variant].encode_many([inputs[i] for i in ids], batch_size)))
        for index, row in group.iterrows():
            enc = encoded[row["input"]]
            attn = enc.attn[int(row["layer"]) - 1, int(row["head"]) - 1][None, None].copy()
            maps[index] = Encoded(enc.tokens, enc.word_ids, enc.words, enc.segment_ids, attn, enc.cls_token,
                                  enc.sep_token)
    return [maps[index] for index in labels.index]


def labelled_features(labels: pd.DataFrame, encoders: Mapping[str, Encoder], inputs: Mapping[str, object],
                      batch_size: int = 16, maps: Sequence[Encoded] | None = None) -> pd.DataFrame:
    """`labels` with the FEATURES and EXTRA columns and `is_pair`, from the regenerated maps (`labelled_maps`, or `maps`
    when given, one per row)."""
    maps = labelled_maps(labels, encoders, inputs, batch_size) if maps is None else maps
    rows = [{**{k: float(v[0, 0]) for k, v in encoded_features(m).items()}, "is_pair": len(set(m.segment_ids)) > 1}
            for m in maps]
    return labels.join(pd.DataFrame(rows, index=labels.index))


def label_shares(labels: pd.DataFrame, by: Sequence[str] = ("variant", "task", "layer"), level: float = 0.95
                 ) -> pd.DataFrame:
    """The share of each kind among the hand labels of the random sample (targeted maps left out), per group
    of `by` columns and for each group over all layers (layer "all" when "layer" is in `by`), with Wilson
    intervals. Long frame: the `by` columns, kind, count, n, share, low, high."""
    by = list(by)
    sample = labels[labels["sample"] == "random"] if "sample" in labels else labels
    if sample.empty:
        raise ValueError("no labelled maps of the random sample: shares need maps drawn at random")
    bad = sorted(set(sample["label"]) - set(KINDS))
    if bad:
        raise ValueError(f"unknown labels {bad}; use one of {KINDS}")
    missing = [c for c in by if c not in sample]
    if missing:
        raise ValueError(f"labels have no columns {missing}")
    parts = [sample]
    if "layer" in by:
        parts.append(sample.assign(layer="all"))
    rows = []
    for part in parts:
        for key, group in part.groupby(by, sort=True) if by else [((), part)]:
            key = key if isinstance(key, tuple) else (key,)
            counts = group["label"].value_counts()
            for kind in KINDS:
                count = int(counts.get(kind, 0))
                low, high = wilson_interval(count, len(group), level)
                rows.append({**dict(zip(by, key)), "kind": kind, "count": count, "n": len(group),
                             "share": count / len(group), "low": low, "high": high})
    return pd.DataFrame(rows)
