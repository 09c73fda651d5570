"""Notebook 04 (syntax heads): the numbers its prose reads from Table 1 (`syntax.head_accuracy`,
`syntax.offset_baseline`), the scoring variants, the held-out table, the two parsers' agreement
(`parses.agreement_table`, `syntax.on_subset`) and the hand check (`parsecheck.precision_table`), against the
paper's Table 1. Accuracies in %, gains, gaps and losses in percentage points, as the notebook prints them;
layers and heads 1-indexed."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from ...analyses import syntax
from ...data import parsecheck
from ...core.models import Encoded
from ...present import paper
from ...present.viz import head_map

WIDE_GAIN = 10  # points over the best offset: "far ahead of the baseline" above this
SMALL_GAIN = 5  # "little or no gain" below this; "modest" in between (both ends included)
FAR = ("det", "dobj", "pobj")  # relations whose head is not a neighbour, and the paper's largest leads
CLARK = f"{syntax.CLARK_OFFSETS[0]:+d}..{syntax.CLARK_OFFSETS[-1]:+d}"  # Clark's offsets, as scoring_variants says


def code_list(names: Sequence[str]) -> str:
    """("det", "dobj") -> "`det`, `dobj`" (empty for none)."""
    return ", ".join(f"`{name}`" for name in names)


def listed(gains: Sequence[tuple[str, float]]) -> str:
    """((relation, gain), ...) -> "`dobj` (+37.3), `pobj` (+25.6)", in the order given."""
    return ", ".join(f"`{relation}` ({gain:+.1f})" for relation, gain in gains)


def _percent_table(heads: pd.DataFrame, baseline: pd.DataFrame) -> pd.DataFrame:
    """`syntax.summary_table` indexed by relation: accuracies as Table 1 prints them (%, one decimal)."""
    return syntax.summary_table(heads, baseline).set_index("relation")


def _ranked(gains: pd.Series) -> tuple[tuple[str, float], ...]:
    """relation -> gain, as ((relation, gain), ...), largest first."""
    return tuple((str(r), float(v)) for r, v in gains.sort_values(ascending=False).items())


@dataclass(frozen=True)
class ScoringVariants:
    """Clark's scoring against the kit's earlier variant (the table `scoring_variants` prints), in points."""

    root_head_drop: float  # best head over all words: kit's scoring minus Clark's (which counts the root)
    root_baseline_drop: float  # the same for the best offset
    poss_difference: float  # the chosen poss head: Clark's 's rule minus the kit's either-row rule (0: they agree)
    plus3_changes: tuple[str, ...]  # "relation (scoring)" whose best offset changes when +3 is allowed


def scoring_variants(variants: pd.DataFrame) -> ScoringVariants:
    """variants: `syntax.scoring_variants` for "all" and "poss", accuracy and baseline in % (as printed)."""
    by = variants.set_index(["relation", "scoring", "offsets"])

    def at(relation: str, scoring: str, column: str) -> float:
        return float(by.loc[(relation, scoring, CLARK), column])

    baselines = variants.groupby(["relation", "scoring"])["baseline"].nunique()
    return ScoringVariants(
        root_head_drop=at("all", "kit", "accuracy") - at("all", "clark", "accuracy"),
        root_baseline_drop=at("all", "kit", "baseline") - at("all", "clark", "baseline"),
        poss_difference=at("poss", "clark", "accuracy") - at("poss", "kit", "accuracy"),
        plus3_changes=tuple(f"{relation} ({scoring})" for (relation, scoring), n in baselines.items() if n > 1))


@dataclass(frozen=True)
class Table1:
    """Table 1 of this run read against the paper's."""

    all_head: str  # the best head over all words, "3-2"
    all_accuracy: float  # its accuracy (%, one decimal, as the table prints it)
    all_baseline: float  # the best offset's accuracy over all words (%)
    paper_all_accuracy: float  # the paper's best head over all words (%)
    paper_all_baseline: float  # the paper's best offset over all words (%)
    all_gap_to_paper: float  # all_accuracy - paper_all_accuracy (points)
    released_all_accuracy: float  # the same two numbers as Clark et al.'s released notebook prints them (%)
    released_all_baseline: float
    all_gap_to_released: float  # all_accuracy - released_all_accuracy (points)
    disagreements: tuple[tuple[str, float, float, float], ...]  # (relation, the paper's gain, its released notebook's,
    # this run's, NaN if it has none) for the relations but "all" where the paper's table and its released notebook
    # disagree (points)
    wide: tuple[tuple[str, float], ...]  # (relation, gain) with a gain over WIDE_GAIN, largest first
    modest: tuple[tuple[str, float], ...]  # gains from SMALL_GAIN to WIDE_GAIN
    small: tuple[tuple[str, float], ...]  # gains under SMALL_GAIN
    wide_max_baseline: float  # the highest best-offset accuracy among the wide relations (%; NaN for none)
    small_not_adjacent: tuple[str, ...]  # small-gain relations whose best offset is not -1 or +1
    small_top_head: str  # the head that wins most small-gain relations ("" for none)
    small_top_head_wins: int  # how many it wins
    paper_nn_accuracy: float  # the paper's nn row: best head (%) ...
    paper_nn_baseline: float  # ... and best offset (%)
    rare: str  # the rare relation discussed ("prt")
    rare_n: int  # its dependents
    rare_hits: int  # how many its best head finds
    rare_interval: str  # its 95 % interval as printed, "100.0–100.0"
    rare_plausible: float  # the rule of three: any accuracy above 100 - 300 / n (%) is plausible

    @property
    def wide_relations(self) -> tuple[str, ...]:
        return tuple(relation for relation, _ in self.wide)


