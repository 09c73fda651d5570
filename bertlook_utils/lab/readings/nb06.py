"""Notebook 06 (attention probes, Clark et al. §5, Table 3): the numbers its prose and checks use.

UAS values are held-out unlabelled attachment scores in % (argmax heads, punctuation excluded, as
`probes.ProbeResults.table`); gaps between them are in UAS points; the paper's numbers are Clark et al.'s Table 1
and Table 3 (`paper`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pandas as pd

from ...analyses.probe_baselines import BASELINE_SETTINGS, BaselineResults
from ...analyses.probes import Model, ProbeResults, make_probe, weight_table
from ...present import paper

# Clark et al.'s distances + words baseline as trained in `BASELINE_SETTINGS`, in its order: his recipe (100-d
# vectors, 1 epoch, one sentence per step), 300-d vectors, half the training sentences, the kit's training
CLARK, CLARK_300D, CLARK_HALF, CLARK_LONG = (setting.name for setting in BASELINE_SETTINGS)
# the four probes whose UAS on the arcs two parsers agree on the prose compares
MAIN_PROBES = (Model.RIGHT_BRANCHING, Model.DISTANCES, Model.ATTENTION, Model.ATTENTION_VECTORS)


# -- the learning curve ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrainingCurve:
    """The attention + vectors probe's training: `late_spread`, the range (max - min, UAS points) of its held-out
    UAS over the last epochs; `loss_falls`, whether its training loss falls every epoch; `n_weights`, the
    probe's parameters; `n_train_words`, the words of the training sentences (punctuation included)."""

    late_spread: float
    loss_falls: bool
    n_weights: int
    n_train_words: int


def training_curve(results: ProbeResults, selection: Sequence, dim: int = 300, last: int = 3) -> TrainingCurve:
    """results: `probes.run_probes`; selection: the training sentences (each of len its words); dim: the size of
    the word vectors (spaCy md's: 300); last: how many final epochs `late_spread` covers."""
    curve = results.curves[results.curves["model"] == Model.ATTENTION_VECTORS]
    late = curve["heldout_uas"].iloc[-last:]
    n_maps = results.weights[0].size  # weights [2, L, H]: one map per head
    probe = make_probe("attention+vectors", n_maps, dim)
    return TrainingCurve(late_spread=float(late.max() - late.min()),
                         loss_falls=bool((curve["train_loss"].diff().iloc[1:] < 0).all()),
                         n_weights=sum(p.numel() for p in probe.parameters()),
                         n_train_words=sum(len(s) for s in selection))


# -- what the attention-only probe weighs -----------------------------------------------------------
@dataclass(frozen=True)
class ProbeWeights:
    """The attention-only probe's weights (per root-mean-square of each map): `n_best_clear`, how many of the
    maps notebook 04 finds best for some relation weigh more than `clear`; `det_max_abs`, the largest |weight|
    of the maps best for det (0 when no map is); `min_weight`, `max_weight` over all maps."""

    n_best_clear: int
    det_max_abs: float
    min_weight: float
    max_weight: float


def probe_weights(results: ProbeResults, clear: float = 0.1) -> ProbeWeights:
    """results: `probes.run_probes`; clear: the weight above which a map counts as clearly positive."""
    weights = weight_table(results)
    best = weights[weights["best for (nb 04)"] != "-"]
    det = weights[weights["best for (nb 04)"].str.contains(r"\bdet\b")]
    return ProbeWeights(n_best_clear=int((best["weight"] > clear).sum()),
                        det_max_abs=float(det["weight"].abs().max()) if len(det) else 0.0,
                        min_weight=float(results.weights.min()), max_weight=float(results.weights.max()))


# -- the size of the run ------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunSize:
    """`n_heads`: the model's heads (layers x heads per layer); `n_sentences`: the probes' training sentences."""

    n_heads: int
    n_sentences: int


def run_size(results: ProbeResults) -> RunSize:
    """results: `probes.run_probes` (weights [2, L, H], n_train)."""
    return RunSize(n_heads=int(results.weights[0].size), n_sentences=int(results.n_train))


# -- what the evidence shows ------------------------------------------------------------------------------
def paper_uas() -> dict[str, int]:
    """Clark et al.'s Table 3 UAS (%) of each row this run has, by `probes.Model` value."""
    return {ours: int(uas) for ours, uas in zip(paper.TABLE3["ours"], paper.TABLE3["uas"]) if isinstance(ours, str)}


