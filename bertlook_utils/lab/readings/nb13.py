"""Notebook 13 (syntax in the vectors: structural probes with control tasks): the numbers its prose and checks use.

They are read from the structural probes' results (`structural.run`), every head's attention read as a tree
(`structural.attention_trees`) and notebook 06's probes (`probes.run_probes`), all scored on the same held-out
sentences. UUAS and root accuracy are in %, differences in points; DSpr and NSpr are Spearman correlations; layers
count from 0 (the embeddings), heads as "layer-head", both 1-based.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pandas as pd

from ...analyses.probes import Model, ProbeResults
from ...analyses.structural import StructuralResults, heads_uuas, probe_trees
from .words import findings_table

# The papers' findings, in words (their tables' numbers were not available to check offline)
FINDINGS = {
    "Hewitt & Manning 2019": "a linear map of BERT's and ELMo's word vectors holds whole parse trees: its distances "
                             "recover far more of the tree than the baselines (the embedding layer, a random-init "
                             "model, the left-to-right chain); the middle layers do best (BERT-large: around 15-16 "
                             "of 24); UUAS stops rising near rank 64, far below the vectors' size",
    "Hewitt & Liang 2019": "a probe's accuracy alone says little: a probe that fits a control task (random but "
                           "consistent labels per word type) well can memorise; report selectivity, task minus "
                           "control; for part-of-speech tags, smaller probes were more selective at little cost "
                           "in accuracy",
}


def _rows(results: StructuralResults, model: str = "pretrained", task: str = "silver",
          rank: int | None = None) -> pd.DataFrame:
    scores = results.scores
    rank = results.rank if rank is None else rank
    chosen = scores[(scores["model"] == model) & (scores["task"] == task) & (scores["rank"] == rank)]
    return chosen.set_index("layer").sort_index()


# -- the probes per layer ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LayersReading:
    """The rank-`rank` probes per layer: the best layer by held-out UUAS and what the baselines reach."""

    rank: int
    layers: int  # the model's layers (layer 0, the embeddings, not counted)
    best: int  # the layer whose distance probe has the highest UUAS
    uuas: float
    uuas_low: float
    uuas_high: float
    dspr: float
    root_layer: int  # the layer whose depth probe finds the root most often
    root_acc: float
    nspr: float  # the depth probe's NSpr at root_layer
    embeddings: float  # layer 0's UUAS
    embeddings_high: float
    last: float  # the last layer's UUAS
    random_best: float  # the random-init model's best layer's UUAS (from layer 1)
    random_high: float  # ... the top of its interval
    linear: float  # the left-to-right chain's UUAS
    linear_root: float  # the chain's root accuracy (its first word as the root)
    control: float  # the control task's UUAS at the best layer
    selectivity: float  # best layer: UUAS - control UUAS


def layers(results: StructuralResults) -> LayersReading:
    silver, control = _rows(results), _rows(results, task="control")
    random = _rows(results, model="random-init")
    best, root_layer = int(silver["uuas"].idxmax()), int(silver["root_acc"].idxmax())
    random_layer = int(random["uuas"].idxmax())
    linear = results.linear.iloc[0]
    return LayersReading(
        rank=results.rank, layers=int(silver.index.max()), best=best, uuas=float(silver.at[best, "uuas"]),
        uuas_low=float(silver.at[best, "uuas_low"]), uuas_high=float(silver.at[best, "uuas_high"]),
        dspr=float(silver.at[best, "dspr"]), root_layer=root_layer, root_acc=float(silver.at[root_layer, "root_acc"]),
        nspr=float(silver.at[root_layer, "nspr"]), embeddings=float(silver.at[0, "uuas"]),
        embeddings_high=float(silver.at[0, "uuas_high"]), last=float(silver["uuas"].iloc[-1]),
        random_best=float(random.at[random_layer, "uuas"]), random_high=float(random.at[random_layer, "uuas_high"]),
        linear=float(linear["uuas"]), linear_root=float(linear["root_acc"]), control=float(control.at[best, "uuas"]),
        selectivity=float(silver.at[best, "uuas"] - control.at[best, "uuas"]))


def layer_table(results: StructuralResults) -> pd.DataFrame:
    """The rank-`results.rank` probes per layer, as the notebook shows them: the distance probe's UUAS with its
    interval and DSpr, the depth probe's root accuracy and NSpr, the control task's UUAS and the random-init model's
    (NaN at layer 0: its embeddings are the pretrained ones)."""
    silver = _rows(results)
    table = pd.DataFrame({"UUAS": silver["uuas"], "low": silver["uuas_low"], "high": silver["uuas_high"],
                          "DSpr": silver["dspr"], "root %": silver["root_acc"], "NSpr": silver["nspr"],
                          "control UUAS": _rows(results, task="control")["uuas"],
                          "random-init UUAS": _rows(results, model="random-init")["uuas"]})
    return table.rename_axis("layer").reset_index()


# -- the rank sweep ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RanksReading:
    """The rank sweep at one layer (`results.selectivity`)."""

    layer: int
    lowest: int  # the lowest rank
    highest: int  # the highest rank
    uuas_lowest: float
    uuas_highest: float
    near: int  # the lowest rank within `within` points of the highest rank's UUAS
    within: float
    control_lowest: float
    control_highest: float
    most_selective: int  # the rank with the highest selectivity
    selectivity: float  # ... its selectivity
    selectivity_low: float
    selectivity_highest: float  # the highest rank's selectivity
    selectivity_highest_high: float  # ... the top of its interval


def ranks(results: StructuralResults, layer: int, within: float = 3.0) -> RanksReading:
    """layer: the layer of the sweep (0 = the embeddings); within: points below the highest rank's UUAS that count
    as near it."""
    sweep = results.selectivity[results.selectivity["layer"] == layer].set_index("rank").sort_index()
    if sweep.empty:
        raise ValueError(f"layer: no rank sweep at layer {layer}; the layers are "
                         f"{sorted(results.selectivity['layer'].unique())}")
    lowest, highest = int(sweep.index.min()), int(sweep.index.max())
    near = int(sweep.index[sweep["uuas"] >= sweep.at[highest, "uuas"] - within].min())
    most = int(sweep["selectivity"].idxmax())
    return RanksReading(
        layer=layer, lowest=lowest, highest=highest, uuas_lowest=float(sweep.at[lowest, "uuas"]),
        uuas_highest=float(sweep.at[highest, "uuas"]), near=near, within=within,
        control_lowest=float(sweep.at[lowest, "control"]), control_highest=float(sweep.at[highest, "control"]),
        most_selective=most, selectivity=float(sweep.at[most, "selectivity"]),
        selectivity_low=float(sweep.at[most, "low"]), selectivity_highest=float(sweep.at[highest, "selectivity"]),
        selectivity_highest_high=float(sweep.at[highest, "high"]))


# -- vectors against attention ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class VersusReading:
    """The structural probe beside notebook 04's heads and notebook 06's probes, UUAS on the same held-out
    sentences; `table` holds every row shown."""

    table: pd.DataFrame  # method, what it sees, UUAS
    probe: float  # the structural probe at its best layer
    chosen_head: str  # the head whose attention tree scores best on the selection half
    chosen_head_uuas: float  # ... on the held-out half
    chosen_head_high: float
    nb04_head: str  # notebook 04's best head over all words (chosen on the selection half)
    nb04_head_uuas: float
    attention_probe: float  # notebook 06's attention-only probe, MST
    attention_vectors: float  # notebook 06's attention + vectors probe, MST
    distances_vectors: float  # notebook 06's distances + vectors network, MST
    linear: float


def versus_attention(results: StructuralResults, heads: pd.DataFrame, probes: ProbeResults,
                     heldout: Sequence) -> VersusReading:
    """heads: `structural.attention_trees`; probes: notebook 06's `probes.run_probes` on the same halves; heldout:
    the held-out sentences, in the probes' order."""
    trees = [s.heads for s in heldout]
    puncts = [s.is_punct for s in heldout]

    def probe_uuas(model: str) -> float:
        return 100 * heads_uuas(probe_trees(probes.predictions, f"{model} (MST)"), trees, puncts)

    def head_label(row) -> str:
        return f"{int(row['layer'])}-{int(row['head'])}"

    chosen = heads.loc[heads["selection"].idxmax()]
    best_all = probes.best_heads.set_index("relation").loc["all"]
    nb04 = heads[(heads["layer"] == int(best_all["layer"])) & (heads["head"] == int(best_all["head"]))].iloc[0]
    reading = layers(results)
    scores = {
        "the left-to-right chain": ("word order only", reading.linear),
        f"structural probe, layer 0 (rank {reading.rank})": ("the embeddings", reading.embeddings),
        f"structural probe, layer {reading.best} (rank {reading.rank})": ("one layer's word vectors", reading.uuas),
        f"head {head_label(chosen)}'s attention tree (best on the selection half)": ("one attention map",
                                                                                    float(chosen["heldout"])),
        f"head {head_label(nb04)}'s attention tree (notebook 04's best head, all words)": ("one attention map",
                                                                                          float(nb04["heldout"])),
        "notebook 06: attention only (MST)": ("every attention map", probe_uuas(Model.ATTENTION)),
        "notebook 06: distances + vectors (MST)": ("static word vectors and word distances",
                                                   probe_uuas(Model.DISTANCES)),
        "notebook 06: attention + vectors (MST)": ("every attention map and static word vectors",
                                                   probe_uuas(Model.ATTENTION_VECTORS)),
    }
    table = pd.DataFrame([(name, sees, uuas) for name, (sees, uuas) in scores.items()],
                         columns=["method", "what it reads", "UUAS"])
    values = table["UUAS"].to_numpy()
    return VersusReading(table=table, probe=reading.uuas, chosen_head=head_label(chosen),
                         chosen_head_uuas=float(chosen["heldout"]), chosen_head_high=float(chosen["heldout_high"]),
                         nb04_head=head_label(nb04), nb04_head_uuas=float(nb04["heldout"]),
                         attention_probe=float(values[5]), distances_vectors=float(values[6]),
                         attention_vectors=float(values[7]), linear=reading.linear)


