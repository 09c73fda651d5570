"""Notebook 05 (the coreference head): the numbers its prose reads from the mentions' positions
(`coref.positions`, `coref.position_baselines`), from `coref.analyse`'s result (its heads, Table 2, the readings of
the definition) and from its failure tables (`coref.by_head_word`, `coref.failures`, `coref.accuracy_by_rank`),
against the paper's Table 2. Accuracies in % of the held-out half's mentions unless a field says "share" (a
fraction, 0-1); layers and heads 1-indexed."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from ...analyses import coref
from ...analyses.coref import CorefResult, Reading, SameWord, System
from ...core.conventions import head_label
from ...data.corefdata import Passage
from ...present import paper

NAMES_AND_DESCRIPTIONS = ("proper", "nominal")


def _paper() -> pd.DataFrame:
    """The paper's Table 2 (%) indexed by system."""
    return paper.TABLE2.set_index("system")


def _best_by_reading(result: CorefResult) -> pd.DataFrame:
    """`result.readings` indexed by reading."""
    return result.readings.set_index("reading")


def _strict_label(result: CorefResult) -> str:
    """The system name of the best head under the stricter reading (the argmax over every earlier word)."""
    best = _best_by_reading(result)
    return coref.best_head_label((best.loc[Reading.EARLIER_WORDS, "layer"], best.loc[Reading.EARLIER_WORDS, "head"]),
                                 Reading.EARLIER_WORDS)


@dataclass(frozen=True)
class Positions:
    """What position alone does (on every coreferent mention, both halves)."""

    nearest_share: float  # % of the mentions whose nearest earlier mention is an antecedent
    best_k: int  # the best fixed position: k mentions back ...
    best_k_accuracy: float  # ... and its accuracy (%)
    paper_nearest: float  # Clark et al.'s nearest-mention baseline on CoNLL-2012 (%)


def positions(passages: Sequence[Passage], mentions: pd.DataFrame) -> Positions:
    """mentions: `coref.mention_table(passages)`."""
    where = coref.positions(mentions).set_index("type")
    by_k = coref.position_baselines(passages, mentions).set_index("k")["all"]
    return Positions(nearest_share=float(100 * where.loc["all", "rank_1"]), best_k=int(by_k.idxmax()),
                     best_k_accuracy=float(100 * by_k.max()), paper_nearest=float(_paper().loc[System.NEAREST, "all"]))


@dataclass(frozen=True)
class HeadRanking:
    """Every head on the selection half, and how much choosing the best flatters it."""

    n_good: int  # heads that pick an antecedent for at least `threshold` of the selection half's mentions
    n_heads: int  # heads in all
    median: float  # the median head's selection accuracy (%)
    drift: float  # the largest |held-out - selection| accuracy among the `top` best heads (points)
    min_per_half: int  # mentions in the smaller half
    first: str  # the best head, "3-10", ...
    first_accuracy: float  # ... its selection accuracy (%) ...
    first_layer: int  # ... and its layer (1-indexed)
    second: str  # the same for the second best
    second_accuracy: float
    second_layer: int
    paper_head: str  # the paper's best head, "5-4" ...
    paper_layer: int  # ... and its layer in BERT-base


def head_ranking(result: CorefResult, threshold: float = 0.6, top: int = 6) -> HeadRanking:
    """threshold: a share of mentions (0-1); top: how many of the best heads `drift` covers."""
    heads = result.heads
    ranked = heads.sort_values("all", ascending=False)
    best = ranked.head(top)
    first, second = ranked.iloc[0], ranked.iloc[1]
    return HeadRanking(
        n_good=int((heads["all"] >= threshold).sum()), n_heads=len(heads), median=float(100 * heads["all"].median()),
        drift=float(100 * (best["held_out"] - best["all"]).abs().max()),
        min_per_half=int(result.mentions["half"].value_counts().min()),
        first=head_label(int(first["layer"]), int(first["head"])), first_accuracy=float(100 * first["all"]),
        first_layer=int(first["layer"]),
        second=head_label(int(second["layer"]), int(second["head"])), second_accuracy=float(100 * second["all"]),
        second_layer=int(second["layer"]),
        paper_head=paper.COREF_HEAD, paper_layer=int(paper.COREF_HEAD.split("-")[0]))


