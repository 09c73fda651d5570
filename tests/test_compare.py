"""compare: every "paper vs this run" table on small hand-made results whose answers are known by construction;
results are looked up by their ids (`coref.System`, `probes.Model`, `finetune.Score`), never by their labels."""
from __future__ import annotations

import inspect

import numpy as np
import pandas as pd
import pytest

from bertlook_utils import compare, coref, disabling, finetune, gradients, norms, paper, probes, relations, tokentypes
from bertlook_utils.clustering import ClusterResult
from bertlook_utils.surface import ENTROPY_COLUMNS, TOKEN_COLUMNS, SurfaceResult


# -- hand-made results ------------------------------------------------------------------------------
def surface_result(n_layers: int = 3) -> SurfaceResult:
    """n_layers x 2 heads: every head puts 0.6 on [CLS]; head 1-1 puts 0.7 on the previous token."""
    rows = [(layer, head) for layer in range(1, n_layers + 1) for head in (1, 2)]
    tokens = pd.DataFrame(rows, columns=["layer", "head"])
    tokens[list(TOKEN_COLUMNS)] = 0.0
    tokens["cls"] = 0.6
    tokens.loc[0, "prev"] = 0.7
    entropy = pd.DataFrame(rows, columns=["layer", "head"]).assign(**{c: 1.0 for c in ENTROPY_COLUMNS})
    entropy["uniform"] = np.log(128)
    return SurfaceResult(tokens, entropy, [])


def ablation() -> gradients.AblationResult:
    """Layer 1: moving the sink mass moves the pooled embedding 3x as far as moving ordinary tokens' mass."""
    distances = {"sink": [2e-3, 4e-3], "random": [1e-3, 1e-3]}
    rows = [("layer", 1, 0, source, "matched", "renormalise", i, d, d, 0.1)
            for source, values in distances.items() for i, d in enumerate(values)]
    return gradients.AblationResult(pd.DataFrame(rows, columns=["scope", "layer", "head", *gradients.CONDITION_COLUMNS,
                                                                "input", *gradients.DISTANCES, "moved"]), 0.5)


def gradient_result() -> gradients.GradientResult:
    """2 inputs, 2 layers x 2 heads: the same gradient and attention for every category."""
    return gradients.GradientResult(np.ones((2, 2, 2, 4)), np.full((2, 2, 2, 4), 0.25), "test objective")


def syntax_frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    """`syntax.head_accuracy` and `syntax.offset_baseline` for "all" and "det": head 2-1 at 90 % on det."""
    heads = pd.DataFrame({"relation": ["all", "det"], "layer": [1, 2], "head": [2, 1],
                          "direction": ["dep->head", "head->dep"], "accuracy": [0.3, 0.9], "low": [0.25, 0.85],
                          "high": [0.35, 0.95], "n": [100, 20]})
    return heads, pd.DataFrame({"relation": ["all", "det"], "offset": [1, 1], "accuracy": [0.2, 0.5]})


def coref_result() -> coref.CorefResult:
    """Every system of Table 2 on the held-out half: the baselines at 40, 50 and 60 %, the learned combination
    at 70 %, head 1-2 at 80 % under every reading; every type at its system's accuracy."""
    systems = {coref.System.NEAREST: 0.4, coref.System.HEAD_WORD: 0.5, coref.System.SIEVE: 0.6,
               coref.System.COMBINED: 0.7, **{coref.best_head_label((1, 2), r): 0.8 for r in coref.Reading}}
    table = pd.DataFrame([(name, t, accuracy, accuracy - 0.1, accuracy + 0.1, 10)
                          for name, accuracy in systems.items() for t in coref.COLUMNS],
                         columns=["system", "type", "accuracy", "low", "high", "n"])
    readings = pd.DataFrame([dict(reading=r, layer=1, head=2, label="1-2", selection=0.9, held_out=0.8, low=0.7,
                                  high=0.9, n=10) for r in coref.Reading])
    return coref.CorefResult([], pd.DataFrame(), np.zeros((0, 1, 2)), np.zeros((0, 1, 2), bool), pd.DataFrame(),
                             (1, 2), table, readings)


