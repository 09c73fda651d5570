"""Notebook 09 (Kovaleva et al. §4.2, §4.4-4.6: relation-specific heads, [CLS] and [SEP], disabling heads): the
numbers its prose and checks use.

They are read from the relation scores (`relations.score_relations`, `relations.versus_syntax`), the attention by
token type before and after fine-tuning (`tokentypes.special_change`, `tokentypes.exclusive_cls_change`,
`tokentypes.stripe_summary`) and the held-out disabling scans (`disabling.held_out`, `disabling.near_ties`).
Attention shares and accuracy changes are fractions (1 = all the attention, 100 points); layers and heads
1-indexed; tasks in the order of the mappings given.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd

from ...analyses.disabling import HeldOut, NearTies
from ...analyses.finetune import Stage
from ...analyses.relations import RelationScores
from ...analyses.tokentypes import DEFAULT_THRESHOLD, EXCLUSIVE, UNTYPED, Stripes, TokenTypeAttention
from ...present import paper
from .words import listed  # noqa: F401 - the cells write their lists with it

CORE = ("nsubj", "dobj", "pobj")  # the proxy's arguments that are plainly dependency relations too
PAIR_TASK = "next_paragraph"  # the kit's sentence-pair task (`classroom.task_data`)


# -- §4.2 relation-specific heads ---------------------------------------------------------------------
@dataclass(frozen=True)
class Effect:
    """One head's score minus a null's mean, with its 95 % interval over sentences (`RelationScores.effects`)."""

    label: str  # "layer-head"
    layer: int
    head: int
    effect: float
    low: float
    high: float


def _effect(row: pd.Series) -> Effect:
    return Effect(str(row["label"]), int(row["layer"]), int(row["head"]), float(row["effect"]),
                  float(row["effect_low"]), float(row["effect_high"]))


@dataclass(frozen=True)
class RelationHeads:
    """The relation scores by the paper's statistic (a rank among heads) and by the kit's nulls (effect sizes and
    per-head tests against the relocated and the shifted null, `RelationScores.table`)."""

    n_heads: int  # heads scored
    n_arguments: int  # argument spans scored
    percentile: float  # the 99th percentile of all the heads' scores
    paper_heads: tuple[str, ...]  # the heads above it, by score (the paper's statistic)
    top: str  # the head with the highest score, "layer-head"
    top_score: float  # its score (mean largest weight between predicate and argument words)
    paper_best: float  # the paper's best FrameNet score
    paper_scores: tuple[float, ...]  # the paper's heads above its 99th percentile
    top_relocated: Effect  # the top head's effect over the relocated null
    top_shifted: Effect  # over the shifted null
    strongest: Effect  # the largest effect over the shifted null
    n_relocated: int  # heads above their relocated null's 99th percentile
    n_shifted: int  # heads above their shifted null's
    n_effect_shifted: int  # heads whose effect over the shifted null has an interval above 0


def relation_heads(scores: Mapping[str, RelationScores]) -> RelationHeads:
    """scores: null ("relocated", "shifted") -> `relations.score_relations` of one model's heads (same frames)."""
    relocated, shifted = scores["relocated"].table(), scores["shifted"].table()
    top = relocated.iloc[0]
    by_label = {null: table.set_index("label", drop=False) for null, table in (("relocated", relocated),
                                                                               ("shifted", shifted))}
    strongest = shifted.loc[shifted["effect"].idxmax()]
    return RelationHeads(
        n_heads=len(relocated), n_arguments=sum(len(f.spans) for f in scores["shifted"].frames),
        percentile=float(np.percentile(relocated["score"], 99)),
        paper_heads=tuple(relocated.loc[relocated["top_p99"], "label"]), top=str(top["label"]),
        top_score=float(top["score"]), paper_best=max(paper.DARK_SECRETS["framenet_scores"]),
        paper_scores=tuple(paper.DARK_SECRETS["framenet_scores"]),
        top_relocated=_effect(by_label["relocated"].loc[top["label"]]),
        top_shifted=_effect(by_label["shifted"].loc[top["label"]]), strongest=_effect(strongest),
        n_relocated=int(relocated["above"].sum()), n_shifted=int(shifted["above"].sum()),
        n_effect_shifted=int((shifted["effect_low"] > 0).sum()))