# -- one sentence --------------------------------------------------------------------------------------------------
def example_sentence(heldout: Sequence, shortest: int = 9, longest: int = 14) -> int:
    """The index of the first held-out sentence of `shortest` to `longest` words with one punctuation word at most:
    short enough to draw its trees at the column's width."""
    for i, sentence in enumerate(heldout):
        if shortest <= len(sentence.heads) <= longest and sum(sentence.is_punct) <= 1:
            return i
    raise ValueError(f"no held-out sentence of {shortest}-{longest} words with one punctuation word at most")


@dataclass(frozen=True)
class SentenceReading:
    """One sentence's predicted tree at one layer: `found` of its `edges` silver edges between non-punctuation
    words."""

    index: int
    layer: int
    found: int
    edges: int


def sentence_tree(results: StructuralResults, heldout: Sequence, index: int, layer: int) -> SentenceReading:
    """results.edges' predicted edges (1-based word pairs) of sentence `index` at `layer`, against its silver
    tree."""
    sentence = heldout[index]
    edges = results.edges[(results.edges["sentence"] == index) & (results.edges["layer"] == layer)]
    if edges.empty:
        raise ValueError(f"index, layer: results.edges holds no tree for sentence {index} at layer {layer}")
    silver = {frozenset((w + 1, int(h))) for w, h in enumerate(sentence.heads)
              if h and not sentence.is_punct[w] and not sentence.is_punct[int(h) - 1]}
    found = {frozenset((int(a), int(b))) for a, b in zip(edges["a"], edges["b"])}
    return SentenceReading(index=index, layer=layer, found=len(found & silver), edges=len(silver))


