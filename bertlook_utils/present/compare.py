"""Paper vs this run: every comparison table of the kit, in one layout.

`table(rows)` is the one layout — quantity · paper · this run · what differs (Table 1 adds the column of its
released notebook) — and each function below feeds it from an analysis result and the paper's numbers (`paper`,
where each is typed once):

    surface(result)                        Clark et al. §3, Fig 1-2 (notebook 01)
    sep_noop(grad, ablation)               §3.2, Fig 3 (02)
    entropy(result)                        §3.3, Fig 4 (03)
    table1(heads, baseline)                Table 1 (04), with its released notebook's rows
    table2(result)                         Table 2 (05), beside coref_readings(result) and coref_learned(result)
    table3(results), table3_gaps(results)  (06)
    clustering(result, ...)                §6, Fig 6 (07)
    dark_secrets_patterns(...)             Kovaleva §4.1, §4.3 (08)
    dark_secrets_heads(...)                §4.2, §4.4-4.6 (09)
    beyond_attention(...)                  later work (10)

Numbers are formatted here, rounded as the notebooks print them; the analyses return unrounded data. Results are
looked up by their ids (`coref.System`, `probes.Model`, `finetune.Score`), never by the labels they show.
`tables.show` displays the tables (also as `compare.show`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from . import paper
from .tables import show as show  # the notebooks and the student copies already handed out call compare.show(...)
from ..analyses.clustering import BEHAVIOUR_NAMES, BEHAVIOURS, ClusterResult, compare as compare_maps
from ..core.conventions import by_depth, head_label
from ..analyses.coref import (COLUMNS as MENTION_TYPES, READINGS as COREF_READINGS, CorefResult, Reading, System,
                              best_head_label)
from ..analyses.disabling import HeldOut
from ..analyses.finetune import Score, Stage
from ..analyses.gradients import MIN_DISTANCE, AblationResult, GradientResult
from ..analyses.norms import Mixing, NormResult
from ..analyses.probes import Model, ProbeResults
from ..analyses.relations import RelationScores
from ..analyses.surface import BROAD_ENTROPY, SurfaceResult, broad_heads
from ..analyses.tokentypes import UNTYPED, Stripes

COLUMNS = ("quantity", "paper", "this run", "what differs")
MIDDLE = range(paper.SURFACE["sep_middle_layers"][0], paper.SURFACE["sep_middle_layers"][1] + 1)
TABLE1_RELATIONS = ["all"] + [paper.SD_TO_SPACY.get(r, r) for r in paper.TABLE1["relation"] if r != "all"]
SINK_NAMES = {"cls": "[CLS]", "sep": "[SEP]", "punct": '". ,"'}


def table(rows: Iterable[Sequence[str]]) -> pd.DataFrame:
    """The one layout of every "paper vs this run" table: one row per quantity, with what the paper reports,
    what this run measured and what differs between the two (model, data, definition), as text."""
    rows = [tuple(row) for row in rows]
    bad = [row for row in rows if len(row) != len(COLUMNS)]
    if bad:
        raise ValueError(f"every row needs {len(COLUMNS)} entries ({', '.join(COLUMNS)}); got {bad[0]}")
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _heads(stats: pd.DataFrame, mask: pd.Series, limit: int = 12) -> str:
    """Labels of the chosen heads, the first `limit` of them and how many more."""
    chosen = stats[mask]
    labels = [head_label(layer, h) for layer, h in zip(chosen["layer"], chosen["head"])]
    more = f", … ({len(labels) - limit} more)" if len(labels) > limit else ""
    return ", ".join(labels[:limit]) + more or "none"


def _pct(value: float) -> str:
    return f"{100 * value:.1f} %"


def _paper_heads(count_key: str, layers_key: str) -> str:
    return f"{paper.SURFACE[count_key]} (layers {', '.join(map(str, paper.SURFACE[layers_key]))})"


def _middle(n_layers: int) -> tuple[list[int], str, str]:
    """This model's layers at the depth of BERT-base's layers 6-10, the paper's wording and what differs."""
    middle = by_depth(MIDDLE, n_layers)
    return (middle, f"{paper.SURFACE['sep_middle_share']} (layers {MIDDLE[0]}-{MIDDLE[-1]})",
            f"layers {middle[0]}-{middle[-1]} here, by relative depth")


