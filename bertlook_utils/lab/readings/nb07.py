"""Notebook 07 (clustering heads, Clark et al. §6, Fig 6): the numbers its prose and checks use.

Ratios are between / within mean JS distances of `clustering.GroupTest`; p-values its permutation p; NaN where a
test could not run (`clustering.tests_frame`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ...analyses.clustering import BEHAVIOURS, ClusterResult, GroupTest, tests_frame

TOKEN_BEHAVIOURS = tuple(b for b in BEHAVIOURS if b not in ("broad", "other"))  # a position or token label


@dataclass(frozen=True)
class LayerRobustness:
    """Do heads of one layer stay close without the broad heads? `n_broad`: heads labelled broad; `n_broad_first`,
    `n_broad_last`: those in layer 1 and in the last layer, `n_broad_edge` their sum. The layer test on every head
    (`ratio`), without the broad heads (`ratio_without_broad`, the largest shuffled ratio `null_max_without_broad`,
    `p_without_broad`) and within behaviours (`ratio_within_behaviours`, `p_within_behaviours`); the behaviour
    test (`behaviour_ratio`, `behaviour_p`) and whether one could run without the broad heads
    (`behaviours_without_broad_tested`)."""

    n_broad: int
    n_broad_first: int
    n_broad_last: int
    n_broad_edge: int
    ratio: float
    ratio_without_broad: float
    null_max_without_broad: float
    p_without_broad: float
    ratio_within_behaviours: float
    p_within_behaviours: float
    behaviour_ratio: float
    behaviour_p: float
    behaviours_without_broad_tested: bool


def layer_robustness(result: ClusterResult, tests: Mapping[str, GroupTest | None]) -> LayerRobustness:
    """result: `clustering.analyse`; tests: its `robustness_tests` (`clustering.ROBUSTNESS`)."""
    by_name = tests_frame(dict(tests)).set_index("test")
    layers = result.heads.loc[result.heads["behaviour"] == "broad", "layer"]
    first, last = int((layers == 1).sum()), int((layers == result.n_layers).sum())
    return LayerRobustness(
        n_broad=len(layers), n_broad_first=first, n_broad_last=last, n_broad_edge=first + last,
        ratio=float(by_name.loc["layers", "ratio"]),
        ratio_without_broad=float(by_name.loc["layers without broad heads", "ratio"]),
        null_max_without_broad=float(by_name.loc["layers without broad heads", "null_max"]),
        p_without_broad=float(by_name.loc["layers without broad heads", "p"]),
        ratio_within_behaviours=float(by_name.loc["layers within behaviours", "ratio"]),
        p_within_behaviours=float(by_name.loc["layers within behaviours", "p"]),
        behaviour_ratio=float(by_name.loc["behaviours", "ratio"]), behaviour_p=float(by_name.loc["behaviours", "p"]),
        behaviours_without_broad_tested=tests["behaviours without broad heads"] is not None)


@dataclass(frozen=True)
class BroadDefinitions:
    """Notebook 03's broad heads (largest weight <= 0.10) against the entropy > 3.8 nats ones here: `n_nb03`, how
    many notebook 03 counts; `entropy_only`, `largest_weight_only`: the head labels broad by one definition
    only."""

    n_nb03: int
    entropy_only: tuple[str, ...]
    largest_weight_only: tuple[str, ...]


def broad_definitions(overlap: Mapping[str, list[str]]) -> BroadDefinitions:
    """overlap: `clustering.broad_overlap` (head labels broad by both, by entropy only, by largest weight only)."""
    return BroadDefinitions(n_nb03=len(overlap["both"]) + len(overlap["largest weight only"]),
                            entropy_only=tuple(overlap["entropy only"]),
                            largest_weight_only=tuple(overlap["largest weight only"]))


@dataclass(frozen=True)
class LabelCounts:
    """What the behaviour labels say about the model: `n_token_heads`, heads with a position or token label
    (`TOKEN_BEHAVIOURS`); `n_other`, `n_sep`, `n_punct`: heads labelled other, [SEP], punctuation; `cls_share`,
    `sep_share`: the mean share of attention to [CLS] and to [SEP] over the heads."""

    n_token_heads: int
    n_other: int
    n_sep: int
    n_punct: int
    cls_share: float
    sep_share: float


def label_counts(result: ClusterResult) -> LabelCounts:
    """result: `clustering.analyse` (heads with behaviour, cls and sep)."""
    heads = result.heads
    counts = heads["behaviour"].value_counts()
    return LabelCounts(n_token_heads=int(counts.reindex(list(TOKEN_BEHAVIOURS)).fillna(0).sum()),
                       n_other=int(counts.get("other", 0)), n_sep=int(counts.get("sep", 0)),
                       n_punct=int(counts.get("punct", 0)), cls_share=float(heads["cls"].mean()),
                       sep_share=float(heads["sep"].mean()))