UAS = {probes.Model.RIGHT_BRANCHING: 20.0, probes.Model.DISTANCES: 60.0, probes.Model.RANDOM_ATTENTION_VECTORS: 25.0,
       probes.Model.RANDOM_ATTENTION: 22.0, probes.Model.ATTENTION: 50.0, probes.Model.ATTENTION_VECTORS: 70.0,
       probes.Model.ONE_EPOCH: 45.0}


def probe_results() -> probes.ProbeResults:
    """Table 3 of this run: UAS, and one point more from the tree (MST)."""
    table = pd.DataFrame({"model": list(UAS), "uas_argmax": list(UAS.values())})
    table["uas_mst"] = table["uas_argmax"] + 1
    empty = np.zeros((2, 1, 1))
    return probes.ProbeResults(table, pd.DataFrame(), empty, empty, empty, pd.DataFrame(), pd.DataFrame(), 0, 0,
                               "spacy-md")


def cluster_result() -> ClusterResult:
    """3 layers x 2 heads: heads of one layer at distance 1, of different layers at 4; layer 1's heads broad,
    layer 2's [CLS], layer 3's other."""
    layer = np.repeat([1, 2, 3], 2)
    distances = np.where(layer[:, None] == layer[None], 1.0, 4.0) - np.eye(6)
    heads = pd.DataFrame({"layer": layer, "head": [1, 2] * 3, "behaviour": np.repeat(["broad", "cls", "other"], 2),
                          "x": np.arange(6.0), "y": np.zeros(6)})
    heads["label"] = [f"{a}-{b}" for a, b in zip(heads["layer"], heads["head"])]
    return ClusterResult(distances, 1, heads, [], 3, 2)


def share_frame(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["task", "model", "kind", "share", "low", "high"])


SCORES = pd.DataFrame([[0.1, 0.12, 0.5, 0.6, 0.75]], columns=list(finetune.Score), index=["topic"])
SIMILARITY = {"topic": np.array([[1.0, 0.99], [0.8, 0.7], [0.9, 0.85]])}  # layers 2 and 3 changed most
CLASSIFIED = {"learned": share_frame([("topic", "fine-tuned", "heterogeneous", 0.30, 0.2, 0.4),
                                      ("topic", "fine-tuned", "broad", 0.12, 0.1, 0.2),
                                      ("topic", "pre-trained", "heterogeneous", 0.5, 0.4, 0.6)])}
HAND_LABELS = compare.HandLabels(pd.Series({"rules": 0.66, "learned": 0.71}), 0.9, 440,
                                 share_frame([("topic", "fine-tuned", "heterogeneous", 0.2, 0.1, 0.3),
                                              ("topic", "fine-tuned", "broad", 0.05, 0.0, 0.1),
                                              ("topic", "pre-trained", "broad", 0.1, 0.0, 0.2)])
                                 .assign(n=[40, 40, 20]))  # random maps per group


def held(task: str = "sentiment", head: str = "1-2") -> disabling.HeldOut:
    """Head 1-2 chosen on the selection half (+50 points) changes nothing on the evaluation half; layer 1 +10."""
    picks = pd.DataFrame({"label": [head, "1"], "selection": [0.5, 0.2], "evaluation": [0.0, 0.1],
                          "low": [-0.1, 0.0], "high": [0.1, 0.2]}, index=["best head", "best layer"])
    return disabling.HeldOut(task, picks, pd.Series([0.0], index=[head]), {"selection": 0.5, "evaluation": 0.5}, 4, 4)