@dataclass(frozen=True)
class SyntaxOverlap:
    """The relation heads beside notebook 04's syntax heads, for the `relations` read (CORE by default)."""

    spearman_min: float  # smallest rank correlation over heads between relation score and syntax accuracy
    spearman_max: float  # largest
    ranks: tuple[int, ...]  # per relation, in order: its best syntax head's rank by relation score (1 = top)

    @property
    def worst_rank(self) -> int:
        """The lowest of those ranks (the largest number)."""
        return max(self.ranks)


def syntax_overlap(overlap: pd.DataFrame, relations: tuple[str, ...] = CORE) -> SyntaxOverlap:
    """overlap: `relations.versus_syntax` (one row per relation: relation, rank, spearman, ...)."""
    rows = overlap.set_index("relation").loc[list(relations)]
    return SyntaxOverlap(spearman_min=float(rows["spearman"].min()), spearman_max=float(rows["spearman"].max()),
                         ranks=tuple(int(rank) for rank in rows["rank"]))


# -- §4.5 [CLS] and [SEP] before and after fine-tuning ------------------------------------------------------
@dataclass(frozen=True)
class SinkShift:
    """What fine-tuning does to the attention to [CLS] and [SEP], per layer (mean over rows, heads and inputs)."""

    falls: tuple[tuple[str, int, float], ...]  # per task: (task, the layer where [CLS] falls most, that change)
    first_layer: float  # largest |change| of the attention to [CLS] in layer 1, over tasks
    sep_after_min: float  # smallest attention to [SEP] after fine-tuning, any layer and task
    sep_after_max: float  # largest
    sep_change: float  # largest |change| of the attention to [SEP], any layer and task


def sink_shift(special: Mapping[str, pd.DataFrame]) -> SinkShift:
    """special: task -> `tokentypes.special_change` (index layer 1..L; cls_change, sep_after, sep_change, ...)."""
    frames = special.values()
    return SinkShift(
        falls=tuple((task, int(frame["cls_change"].idxmin()), float(frame["cls_change"].min()))
                    for task, frame in special.items()),
        first_layer=max(abs(float(frame["cls_change"].iloc[0])) for frame in frames),
        sep_after_min=min(float(frame["sep_after"].min()) for frame in frames),
        sep_after_max=max(float(frame["sep_after"].max()) for frame in frames),
        sep_change=max(float(frame["sep_change"].abs().max()) for frame in frames))


@dataclass(frozen=True)
class ClsReads:
    """What the last layer's [CLS] row attends to, in exclusive categories (`tokentypes.exclusive_cls_change`:
    each token in one; shares of the row, mean over heads and inputs; changes with paired intervals)."""

    nouns: tuple[tuple[str, float, float, float], ...]  # per task: (task, share on nouns before fine-tuning,
    # after, nouns' share of the tokens)
    noun_changes: tuple[tuple[str, float, float, float], ...]  # per task: (task, change, low, high)
    largest_before: tuple[str, ...]  # per task: the typed category (not UNTYPED) with the largest share before
    largest_after: tuple[str, ...]  # after
    largest_overall: tuple[str, ...]  # per task: the category with the largest share after, UNTYPED included
    untyped: tuple[tuple[str, float, float, float, float], ...]  # per task: (task, UNTYPED's share after, its
    # change, low, high)
    sep_after_min: float  # smallest share on [SEP] after fine-tuning, over tasks
    sep_after_max: float  # largest
    sep_most: float  # largest share on [SEP], before or after, over tasks
    cls_changes: tuple[tuple[str, float], ...]  # per task: (task, change of the share [CLS] keeps on itself)

    @property
    def noun_largest(self) -> bool:
        """Whether nouns take the largest typed share in every task, before and after fine-tuning."""
        return all(name == "noun" for name in (*self.largest_before, *self.largest_after))