# -- paper vs this run --------------------------------------------------------------------------------------------
def paper_vs_run(layers_: LayersReading, ranks_: RanksReading) -> pd.DataFrame:
    """One row per paper: its finding in words (FINDINGS, marked as such) and this run's, rendered from the
    readings."""
    run = {
        "Hewitt & Manning 2019": f"layer {layers_.best} of {layers_.layers} is best: UUAS {layers_.uuas:.1f} "
                                 f"[{layers_.uuas_low:.1f}, {layers_.uuas_high:.1f}], DSpr {layers_.dspr:.2f}; the "
                                 f"embeddings {layers_.embeddings:.1f}, the random-init model at most "
                                 f"{layers_.random_best:.1f}, the chain {layers_.linear:.1f}; rank {ranks_.near} is "
                                 f"within {ranks_.within:g} points of rank {ranks_.highest}",
        "Hewitt & Liang 2019": f"at layer {ranks_.layer}, the control task reaches {ranks_.control_highest:.1f} UUAS "
                               f"at rank {ranks_.highest} and {ranks_.control_lowest:.1f} at rank {ranks_.lowest}; "
                               f"selectivity is highest at rank {ranks_.most_selective} ({ranks_.selectivity:.1f} "
                               f"points), {ranks_.selectivity_highest:.1f} at rank {ranks_.highest}",
    }
    return findings_table(FINDINGS, run)