def heads_inputs() -> dict:
    """`dark_secrets_heads`' inputs: a planted relation head 2-2, sinks, [CLS] rows and stripes as numbers."""
    maps = [np.full((2, 2, 6, 6), 1 / 6) for _ in range(3)]
    for attn in maps:
        attn[1, 1, 1] = [0, 0, 0.9, 0.1, 0, 0]  # head 2-2: the predicate (word 0) looks at its argument (word 1)
    frames = [relations.Frame(k, 0, ((1, 2),), ("dobj",)) for k in range(3)]
    layers = pd.Index([1, 2], name="layer")
    cls = pd.DataFrame({"category": list(tokentypes.EXCLUSIVE), "before": 0.1,
                        "after": np.linspace(0.1, 0.01, len(tokentypes.EXCLUSIVE))})  # as exclusive_cls_change
    cls.loc[cls["category"] == "noun", "after"] = 0.5
    return dict(relation_scores={"shifted": relations.score_maps(maps, frames, n_draws=100)},
                special={"sentiment": pd.DataFrame({"cls_change": [-0.01, -0.2], "sep_change": [0.005, -0.002]},
                                                   index=layers)},
                cls_rows={"sentiment": cls},
                stripes=pd.DataFrame({"threshold": [0.1, 0.2], "special or punct.": [0.7, 0.95],
                                      "linguistic": [0.2, 0.03]}),
                held={"sentiment": held()}, seeds={0: held(), 1: held()})


def beyond_inputs() -> dict:
    """`beyond_attention`'s inputs, 2 inputs x 2 layers: [CLS] 0.2 and 0.6 of the weight but 0.02 and 0.05 of the
    norm; 0.3 and 0.2 of a token's update from the others with residual and LayerNorm (0.95 by weight); effective
    attention takes [CLS] from 0.6 to 0.004; one of two relations keeps its head (both on long sentences, changes
    -2 and +1 points); the released attribution reading at half the kit's correlations; half the heads pruned by
    importance: 0.9 -> 0.8 (raw 0.75, random 0.6); every vertical head removed: 0.7 (random 0.8-0.85, p 0.02), only
    their [CLS] column: 0.88."""
    share = np.zeros((2, 2, 4))  # [inputs, layers, gradients.CATEGORIES]
    share[..., gradients.CATEGORIES.index("cls")] = [0.2, 0.6]
    norm = np.zeros((2, 2, 4))
    norm[..., gradients.CATEGORIES.index("cls")] = [0.02, 0.05]
    mixing = np.tile(np.array([[0.95, 0.9, 0.5, 0.3], [0.95, 0.9, 0.5, 0.2]]), (2, 1, 1))  # [inputs, layers, MIXING]
    norm_result = norms.NormResult({"layer_weight": share, "layer_norm": norm, "layer_context": norm, "mixing": mixing})
    sinks = pd.concat({"raw": pd.DataFrame({"cls": [0.6, 0.3], "sep": 0.1, "punct": 0.1}),
                       "effective": pd.DataFrame({"cls": [0.004, 0.002], "sep": 0.0, "punct": 0.0})}, axis=1)
    syntax_heads = pd.concat({"raw": pd.DataFrame({"head": [1, 2]}, index=["det", "amod"]),
                              "effective": pd.DataFrame({"head": [1, 1]}, index=["det", "amod"])}, axis=1)
    long_change = pd.DataFrame({"relation": ["det", "amod"], "change": [-0.02, 0.01], "kept": [True, True]})
    methods = {"attention": [0.5, 0.1], "rollout": [0.1, 0.2], "flow": [0.1, 0.3], "grad_x_input": [0.1, 0.4]}
    correlations = pd.DataFrame([(layer, method, values[layer - 1]) for method, values in methods.items()
                                 for layer in (1, 2)], columns=["layer", "method", "spearman"])
    released = correlations[correlations["method"] != "grad_x_input"].assign(spearman=lambda f: f["spearman"] / 2)
    curves = pd.DataFrame({"heads": [0, 0, 0, 2, 2, 2, 2], "share": [0, 0, 0, 0.5, 0.5, 0.5, 0.5],
                           "accuracy": [0.9, 0.9, 0.9, 0.8, 0.75, 0.5, 0.7],
                           "order": ["importance", "raw importance", "random 0", "importance", "raw importance",
                                     "random 0", "random 1"]})
    removal = pd.DataFrame({"kind": ["vertical", "diagonal"], "accuracy": [0.7, 0.9], "random low": [0.8, 0.8],
                            "random high": [0.85, 0.85], "p": [0.02, 0.6], "cls drained": [0.88, np.nan]})
    return dict(norm_result=norm_result, sinks=sinks, syntax_heads=syntax_heads, long_change=long_change,
                correlations=correlations, released=released, curves={"topic": curves}, removal={"topic": removal},
                head_size=32)