def cls_reads(cls_rows: Mapping[str, pd.DataFrame]) -> ClsReads:
    """cls_rows: task -> `tokentypes.exclusive_cls_change` (one row per EXCLUSIVE category: base_rate, before,
    after, change, change_low, change_high)."""
    rows = {task: frame.set_index("category") for task, frame in cls_rows.items()}
    typed = [c for c in EXCLUSIVE if c != UNTYPED]
    return ClsReads(
        nouns=tuple((task, float(row.loc["noun", "before"]), float(row.loc["noun", "after"]),
                     float(row.loc["noun", "base_rate"])) for task, row in rows.items()),
        noun_changes=tuple((task, *(float(row.loc["noun", c]) for c in ("change", "change_low", "change_high")))
                           for task, row in rows.items()),
        largest_before=tuple(str(row.loc[typed, "before"].idxmax()) for row in rows.values()),
        largest_after=tuple(str(row.loc[typed, "after"].idxmax()) for row in rows.values()),
        largest_overall=tuple(str(row["after"].idxmax()) for row in rows.values()),
        untyped=tuple((task, *(float(row.loc[UNTYPED, c]) for c in ("after", "change", "change_low", "change_high")))
                      for task, row in rows.items()),
        sep_after_min=min(float(row.loc["[SEP]", "after"]) for row in rows.values()),
        sep_after_max=max(float(row.loc["[SEP]", "after"]) for row in rows.values()),
        sep_most=max(float(row.loc["[SEP]", ["before", "after"]].max()) for row in rows.values()),
        cls_changes=tuple((task, float(row.loc["[CLS]", "change"])) for task, row in rows.items()))


# -- §4.4 vertical stripes ------------------------------------------------------------------------------
@dataclass(frozen=True)
class StripePlaces:
    """Where the vertical stripes fall (`tokentypes.stripe_summary`): ranges over tasks and models at the
    `threshold` given, shares of all stripes or of all tokens; and the pre-trained model's last layer."""

    special_min: float  # share of the stripes on [CLS], [SEP] and punctuation
    special_max: float
    special_tokens_min: float  # share of the tokens that are [CLS], [SEP] or punctuation
    special_tokens_max: float
    linguistic_tokens_min: float  # share of the tokens of a linguistic type
    linguistic_tokens_max: float
    linguistic_min: float  # share of the stripes on linguistic types
    linguistic_max: float
    special_any_threshold: float  # smallest share of the stripes on special tokens or punctuation, every threshold
    last_layer: tuple[tuple[str, float, float], ...]  # per task, the pre-trained model's last layer: (task, share
    # of its stripes on linguistic types, share on nouns)


def stripe_places(summary: pd.DataFrame, by_type: Mapping[str, Mapping[str, TokenTypeAttention]],
                  threshold: float = DEFAULT_THRESHOLD) -> StripePlaces:
    """summary: `tokentypes.stripe_summary(by_type)`; by_type: task -> `finetune.Stage` -> `TokenTypeAttention`
    (with stripes counted at `threshold`)."""
    main = summary[summary["threshold"] == threshold]
    last = {task: models[Stage.PRETRAINED].stripes_by_layer(threshold).iloc[-1] for task, models in by_type.items()}
    return StripePlaces(
        special_min=float(main[Stripes.SPECIAL].min()), special_max=float(main[Stripes.SPECIAL].max()),
        special_tokens_min=float(main[Stripes.SPECIAL_TOKENS].min()),
        special_tokens_max=float(main[Stripes.SPECIAL_TOKENS].max()),
        linguistic_tokens_min=float(main[Stripes.LINGUISTIC_TOKENS].min()),
        linguistic_tokens_max=float(main[Stripes.LINGUISTIC_TOKENS].max()),
        linguistic_min=float(main[Stripes.LINGUISTIC].min()), linguistic_max=float(main[Stripes.LINGUISTIC].max()),
        special_any_threshold=float(summary[Stripes.SPECIAL].min()),
        last_layer=tuple((task, float(row["linguistic"]), float(row["noun"])) for task, row in last.items()))


