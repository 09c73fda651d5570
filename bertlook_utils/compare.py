"""Paper vs this run: every comparison table of the kit, in one layout.

`table(rows)` is the one layout — quantity · paper · this run · what differs — and each function below feeds
it from an analysis result and the paper's numbers (`paper`, where each is typed once):

    surface(result)            Clark et al. §3, Fig 1-2 (notebook 01)      entropy(result)   §3.3, Fig 4 (03)
    sep_noop(grad, ablation)   §3.2, Fig 3 (02)                            table1(heads, baseline)   Table 1 (04)
    table2(result)             Table 2 (05)                                table3(results), table3_gaps(results)  (06)
    clustering(result, ...)    §6, Fig 6 (07)                              dark_secrets(...)  Kovaleva et al. (08)

Numbers are formatted here, rounded as the notebooks print them; the analyses return unrounded data.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from . import paper
from .clustering import BEHAVIOUR_NAMES, BEHAVIOURS, ClusterResult, compare as compare_maps
from .conventions import by_depth, head_label
from .coref import COLUMNS as MENTION_TYPES, COMBINED, CorefResult, best_head_label
from .finetune import SCORE_COLUMNS
from .gradients import MIN_DISTANCE, AblationResult, GradientResult
from .probes import ProbeResults
from .surface import SurfaceResult

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
    labels = [head_label(l, h) for l, h in zip(chosen["layer"], chosen["head"])]
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
    return table([
        ("heads with > 50 % on the previous token", _paper_heads("heads_prev_over_half", "heads_prev_layers"),
         f"{int(prev.sum())} ({_heads(tokens, prev)})", ""),
        ("heads with > 50 % on the next token", _paper_heads("heads_next_over_half", "heads_next_layers"),
         f"{int(nxt.sum())} ({_heads(tokens, nxt)})", ""),
        ("attention to [SEP] in the middle layers", sep_paper, _pct(sep_middle), depth_note),
        ("attention to [CLS] in the middle layers", paper.SURFACE["cls_middle_share"], _pct(cls_middle),
         "this model's sink is [CLS]" if cls_middle > sep_middle else ""),
        ("[SEP] → [SEP] attention in the middle layers", paper.SURFACE["sep_sep"],
         _pct(tokens[in_middle]["sep_sep"].mean()), ""),
        ("early / middle / deep layers attend most to", " / ".join(paper.SURFACE["sink_by_depth"]), "; ".join(sinks),
         "the largest of [CLS], [SEP], punctuation per third of the layers"),
    ])


def entropy(result: SurfaceResult) -> pd.DataFrame:
    """Clark et al. §3.3 (Fig 4) headline numbers beside this run's."""
    stats = result.entropy
    n_layers = int(stats["layer"].max())
    last = stats[stats["layer"] == n_layers]
    broad = stats["max_weight"] <= 0.10
    highest = stats["entropy"] == stats["entropy"].max()
    return table([
        ("[CLS] entropy in the last layer (nats)", f"{paper.ENTROPY['cls_entropy_last_layer']:.2f}",
         f"{last['cls_entropy'].mean():.2f}", f"mean over the {len(last)} heads of layer {n_layers}"),
        ("broad heads (≤ 10 % on any one token)", paper.ENTROPY["broad_heads"],
         f"{int(broad.sum())} ({_heads(stats, broad)})", "mean largest weight per row ≤ 0.10"),
        ("highest head entropy (nats)", paper.ENTROPY["highest_entropy"],
         f"{stats['entropy'].max():.2f} (head {_heads(stats, highest)})",
         f"uniform attention: {float(stats['uniform'].mean()):.2f}"),
        ("mean head entropy by layer (nats)", paper.ENTROPY["entropy_by_layer"],
         " / ".join(f"{v:.2f}" for v in stats.groupby("layer")["entropy"].mean()), "layer 1 first"),
    ])