@dataclass(frozen=True)
class Table2:
    """Table 2 of this run (held-out half, every mention) read against the paper's."""

    nearest: float  # the nearest mention (%)
    head_word: float  # head-word match (%)
    sieve: float  # the rule-based sieve (%)
    best: str  # the best head under the kit's reading, "3-10", ...
    best_accuracy: float  # ... and its accuracy (%)
    strict: str  # the best head under the stricter reading (every earlier word) ...
    strict_accuracy: float  # ... and its accuracy (%)
    nearest_gap: float  # head_word - nearest (points)
    not_above_paper: tuple[str, ...]  # "system: type" where head-word match, the sieve or the kit's-reading head
    # does not score higher than the paper's counterpart (the paper's head for the best head)


def table2(result: CorefResult) -> Table2:
    """result: `coref.analyse`'s, with its readings."""
    acc, theirs = result.wide(), _paper()
    kit, strict = coref.best_head_label(result.best), _strict_label(result)
    pairs = ((System.HEAD_WORD, System.HEAD_WORD), (System.SIEVE, System.SIEVE), (paper.TABLE2_HEAD, kit))
    return Table2(
        nearest=float(acc.loc[System.NEAREST, "all"]), head_word=float(acc.loc[System.HEAD_WORD, "all"]),
        sieve=float(acc.loc[System.SIEVE, "all"]), best=result.best_label, best_accuracy=float(acc.loc[kit, "all"]),
        strict=str(_best_by_reading(result).loc[Reading.EARLIER_WORDS, "label"]),
        strict_accuracy=float(acc.loc[strict, "all"]),
        nearest_gap=float(acc.loc[System.HEAD_WORD, "all"] - acc.loc[System.NEAREST, "all"]),
        not_above_paper=tuple(f"{mine}: {t}" for theirs_name, mine in pairs for t in coref.COLUMNS
                              if not acc.loc[mine, t] > theirs.loc[theirs_name, t]))


@dataclass(frozen=True)
class Combined:
    """All heads together (the learned row) beside the best single head and the sieve (%)."""

    combined: float  # every mention
    best: float  # the best single head, every mention
    sieve: float  # the sieve, every mention
    gap_to_sieve: float  # combined - sieve (points)
    combined_nominal: float  # nominal mentions: all heads together ...
    sieve_nominal: float  # ... and the sieve
    combined_pronoun: float  # pronouns: all heads together ...
    sieve_pronoun: float  # ... and the sieve


def combined(result: CorefResult) -> Combined:
    """result: `coref.analyse`'s."""
    acc = result.wide()
    mine, sieve, kit = acc.loc[System.COMBINED], acc.loc[System.SIEVE], acc.loc[coref.best_head_label(result.best)]
    return Combined(combined=float(mine["all"]), best=float(kit["all"]), sieve=float(sieve["all"]),
                    gap_to_sieve=float(mine["all"] - sieve["all"]),
                    combined_nominal=float(mine["nominal"]), sieve_nominal=float(sieve["nominal"]),
                    combined_pronoun=float(mine["pronoun"]), sieve_pronoun=float(sieve["pronoun"]))


@dataclass(frozen=True)
class Definition:
    """The best head under each reading of "most attends to" (held-out accuracy, %)."""

    kit: float  # the earlier mentions' head words (the kit's reading) ...
    kit_head: str  # ... and the best head under it, "3-10"
    strict: float  # every word before the mention
    strict_head: str
    all_words: float  # every word of the passage but the mention's own head word
    all_words_head: str
    lost: float  # % of the held-out mentions the kit's best head gets right among the mention heads but not
    # over every earlier word (it attends more to some other earlier word)
    head_word: float  # head-word match (%)
    paper_head: float  # the paper's head, reading unknown (%)


def definition(result: CorefResult) -> Definition:
    """result: `coref.analyse`'s, with its readings and reading_correct."""
    best = _best_by_reading(result)
    held = result.mentions["half"].to_numpy() == "held-out"
    layer, head = result.best
    right = {r: ok[held, layer - 1, head - 1] for r, ok in result.reading_correct.items()}
    return Definition(
        kit=float(100 * best.loc[Reading.MENTION_HEADS, "held_out"]),
        kit_head=str(best.loc[Reading.MENTION_HEADS, "label"]),
        strict=float(100 * best.loc[Reading.EARLIER_WORDS, "held_out"]),
        strict_head=str(best.loc[Reading.EARLIER_WORDS, "label"]),
        all_words=float(100 * best.loc[Reading.ALL_WORDS, "held_out"]),
        all_words_head=str(best.loc[Reading.ALL_WORDS, "label"]),
        lost=float(100 * (right[Reading.MENTION_HEADS] & ~right[Reading.EARLIER_WORDS]).mean()),
        head_word=float(result.wide().loc[System.HEAD_WORD, "all"]),
        paper_head=float(_paper().loc[paper.TABLE2_HEAD, "all"]))


