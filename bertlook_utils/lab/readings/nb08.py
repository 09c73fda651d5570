"""Notebook 08 (Kovaleva et al. §4.1, §4.3: attention patterns and what fine-tuning changes): the numbers its prose
and checks use.

Accuracy gaps are in points (100 x the difference of two accuracies of `finetune.task_scores`); pattern shares are
fractions of all maps, with the intervals of `patterns.classifier_shares` (refit bands: how much a share moves when
the classifier is refitted on resampled labels, not sampling intervals), `patterns.label_shares` (Wilson) and
`share_change` (a bootstrap over inputs, per fine-tuning seed); cosine similarities per layer are
`patterns.map_similarity`'s means over heads; layers are 1-indexed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ...analyses.finetune import Score, Stage
from ...data.tasks import TaskData
from ...analyses.patterns import label_shares, to_pattern
from ...present import paper

RULES, LEARNED, CNN = "rules", "learned", "CNN"  # the classifiers' names in the notebook's tables
UNPATTERNED = ["heterogeneous", "broad"]  # the paper's heterogeneous kind: broad maps counted with it


# -- fine-tuning against the baselines --------------------------------------------------------------
@dataclass(frozen=True)
class TaskGains:
    """What fine-tuning gains per task (in the order of `tasks`), in points: over the untrained head, over a linear
    head on the frozen mean-pooled states and on the frozen `[CLS]` state."""

    tasks: tuple[str, ...]
    over_untrained: tuple[float, ...]  # fine-tuned - untrained head, per task
    mean_over_untrained: float  # its mean over tasks
    min_over_untrained: float  # its smallest
    over_mean: tuple[float, ...]  # fine-tuned - frozen mean-pooled, per task
    min_over_mean: float  # its smallest
    over_cls: tuple[float, ...]  # fine-tuned - frozen [CLS], per task
    mean_beats_cls: int  # tasks on which the frozen mean-pooled head scores above the frozen [CLS] one
    untrained_off_majority: float  # largest |untrained head - majority class| over tasks


def task_gains(scores: pd.DataFrame) -> TaskGains:
    """scores: `finetune.task_scores` (one row per task, one accuracy column per `finetune.Score`)."""
    def points(baseline: Score) -> pd.Series:
        return 100 * (scores[Score.FINE_TUNED] - scores[baseline])

    gain, over_mean, over_cls = points(Score.UNTRAINED), points(Score.FROZEN_MEAN), points(Score.FROZEN_CLS)
    return TaskGains(
        tasks=tuple(str(task) for task in scores.index), over_untrained=tuple(map(float, gain)),
        mean_over_untrained=float(gain.mean()), min_over_untrained=float(gain.min()),
        over_mean=tuple(map(float, over_mean)), min_over_mean=float(over_mean.min()),
        over_cls=tuple(map(float, over_cls)),
        mean_beats_cls=int((scores[Score.FROZEN_MEAN] > scores[Score.FROZEN_CLS]).sum()),
        untrained_off_majority=float((100 * (scores[Score.UNTRAINED] - scores[Score.MAJORITY])).abs().max()))


@dataclass(frozen=True)
class TaskSizes:
    """The tasks' split sizes: how many tasks, and each distinct number of training and of test inputs per task,
    ascending."""

    n_tasks: int
    n_train: tuple[int, ...]
    n_test: tuple[int, ...]


def task_sizes(tasks: Mapping[str, TaskData]) -> TaskSizes:
    """tasks: name -> `TaskData`."""
    return TaskSizes(n_tasks=len(tasks), n_train=tuple(sorted({len(data.train) for data in tasks.values()})),
                     n_test=tuple(sorted({len(data.test) for data in tasks.values()})))


# -- the classifiers against the hand labels ---------------------------------------------------------
def confused_pairs(first: Sequence[str], second: Sequence[str]) -> pd.Series:
    """Where two labellings of the same maps differ: (kind, kind) in alphabetical order -> how many maps, most
    frequent first."""
    return pd.Series([tuple(sorted(pair)) for pair in zip(first, second) if pair[0] != pair[1]]).value_counts()


@dataclass(frozen=True)
class ClassifierAgreement:
    """The cross-validated classifiers against the hand labels (accuracy a fraction, macro-F1 and F1 per kind in
    [0, 1]); the best is the one with the highest macro-F1 over the six kinds."""

    best: str  # the best classifier's name (a row of the table)
    accuracy: float  # its accuracy
    macro_f1: float  # its macro-F1, six kinds
    macro_f1_five: float  # its macro-F1 with broad counted as heterogeneous (the paper's five kinds)
    f1_vertical: float  # its F1 on vertical maps
    f1_other_max: float  # its largest F1 on any other kind
    rules_macro_f1: float  # the rules' macro-F1
    rules_f1_block: float  # the rules' F1 on block maps
    cnn_macro_f1: float  # the CNN's macro-F1
    max_macro_f1: float  # the largest macro-F1 of any classifier
    max_accuracy: float  # the largest accuracy of any classifier
    confused: tuple[tuple[str, str, int], ...]  # the best's most frequent confusions: (kind, kind, maps)
    n_confused_wavered: int  # how many of those pairs the labeller's second look also confused


def classifier_agreement(table: pd.DataFrame, truth: Sequence[str], predicted: Mapping[str, Sequence[str]],
                         first_look: Sequence[str], second_look: Sequence[str], top: int = 3) -> ClassifierAgreement:
    """table: one row per classifier (at least `RULES` and `CNN`) with columns accuracy, macro-F1, "macro-F1, five
    kinds" and "F1 <kind>"; truth: the hand labels; predicted: classifier (a row of the table) -> its out-of-fold
    labels of the same maps; first_look, second_look: the labeller's two labels of the relabelled maps; top: how
    many of the best's confusions to keep."""
    best = str(table["macro-F1"].idxmax())
    f1 = table.loc[best].filter(like="F1 ")  # the per-kind columns
    confused = confused_pairs(truth, predicted[best]).head(top)
    wavered = set(confused_pairs(first_look, second_look).index)
    return ClassifierAgreement(
        best=best, accuracy=float(table.loc[best, "accuracy"]), macro_f1=float(table.loc[best, "macro-F1"]),
        macro_f1_five=float(table.loc[best, "macro-F1, five kinds"]), f1_vertical=float(f1["F1 vertical"]),
        f1_other_max=float(f1.drop(["F1 vertical"]).max()), rules_macro_f1=float(table.loc[RULES, "macro-F1"]),
        rules_f1_block=float(table.loc[RULES, "F1 block"]), cnn_macro_f1=float(table.loc[CNN, "macro-F1"]),
        max_macro_f1=float(table["macro-F1"].max()), max_accuracy=float(table["accuracy"].max()),
        confused=tuple((a, b, int(n)) for (a, b), n in confused.items()),
        n_confused_wavered=len(set(confused.index) & wavered))