# -- every public comparison, called once ------------------------------------------------------------
CASES = {  # function -> its keyword arguments
    "table": lambda: dict(rows=[("a quantity", "paper", "this run", "")]),
    "surface": lambda: dict(result=surface_result()),
    "entropy": lambda: dict(result=surface_result()),
    "sep_noop": lambda: dict(result=gradient_result(), ablation=ablation()),
    "table1": lambda: dict(zip(("heads", "baseline"), syntax_frames())),
    "table2": lambda: dict(result=coref_result()),
    "coref_readings": lambda: dict(result=coref_result()),
    "coref_learned": lambda: dict(result=coref_result()),
    "table3": lambda: dict(results=probe_results()),
    "table3_gaps": lambda: dict(results=probe_results()),
    "clustering": lambda: dict(result=cluster_result(), n_permutations=20),
    "dark_secrets_patterns": lambda: dict(shares=CLASSIFIED, similarity=SIMILARITY, scores=SCORES, labels=HAND_LABELS),
    "dark_secrets_heads": heads_inputs,
    "beyond_attention": beyond_inputs,
}
OWN_LAYOUT = {"coref_readings", "coref_learned"}  # tables beside Table 2, not in the paper-vs-this-run layout
LAYOUTS = {"table1": compare.TABLE1_COLUMNS}  # the layout with one more column (Table 1's released notebook)


def public_functions() -> list[str]:
    return sorted(name for name, f in inspect.getmembers(compare, inspect.isfunction)
                  if not name.startswith("_") and f.__module__ == compare.__name__)


def test_every_public_function_has_a_case():
    assert public_functions() == sorted(CASES)  # a new comparison needs its case here


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_public_function_makes_a_table_of_text(name):
    table = getattr(compare, name)(**CASES[name]())
    assert isinstance(table, pd.DataFrame) and len(table) > 0
    if name not in OWN_LAYOUT:
        assert list(table.columns) == list(LAYOUTS.get(name, compare.COLUMNS))
        assert table.map(lambda cell: isinstance(cell, str)).all().all() and table["this run"].str.len().min() > 0


def test_compare_still_shows_tables():
    """The notebooks and the student copies already handed out call compare.show."""
    assert repr(compare.show(compare.table([("q", "p", "r", "")]))).startswith("quantity")


# -- known answers -----------------------------------------------------------------------------------
def test_a_row_must_have_every_column():
    with pytest.raises(ValueError, match="every row needs 4 entries"):
        compare.table([("quantity", "paper", "this run")])


def test_surface_and_table1_read_the_heads_off_the_result():
    surface = compare.surface(surface_result()).set_index("quantity")["this run"]
    assert surface["heads with > 50 % on the previous token"] == "1 (1-1)"
    assert surface["attention to [CLS] in the middle layers"] == "60.0 %"
    table1 = compare.table1(*syntax_frames()).set_index("quantity")
    assert table1.loc["det", "this run"] == "2-1 (head→dep): 90.0 [85.0–95.0] | offset +1: 50.0 | n = 20"
    assert table1.loc["det", "paper"] == "8-11: 94.3 | offset +1: 51.7"
    assert table1.loc["nn", "this run"] == "–" and table1.loc["nn", "what differs"].startswith("nn is spaCy's compound")


def test_table1_puts_the_released_notebook_beside_the_paper_and_names_where_they_disagree():
    table1 = compare.table1(*syntax_frames()).set_index("quantity")
    assert list(table1.columns) == list(compare.TABLE1_COLUMNS[1:])
    assert table1.loc["det", "released notebook"] == "94.3 | 51.7" and table1.loc["det", "what differs"] == ""
    assert table1.loc["auxpass", "paper"] == "4-10: 82.5 | offset +1: 40.5"
    assert table1.loc["auxpass", "released notebook"] == "94.1 | 82.5"
    assert table1.loc["auxpass", "what differs"] == "the paper's gain +42.0, its released notebook's +11.6"
    assert table1.loc["all", "what differs"].startswith("the paper's gain +8.2, its released notebook's +8.0; silver")