def table1(heads: pd.DataFrame, baseline: pd.DataFrame, rare: str = "prt") -> Table1:
    """heads: `syntax.head_accuracy`, baseline: `syntax.offset_baseline`, both with "all" and Table 1's
    relations (fractions)."""
    table = _percent_table(heads, baseline)
    offsets = baseline.set_index("relation")
    gain = table["gain"].drop("all")
    wide, small = gain[gain > WIDE_GAIN], gain[gain < SMALL_GAIN]
    modest = gain[(gain >= SMALL_GAIN) & (gain <= WIDE_GAIN)]
    winners = table.loc[small.index, "head"].value_counts()
    theirs = paper.TABLE1.set_index("relation")
    gains = paper.table1_gains().set_index("relation").drop("all")
    n = int(table.loc[rare, "n"])
    rare_row = heads.set_index("relation").loc[rare]
    return Table1(
        all_head=str(table.loc["all", "head"]), all_accuracy=float(table.loc["all", "acc."]),
        all_baseline=float(100 * offsets.loc["all", "accuracy"]),
        paper_all_accuracy=float(theirs.loc["all", "accuracy"]),
        paper_all_baseline=float(theirs.loc["all", "baseline"]),
        all_gap_to_paper=float(table.loc["all", "acc."] - theirs.loc["all", "accuracy"]),
        released_all_accuracy=float(theirs.loc["all", "released_accuracy"]),
        released_all_baseline=float(theirs.loc["all", "released_baseline"]),
        all_gap_to_released=float(table.loc["all", "acc."] - theirs.loc["all", "released_accuracy"]),
        disagreements=tuple((str(r), float(g.paper), float(g.released),
                             float(gain.get(paper.SD_TO_SPACY.get(r, r), np.nan)))
                            for r, g in gains[gains["differs"]].iterrows()),
        wide=_ranked(wide), modest=_ranked(modest), small=_ranked(small),
        wide_max_baseline=float((100 * offsets.loc[wide.index, "accuracy"]).max()) if len(wide) else float("nan"),
        small_not_adjacent=tuple(str(r) for r in small.index if abs(offsets.loc[r, "offset"]) != 1),
        small_top_head=str(winners.index[0]) if len(winners) else "",
        small_top_head_wins=int(winners.iloc[0]) if len(winners) else 0,
        paper_nn_accuracy=float(theirs.loc["nn", "accuracy"]), paper_nn_baseline=float(theirs.loc["nn", "baseline"]),
        rare=rare, rare_n=n, rare_hits=int(round(rare_row["accuracy"] * n)),
        rare_interval=str(table.loc[rare, "95% interval"]), rare_plausible=100 - 100 * 3 / n)