# -- Clark et al. §3 --------------------------------------------------------------------------------
def surface(result: SurfaceResult) -> pd.DataFrame:
    """Clark et al. §3 headline numbers (positions, [CLS] / [SEP] / punctuation) beside this run's."""
    tokens = result.tokens
    n_layers = int(tokens["layer"].max())
    middle, sep_paper, depth_note = _middle(n_layers)
    in_middle = tokens["layer"].isin(middle)
    prev, nxt = tokens["prev"] > 0.5, tokens["next"] > 0.5
    thirds = [part for part in np.array_split(np.arange(1, n_layers + 1), 3) if len(part)]  # fewer for 1-2 layers
    sinks = []
    for part in thirds:
        means = tokens[tokens["layer"].isin(part)][["cls", "sep", "punct"]].mean()
        sinks.append(f"{part[0]}-{part[-1]}: {SINK_NAMES[means.idxmax()]} {_pct(means.max())}")
    cls_middle, sep_middle = tokens[in_middle]["cls"].mean(), tokens[in_middle]["sep"].mean()

    def other_definition(direction: str) -> str:
        """What the n-1 definition gives, where the result holds both (`SurfaceResult.neighbours`)."""
        if result.neighbours is None:
            return ""
        other = "pairs" if result.definition == "tokens" else "tokens"
        over = result.neighbours[f"{direction}_{other}"] > 0.5
        shown = {"tokens": "÷ n as Clark's code", "pairs": "÷ n-1 (Clark's code: ÷ n)"}
        return (f"{shown[result.definition]}; {'÷ n-1' if other == 'pairs' else '÷ n'}: "
                f"{int(over.sum())} ({_heads(result.neighbours, over)})")

    return table([
        ("heads with > 50 % on the previous token", _paper_heads("heads_prev_over_half", "heads_prev_layers"),
         f"{int(prev.sum())} ({_heads(tokens, prev)})", other_definition("prev")),
        ("heads with > 50 % on the next token", _paper_heads("heads_next_over_half", "heads_next_layers"),
         f"{int(nxt.sum())} ({_heads(tokens, nxt)})", other_definition("next")),
        ("attention to [SEP] in the middle layers", sep_paper, _pct(sep_middle), depth_note),
        ("attention to [CLS] in the middle layers", paper.SURFACE["cls_middle_share"], _pct(cls_middle),
         "this model's sink is [CLS]" if cls_middle > sep_middle else ""),
        ("[SEP] → [SEP] attention in the middle layers", paper.SURFACE["sep_sep"],
         _pct(tokens[in_middle]["sep_sep"].mean()), ""),
        ("early / middle / deep layers attend most to", " / ".join(paper.SURFACE["sink_by_depth"]), "; ".join(sinks),
         "the largest of [CLS], [SEP], punctuation per third of the layers"),
    ])


def entropy(result: SurfaceResult, entropy_above: float | None = None) -> pd.DataFrame:
    """Clark et al. §3.3 (Fig 4) headline numbers beside this run's. Broad heads by both definitions
    (`surface.broad_heads`: mean largest weight <= 0.10, and entropy > `entropy_above`, default 3.8 nats)."""
    stats = result.entropy
    n_layers = int(stats["layer"].max())
    last = stats[stats["layer"] == n_layers]
    broad = broad_heads(stats, **({} if entropy_above is None else {"entropy_above": entropy_above}))
    by_weight, by_entropy = broad["by_max_weight"], broad["by_entropy"]
    threshold = BROAD_ENTROPY if entropy_above is None else entropy_above
    highest = stats["entropy"] == stats["entropy"].max()
    layer_means = stats.groupby("layer")[["entropy", "cls_entropy"]].mean()
    means = layer_means["entropy"].to_numpy()
    shape = ("U-shaped: the first and last layers above every layer between"
             if n_layers > 2 and min(means[0], means[-1]) > means[1:-1].max() else "")
    return table([
        ("[CLS] entropy in the last layer (nats)", f"{paper.ENTROPY['cls_entropy_last_layer']:.2f}",
         f"{last['cls_entropy'].mean():.2f}", f"mean over the {len(last)} heads of layer {n_layers}; that layer's "
                                              f"mean over all rows: {last['entropy'].mean():.2f}"),
        ("[CLS] entropy minus the layer's mean entropy (nats)", paper.ENTROPY["cls_entropy_by_layer"],
         " / ".join(f"{v:+.2f}" for v in layer_means["cls_entropy"] - layer_means["entropy"]), "layer 1 first"),
        ("broad heads (≤ 10 % on any one token)", paper.ENTROPY["broad_heads"],
         f"{int(by_weight.sum())} ({_heads(stats, by_weight)})", "mean largest weight per row ≤ 0.10"),
        (f"broad heads by entropy > {threshold:g} nats (notebook 07's label)", "–",
         f"{int(by_entropy.sum())}, {int((by_weight & by_entropy).sum())} of them also ≤ 10 %",
         f"entropy only: {_heads(stats, by_entropy & ~by_weight)}"),
        ("highest head entropy (nats)", paper.ENTROPY["highest_entropy"],
         f"{stats['entropy'].max():.2f} (head {_heads(stats, highest)})",
         f"uniform attention: {float(stats['uniform'].mean()):.2f}"),
        ("mean head entropy by layer (nats)", paper.ENTROPY["entropy_by_layer"],
         " / ".join(f"{v:.2f}" for v in means), "; ".join(p for p in ("layer 1 first", shape) if p)),
    ])


def _signs(contrast: pd.DataFrame) -> str:
    """Which layers' paired 95 % intervals of sink - random lie above 0, include 0, lie below 0 (the ratio
    sink ÷ random significantly above 1, not significantly different, significantly below)."""
    groups = {"above 1": contrast["low"] > 0, "includes 1": (contrast["low"] <= 0) & (contrast["high"] >= 0),
              "below 1": contrast["high"] < 0}
    parts = []
    for name, mask in groups.items():
        if mask.any():
            where = ", ".join(str(int(layer)) for layer in contrast[mask]["layer"])
            parts.append(f"{name} in layer{'s' if mask.sum() > 1 else ''} {where}")
    return "; ".join(parts)


