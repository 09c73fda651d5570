"""The talk (slides/bertlook_talk.ipynb): the numbers its slide captions and speaker notes read, beside those the
notebooks' readings give (`nb01.sink`, `nb02.sink_ablation`, `nb04.table1`, `nb06.table3_scores`). Gains and
accuracy changes in percentage points; shares are fractions; layers and heads 1-indexed."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import pandas as pd

from ...analyses.disabling import HeldOut
from ...present import paper
from .nb04 import WIDE_GAIN, table1


@dataclass(frozen=True)
class Specialists:
    """Table 1's relations (not "all") whose best head beats the best offset by more than WIDE_GAIN points."""

    relations: int  # the relations of the paper's Table 1
    paper: int  # how many do in the paper's table
    released: int  # in its released notebook's printout
    run: int  # in this run
    disagreements: tuple[tuple[str, float, float, float], ...]  # (relation, the paper's gain, the released
    # notebook's, this run's) where the paper's table and its released notebook disagree (`nb04.Table1`)


def specialists(heads: pd.DataFrame, baseline: pd.DataFrame) -> Specialists:
    """heads: `syntax.head_accuracy`, baseline: `syntax.offset_baseline`, with "all" and Table 1's relations."""
    gains = paper.table1_gains().set_index("relation").drop("all")
    reading = table1(heads, baseline)
    return Specialists(len(gains), int((gains["paper"] > WIDE_GAIN).sum()), int((gains["released"] > WIDE_GAIN).sum()),
                       len(reading.wide), reading.disagreements)


@dataclass(frozen=True)
class NormSink:
    """[CLS]'s share of what the middle layers' heads take in, by attention weight and by the norm of what it
    writes (`norms.NormResult.by_layer`), mean over the layers `first`..`last`."""

    first: int
    last: int
    by_weight: float
    by_norm: float

    @property
    def shrink(self) -> float:
        """by_weight / by_norm: how many times smaller [CLS]'s share is by norm (inf if 0 by norm)."""
        return self.by_weight / self.by_norm if self.by_norm else float("inf")


def norm_sink(by_layer: pd.DataFrame, first: int, last: int) -> NormSink:
    """by_layer: `NormResult.by_layer()` (index (layer, category), columns "by weight", "by norm", ...); first,
    last: the middle layers (e.g. `nb01.sink`'s)."""
    if not 1 <= first <= last:
        raise ValueError(f"need 1 <= first <= last, got {first}..{last}")
    cls = by_layer.xs("cls", level="category").loc[first:last]
    return NormSink(first, last, float(cls["by weight"].mean()), float(cls["by norm"].mean()))


@dataclass(frozen=True)
class HeldOutGains:
    """The head whose disabling helped most on the selection half, per task, scored on the other half
    (`disabling.held_out`, the "best head" pick)."""

    tasks: tuple[str, ...]
    selection: tuple[float, ...]  # its accuracy change on the selection half, per task (points)
    evaluation: tuple[float, ...]  # on the evaluation half
    low: tuple[float, ...]  # the evaluation change's paired 95 % interval
    high: tuple[float, ...]
    n_evaluation: tuple[int, ...]  # evaluation inputs per task

    @property
    def confirmed(self) -> tuple[str, ...]:
        """The tasks whose held-out gain lies above zero with 95 % confidence."""
        return tuple(task for task, low in zip(self.tasks, self.low) if low > 0)


def held_out_gains(held: Mapping[str, HeldOut], pick: str = "best head") -> HeldOutGains:
    """held: task -> `disabling.held_out`; pick: the row of its `picks` to read."""
    if not held:
        raise ValueError("no held-out results")
    rows = {task: result.picks.loc[pick] for task, result in held.items()}

    def points(column: str) -> tuple[float, ...]:
        return tuple(100 * float(row[column]) for row in rows.values())

    return HeldOutGains(tuple(rows), points("selection"), points("evaluation"), points("low"), points("high"),
                        tuple(int(result.n_evaluation) for result in held.values()))