def sep_noop(result: GradientResult, ablation: AblationResult, mode: str = "renormalise") -> pd.DataFrame:
    """Clark et al. §3.2 (Fig 3) beside this run: gradient importance and the causal test."""
    relative, by_layer = result.relative(), result.by_layer()
    middle, sep_paper, depth_note = _middle(result.gradient.shape[1])

    def ratios(category):
        return " / ".join(f"{v:.2f}" for v in relative[relative["category"] == category]["ratio"])

    def middle_share(category):
        chosen = by_layer[(by_layer["category"] == category) & by_layer["layer"].isin(middle)]
        return _pct(chosen["attention"].mean())

    contrast = ablation.contrast(mode=mode)
    measured = contrast[(contrast["scope"] == "layer") & contrast["ratio"].notna()]
    if len(measured):
        strongest = measured.loc[measured["ratio"].idxmax()]
        moving = (f"{measured['ratio'].min():.1f}x to {measured['ratio'].max():.1f}x the change",
                  f"pooled embedding, one layer at a time; largest in layer {int(strongest['layer'])}")
    else:
        moving = ("no measurable change", f"moving mass between ordinary tokens moved the pooled embedding by "
                                          f"less than {MIN_DISTANCE:g} in every layer")
    return table([
        ("gradient on attention to [SEP] ÷ gradient on other tokens", paper.SURFACE["sep_gradient"],
         ratios("sep"), f"per layer, layer 1 first; objective: {result.objective}"),
        ("gradient on attention to [CLS] ÷ gradient on other tokens", paper.SURFACE["cls_gradient"],
         ratios("cls"), "per layer, layer 1 first"),
        ("attention to [SEP] in the middle layers", sep_paper, middle_share("sep"), depth_note),
        ("attention to [CLS] in the middle layers", paper.SURFACE["cls_middle_share"], middle_share("cls"), ""),
        (f"moving the sink mass vs the same mass between ordinary tokens ({mode})", "not tested", *moving),
    ])


# -- Clark et al. §4-6 ------------------------------------------------------------------------------
def _direction(direction: str) -> str:
    return " (head→dep)" if direction == "head->dep" else ""


TABLE1_DIFFERS = {
    "all": "ROOT is left out of 'all' here (Clark's code counts it, always wrong)",
    "poss": "a hit through the possessor or its 's counts here (Clark's code scores the 's row)",
}


def table1(heads: pd.DataFrame, baseline: pd.DataFrame) -> pd.DataFrame:
    """Clark et al.'s Table 1 beside this run's `syntax.head_accuracy` and `syntax.offset_baseline`, relation
    by relation (SD names mapped to spaCy's, e.g. nn -> compound): the best head, its accuracy (%) and 95 %
    interval, the best offset's accuracy, and the number of dependents."""
    heads, baseline = heads.set_index("relation"), baseline.set_index("relation")
    rows = []
    for p in paper.TABLE1.itertuples():
        ours = paper.SD_TO_SPACY.get(p.relation, p.relation)
        theirs = f"{p.head}{_direction(p.direction)}: {p.accuracy:.1f} | offset {p.offset:+d}: {p.baseline:.1f}"
        mine = "–"
        if ours in heads.index:
            h, b = heads.loc[ours], baseline.loc[ours]
            mine = (f"{head_label(h['layer'], h['head'])}{_direction(h['direction'])}: {100 * h['accuracy']:.1f} "
                    f"[{100 * h['low']:.1f}–{100 * h['high']:.1f}] | offset {int(b['offset']):+d}: "
                    f"{100 * b['accuracy']:.1f} | n = {int(h['n'])}")
        differs = "; ".join(d for d in (f"{p.relation} is spaCy's {ours}" if ours != p.relation else "",
                                        TABLE1_DIFFERS.get(ours, "")) if d)
        rows.append((p.relation, theirs, mine, differs))
    return table(rows)