@dataclass(frozen=True)
class Table3Scores:
    """This run's probes against Clark et al.'s Table 3: UAS (%) of right-branching, the kit's distances + vectors
    network, attention only, attention + vectors, random-init attention + vectors, and attention only trained as
    Clark's code trains (`one_epoch`: 1 epoch, one sentence per step); `best`, the model (`probes.Model` value) with
    the highest UAS; `tree_gain`, what decoding a tree (MST) adds to attention + vectors; `attention_over_right`,
    `distances_over_attention`: gaps (points). `paper_*`: the paper's UAS (integers) and the gap attention only -
    distances + GloVe."""

    right_branching: float
    distances: float
    attention: float
    attention_vectors: float
    random_attention_vectors: float
    one_epoch: float
    best: str
    tree_gain: float
    attention_over_right: float
    distances_over_attention: float
    paper_right_branching: int
    paper_distances: int
    paper_attention: int
    paper_attention_vectors: int
    paper_random_attention_vectors: int
    paper_attention_over_distances: int


def table3_scores(results: ProbeResults) -> Table3Scores:
    """results: `probes.run_probes`."""
    table = results.table.set_index("model")
    uas, mst = table["uas_argmax"], table["uas_mst"]
    reported = paper_uas()
    return Table3Scores(
        right_branching=float(uas[Model.RIGHT_BRANCHING]), distances=float(uas[Model.DISTANCES]),
        attention=float(uas[Model.ATTENTION]), attention_vectors=float(uas[Model.ATTENTION_VECTORS]),
        random_attention_vectors=float(uas[Model.RANDOM_ATTENTION_VECTORS]), one_epoch=float(uas[Model.ONE_EPOCH]),
        best=str(uas.idxmax()),
        tree_gain=float(mst[Model.ATTENTION_VECTORS] - uas[Model.ATTENTION_VECTORS]),
        attention_over_right=float(uas[Model.ATTENTION] - uas[Model.RIGHT_BRANCHING]),
        distances_over_attention=float(uas[Model.DISTANCES] - uas[Model.ATTENTION]),
        paper_right_branching=reported[Model.RIGHT_BRANCHING], paper_distances=reported[Model.DISTANCES],
        paper_attention=reported[Model.ATTENTION], paper_attention_vectors=reported[Model.ATTENTION_VECTORS],
        paper_random_attention_vectors=reported[Model.RANDOM_ATTENTION_VECTORS],
        paper_attention_over_distances=reported[Model.ATTENTION] - reported[Model.DISTANCES])


@dataclass(frozen=True)
class UntrainedAttention:
    """How uniform the random-init model's attention is, from per-layer means (nats): `entropy_gap`, the largest
    gap between the uniform entropy and the mean row entropy over layers; `uniform`, the uniform entropy (mean
    ln n) averaged over layers; `max_weight`, the largest per-layer mean of a row's largest weight; the trained
    model's smallest and largest per-layer mean largest weight."""

    entropy_gap: float
    uniform: float
    max_weight: float
    trained_max_weight_min: float
    trained_max_weight_max: float


def untrained_attention(trained: pd.DataFrame, random: pd.DataFrame) -> UntrainedAttention:
    """trained, random: one row per layer with the means of `surface.entropy_stats` (entropy, uniform,
    max_weight), of the trained and of the random-init model."""
    return UntrainedAttention(entropy_gap=float((random["uniform"] - random["entropy"]).max()),
                              uniform=float(random["uniform"].mean()), max_weight=float(random["max_weight"].max()),
                              trained_max_weight_min=float(trained["max_weight"].min()),
                              trained_max_weight_max=float(trained["max_weight"].max()))


@dataclass(frozen=True)
class ClarkBaseline:
    """Clark et al.'s distances + words baseline (`probes.ClarkDistanceWordsMLP`) in the four `BASELINE_SETTINGS`
    (UAS %): his recipe (`clark`), 300-d vectors, half the training sentences, the kit's training (`long`: 6
    epochs, batches of 8); and gaps in points: `one_epoch_over_clark` (attention only trained as Clark's code
    trains, minus his baseline), `half_cost` (clark - half), `long_gain` (long - clark), `vectors_gain`
    (vectors_300d - clark), `long_over_attention` (long - attention only), `training_gain` (attention only: 6 epochs
    in batches of 8 minus 1 epoch of single sentences)."""

    clark: float
    vectors_300d: float
    half: float
    long: float
    one_epoch_over_clark: float
    half_cost: float
    long_gain: float
    vectors_gain: float
    long_over_attention: float
    training_gain: float