def test_table1_gains_of_the_paper_and_its_released_notebook():
    gains = paper.table1_gains().set_index("relation")
    assert list(gains.index) == list(paper.TABLE1["relation"])
    assert list(gains.index[gains["differs"]]) == ["all", "auxpass"]
    np.testing.assert_allclose(gains.loc["auxpass", ["paper", "released"]].to_numpy(float), [42.0, 11.6])
    np.testing.assert_allclose(gains.loc["dobj", ["paper", "released"]].to_numpy(float), [46.8, 46.8])


def test_table2_puts_each_system_beside_the_papers_row_of_the_same_id():
    side = compare.table2(coref_result()).set_index("quantity")
    assert list(side.index) == [coref.System.NEAREST, coref.System.HEAD_WORD, coref.System.SIEVE, paper.TABLE2_NEURAL,
                                paper.TABLE2_HEAD, f"{paper.TABLE2_HEAD}, argmax over {coref.Reading.EARLIER_WORDS}"]
    assert side.loc[coref.System.SIEVE, "paper"] == "all 69 · pronoun 70 · proper 77 · nominal 60"
    assert side.loc[coref.System.SIEVE, "this run"].startswith("all 60.0 [50–70] · pronoun 60.0")
    assert side.loc[paper.TABLE2_HEAD, "this run"].startswith("all 80.0 [70–90]")
    learned = compare.coref_learned(coref_result()).set_index("system")
    assert list(learned.index) == [coref.System.COMBINED, "best head 1-2", coref.System.SIEVE]
    assert learned.loc[coref.System.COMBINED, "all"] == "70 [60–80]"
    readings = compare.coref_readings(coref_result())
    assert list(readings["argmax over"]) == [coref.READINGS[r] for r in coref.Reading]
    assert list(readings["held-out %"]) == ["80.0 [70.0–90.0]"] * 3


def test_table3_puts_each_model_beside_the_papers_row_it_stands_for():
    table3 = compare.table3(probe_results()).set_index("quantity")
    assert table3.loc["attention + GloVe", "this run"] == "70.0 (MST 71.0)"
    assert table3.loc["attention + GloVe", "what differs"] == (
        f"this run: {probes.Model.ATTENTION_VECTORS}; {compare.VECTORS_FOR_GLOVE}")
    assert table3.loc["attention only", "what differs"] == ""  # the same row in the paper and here
    assert table3.loc["structural probe (UUAS, not comparable)", "this run"] == "–"
    assert list(table3.index[-2:]) == [probes.Model.RANDOM_ATTENTION, probes.Model.ONE_EPOCH]  # ours only
    gaps = compare.table3_gaps(probe_results()).set_index("quantity")
    assert gaps.loc[f"{probes.Model.ATTENTION} - {probes.Model.RIGHT_BRANCHING} (UAS points)"].tolist()[:2] == [
        "+35.0", "+30.0"]
    assert gaps.loc[f"{probes.Model.ATTENTION_VECTORS} - {probes.Model.RANDOM_ATTENTION_VECTORS} (UAS points)",
                    "this run"] == "+45.0"


def test_clustering_finds_the_layers_close_and_names_the_behaviours():
    table = compare.clustering(cluster_result(), n_permutations=20).set_index("quantity")["this run"]
    assert table["heads of the same layer are close"].startswith("between/within distance 4.00, p = ")
    assert table["heads by behaviour"] == "broad 2, [CLS] 2, other 2"