def sep_noop(result: GradientResult, ablation: AblationResult,
             modes: Sequence[str] = ("renormalise", "uniform")) -> pd.DataFrame:
    """Clark et al. §3.2 (Fig 3) beside this run: gradient importance and the causal test, the latter in every
    redistribution mode of `modes`: per layer the range of sink / random ratios and where the paired 95 %
    interval of the difference puts the ratio (above, around or below 1); per single head its ratio and interval."""
    relative, by_layer = result.relative(), result.by_layer()
    middle, sep_paper, depth_note = _middle(result.gradient.shape[1])

    def ratios(category):
        return " / ".join(f"{v:.2f}" for v in relative[relative["category"] == category]["ratio"])

    def middle_share(category):
        chosen = by_layer[(by_layer["category"] == category) & by_layer["layer"].isin(middle)]
        return _pct(chosen["attention"].mean())

    rows = [
        ("gradient on attention to [SEP] ÷ gradient on other tokens", paper.SURFACE["sep_gradient"],
         ratios("sep"), f"per layer, layer 1 first; objective: {result.objective}"),
        ("gradient on attention to [CLS] ÷ gradient on other tokens", paper.SURFACE["cls_gradient"],
         ratios("cls"), "per layer, layer 1 first"),
        ("attention to [SEP] in the middle layers", sep_paper, middle_share("sep"), depth_note),
        ("attention to [CLS] in the middle layers", paper.SURFACE["cls_middle_share"], middle_share("cls"), ""),
    ]
    for mode in [m for m in modes if (ablation.frame["mode"] == m).any()]:
        contrast = ablation.contrast(mode=mode)
        measured = contrast[(contrast["scope"] == "layer") & contrast["ratio"].notna()]
        quantity = f"moving the sink mass ÷ moving the same mass between ordinary tokens ({mode})"
        if len(measured):
            strongest = measured.loc[measured["ratio"].idxmax()]
            rows.append((f"{quantity}, per layer", "not tested",
                         f"{measured['ratio'].min():.1f}x to {measured['ratio'].max():.1f}x; {_signs(measured)}",
                         f"pooled embedding, one layer at a time; largest in layer {int(strongest['layer'])}; "
                         "paired 95 % interval over inputs"))
        else:
            rows.append((f"{quantity}, per layer", "not tested", "no measurable change",
                         f"moving mass between ordinary tokens moved the pooled embedding by less than "
                         f"{MIN_DISTANCE:g} in every layer"))
        for one in contrast[contrast["scope"] == "head"].itertuples():
            ratio = "not measurable" if pd.isna(one.ratio) else f"{one.ratio:.1f}x"
            rows.append((f"{quantity}, head {head_label(one.layer, one.head)} alone", "not tested",
                         f"{ratio}; difference {1000 * one.difference:+.2f} [{1000 * one.low:+.2f}, "
                         f"{1000 * one.high:+.2f}] x 1e-3", "pooled distance, paired 95 % interval over inputs"))
    return table(rows)


# -- Clark et al. §4-6 ------------------------------------------------------------------------------
def _direction(direction: str) -> str:
    return " (head→dep)" if direction == "head->dep" else ""


TABLE1_DIFFERS = {  # this run is scored as Clark's released code (syntax.SCORINGS); what still differs
    "all": "silver spaCy trees of Wikipedia, not PTB; counts the root (never right) and punctuation, as Clark's code",
    "poss": "the 's row stands for the possessor, as Clark's code",
}


TABLE1_COLUMNS = ("quantity", "paper", "released notebook", "this run", "what differs")  # table1's layout


def table1(heads: pd.DataFrame, baseline: pd.DataFrame) -> pd.DataFrame:
    """Clark et al.'s Table 1, the rows its released notebook prints (`paper.TABLE1`'s released columns: same heads
    and offsets) and this run's `syntax.head_accuracy` and `syntax.offset_baseline` (scored as Clark's released
    code: `syntax.SCORINGS["clark"]`, offsets -3 ... +2), relation by relation (SD names mapped to spaCy's, e.g.
    nn -> compound): the best head, its accuracy (%) and 95 % interval, the best offset's accuracy, and the number
    of dependents. Columns: TABLE1_COLUMNS; where the paper and its released notebook disagree, both gains."""
    heads, baseline = heads.set_index("relation"), baseline.set_index("relation")
    gains = paper.table1_gains().set_index("relation")
    rows = []
    for p in paper.TABLE1.itertuples():
        ours = paper.SD_TO_SPACY.get(p.relation, p.relation)
        theirs = f"{p.head}{_direction(p.direction)}: {p.accuracy:.1f} | offset {p.offset:+d}: {p.baseline:.1f}"
        released = f"{p.released_accuracy:.1f} | {p.released_baseline:.1f}"
        mine = "–"
        if ours in heads.index:
            h, b = heads.loc[ours], baseline.loc[ours]
            mine = (f"{head_label(h['layer'], h['head'])}{_direction(h['direction'])}: {100 * h['accuracy']:.1f} "
                    f"[{100 * h['low']:.1f}–{100 * h['high']:.1f}] | offset {int(b['offset']):+d}: "
                    f"{100 * b['accuracy']:.1f} | n = {int(h['n'])}")
        gain = gains.loc[p.relation]
        disagree = (f"the paper's gain {gain['paper']:+.1f}, its released notebook's {gain['released']:+.1f}"
                    if gain["differs"] else "")
        differs = "; ".join(d for d in (disagree, f"{p.relation} is spaCy's {ours}" if ours != p.relation else "",
                                        TABLE1_DIFFERS.get(ours, "")) if d)
        rows.append((p.relation, theirs, released, mine, differs))
    return pd.DataFrame(rows, columns=list(TABLE1_COLUMNS))