# -- §4.6 disabling heads, held out ----------------------------------------------------------------------
@dataclass(frozen=True)
class Harm:
    """A worst head or layer whose held-out interval lies below 0: its accuracy change on the evaluation half and
    the paired 95 % interval (fractions)."""

    task: str
    label: str  # "4-4" or "layer 4"
    evaluation: float
    low: float
    high: float


@dataclass(frozen=True)
class HeldOutDisabling:
    """The best single head to disable, chosen on the selection half and scored on the evaluation half, over
    the tries: every task at one seed, and the seeds' task at each other seed. Changes are fractions."""

    tries: int
    heads_chosen: int  # different best heads among the tries
    evaluation_sizes: tuple[int, ...]  # the evaluation halves' sizes, distinct, increasing
    test_sizes: tuple[int, ...]  # the test sets' sizes (both halves), distinct, increasing
    selection_min: float  # smallest accuracy change of a best head on its selection half
    selection_max: float
    evaluation_min: float  # smallest change of a best head on its evaluation half
    evaluation_max: float
    gained_lost: tuple[tuple[str, str, int, int], ...]  # per try: (try, best head, evaluation inputs it turns
    # right, wrong); a try is a task, or "<task>, seed <seed>"
    including_zero: int  # tries whose evaluation interval includes 0
    paper_low: float  # the paper's smallest and largest best-head gain (fractions)
    paper_high: float
    containing_paper: int  # tries whose evaluation interval contains the paper's whole range
    half_width: float  # median half-width of those intervals
    harmful: tuple[Harm, ...]  # each task's worst head and worst layer whose interval lies below 0, in order
    seed_heads: int  # different best heads over the seeds
    pair_random: float  # mean change on the pair task over every single head disabled
    other_random: tuple[tuple[str, float], ...]  # the same on the other tasks: (task, mean change)
    costliest: str  # the task whose mean change over single heads is lowest

    @property
    def evaluation_inputs(self) -> str:
        """The evaluation halves' sizes in words: "96", or "95 or 96"."""
        return " or ".join(map(str, self.evaluation_sizes))

    @property
    def test_inputs(self) -> str:
        """The test sets' sizes in words: "192", or "190 or 192"."""
        return " or ".join(map(str, self.test_sizes))

    @property
    def gained_lost_text(self) -> str:
        """Per try, the best head and the evaluation inputs it turns right / wrong: "4-4 3/5 (topic), ..."."""
        return ", ".join(f"{head} {gained}/{lost} ({name})" for name, head, gained, lost in self.gained_lost)

    @property
    def harm_text(self) -> str:
        """The harmful heads and layers with their changes and intervals in points, or "nothing"."""
        return ", ".join(f"disabling {h.label} on {h.task} ({100 * h.evaluation:+.1f}, interval {100 * h.low:+.1f} "
                         f"to {100 * h.high:+.1f})" for h in self.harmful) or "nothing"