@dataclass(frozen=True)
class SeedSpread:
    """How far the CNN's cross-validated scores move with its seed (scores in [0, 1])."""

    n_seeds: int  # nets compared, one per seed, each scored over the same folds
    macro_f1_low: float  # the lowest macro-F1 over the seeds
    macro_f1_high: float  # the highest
    accuracy_high: float  # the highest accuracy over the seeds
    widest_kind: str  # the kind whose F1 moves most over the seeds
    widest_range: float  # by how much (highest - lowest)


def seed_spread(by_seed: pd.DataFrame) -> SeedSpread:
    """by_seed: one row per seed, the columns of a score table (`patterns.classifier_scores`: macro-F1,
    "F1 <kind>", ...)."""
    if len(by_seed) < 2:
        raise ValueError("a spread needs at least two seeds")
    ranges = (by_seed.filter(like="F1 ").max() - by_seed.filter(like="F1 ").min()).dropna()
    return SeedSpread(n_seeds=len(by_seed), macro_f1_low=float(by_seed["macro-F1"].min()),
                      macro_f1_high=float(by_seed["macro-F1"].max()), accuracy_high=float(by_seed["accuracy"].max()),
                      widest_kind=str(ranges.idxmax()).removeprefix("F1 "), widest_range=float(ranges.max()))