@dataclass(frozen=True)
class HeldOut:
    """Heads chosen on the selection half, scored on the held-out half (losses in points)."""

    n_relations: int
    still_best: int  # relations whose chosen head is also the held-out half's best
    worst_loss: float  # the largest selection - held-out accuracy over all relations
    frequent_worst_loss: float  # the same over relations with at least `frequent_n` held-out words (NaN: none)
    watched: tuple[str, ...]  # the relations the prose names
    watched_min_loss: float  # their smallest and ...
    watched_max_loss: float  # ... largest loss
    watched_kept_best: tuple[str, ...]  # those of them where no other head would have looked better


def held_out(held: pd.DataFrame, watched: Sequence[str], frequent_n: int = 1000) -> HeldOut:
    """held: `syntax.heldout_table` with selection, heldout and heldout_best in % (as printed)."""
    by = held.set_index("relation")
    lost = by["selection"] - by["heldout"]
    frequent = lost[by["n"] >= frequent_n]
    watched = tuple(watched)
    return HeldOut(
        n_relations=len(by), still_best=int((by["heldout"] == by["heldout_best"]).sum()),
        worst_loss=float(lost.max()), frequent_worst_loss=float(frequent.max()) if len(frequent) else float("nan"),
        watched=watched, watched_min_loss=float(lost[list(watched)].min()),
        watched_max_loss=float(lost[list(watched)].max()),
        watched_kept_best=tuple(r for r in watched if not by.loc[r, "heldout_best"] > by.loc[r, "heldout"]))


@dataclass(frozen=True)
class ParserAgreement:
    """spaCy's small parser against its medium one, and Table 1 re-scored where they agree."""

    head_agreement: float  # % of the non-punctuation words with the same head
    labelled_agreement: float  # % with the same head and label
    least_agreed: tuple[tuple[str, float], ...]  # the three relations with the lowest head agreement (%), lowest first
    moved_min: float  # the chosen heads' accuracy on agreed words minus on all words: the smallest change ...
    moved_max: float  # ... and the largest (points)
    all_baseline_rise: float  # the best offset over all words: on agreed words minus on all words (points)
    baselines_risen: int  # relations (with "all") whose best offset scores higher on agreed words
    n_relations: int  # relations re-scored (with "all")


def parser_agreement(agreement: pd.DataFrame, rescored: pd.DataFrame, relations: Sequence[str]) -> ParserAgreement:
    """agreement: `parses.agreement_table`; rescored: `syntax.on_subset` with accuracies in % (as printed);
    relations: Table 1's ("all" is left out of the least agreed)."""
    agree = agreement.set_index("relation")
    again = rescored.set_index("relation")
    moved = again["accuracy_kept"] - again["accuracy"]
    least = agree.loc[[r for r in relations if r != "all"], "head_agreement"].nsmallest(3)
    return ParserAgreement(
        head_agreement=float(agree.loc["all", "head_agreement"]),
        labelled_agreement=float(agree.loc["all", "labelled_agreement"]),
        least_agreed=tuple((str(r), float(v)) for r, v in least.items()),
        moved_min=float(moved.min()), moved_max=float(moved.max()),
        all_baseline_rise=float(again.loc["all", "baseline_kept"] - again.loc["all", "baseline"]),
        baselines_risen=int((again["baseline_kept"] > again["baseline"]).sum()), n_relations=len(again))


@dataclass(frozen=True)
class HandCheck:
    """The hand check of spaCy's arcs (`parsecheck.precision_table`), and whether its errors could explain the
    gaps to the paper on the far relations."""

    head_ok: int  # arcs whose head spaCy got right ...
    n: int  # ... of the arcs checked
    precision: float  # head right (%) ...
    low: float  # ... its 95 % interval (%)
    high: float
    labelled: float  # head and label right (%)
    worst: str  # the relation with the lowest head precision
    worst_precision: float  # its precision and interval (%)
    worst_low: float
    worst_high: float
    gaps: tuple[tuple[str, float], ...]  # (relation, the paper's accuracy - this run's, points) for FAR
    most_wrong: tuple[tuple[str, float], ...]  # (relation, the upper end of its share of wrong heads, %)
    beyond: tuple[str, ...]  # far relations whose gap is larger than that: parse errors cannot explain it
    undecided: tuple[str, ...]  # the others: the sample is too small to tell