def held_out_disabling(held: Mapping[str, HeldOut], seeds: Mapping[int, HeldOut], seed: int,
                       pair_task: str = PAIR_TASK) -> HeldOutDisabling:
    """held: task -> `disabling.held_out` of the model fine-tuned with `seed`; seeds: seed -> `held_out` of one
    task's models fine-tuned with each seed (the one at `seed` is `held`'s); pair_task: a key of held."""
    named = {**held, **{f"{result.task}, seed {key}": result for key, result in seeds.items() if key != seed}}
    best = pd.DataFrame([result.picks.loc["best head"] for result in named.values()])
    harmful = tuple(Harm(task, str(row["label"]), float(row["evaluation"]), float(row["low"]), float(row["high"]))
                    for task, result in held.items()
                    for _, row in result.picks.loc[["worst head", "worst layer"]].iterrows() if row["high"] < 0)
    random = {task: result.random_heads()["mean"] for task, result in held.items()}
    low, high = best["low"].astype(float), best["high"].astype(float)
    paper_low, paper_high = (gain / 100 for gain in paper.DARK_SECRETS["head_disabling_gain"])
    return HeldOutDisabling(
        tries=len(best), heads_chosen=int(best["label"].nunique()),
        evaluation_sizes=tuple(sorted({result.n_evaluation for result in named.values()})),
        test_sizes=tuple(sorted({result.n_selection + result.n_evaluation for result in named.values()})),
        selection_min=float(best["selection"].min()), selection_max=float(best["selection"].max()),
        evaluation_min=float(best["evaluation"].min()), evaluation_max=float(best["evaluation"].max()),
        gained_lost=tuple((name, str(row["label"]), int(row["gained"]), int(row["lost"]))
                          for name, (_, row) in zip(named, best.iterrows())),
        including_zero=int(((low <= 0) & (high >= 0)).sum()), paper_low=paper_low, paper_high=paper_high,
        containing_paper=int(((low <= paper_low) & (high >= paper_high)).sum()),
        half_width=float(((high - low) / 2).median()),
        harmful=harmful, seed_heads=len({result.picks.loc["best head", "label"] for result in seeds.values()}),
        pair_random=random[pair_task], other_random=tuple((task, v) for task, v in random.items() if task != pair_task),
        costliest=min(random, key=random.get))


@dataclass(frozen=True)
class Drift:
    """Where the mean change under a random single head comes from (`disabling.near_ties`, one per task): the
    nearly tied inputs, against the rest."""

    ties: tuple[NearTies, ...]  # per task, in order
    wrong: tuple[tuple[str, int, int], ...]  # per task: (task, near ties classified wrong, near ties)
    close_share_min: float  # the smallest share of a task's flips made by its close inputs
    far_largest: float  # the largest |mean change| over single heads with the close inputs kept as they were

    @property
    def margin(self) -> float:
        """The margin (logits) below which an input is nearly tied."""
        return self.ties[0].margin

    @property
    def follows_ties(self) -> bool:
        """Whether, on every task, a random head's mean change is positive exactly where most near ties are
        wrong (a flip can only gain them) and negative where most are right."""
        return all((t.mean_change > 0) == (t.close - t.close_right > t.close_right) and t.mean_change != 0
                   for t in self.ties)

    @property
    def mean_changes(self) -> str:
        """A random head's mean change per task, in points: "+1.2 (topic), -0.8 (sentiment)"."""
        return ", ".join(f"{100 * t.mean_change:+.1f} ({t.task})" for t in self.ties)

    @property
    def close_counts(self) -> str:
        """The near ties per task: "6 on topic, 13 on sentiment"."""
        return ", ".join(f"{t.close} on {t.task}" for t in self.ties)

    @property
    def close_flips(self) -> str:
        """The flips the near ties make, of all flips, per task: "62 of 71, 326 of 453"."""
        return ", ".join(f"{t.close_flips} of {t.flips}" for t in self.ties)

    @property
    def wrong_counts(self) -> str:
        """The near ties classified wrong per task: "5 of 6 wrong on topic, ..."."""
        return ", ".join(f"{wrong} of {close} wrong on {task}" for task, wrong, close in self.wrong)

    @property
    def far_changes(self) -> str:
        """A random head's mean change per task with the near ties kept as they were, in points: "+0.10, -0.07"."""
        return ", ".join(f"{100 * t.mean_change_far:+.2f}" for t in self.ties)


def drift(ties: Mapping[str, NearTies]) -> Drift:
    """ties: task -> `disabling.near_ties` of its evaluation half, all with one margin."""
    if len({t.margin for t in ties.values()}) != 1:
        raise ValueError("near ties of different margins: compute them with one margin")
    return Drift(ties=tuple(ties.values()),
                 wrong=tuple((t.task, t.close - t.close_right, t.close) for t in ties.values()),
                 close_share_min=min(t.close_share for t in ties.values()),
                 far_largest=max(abs(t.mean_change_far) for t in ties.values()))