@dataclass(frozen=True)
class Failures:
    """Where the best head fails (held-out half). Shares are fractions (0-1), as the tables print them."""

    same_word_min: float  # its lowest share right, over types, where an antecedent has the mention's head word
    other_word_max: float  # its highest share right where none has
    over_head_word_min: float  # where none has: its smallest lead over head-word match, over types
    over_sieve_names_min: float  # where none has: its smallest lead over the sieve on names and descriptions
    pronoun_below_sieve: float  # where none has: the sieve's lead over it on pronouns
    weakest_type: str  # its weakest mention type (held-out accuracy) ...
    pronoun_accuracy: float  # ... and its accuracy on pronouns (%)
    pronoun_errors_disagree: float  # share of its pronoun errors that pick a mention that disagrees (NaN: none)
    rank_loss: float  # its share right with the nearest antecedent next minus with it furthest back (last rank)
    nearest_at_last_rank: float  # the nearest mention's share right at the last rank


def failures(result: CorefResult, split: pd.DataFrame, wrong: pd.DataFrame, by_rank: pd.DataFrame) -> Failures:
    """split: `coref.by_head_word`, wrong: `coref.failures`, by_rank: `coref.accuracy_by_rank`, each with the
    best head's column (and head-word match, the sieve, the nearest mention where used)."""
    label = coref.best_head_label(result.best)
    cases = split.set_index(["type", "same_word"])
    same, other = cases.xs(SameWord.YES, level="same_word"), cases.xs(SameWord.NO, level="same_word")
    by_type = result.wide().loc[label, list(coref.TYPES)]
    pronoun_agrees = wrong.loc[wrong["type"] == "pronoun", "picked_agrees"] if len(wrong) else []
    ranks = by_rank.set_index("rank")
    return Failures(
        same_word_min=float(same[label].min()), other_word_max=float(other[label].max()),
        over_head_word_min=float((other[label] - other[System.HEAD_WORD]).min()),
        over_sieve_names_min=float((other[label] - other[System.SIEVE])[list(NAMES_AND_DESCRIPTIONS)].min()),
        pronoun_below_sieve=float(other.loc["pronoun", System.SIEVE] - other.loc["pronoun", label]),
        weakest_type=str(by_type.idxmin()), pronoun_accuracy=float(by_type["pronoun"]),
        pronoun_errors_disagree=float(1 - np.mean(pronoun_agrees)) if len(pronoun_agrees) else float("nan"),
        rank_loss=float(ranks[label].iloc[0] - ranks[label].iloc[-1]),
        nearest_at_last_rank=float(ranks[System.NEAREST].iloc[-1]))


@dataclass(frozen=True)
class Discussion:
    """What the comparison with the paper means: the model, the data, the sieve on pronouns."""

    best_layers: tuple[int, ...]  # the layers of the best heads under the kit's and the stricter reading, sorted
    paper_head: str  # the paper's best head, "5-4"
    mean_words: float  # words per passage, on average
    candidates: float  # earlier mentions per coreferent mention, on average
    sieve_pronoun: float  # the sieve on pronouns here (%) ...
    paper_sieve_pronoun: float  # ... and on CoNLL-2012 (%)


def discussion(result: CorefResult) -> Discussion:
    """result: `coref.analyse`'s, with its readings."""
    best = _best_by_reading(result)
    where = coref.positions(result.mentions).set_index("type")
    return Discussion(
        best_layers=tuple(sorted({int(best.loc[r, "layer"]) for r in (Reading.MENTION_HEADS, Reading.EARLIER_WORDS)})),
        paper_head=paper.COREF_HEAD, mean_words=float(np.mean([len(p.words) for p in result.passages])),
        candidates=float(where.loc["all", "candidates"]),
        sieve_pronoun=float(result.wide().loc[System.SIEVE, "pronoun"]),
        paper_sieve_pronoun=float(_paper().loc[System.SIEVE, "pronoun"]))