TABLE2_READINGS = (Reading.MENTION_HEADS, Reading.EARLIER_WORDS)  # the head rows of Table 2; all in coref_readings


def _coref_heads(result: CorefResult) -> dict[str, tuple[str, str]]:
    """The paper's head row -> this run's best head under each reading of TABLE2_READINGS (system, note)."""
    best = result.readings.set_index("reading")
    rows = {}
    for reading in TABLE2_READINGS:
        layer, head = (int(best.loc[reading, c]) for c in ("layer", "head"))
        name = paper.TABLE2_HEAD + ("" if reading == Reading.MENTION_HEADS else f", argmax over {reading}")
        rows[name] = (best_head_label((layer, head), reading), f"this run: {head_label(layer, head)}, chosen on the "
                      f"selection half; argmax over {COREF_READINGS[reading]}")
    return rows


def table2(result: CorefResult) -> pd.DataFrame:
    """Clark et al.'s Table 2 beside this run: accuracy (%) per mention type of every system of the paper and
    its counterpart here (the held-out half, with 95 % bootstrap intervals). The paper's head row appears once
    per reading of its argmax in TABLE2_READINGS (the paper does not say which it used), each beside the best
    head under that reading. The neural system (Wiseman et al. 2015) has no counterpart here: the learned
    combination of heads is not one (see `coref_learned`)."""
    ours = {(r.system, r.type): r for r in result.table.itertuples(index=False)}
    heads = _coref_heads(result)
    rows = []
    for record in paper.TABLE2.itertuples(index=False):
        theirs = " · ".join(f"{t} {'–' if pd.isna(getattr(record, t)) else f'{getattr(record, t):.0f}'}"
                            for t in MENTION_TYPES)
        if record.system == paper.TABLE2_NEURAL:
            rows.append((record.system, theirs, "not run (no neural coreference system here)",
                         "a trained coreference model on CoNLL-2012"))
            continue
        pairs = ([(name, *heads[name]) for name in heads] if record.system == paper.TABLE2_HEAD
                 else [(record.system, record.system, "")])
        for quantity, mine, differs in pairs:
            measured = " · ".join(f"{t} {100 * ours[(mine, t)].accuracy:.1f} [{100 * ours[(mine, t)].low:.0f}–"
                                  f"{100 * ours[(mine, t)].high:.0f}]" for t in MENTION_TYPES)
            rows.append((quantity, theirs, measured, differs))
    return table(rows)


def coref_readings(result: CorefResult) -> pd.DataFrame:
    """The best head under each reading of "most attends to the head of an antecedent" (`coref.READINGS`):
    where the argmax is taken, the head chosen on the selection half, its accuracy (%) there and on the
    held-out half (95 % bootstrap interval)."""
    return pd.DataFrame([{"argmax over": COREF_READINGS[r.reading], "best head": r.label,
                          "selection %": round(100 * r.selection, 1),
                          "held-out %": f"{100 * r.held_out:.1f} [{100 * r.low:.1f}–{100 * r.high:.1f}]",
                          "n": int(r.n)} for r in result.readings.itertuples(index=False)])


def coref_learned(result: CorefResult) -> pd.DataFrame:
    """The learned combination of all heads beside the best single head and the sieve (%, held-out half, 95 %
    intervals): how much a linear read-out of the attention finds, a lower bound on what the heads hold. Whole
    percents: the trained read-out's first decimal depends on the CPU's floating point (87.4 on one machine,
    87.5 on another)."""
    ours = {(r.system, r.type): r for r in result.table.itertuples(index=False)}
    systems = {System.COMBINED: "logistic regression on every head's log attention (trained on the selection half)",
               best_head_label(result.best): "one head, no training",
               System.SIEVE: "rules with a gender / number / animacy lexicon"}
    return pd.DataFrame([{"system": name,
                          **{t: f"{100 * ours[(name, t)].accuracy:.0f} [{100 * ours[(name, t)].low:.0f}–"
                                f"{100 * ours[(name, t)].high:.0f}]" for t in MENTION_TYPES},
                          "what it is": note} for name, note in systems.items()])


VECTORS_FOR_GLOVE = "spaCy md's 300-d vectors for GloVe"
TABLE3_DIFFERS = {  # the row of this run that stands for a paper's row (`paper.TABLE3.ours`) -> what differs
    None: "not trained here", Model.DISTANCES: f"{VECTORS_FOR_GLOVE}; the kit's own network",
    Model.RANDOM_ATTENTION_VECTORS: VECTORS_FOR_GLOVE, Model.ATTENTION_VECTORS: VECTORS_FOR_GLOVE}