def hand_check(checked: pd.DataFrame, heads: pd.DataFrame, baseline: pd.DataFrame,
               far: Sequence[str] = FAR) -> HandCheck:
    """checked: `parsecheck.precision_table`; heads, baseline: as for `table1` (the far relations' rows)."""
    by = checked.set_index("relation")
    every = by.loc[parsecheck.ALL]
    worst = str(by.drop(parsecheck.ALL)["head_precision"].idxmin())
    table, theirs = _percent_table(heads, baseline), paper.TABLE1.set_index("relation")
    gap = {r: float(theirs.loc[r, "accuracy"] - table.loc[r, "acc."]) for r in far}
    most_wrong = {r: float(100 - by.loc[r, "head_low"]) for r in far}
    beyond = tuple(r for r in far if gap[r] > most_wrong[r])
    return HandCheck(
        head_ok=int(every["head_ok"]), n=int(every["n"]), precision=float(every["head_precision"]),
        low=float(every["head_low"]), high=float(every["head_high"]), labelled=float(every["labelled_precision"]),
        worst=worst, worst_precision=float(by.loc[worst, "head_precision"]), worst_low=float(by.loc[worst, "head_low"]),
        worst_high=float(by.loc[worst, "head_high"]), gaps=tuple(gap.items()), most_wrong=tuple(most_wrong.items()),
        beyond=beyond, undecided=tuple(r for r in far if r not in beyond))


@dataclass(frozen=True)
class Differences:
    """What differs from the paper: labels, the model's size, where the best heads sit."""

    compound_baseline: float  # the best offset for spaCy's `compound` (%) ...
    paper_nn_baseline: float  # ... and for the paper's `nn` (%)
    n_heads: int  # this model's heads (layers x heads)
    n_candidates: int  # heads x 2 directions
    layers_min: int  # the layers (1-indexed) of this run's best heads, Table 1's relations without "all"
    layers_max: int
    layers_median: float
    paper_layers_min: int  # the same for the paper's best heads
    paper_layers_max: int
    paper_layers_median: float
    far_vs_paper: tuple[tuple[str, float, float], ...]  # (relation, this run's accuracy, the paper's) (%) for FAR


def differences(heads: pd.DataFrame, baseline: pd.DataFrame, n_layers: int, n_heads: int,
                far: Sequence[str] = FAR) -> Differences:
    """heads, baseline: as for `table1`; n_layers, n_heads: the model's."""
    table, theirs = _percent_table(heads, baseline), paper.TABLE1.set_index("relation")
    layers = heads.set_index("relation").drop("all")["layer"]
    paper_layers = theirs.drop("all")["head"].str.split("-").str[0].astype(int)
    compound = paper.SD_TO_SPACY["nn"]
    return Differences(
        compound_baseline=float(100 * baseline.set_index("relation").loc[compound, "accuracy"]),
        paper_nn_baseline=float(theirs.loc["nn", "baseline"]),
        n_heads=n_layers * n_heads, n_candidates=2 * n_layers * n_heads,
        layers_min=int(layers.min()), layers_max=int(layers.max()), layers_median=float(np.median(layers)),
        paper_layers_min=int(paper_layers.min()), paper_layers_max=int(paper_layers.max()),
        paper_layers_median=float(np.median(paper_layers)),
        far_vs_paper=tuple((r, float(table.loc[r, "acc."]), float(theirs.loc[r, "accuracy"])) for r in far))


# -- the BertViz example ------------------------------------------------------------------------------
def strongest_targets(enc: Encoded, layer: int, head: int, token: str, k: int = 2) -> tuple[str, ...]:
    """The `k` tokens that the first `token` of `enc` sends most attention to in head `layer`-`head`
    (1-indexed), strongest first: what a reader hovering over it in BertViz sees as its thickest lines."""
    if token not in enc.tokens:
        raise ValueError(f"token {token!r} is not in the input: {enc.tokens}")
    row = head_map(enc, layer, head)[enc.tokens.index(token)]  # [n_tokens]
    return tuple(enc.tokens[i] for i in np.argsort(-row, kind="stable")[:k])