# -- the heterogeneous share -----------------------------------------------------------------------
@dataclass(frozen=True)
class HeterogeneousShare:
    """The heterogeneous share counted the paper's way (broad maps included) over every (task, model), by a
    classifier over all maps and by the random sample of hand labels, against the paper's range; and, for one task,
    whether fine-tuning raises it beyond the refit bands and the labels' intervals."""

    classifier: str  # the classifier read: the learned model when there is one, else the rules
    unpatterned_min: float  # its smallest heterogeneous + broad share over (task, model)
    unpatterned_max: float  # its largest
    largest_kinds: tuple[str, ...]  # the kinds that are its largest for some (task, model), sorted
    labels_min: float  # the labels' smallest heterogeneous share (broad included) over (task, model)
    labels_max: float  # their largest
    labels_high_max: float  # the largest upper end of their Wilson intervals
    layer_one_min: float  # by the rules, the smallest heterogeneous + broad share of layer 1's maps, over (task, model)
    layer_one_max: float  # the largest
    top_layers: tuple[int, ...]  # the layers with the largest heterogeneous + broad share (rules) of some (task, model)
    labels_reach_paper: tuple[tuple[str, str], ...]  # (task, model) whose labels' upper Wilson end reaches paper_low
    labels_tuned_high: float  # for `task`: the labels' upper Wilson end for the heterogeneous share, fine-tuned
    labels_tuned_low: float  # and their lower end
    labels_pretrained_high: float  # their upper end, pre-trained
    labels_n: tuple[int, ...]  # for `task`: the random hand-labelled maps per model, each distinct count ascending
    band_gap: float  # for `task`, min over classifiers of fine-tuned band low - pre-trained band high (> 0: apart)
    paper_low: float  # the paper's lowest heterogeneous share
    paper_high: float  # its highest
    paper_low_task: str  # the paper's task with the lowest share (MRPC)
    paper_high_task: str  # with the highest (QQP)

    @property
    def labels_reach(self) -> str:
        """Whether the labels' intervals reach the paper's lowest share, as the prose's sentence says it."""
        if not self.labels_reach_paper:
            return "No interval of the labels reaches it"
        models = ", ".join(f"the {model} {task} model" for task, model in self.labels_reach_paper)
        return f"The labels cannot exclude {100 * self.paper_low:.0f} %: their intervals reach it for {models}"

    @property
    def labels_counts(self) -> str:
        """The hand-labelled maps per model in words: "60", or "30 or 60"."""
        return " or ".join(map(str, self.labels_n))