def _uas(results: ProbeResults, model: str) -> str:
    row = results.table.set_index("model").loc[model]
    return f"{row['uas_argmax']:.1f} (MST {row['uas_mst']:.1f})"


def table3(results: ProbeResults) -> pd.DataFrame:
    """Clark et al.'s Table 3 beside this run's held-out UAS (%, punctuation excluded; argmax, and from the
    maximum spanning tree), the paper's rows first (each beside its `ours`), then the rows only this run has."""
    rows = []
    for row in paper.TABLE3.itertuples():
        mine = None if pd.isna(row.ours) else row.ours
        rows.append((row.model, f"{row.uas:.0f}", "–" if mine is None else _uas(results, mine),
                     "; ".join(d for d in (f"this run: {mine}" if mine not in (None, row.model) else "",
                                           TABLE3_DIFFERS.get(mine, "")) if d)))
    rows += [(model, "–", _uas(results, model), "not in the paper")
             for model in results.table["model"] if model not in set(paper.TABLE3["ours"])]
    return table(rows)


TABLE3_GAPS = ((Model.ATTENTION, Model.RIGHT_BRANCHING), (Model.ATTENTION, Model.DISTANCES),
               (Model.ATTENTION_VECTORS, Model.ATTENTION), (Model.ATTENTION_VECTORS, Model.DISTANCES),
               (Model.ATTENTION_VECTORS, Model.RANDOM_ATTENTION_VECTORS))


def table3_gaps(results: ProbeResults) -> pd.DataFrame:
    """The paper's claims as differences of UAS points (argmax): what attention adds over the baselines, and
    what pre-training adds over random weights."""
    reported = dict(zip(paper.TABLE3["ours"], paper.TABLE3["uas"]))
    uas = dict(zip(results.table["model"], results.table["uas_argmax"]))
    return table((f"{a} - {b} (UAS points)", f"{reported[a] - reported[b]:+.1f}", f"{uas[a] - uas[b]:+.1f}", "")
                 for a, b in TABLE3_GAPS)


def _p(value: float, n_permutations: int) -> str:
    return f"p = {value:.4f} (the smallest possible)" if value <= 1 / (1 + n_permutations) else f"p = {value:.4f}"


def clustering(result: ClusterResult, second: ClusterResult | None = None, second_name: str = "single texts",
               n_permutations: int = 10000, seed: int = 0) -> pd.DataFrame:
    """Clark et al. Fig 6's claims beside this run's measurements (permutation tests on the distances)."""
    claims = paper.CLUSTERING
    tests = result.robustness_tests(n_permutations, seed)
    layers = tests["layers"]
    counts = result.heads["behaviour"].value_counts()
    found = ", ".join(f"{BEHAVIOUR_NAMES[b]} {counts[b]}" for b in BEHAVIOURS if b in counts)
    behaviours = tests["behaviours"]

    def measured(test, why: str = "it needs two behaviours besides 'other', one with two heads") -> str:
        return (f"no test: {why}" if test is None else
                f"between/within distance {test.ratio:.2f}, {_p(test.p_value, n_permutations)}")

    without = tests["behaviours without broad heads"]
    rows = [
        ("heads of the same layer are close", claims["same_layer"], measured(layers),
         f"permutation test, {n_permutations} relabellings"),
        ("… without the broad heads", claims["same_layer"],
         measured(tests["layers without broad heads"], "too few heads left in one layer"),
         f"{int(counts.get('broad', 0))} broad heads (entropy > 3.8 nats) left out"),
        ("… within behaviours", claims["same_layer"],
         measured(tests["layers within behaviours"], "too few heads left in one layer"),
         "layers shuffled within each behaviour; pairs of one behaviour only"),
        ("heads by behaviour", ", ".join(claims["behaviour_clusters"]), found, claims["thresholds"]),
        ("heads of the same behaviour are close", claims["behaviour_close"], measured(behaviours),
         "a sanity check, among the labelled heads (not 'other'): broad heads are close by construction"
         + ("" if behaviours is None else "; without them: " + ("no behaviour has two heads" if without is None
                                                                 else measured(without)))),
    ]
    if second is not None:
        same = compare_maps(result.distances, second.distances, result.coords, second.coords)
        rows.append((f"the map for {second_name}", "not studied",
                     f"Spearman {same['spearman']:.2f}, Procrustes disparity {same['procrustes']:.2f}",
                     f"{100 * same['neighbours']:.0f} % of each head's 5 nearest heads are the same"))
    return table(rows)


# -- Kovaleva et al. --------------------------------------------------------------------------------
def _per_task(values: Mapping[str, str]) -> str:
    return "; ".join(f"{v} ({task})" for task, v in values.items())


@dataclass(frozen=True)
class HandLabels:
    """What the hand labels of the default model's maps measure (notebook 08). macro_f1: per classifier (its name
    as the table shows it), the cross-validated macro-F1 over the paper's five kinds; self_agreement: the share of
    maps the labeller gave the same label on a second look; n_maps: the labelled maps; shares: the long frame (task,
    model, kind, n, share, low, high) of the labels' own shares (`patterns.label_shares`: n random maps per group,
    Wilson 95 % intervals)."""

    macro_f1: pd.Series
    self_agreement: float
    n_maps: int
    shares: pd.DataFrame