@pytest.mark.parametrize("labelled", [True, False])
def test_dark_secrets_patterns_reads_each_finding_off_the_results(labelled):
    """A 3 x 2 model whose layers 2 and 3 changed most; fine-tuned heterogeneous 0.30 + broad 0.12 by the
    classifier, 0.2 + 0.05 by the hand labels."""
    table = compare.dark_secrets_patterns(CLASSIFIED, SIMILARITY, SCORES, HAND_LABELS if labelled else None)
    found = dict(zip(table["quantity"], table["this run"]))
    if labelled:
        assert found["classifier vs hand labels"] == ("macro-F1 0.71 (learned; rules 0.66), 440 maps, cross-validated; "
                                                      "the labeller agrees with himself on 90%")
        assert found["heterogeneous share (fine-tuned), from the labels"] == "25% (topic)"
        differs = dict(zip(table["quantity"], table["what differs"]))
        assert differs["heterogeneous share (fine-tuned), from the labels"] == "random maps per task: 40 (topic)"
    else:
        assert found["classifier vs hand labels"].startswith("not measured (")
        assert "heterogeneous share (fine-tuned), from the labels" not in found
    assert found["heterogeneous share (fine-tuned)"] == "learned: 42% (topic)"
    assert found["layers changed most by fine-tuning"] == "layers 2, 3 (topic)"
    assert found["fine-tuned vs pre-trained (no task training)"] == "+63.0 points (average); +63.0 (topic)"
    assert found["fine-tuned vs a frozen encoder (mean-pooled)"] == "+15.0 points (topic)"
    assert dict(zip(table["quantity"], table["paper"]))["heterogeneous share (fine-tuned)"] == "32% (MRPC) to 61% (QQP)"


def test_dark_secrets_heads_reads_the_held_out_choice():
    table = compare.dark_secrets_heads(**heads_inputs())
    found = dict(zip(table["quantity"], table["this run"]))
    assert found["best single-head disabling (§4.6)"] == ("chosen on one half -> scored on the other [95 %]: "
                                                          "1-2 +50.0 -> +0.0 [-10.0, +10.0] (sentiment)")
    assert found["best layer disabling (§4.6)"] == "held out: 1 +10.0 [+0.0, +20.0] (sentiment)"
    assert found["best head over fine-tuning seeds"] == "sentiment, 2 seeds: held-out change +0.0, +0.0 points"
    differs = dict(zip(table["quantity"], table["what differs"]))
    assert differs["best single-head disabling (§4.6)"].endswith("; 4 inputs per half")  # the halves' size, rendered
    assert differs["best head over fine-tuning seeds"] == "every seed chooses the same head"
    other = compare.dark_secrets_heads(**{**heads_inputs(), "seeds": {0: held(), 1: held(head="2-1")}})
    assert dict(zip(other["quantity"], other["what differs"]))["best head over fine-tuning seeds"] == (
        "the chosen head differs between seeds")


def test_beyond_attention_reads_each_later_finding_off_the_results():
    table = compare.beyond_attention(**beyond_inputs())
    found = dict(zip(table["quantity"], table["this run"]))
    assert found[f"weight vs norm ({paper.KOBAYASHI})"] == "[CLS] by weight 0.20-0.60 per layer, by norm 0.020-0.050"
    assert found[f"context mixing ({paper.KOBAYASHI_2021})"] == (
        "share from other tokens: by weight 0.95-0.95, with residual and LayerNorm 0.20-0.30")
    assert found[f"effective attention ({paper.BRUNNER})"] == (
        "[CLS] 0.60 -> 0.004 (largest layer mean); 1 of 2 relations keep their best syntax head; on long sentences "
        "only 2 of 2, accuracy changes -2.0 to +1.0 points")
    assert found[f"rollout and flow ({paper.ABNAR})"] == (
        "Spearman with leave-one-out, last layer: attention 0.10, rollout 0.20, flow 0.30, gradient x input 0.40; "
        "raw attention best in layer 1 (0.50); their released reading (max over rows, against |gradient|): "
        "attention 0.05, rollout 0.10, flow 0.15")
    assert found[f"pruning by importance ({paper.MICHEL}; {paper.BUDHRAJA})"] == (
        "half the heads removed: 0.90 -> 0.80 (raw 0.75, random 0.60) (topic)")
    assert found["removing one pattern's heads (Kovaleva patterns)"] == (
        "every vertical head: 0.70 vs random 0.80-0.85 (p 0.02); only their [CLS] column: 0.88 (topic)")
    assert "32 dimensions per head" in dict(zip(table["quantity"], table["what differs"]))[
        f"effective attention ({paper.BRUNNER})"]