def heterogeneous_share(overall: Mapping[str, pd.DataFrame], by_model: pd.DataFrame,
                        per_layer: Mapping[object, pd.DataFrame], classifiers: Sequence[str],
                        task: str = "topic") -> HeterogeneousShare:
    """overall: name -> long frame (task, model: a `finetune.Stage`, kind, share, low, high) of the shares over all
    layers, for each classifier in `classifiers` (`patterns.classifier_shares`' layer "all"); per_layer: (task,
    model) -> the rules' shares per layer (`patterns.shares_by_layer`); by_model: the hand labels with a model
    column (a `finetune.Stage`); task: the task whose change under fine-tuning is read."""
    five = label_shares(by_model.assign(label=to_pattern(by_model["label"])), by=("task", "model"))
    five = five[five["kind"] == "heterogeneous"].set_index(["task", "model"])
    read = LEARNED if LEARNED in classifiers else RULES
    best = overall[read].set_index(["task", "model", "kind"])["share"]
    unpatterned = best.xs("heterogeneous", level="kind") + best.xs("broad", level="kind")
    layer_one = [shares.loc[1, UNPATTERNED].sum() for shares in per_layer.values()]

    def heterogeneous(frame: pd.DataFrame, stage: Stage) -> pd.Series:
        return frame.set_index(["task", "model", "kind"]).loc[(task, stage, "heterogeneous")]

    low, high = paper.DARK_SECRETS["heterogeneous_share"]
    return HeterogeneousShare(
        classifier=read, unpatterned_min=float(unpatterned.min()), unpatterned_max=float(unpatterned.max()),
        largest_kinds=tuple(sorted(set(best.unstack("kind").idxmax(axis=1)))),
        labels_min=float(five["share"].min()), labels_max=float(five["share"].max()),
        labels_high_max=float(five["high"].max()),
        layer_one_min=float(min(layer_one)), layer_one_max=float(max(layer_one)),
        top_layers=tuple(sorted({int(shares[UNPATTERNED].sum(axis=1).idxmax()) for shares in per_layer.values()})),
        labels_reach_paper=tuple((str(t), str(m)) for (t, m), reach in (five["high"] >= low).items() if reach),
        labels_tuned_high=float(five.loc[(task, Stage.FINE_TUNED), "high"]),
        labels_tuned_low=float(five.loc[(task, Stage.FINE_TUNED), "low"]),
        labels_pretrained_high=float(five.loc[(task, Stage.PRETRAINED), "high"]),
        labels_n=tuple(sorted({int(n) for n in five.loc[task, "n"]})),
        band_gap=float(min(heterogeneous(overall[name], Stage.FINE_TUNED)["low"]
                           - heterogeneous(overall[name], Stage.PRETRAINED)["high"] for name in classifiers)),
        paper_low=float(low), paper_high=float(high), paper_low_task=paper.DARK_SECRETS["heterogeneous_tasks"][0],
        paper_high_task=paper.DARK_SECRETS["heterogeneous_tasks"][1])


# -- the heterogeneous share over fine-tuning seeds and inputs --------------------------------------
@dataclass(frozen=True)
class ShareChange:
    """The heterogeneous share (broad included, the paper's count) of one task's maps before and after fine-tuning
    with several seeds, on the same inputs, with a percentile interval from a bootstrap over the inputs (every
    seed's change and the mean over seeds read off the same resamples, paired before and after)."""

    seeds: tuple[int, ...]  # the fine-tuning seeds, in the order given
    n_seeds: int  # how many
    n_inputs: int  # the inputs the maps come from
    n_boot: int  # bootstrap resamples of the inputs
    level: float  # the intervals' coverage
    pretrained: float  # the pre-trained model's share
    tuned: tuple[float, ...]  # each seed's fine-tuned share
    change: tuple[float, ...]  # each seed's tuned - pretrained
    low: tuple[float, ...]  # its interval
    high: tuple[float, ...]
    smallest: float  # the smallest change over seeds
    largest: float  # the largest
    sizes_differ: bool  # whether some seed's interval lies wholly above another's (the size depends on the run)
    mean_change: float  # the mean change over seeds
    mean_low: float  # its interval
    mean_high: float
    n_raised: int  # seeds whose interval lies above 0
    n_lowered: int  # seeds whose interval lies below 0

    @property
    def seed_list(self) -> str:
        """The seeds in words: "0, 1, 2"."""
        return ", ".join(map(str, self.seeds))

    @property
    def tuned_percent(self) -> str:
        """Each seed's fine-tuned share in percent: "38, 41"."""
        return ", ".join(f"{100 * t:.0f}" for t in self.tuned)

    @property
    def changes(self) -> str:
        """Each seed's change in points with its interval: "+2.1 [+0.4, +3.9], +5.0 [+3.2, +6.8]"."""
        return ", ".join(f"{100 * d:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"
                         for d, lo, hi in zip(self.change, self.low, self.high))

    @property
    def verdict(self) -> str:
        """Whether the rise holds across the seeds, and whether its size depends on the run, in one clause."""
        held = ("The rise holds across these seeds: every interval lies above zero" if self.n_raised == self.n_seeds
                else f"The rise does not hold across seeds: {self.n_raised} of {self.n_seeds} intervals lie above "
                     f"zero, {self.n_lowered} below")
        return held + ("; its size depends on the run (some seeds' intervals do not overlap)"
                       if self.sizes_differ else "")