def dark_secrets_patterns(shares: Mapping[str, pd.DataFrame], similarity: Mapping[str, np.ndarray],
                          scores: pd.DataFrame, labels: HandLabels | None = None) -> pd.DataFrame:
    """Kovaleva et al. §4.1 and §4.3 beside this run (notebook 08).

    shares: classifier (its name as the table shows it) -> long frame (task, model: a `finetune.Stage`,
    kind, share, low, high) of its shares over all maps; similarity: task -> cosine [L, H] of the maps before and
    after fine-tuning; scores: `finetune.task_scores`; labels: what the hand labels measure, None when they cannot
    be scored (another model than the one they describe)."""
    ds = paper.DARK_SECRETS
    tasks = "the kit's tasks, not GLUE"
    if labels is None:
        agreement = "not measured (the hand labels describe the default model's maps)"
    else:
        best = labels.macro_f1.idxmax()
        agreement = (f"macro-F1 {labels.macro_f1[best]:.2f} ({best}; "
                     + ", ".join(f"{name} {f1:.2f}" for name, f1 in labels.macro_f1.drop(best).items())
                     + f"), {labels.n_maps} maps, cross-validated; the labeller agrees with himself on "
                       f"{labels.self_agreement:.0%}")

    order = list(dict.fromkeys(next(iter(shares.values()))["task"]))

    def heterogeneous(frame: pd.DataFrame) -> dict[str, str]:
        """Fine-tuned models' heterogeneous share, broad maps included (the paper's count)."""
        fine = frame[(frame["model"] == Stage.FINE_TUNED) & frame["kind"].isin(["heterogeneous", "broad"])]
        summed = fine.groupby("task")["share"].sum()
        return {task: f"{summed[task]:.0%}" for task in order if task in summed}

    low, high = ds["heterogeneous_share"]
    changed = {task: "layers " + ", ".join(str(int(i) + 1) for i in sorted(np.argsort(sim.mean(1))[:2]))
               for task, sim in similarity.items()}
    gain = 100 * (scores[Score.FINE_TUNED] - scores[Score.UNTRAINED])
    over_frozen = {task: f"{100 * (row[Score.FINE_TUNED] - row[Score.FROZEN_MEAN]):+.1f} points"
                   for task, row in scores.iterrows()}
    rows = [
        ("classifier vs hand labels", f"F1 {ds['classifier_f1']:.2f} (CNN, ~{ds['labelled_maps']} maps)", agreement,
         "three classifiers (transparent rules, boosted trees, a CNN, whose weights depend on the CPU: its "
         "scores per seed are in a table of their own); the kit's own labels, one labeller"),
        ("heterogeneous share (fine-tuned)", f"{low:.0%} ({ds['heterogeneous_tasks'][0]}) to {high:.0%} "
         f"({ds['heterogeneous_tasks'][1]})", "; ".join(f"{name}: {_per_task(heterogeneous(frame))}"
                                                     for name, frame in shares.items()),
         f"{tasks}; broad maps counted as heterogeneous, as in the paper"),
    ]
    if labels is not None:
        fine = labels.shares[labels.shares["model"] == Stage.FINE_TUNED].groupby("task")["n"].first()
        maps = _per_task({task: f"{int(fine[task])}" for task in order if task in fine})
        rows.append(("heterogeneous share (fine-tuned), from the labels", "not reported",
                     _per_task(heterogeneous(labels.shares)), f"random maps per task: {maps}"))
    rows += [
        ("fine-tuned vs pre-trained (no task training)", f"{ds['finetuned_vs_pretrained_gain']:+.1f} points (average)",
         f"{gain.mean():+.1f} points (average); " + _per_task({t: f"{g:+.1f}" for t, g in gain.items()}),
         f"{tasks}; pre-trained = the encoder with an untrained linear head"),
        ("fine-tuned vs a frozen encoder (mean-pooled)", "not studied", _per_task(over_frozen),
         "a linear head trained on the frozen model, read the way it was trained"),
        ("layers changed most by fine-tuning", ds["most_changed_layers"], _per_task(changed), tasks),
    ]
    return table(rows)