def clark_baseline(results: ProbeResults, baselines: BaselineResults) -> ClarkBaseline:
    """results: `probes.run_probes`; baselines: `probes.distance_baselines` with `BASELINE_SETTINGS`."""
    base = baselines.table.set_index("model")["uas_argmax"]
    uas = results.table.set_index("model")["uas_argmax"]
    clark, vectors, half, long = (float(base[name]) for name in (CLARK, CLARK_300D, CLARK_HALF, CLARK_LONG))
    attention, one_epoch = float(uas[Model.ATTENTION]), float(uas[Model.ONE_EPOCH])
    return ClarkBaseline(clark=clark, vectors_300d=vectors, half=half, long=long,
                         one_epoch_over_clark=one_epoch - clark, half_cost=clark - half, long_gain=long - clark,
                         vectors_gain=vectors - clark, long_over_attention=long - attention,
                         training_gain=attention - one_epoch)


@dataclass(frozen=True)
class TreeShape:
    """Are spaCy's trees more regular? `plus1_nonpunct`, `plus1_every_word`: the share (%) of words whose head is
    the next word, punctuation excluded and every word counted; `paper_plus1_all`, the paper's offset +1 score for
    "all" (Table 1, every word); `plus1_vs_paper`, `plus1_all_vs_paper`: the two shares minus the paper's
    right-branching UAS (Table 3) and minus `paper_plus1_all`. `agreed_share`: the held-out
    non-punctuation arcs (%) the two parsers agree on; `gain_min`, `gain_max`: the smallest and largest UAS gain of
    the main probes (`MAIN_PROBES`) on those arcs over all arcs; `lead_all`, `lead_agreed`, `lead_md`: distances +
    vectors minus attention only on all arcs, on agreed arcs, against the second parser's trees, and
    `agreed_shift`, `md_shift`: the latter two minus `lead_all` (points)."""

    plus1_nonpunct: float
    plus1_every_word: float
    paper_plus1_all: float
    plus1_vs_paper: float
    plus1_all_vs_paper: float
    agreed_share: float
    gain_min: float
    gain_max: float
    lead_all: float
    lead_agreed: float
    lead_md: float
    agreed_shift: float
    md_shift: float


def tree_shape(shares: pd.DataFrame, subsets: pd.DataFrame) -> TreeShape:
    """shares: `probes.offset_shares` indexed by offset; subsets: `probes.subset_uas` over at least
    `MAIN_PROBES`."""
    right = paper_uas()[Model.RIGHT_BRANCHING]
    plus1_all = float(paper.TABLE1.set_index("relation").loc["all", "baseline"])
    nonpunct, every = float(shares.loc["+1", "non-punct"]), float(shares.loc["+1", "every word"])
    sub = subsets.set_index("model")
    gains = sub.loc[list(MAIN_PROBES), "agreed arcs"] - sub.loc[list(MAIN_PROBES), "all"]
    lead = {column: float(sub.loc[Model.DISTANCES, column] - sub.loc[Model.ATTENTION, column])
            for column in ("all", "agreed arcs", "against md")}
    return TreeShape(plus1_nonpunct=nonpunct, plus1_every_word=every, paper_plus1_all=plus1_all,
                     plus1_vs_paper=nonpunct - right, plus1_all_vs_paper=every - plus1_all,
                     agreed_share=float(100 * sub["n agreed arcs"].iloc[0] / sub["n all"].iloc[0]),
                     gain_min=float(gains.min()), gain_max=float(gains.max()),
                     lead_all=lead["all"], lead_agreed=lead["agreed arcs"], lead_md=lead["against md"],
                     agreed_shift=lead["agreed arcs"] - lead["all"], md_shift=lead["against md"] - lead["all"])


@dataclass(frozen=True)
class Evidence:
    """Everything "What the evidence shows" reads, one record per paragraph or bullet."""

    scores: Table3Scores
    untrained: UntrainedAttention
    baseline: ClarkBaseline
    trees: TreeShape


def evidence(results: ProbeResults, baselines: BaselineResults, subsets: pd.DataFrame, shares: pd.DataFrame,
             trained: pd.DataFrame, random: pd.DataFrame) -> Evidence:
    """The notebook's results: `probes.run_probes`, `probes.distance_baselines`, `probes.subset_uas`,
    `probes.offset_shares` (indexed by offset) and per-layer entropy means of the trained and random-init model
    (see `untrained_attention`)."""
    return Evidence(scores=table3_scores(results), untrained=untrained_attention(trained, random),
                    baseline=clark_baseline(results, baselines), trees=tree_shape(shares, subsets))