def table2(result: CorefResult) -> pd.DataFrame:
    """Clark et al.'s Table 2 beside this run: accuracy (%) per mention type of every system of the paper and
    its counterpart here (the held-out half, with 95 % bootstrap intervals)."""
    ours = {(r.system, r.type): r for r in result.table.itertuples(index=False)}
    label = best_head_label(result.best)
    counterpart = {"BERT head 5-4": (label, f"this run: {label}, chosen on the selection half"),
                   "neural coref (not comparable)": (COMBINED, f"this run: {COMBINED}, not a coreference system")}
    rows = []
    for record in paper.TABLE2.itertuples(index=False):
        mine, differs = counterpart.get(record.system, (record.system, ""))
        theirs = " · ".join(f"{t} {'–' if pd.isna(getattr(record, t)) else f'{getattr(record, t):.0f}'}"
                            for t in MENTION_TYPES)
        measured = " · ".join(f"{t} {100 * ours[(mine, t)].accuracy:.1f} [{100 * ours[(mine, t)].low:.0f}–"
                              f"{100 * ours[(mine, t)].high:.0f}]" for t in MENTION_TYPES)
        rows.append((record.system, theirs, measured, differs))
    return table(rows)


TABLE3_ROWS = {  # the paper's row -> (this run's model, what differs)
    "structural probe (UUAS, not comparable)": (None, "not trained here"),
    "right-branching": ("right-branching", ""),
    "distances + GloVe": ("distances + vectors", "spaCy md's 300-d vectors for GloVe; the kit's own network"),
    "random-init attention + GloVe": ("random-init attention + vectors", "spaCy md's 300-d vectors for GloVe"),
    "attention only": ("attention only", ""),
    "attention + GloVe": ("attention + vectors", "spaCy md's 300-d vectors for GloVe"),
}


def _uas(results: ProbeResults, model: str) -> str:
    row = results.table.set_index("model").loc[model]
    return f"{row['uas_argmax']:.1f} (MST {row['uas_mst']:.1f})"


def table3(results: ProbeResults) -> pd.DataFrame:
    """Clark et al.'s Table 3 beside this run's held-out UAS (%, punctuation excluded; argmax, and from the
    maximum spanning tree), the paper's rows first, then the rows only this run has."""
    rows = []
    for model, uas in zip(paper.TABLE3["model"], paper.TABLE3["uas"]):
        mine, differs = TABLE3_ROWS[model]
        rows.append((model, f"{uas:.0f}", "–" if mine is None else _uas(results, mine),
                     "; ".join(d for d in (f"this run: {mine}" if mine not in (None, model) else "", differs) if d)))
    shown = {mine for mine, _ in TABLE3_ROWS.values()}
    rows += [(model, "–", _uas(results, model), "not in the paper")
             for model in results.table["model"] if model not in shown]
    return table(rows)


TABLE3_GAPS = (("attention only", "right-branching"), ("attention only", "distances + vectors"),
               ("attention + vectors", "attention only"), ("attention + vectors", "distances + vectors"),
               ("attention + vectors", "random-init attention + vectors"))


def table3_gaps(results: ProbeResults) -> pd.DataFrame:
    """The paper's claims as differences of UAS points (argmax): what attention adds over the baselines, and
    what pre-training adds over random weights."""
    reported = dict(zip(paper.TABLE3["model"], paper.TABLE3["uas"]))
    paper_row = {mine: model for model, (mine, _) in TABLE3_ROWS.items()}
    uas = dict(zip(results.table["model"], results.table["uas_argmax"]))
    return table((f"{a} - {b} (UAS points)", f"{reported[paper_row[a]] - reported[paper_row[b]]:+.1f}",
                  f"{uas[a] - uas[b]:+.1f}", "") for a, b in TABLE3_GAPS)


def _p(value: float, n_permutations: int) -> str:
    return f"p = {value:.4f} (the smallest possible)" if value <= 1 / (1 + n_permutations) else f"p = {value:.4f}"