def dark_secrets_heads(relation_scores: Mapping[str, RelationScores], special: Mapping[str, pd.DataFrame],
                       cls_rows: Mapping[str, pd.DataFrame], stripes: pd.DataFrame, held: Mapping[str, HeldOut],
                       seeds: Mapping[int, HeldOut]) -> pd.DataFrame:
    """Kovaleva et al. §4.2 and §4.4-4.6 beside this run (notebook 09).

    relation_scores: null -> `relations.RelationScores` of the silver proxy's frames; special: task ->
    `tokentypes.special_change`; cls_rows: task -> `tokentypes.exclusive_cls_change` (the last layer, each token
    in one category); stripes: one row per
    task, model and threshold (`tokentypes.stripe_summary`); held: task ->
    `disabling.HeldOut` (seed 0); seeds: seed -> `HeldOut` of one task."""
    ds = paper.DARK_SECRETS
    tasks = "the kit's tasks, not GLUE"

    tables = {null: result.table().set_index("label", drop=False) for null, result in relation_scores.items()}
    ranked = next(iter(tables.values()))
    top = ranked[ranked["top_p99"]]

    def effect(null: str, label: str) -> str:
        row = tables[null].loc[label]
        return f"{null} {row['effect']:+.2f} [{row['effect_low']:+.2f}, {row['effect_high']:+.2f}]"

    sink = {task: f"[CLS] {frame['cls_change'].min():+.2f} in layer {int(frame['cls_change'].idxmin())}, [SEP] at most "
                  f"{frame['sep_change'].abs().max():.3f}" for task, frame in special.items()}
    reads = {}
    for task, frame in cls_rows.items():
        rows = frame.set_index("category")
        typed = rows.drop(UNTYPED)
        largest = typed["after"].idxmax()
        reads[task] = (f"{largest} {typed.loc[largest, 'before']:.2f} -> {typed.loc[largest, 'after']:.2f}, [SEP] "
                       f"{typed.loc['[SEP]', 'after']:.2f}, {UNTYPED} {rows.loc[UNTYPED, 'after']:.2f}")
    main = stripes[stripes["threshold"] == 0.2]
    picks = {task: f"{r.picks.loc['best head', 'label']} {100 * r.picks.loc['best head', 'selection']:+.1f} -> "
                   f"{100 * r.picks.loc['best head', 'evaluation']:+.1f} "
                   f"[{100 * r.picks.loc['best head', 'low']:+.1f}, {100 * r.picks.loc['best head', 'high']:+.1f}]"
             for task, r in held.items()}
    layers = {task: f"{r.picks.loc['best layer', 'label']} {100 * r.picks.loc['best layer', 'evaluation']:+.1f} "
                    f"[{100 * r.picks.loc['best layer', 'low']:+.1f}, {100 * r.picks.loc['best layer', 'high']:+.1f}]"
              for task, r in held.items()}
    over_seeds = [100 * r.picks.loc["best head", "evaluation"] for r in seeds.values()]
    task = next(iter(seeds.values())).task
    halves = sorted({r.n_evaluation for r in held.values()})
    per_half = f"{halves[0]}" if len(halves) == 1 else f"{halves[0]}-{halves[-1]}"
    chosen = {r.picks.loc["best head", "label"] for r in seeds.values()}
    seed_heads = "the chosen head differs between seeds" if len(chosen) > 1 else "every seed chooses the same head"
    g_low, g_high = ds["head_disabling_gain"]
    return table([
        ("relation-specific heads (§4.2)", f"{ds['framenet_heads_above']} of 144 heads above the 99th percentile "
         f"of all heads' scores (scores {ds['framenet_scores'][0]}, {ds['framenet_scores'][1]}; "
         f"{ds['framenet_sentences']} FrameNet sentences)",
         f"{len(top)} of {len(ranked)} heads above it: " + "; ".join(
             f"{label} ({row['score']:.2f}), effect over the null [95 %]: "
             + ", ".join(effect(null, label) for null in tables) for label, row in top.iterrows()),
         "a silver predicate-argument proxy from spaCy's parses, not FrameNet; the nulls and effects are the "
         "kit's own"),
        ("[CLS] and [SEP] after fine-tuning (§4.5)", ds["special_after_finetuning"], _per_task(sink),
         f"{tasks}; this model's sink is [CLS]"),
        ("what [CLS] attends to in the last layer (§4.5)", ds["cls_last_layer"], _per_task(reads),
         f"{tasks}; token types from silver parses, one per token (before -> after fine-tuning)"),
        ("where vertical stripes fall (§4.4)", ds["stripes_from"],
         f"special tokens or punctuation {100 * main[Stripes.SPECIAL].min():.0f}-"
         f"{100 * main[Stripes.SPECIAL].max():.0f} % of stripes, linguistic types "
         f"{100 * main[Stripes.LINGUISTIC].min():.0f}-{100 * main[Stripes.LINGUISTIC].max():.0f} %",
         "a stripe: a column with at least 0.2 of every row's attention on average (not the paper's classifier)"),
        ("best single-head disabling (§4.6)", f"{g_low:+.1f} ({ds['head_disabling_tasks'][0]}) to {g_high:+.1f} "
         f"({ds['head_disabling_tasks'][1]}) points, every task",
         "chosen on one half -> scored on the other [95 %]: " + _per_task(picks),
         f"the paper chose and scored on the same inputs; {per_half} inputs per half"),
        ("best layer disabling (§4.6)",
         f"layer 1 on {ds['layer_disabling_task']}: {ds['layer_disabling_gain']:+.1f} points",
         "held out: " + _per_task(layers), "the paper chose and scored on the same inputs"),
        ("best head over fine-tuning seeds", "one seed", f"{task}, {len(seeds)} seeds: held-out change "
         + ", ".join(f"{v:+.1f}" for v in over_seeds) + " points", seed_heads),
    ])


