"""Notebook 09 (Kovaleva et al. §4.2, §4.4-4.6: relation-specific heads, [CLS] and [SEP], disabling heads): the
numbers its prose and checks use.

They are read from the relation scores (`relations.score_relations`, `relations.versus_syntax`), the attention by
token type before and after fine-tuning (`tokentypes.special_change`, `tokentypes.cls_change`,
`tokentypes.stripe_summary`) and the held-out disabling scans (`disabling.held_out`). Attention shares and accuracy
changes are fractions (1 = all the attention, 100 points); layers and heads 1-indexed; tasks in the order of the
mappings given.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import pandas as pd

from ...analyses.disabling import HeldOut
from ...analyses.finetune import Stage
from ...analyses.relations import RelationScores
from ...analyses.tokentypes import DEFAULT_THRESHOLD, TYPES, Stripes, TokenTypeAttention
from ...present import paper
from .words import listed  # noqa: F401 - the cells write their lists with it

CORE = ("nsubj", "dobj", "pobj")  # the proxy's arguments that are plainly dependency relations too
PAIR_TASK = "next_paragraph"  # the kit's sentence-pair task (`classroom.task_data`)
# the table row `relation_heads` reads when no head is above its shifted null
NO_HEAD = pd.Series({"label": "", "layer": 0, "head": 0, "score": float("nan"), "null_p99": float("nan")})


# -- §4.2 relation-specific heads ---------------------------------------------------------------------
@dataclass(frozen=True)
class RelationHeads:
    """The relation scores against their two nulls' 99th percentiles (`RelationScores.table`): the top head by
    score, and the top head of those above the shifted null (`kept`; "", 0 and NaN when no head is)."""

    n_heads: int  # heads scored
    top: str  # the head with the highest score, "layer-head"
    top_score: float  # its score (mean largest weight between predicate and argument words)
    top_relocated: float  # its relocated null's 99th percentile
    top_shifted: float  # its shifted null's 99th percentile
    top_above_shifted: bool  # whether its score is above top_shifted
    paper_best: float  # the paper's best FrameNet score
    n_relocated: int  # heads above their relocated null's 99th percentile
    n_shifted: int  # heads above their shifted null's
    kept: str  # the highest-scoring head above its shifted null
    kept_layer: int
    kept_head: int
    kept_score: float
    kept_shifted: float  # its shifted null's 99th percentile

    @property
    def top_against_shifted(self) -> str:
        """Where the top head's score falls against its shifted null: "still above" or "inside"."""
        return "still above" if self.top_above_shifted else "inside"


def relation_heads(scores: Mapping[str, RelationScores]) -> RelationHeads:
    """scores: null ("relocated", "shifted") -> `relations.score_relations` of one model's heads."""
    relocated, shifted = scores["relocated"].table(), scores["shifted"].table()
    top = relocated.iloc[0]
    top_shifted = shifted.set_index("label").loc[top["label"]]
    kept = shifted[shifted["above"]]
    first = kept.iloc[0] if len(kept) else NO_HEAD
    return RelationHeads(
        n_heads=len(relocated), top=str(top["label"]), top_score=float(top["score"]),
        top_relocated=float(top["null_p99"]), top_shifted=float(top_shifted["null_p99"]),
        top_above_shifted=bool(top_shifted["above"]), paper_best=max(paper.DARK_SECRETS["framenet_scores"]),
        n_relocated=int(relocated["above"].sum()), n_shifted=len(kept), kept=str(first["label"]),
        kept_layer=int(first["layer"]), kept_head=int(first["head"]), kept_score=float(first["score"]),
        kept_shifted=float(first["null_p99"]))


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
    """What the last layer's [CLS] row attends to, per token type (shares of the row, mean over heads and
    inputs; the types overlap)."""

    nouns: tuple[tuple[str, float, float], ...]  # per task: (task, share on nouns after fine-tuning, nouns' share
    # of the tokens)
    largest: tuple[str, ...]  # per task: the type other than "other" with the largest share after fine-tuning
    sep_after_min: float  # smallest share on [SEP] after fine-tuning, over tasks
    sep_after_max: float  # largest
    sep_most: float  # largest share on [SEP], before or after, over tasks
    cls_changes: tuple[tuple[str, float], ...]  # per task: (task, change of the share [CLS] keeps on itself)


def cls_reads(cls_rows: Mapping[str, pd.DataFrame]) -> ClsReads:
    """cls_rows: task -> `tokentypes.cls_change` (one row per category: base_rate, before, after, change, ...)."""
    rows = {task: frame.set_index("category") for task, frame in cls_rows.items()}
    typed = [t for t in TYPES if t != "other"]
    return ClsReads(
        nouns=tuple((task, float(row.loc["noun", "after"]), float(row.loc["noun", "base_rate"]))
                    for task, row in rows.items()),
        largest=tuple(str(row.loc[typed, "after"].idxmax()) for row in rows.values()),
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
    selection_min: float  # smallest accuracy change of a best head on its selection half
    selection_max: float
    evaluation_min: float  # smallest change of a best head on its evaluation half
    evaluation_max: float
    including_zero: int  # tries whose evaluation interval includes 0
    half_width: float  # median half-width of those intervals
    harmful: tuple[Harm, ...]  # each task's worst head and worst layer whose interval lies below 0, in order
    seed_heads: int  # different best heads over the seeds
    pair_random: float  # mean change on the pair task over every single head disabled
    other_random: tuple[tuple[str, float], ...]  # the same on the other tasks: (task, mean change)
    costliest: str  # the task whose mean change over single heads is lowest


def held_out_disabling(held: Mapping[str, HeldOut], seeds: Mapping[int, HeldOut], seed: int,
                       pair_task: str = PAIR_TASK) -> HeldOutDisabling:
    """held: task -> `disabling.held_out` of the model fine-tuned with `seed`; seeds: seed -> `held_out` of one
    task's models fine-tuned with each seed (the one at `seed` is `held`'s); pair_task: a key of held."""
    tries = [*held.values(), *(result for key, result in seeds.items() if key != seed)]
    best = pd.DataFrame([result.picks.loc["best head"] for result in tries])
    harmful = tuple(Harm(task, str(row["label"]), float(row["evaluation"]), float(row["low"]), float(row["high"]))
                    for task, result in held.items()
                    for _, row in result.picks.loc[["worst head", "worst layer"]].iterrows() if row["high"] < 0)
    random = {task: result.random_heads()["mean"] for task, result in held.items()}
    low, high = best["low"].astype(float), best["high"].astype(float)
    return HeldOutDisabling(
        tries=len(best), heads_chosen=int(best["label"].nunique()),
        selection_min=float(best["selection"].min()), selection_max=float(best["selection"].max()),
        evaluation_min=float(best["evaluation"].min()), evaluation_max=float(best["evaluation"].max()),
        including_zero=int(((low <= 0) & (high >= 0)).sum()), half_width=float(((high - low) / 2).median()),
        harmful=harmful, seed_heads=len({result.picks.loc["best head", "label"] for result in seeds.values()}),
        pair_random=random[pair_task], other_random=tuple((task, v) for task, v in random.items() if task != pair_task),
        costliest=min(random, key=random.get))