def clustering(result: ClusterResult, second: ClusterResult | None = None, second_name: str = "single texts",
               n_permutations: int = 10000, seed: int = 0) -> pd.DataFrame:
    """Clark et al. Fig 6's claims beside this run's measurements (permutation tests on the distances)."""
    claims = paper.CLUSTERING
    layers = result.layer_test(n_permutations, seed)
    counts = result.heads["behaviour"].value_counts()
    found = ", ".join(f"{BEHAVIOUR_NAMES[b]} {counts[b]}" for b in BEHAVIOURS if b in counts)
    behaviours = result.behaviour_test(n_permutations, seed)
    rows = [
        ("heads of the same layer are close", claims["same_layer"],
         f"between/within distance {layers.ratio:.2f}, {_p(layers.p_value, n_permutations)}",
         f"permutation test, {n_permutations} relabellings"),
        ("heads by behaviour", ", ".join(claims["behaviour_clusters"]), found, claims["thresholds"]),
        ("heads of the same behaviour are close", claims["behaviour_close"],
         "no test: it needs two behaviours besides 'other', one with two heads" if behaviours is None else
         f"between/within distance {behaviours.ratio:.2f}, {_p(behaviours.p_value, n_permutations)}",
         "among the labelled heads (not 'other')"),
    ]
    if second is not None:
        same = compare_maps(result.distances, second.distances, result.coords, second.coords)
        rows.append((f"the map for {second_name}", "not studied",
                     f"Spearman {same['spearman']:.2f}, Procrustes disparity {same['procrustes']:.2f}",
                     f"{100 * same['neighbours']:.0f} % of each head's 5 nearest heads are the same"))
    return table(rows)


# -- Kovaleva et al. --------------------------------------------------------------------------------
def dark_secrets(classifier_f1: float, n_labels: int, heterogeneous: Mapping[str, float],
                 similarity: Mapping[str, np.ndarray], summary: pd.DataFrame, scores: pd.DataFrame) -> pd.DataFrame:
    """Kovaleva et al.'s findings beside this run's, per task.

    classifier_f1: cross-validated macro-F1 of the pattern rules on `n_labels` hand-labelled maps (NaN when
    the labels could not be scored: another model than the one they describe); heterogeneous: task -> share
    of heterogeneous maps after fine-tuning; similarity: task -> cosine [L, H] of the maps before and after;
    summary: `finetune.scan_summary`; scores: `finetune.task_scores`."""
    ds = paper.DARK_SECRETS

    def per_task(values: Mapping[str, str]) -> str:
        return "; ".join(f"{v} ({task})" for task, v in values.items())

    changed = {task: "layers " + ", ".join(str(int(i) + 1) for i in sorted(np.argsort(sim.mean(1))[:2]))
               for task, sim in similarity.items()}
    gains = {task: f"{100 * row['best gain']:+.1f} points" for task, row in summary.iterrows()}
    _, frozen, tuned = SCORE_COLUMNS
    tuning = {task: f"{100 * (row[tuned] - row[frozen]):+.1f} points" for task, row in scores.iterrows()}
    (low, high), (g_low, g_high) = ds["heterogeneous_share"], ds["head_disabling_gain"]
    agreement = (f"macro-F1 {classifier_f1:.2f} (rules, {n_labels} maps, cross-validated)"
                 if np.isfinite(classifier_f1) else "not measured (the hand labels describe the default model's maps)")
    tasks = "the kit's tasks, not GLUE"
    return table([
        ("classifier vs hand labels", f"F1 {ds['classifier_f1']:.2f} (CNN, ~{ds['labelled_maps']} maps)", agreement,
         "transparent rules, not a CNN; the kit's own labels"),
        ("heterogeneous share (fine-tuned)", f"{low:.0%} ({ds['heterogeneous_tasks'][0]}) to {high:.0%} "
         f"({ds['heterogeneous_tasks'][1]})", per_task({t: f"{v:.0%}" for t, v in heterogeneous.items()}), tasks),
        ("layers changed most by fine-tuning", ds["most_changed_layers"], per_task(changed), tasks),
        ("best single-head disabling", f"{g_low:+.1f} ({ds['head_disabling_tasks'][0]}) to {g_high:+.1f} "
         f"({ds['head_disabling_tasks'][1]}) points", per_task(gains), tasks),
        ("fine-tuned vs frozen pre-trained", f"{ds['finetuned_vs_pretrained_gain']:+.1f} points (average)",
         per_task(tuning), "here: a linear head on the frozen encoder"),
    ])