def share_change(pretrained: np.ndarray, tuned: Mapping[int, np.ndarray], kinds: Sequence[str] = tuple(UNPATTERNED),
                 n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> ShareChange:
    """pretrained: the kind of every map of the pre-trained model (`patterns.classify_with`), [N inputs, L, H];
    tuned: fine-tuning seed -> the kinds of that fine-tuned model's maps on the same inputs, [N, L, H]; kinds: those
    counted (the paper's heterogeneous: heterogeneous and broad); seed: the bootstrap's."""
    pretrained = np.asarray(pretrained, dtype=object)
    if pretrained.ndim != 3 or not len(pretrained) or not tuned:
        raise ValueError(f"need kinds [inputs, layers, heads] of at least one input, and one seed; got "
                         f"{pretrained.shape}")
    if any(np.shape(k) != pretrained.shape for k in tuned.values()):
        raise ValueError(f"every seed's kinds must have the pre-trained shape {pretrained.shape}")

    def per_input(k: np.ndarray) -> np.ndarray:  # [N]: the share of each input's maps of the counted kinds
        return np.isin(np.asarray(k, dtype=object), list(kinds)).mean(axis=(1, 2))

    before = per_input(pretrained)
    after = np.stack([per_input(k) for k in tuned.values()], axis=1)  # [N, S]
    differences = after - before[:, None]
    differences = np.concatenate([differences, differences.mean(1, keepdims=True)], axis=1)  # [N, S + 1]: + mean
    n = len(before)
    weights = np.random.default_rng(seed).multinomial(n, np.full(n, 1 / n), size=n_boot)  # [B, N]
    tail = (1 - level) / 2
    low, high = np.quantile(weights @ differences / n, [tail, 1 - tail], axis=0)  # [S + 1] each
    change = differences.mean(0)
    return ShareChange(
        seeds=tuple(int(s) for s in tuned), n_seeds=len(tuned), n_inputs=n, n_boot=n_boot, level=level,
        pretrained=float(before.mean()),
        tuned=tuple(map(float, after.mean(0))), change=tuple(map(float, change[:-1])),
        low=tuple(map(float, low[:-1])), high=tuple(map(float, high[:-1])), smallest=float(change[:-1].min()),
        largest=float(change[:-1].max()), sizes_differ=bool(low[:-1].max() > high[:-1].min()),
        mean_change=float(change[-1]),
        mean_low=float(low[-1]), mean_high=float(high[-1]), n_raised=int((low[:-1] > 0).sum()),
        n_lowered=int((high[:-1] < 0).sum()))


# -- which layers fine-tuning changes -------------------------------------------------------------
@dataclass(frozen=True)
class LayerChange:
    """Which layers' maps fine-tuning changes most, by the mean cosine similarity per layer (1 = unchanged)."""

    most_changed: tuple[int, ...]  # every layer among the two of lowest similarity for some task, sorted
    last_two: tuple[int, int]  # the model's last two layers
    first_two_min: float  # the lowest similarity of layers 1 and 2 over tasks


def layer_change(by_layer: pd.DataFrame) -> LayerChange:
    """by_layer: one row per layer (index 1..L), one column of mean cosine similarities per task."""
    lowest_two = {layer for _, column in by_layer.items() for layer in column.nsmallest(2).index}
    last = int(by_layer.index.max())
    return LayerChange(most_changed=tuple(sorted(int(layer) for layer in lowest_two)), last_two=(last - 1, last),
                       first_two_min=float(by_layer.loc[[1, 2]].min().min()))


# -- the hand labels --------------------------------------------------------------------------------
@dataclass(frozen=True)
class LabelSample:
    """The hand-labelled maps: all of them, and those drawn at random (the rest are targeted at rare kinds)."""

    n_maps: int
    n_random: int


def label_sample(labels: pd.DataFrame) -> LabelSample:
    """labels: `patterns.load_labels` (one row per map, with a sample column: "random" or "targeted")."""
    return LabelSample(n_maps=len(labels), n_random=int((labels["sample"] == "random").sum()))