def beyond_attention(norm_result: NormResult, sinks: pd.DataFrame, syntax_heads: pd.DataFrame,
                     long_change: pd.DataFrame, correlations: pd.DataFrame, released: pd.DataFrame,
                     curves: Mapping[str, pd.DataFrame], removal: Mapping[str, pd.DataFrame],
                     head_size: int) -> pd.DataFrame:
    """The later work's findings (in words: `paper.LATER_WORK`) beside this run (notebook 10).

    norm_result: `norms.norm_shares`; sinks: per layer, ("raw" | "effective", "cls" | "sep" | "punct") mean
    attention; syntax_heads: per relation, ("raw" | "effective", "head" | "accuracy"); long_change:
    `identifiability.syntax_change` on the long sentences only; correlations: `attribution.correlations` (the kit's
    [CLS]-row test); released: `attribution.released_correlations` (Abnar & Zuidema's reading); curves: task ->
    `importance.pruning_curves(...).frame`; removal: task -> `importance.pattern_removal` (the vertical heads'
    [CLS] column drained); head_size: the model's dimensions per head."""
    later = paper.LATER_WORK
    table_ = norm_result.by_layer().unstack("category")
    mixing = norm_result.mixing()
    full = mixing[Mixing.LAYERNORM]
    same = int((syntax_heads[("raw", "head")] == syntax_heads[("effective", "head")]).sum())
    last = correlations[correlations["layer"] == correlations["layer"].max()].set_index("method")["spearman"]
    best_raw = correlations[correlations["method"] == "attention"].set_index("layer")["spearman"]
    theirs = released[released["layer"] == released["layer"].max()].set_index("method")["spearman"]

    def at_half(frame: pd.DataFrame) -> str:
        half = frame[np.isclose(frame["share"], 0.5)].set_index("order")["accuracy"]
        random = half[half.index.str.startswith("random")].mean()
        start = frame[frame["heads"] == 0]["accuracy"].iloc[0]
        return f"{start:.2f} -> {half['importance']:.2f} (raw {half['raw importance']:.2f}, random {random:.2f})"

    vertical = {task: frame.set_index("kind").loc["vertical"] for task, frame in removal.items()
                if "vertical" in set(frame["kind"])}
    return table([
        (f"weight vs norm ({paper.KOBAYASHI})", later["norms"],
         f"[CLS] by weight {table_[('by weight', 'cls')].min():.2f}-{table_[('by weight', 'cls')].max():.2f} "
         f"per layer, by norm {table_[('by norm', 'cls')].min():.3f}-{table_[('by norm', 'cls')].max():.3f}",
         "this model's sink is [CLS]; Wikipedia segments as Clark et al.'s"),
        (f"context mixing ({paper.KOBAYASHI_2021})", later["mixing"],
         f"share from other tokens: by weight {mixing[Mixing.WEIGHT].min():.2f}-{mixing[Mixing.WEIGHT].max():.2f}, "
         f"with residual "
         f"and LayerNorm {full.min():.2f}-{full.max():.2f}", "their ratio of vector norms, per layer"),
        (f"effective attention ({paper.BRUNNER})", later["identifiability"],
         f"[CLS] {sinks[('raw', 'cls')].max():.2f} -> {sinks[('effective', 'cls')].max():.3f} (largest layer mean); "
         f"{same} of {len(syntax_heads)} relations keep their best syntax head; on long sentences only "
         f"{int(long_change['kept'].sum())} of {len(long_change)}, accuracy changes "
         f"{100 * long_change['change'].min():+.1f} to {100 * long_change['change'].max():+.1f} points",
         f"{head_size} dimensions per head: inputs of at most {head_size} tokens have no null space (A P = A)"),
        (f"rollout and flow ({paper.ABNAR})", later["rollout_flow"],
         f"Spearman with leave-one-out, last layer: attention {last['attention']:.2f}, rollout {last['rollout']:.2f}, "
         f"flow {last['flow']:.2f}, gradient x input {last['grad_x_input']:.2f}; raw attention best in layer "
         f"{int(best_raw.idxmax())} ({best_raw.max():.2f}); their released reading (max over rows, against "
         f"|gradient|): attention {theirs['attention']:.2f}, rollout {theirs['rollout']:.2f}, "
         f"flow {theirs['flow']:.2f}",
         f"{int(correlations['layer'].max())} layers, fine-tuned for the kit's sentiment task; the [CLS]-row test "
         "against leave-one-out (a word removed) is the kit's own"),
        (f"pruning by importance ({paper.MICHEL}; {paper.BUDHRAJA})", f"{later['pruning']}; {later['random_pruning']}",
         "half the heads removed: " + _per_task({task: at_half(frame) for task, frame in curves.items()}),
         "importance normalised per layer (and raw) on one half of the test inputs, accuracy on the other"),
        ("removing one pattern's heads (Kovaleva patterns)", "not in the papers",
         "every vertical head: " + _per_task({task: f"{v['accuracy']:.2f} vs random {v['random low']:.2f}-"
                                                    f"{v['random high']:.2f} (p {v['p']:.2f}); only their [CLS] "
                                                    f"column: {v['cls drained']:.2f}"
                                              for task, v in vertical.items()}),
         "patterns by the kit's rules on the fine-tuned models; random sets matched by layer (5-95 %)"),
    ])
