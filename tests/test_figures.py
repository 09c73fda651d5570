"""figures: every public figure function draws from synthetic results of the analyses and returns its Figure (or
Axes); heatmaps carry a colour bar and mark what they say they mark; figures render and save for publication."""
from __future__ import annotations

import dataclasses
import inspect
import re
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from builders import PAIR_TOKENS, make_encoded, random_row_stochastic  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from bertlook_utils import (  # noqa: E402
    attribution, clustering, coref, corefdata, disabling, figures, gradients, identifiability, mixing, norms, patterns,
    probes, relations, scoreboard, syntax, tokentypes, viz)
from bertlook_utils.present import alttext  # noqa: E402
from bertlook_utils.analyses.sinks import heads as sinkheads, massive, position as sinkposition  # noqa: E402
from bertlook_utils.conventions import head_frame  # noqa: E402
from bertlook_utils.models import Encoded  # noqa: E402

L, H = 2, 3
rng = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def readable_figures():
    """Every figure a test draws, in the kit's style, must be readable in the book's column (`viz.unreadable`)."""
    viz.use_style()
    yield
    problems = {num: viz.unreadable(plt.figure(num)) for num in plt.get_fignums()}
    plt.close("all")
    assert not any(problems.values()), problems


def rendered(drawn) -> bytes:
    """PNG bytes of a Figure, of the figure of an Axes, or of the figure of the first of several Axes; each also
    saves for publication (viz.save) as SVG, PDF and PNG."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        for fmt, magic in (("svg", b"<?xml"), ("pdf", b"%PDF"), ("png", b"\x89PNG")):
            path = viz.save(drawn, Path(folder) / f"figure.{fmt}")
            assert path.read_bytes().startswith(magic), fmt
    fig = getattr(drawn, "figure", None) or getattr(np.ravel(drawn)[0], "figure", drawn)
    assert not viz.unreadable(fig), viz.unreadable(fig)
    png = viz.figure_png(fig)
    assert png.startswith(b"\x89PNG") and len(png) > 2000
    return png


def colour_bars(fig) -> int:
    return sum(ax.get_label() == "<colorbar>" for ax in fig.axes)


# -- synthetic results of the analyses, L x H heads ------------------------------------------------------------
def per_head(*columns: str, scale: float = 1.0) -> pd.DataFrame:
    """A per-head table (`layer`, `head`, 1-indexed) with random values in [0, scale) in each column."""
    return head_frame({column: scale * rng.random((L, H)) for column in columns})


def gradient_result() -> gradients.GradientResult:
    gradient = rng.random((4, L, H, len(gradients.CATEGORIES))) + 0.1
    attention = rng.dirichlet(np.ones(len(gradients.CATEGORIES)), (4, L, H))
    return gradients.GradientResult(gradient, attention, "pair-cosine")


def ablation_result() -> gradients.AblationResult:
    rows = [("layer", layer, 0, *condition, i, 1e-3 * (i + 1), 2e-3 * (i + layer), 0.3)
            for layer in (1, 2) for condition in gradients.CONDITIONS for i in range(3)]
    frame = pd.DataFrame(rows, columns=["scope", "layer", "head", *gradients.CONDITION_COLUMNS, "input",
                                        *gradients.DISTANCES, "moved"])
    return gradients.AblationResult(frame, reference=0.05)


def value_norm_frame() -> pd.DataFrame:
    """`gradients.value_norms`; the first head has no output ratio."""
    frame = per_head("sink")
    frame["value_ratio"] = rng.random(L * H) + 0.01
    frame["output_ratio"] = [np.nan] + list(rng.random(L * H - 1) + 0.01)
    return frame


def broad_frame() -> pd.DataFrame:
    broad = per_head("entropy", "max_weight")
    broad["entropy"], broad["max_weight"] = 4 * broad["entropy"] + 1, 0.5 * broad["max_weight"] + 0.01
    return broad


def entropy_frame() -> pd.DataFrame:
    return per_head("entropy", "cls_entropy", scale=4).assign(uniform=np.log(128), max_weight=0.2)


WORDS = ["The", "cat", "sat", "down", "."]
HEADS, RELATIONS = [2, 3, 0, 3, 3], ["det", "nsubj", "ROOT", "advmod", "punct"]


def parsed_example(attn: np.ndarray | None = None) -> syntax.ParsedAttention:
    """The five words above with their gold arcs, and random word-level maps [L, H, 7, 7] unless given."""
    attn = rng.dirichlet(np.ones(7), (L, H, 7)).astype(np.float32) if attn is None else attn
    return syntax.ParsedAttention(attn, HEADS, RELATIONS, WORDS)


def accuracy_frame() -> pd.DataFrame:
    """`syntax.accuracy_frame` of one relation; the best head is 2-1."""
    return head_frame({"accuracy": np.array([[0.1, 0.2, 0.3], [0.9, 0.4, 0.5]])})


def table1_frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    """`syntax.head_accuracy` and `offset_baseline` of Table 1's relations (spaCy's names)."""
    from bertlook_utils import compare

    relations_ = compare.TABLE1_RELATIONS
    heads = pd.DataFrame({"relation": relations_, "layer": 1, "head": 2, "direction": "dep->head",
                          "accuracy": np.linspace(0.3, 0.9, len(relations_)), "n": 100})
    heads["low"], heads["high"] = heads["accuracy"] - 0.02, heads["accuracy"] + 0.02
    return heads, pd.DataFrame({"relation": relations_, "offset": 1, "accuracy": 0.2, "n": 100})


def passage_and_map() -> tuple[corefdata.Passage, np.ndarray]:
    """A generated story and one head's random word-level map [m, m] ([CLS] first)."""
    passage = corefdata.generate(1, seed=3)[0]
    return passage, random_row_stochastic(rng, (len(passage.words) + 2,) * 2)


def coref_result() -> coref.CorefResult:
    """A `coref.CorefResult` with only what Table 2 reads: the held-out table and the readings' best heads."""
    readings = pd.DataFrame({"reading": list(coref.READINGS), "layer": [1, 2, 2], "head": [2, 1, 3]})
    readings["label"] = [f"{layer}-{head}" for layer, head in zip(readings["layer"], readings["head"])]
    systems = [*coref.SYSTEMS, *(coref.best_head_label((layer, head), reading) for reading, layer, head in
                                   readings[["reading", "layer", "head"]].itertuples(index=False))]
    table = pd.DataFrame([(s, t, a, a - 0.05, a + 0.05, 40) for s in systems for t, a in
                          zip(coref.COLUMNS, rng.uniform(0.2, 0.8, len(coref.COLUMNS)))],
                         columns=["system", "type", "accuracy", "low", "high", "n"])
    return coref.CorefResult([], pd.DataFrame(), np.empty(0), np.empty(0), pd.DataFrame(), (1, 2), table, readings)


def by_rank_frame() -> pd.DataFrame:
    return pd.DataFrame({"rank": [1, 2, 3], "n": [10, 5, 2], "nearest mention": [1.0, 0.0, 0.0],
                         "sieve": [0.9, 0.6, 0.5]})


def synthetic_probes() -> probes.ProbeResults:
    names = [m[0] for m in probes.MODELS]
    table = pd.DataFrame({"model": names, "uas_argmax": np.linspace(20, 70, len(names)),
                          "uas_mst": np.linspace(22, 72, len(names))})
    trained = [name for name, kind, _ in probes.MODELS if kind]
    curves = pd.DataFrame([(name, epoch, 1.0 / epoch, 10.0 * epoch) for name in trained for epoch in (1, 2)],
                          columns=["model", "epoch", "train_loss", "heldout_uas"])
    best = pd.DataFrame({"relation": ["all", "det", "nsubj"], "layer": [1, 1, 2], "head": [2, 2, 3],
                         "direction": ["dep->head", "dep->head", "head->dep"], "accuracy": [30.0, 90.0, 50.0],
                         "n": [100, 40, 30]})
    weights = rng.normal(size=(2, L, H))
    return probes.ProbeResults(table, curves, weights, -weights, 100 * rng.random((2, L, H)), best, pd.DataFrame(),
                               6, 4, "spacy-md")


def synthetic_clusters() -> clustering.ClusterResult:
    points = rng.normal(size=(L * H, 2))
    distances = np.linalg.norm(points[:, None] - points[None], axis=-1)
    heads = head_frame({"x": points[:, 0].reshape(L, H), "y": points[:, 1].reshape(L, H),
                        "entropy": 4 * rng.random((L, H))})
    heads["label"] = [f"{layer}-{head}" for layer, head in zip(heads["layer"], heads["head"])]
    heads["behaviour"] = ["broad", "prev", "other", "cls", "cls", "other"]
    return clustering.ClusterResult(distances, 10, heads, [], L, H)


def group_tests(result: clustering.ClusterResult) -> dict:
    """One testable grouping and one that is not (None)."""
    return {"layers": clustering.layer_test(result.distances, L, n_permutations=50), "behaviours": None}


def fine_tuned() -> dict:
    """task -> a stand-in for `finetune.FineTuned` with its training history."""
    return {"topic": SimpleNamespace(history=pd.DataFrame({"step": [1, 2, 3], "loss": [2.0, 1.5, 1.0]}))}


def pattern_maps(n: int = 12) -> dict[str, np.ndarray]:
    values = rng.random((n, n))
    return {"vertical": np.tile(np.eye(n)[0], (n, 1)), "diagonal": np.eye(n, k=-1) + np.eye(n)[:, :1] * np.eye(n)[0],
            "heterogeneous": values / values.sum(1, keepdims=True)}


def labelled_features() -> pd.DataFrame:
    """`patterns.labelled_features`: one hand-labelled map of each kind."""
    k = len(patterns.KINDS)
    return pd.DataFrame({"label": list(patterns.KINDS), **{f: rng.random(k) for f in patterns.FEATURES}})


def confusion_matrices() -> dict[str, pd.DataFrame]:
    confusion = pd.crosstab(pd.Series(["block", "broad"], name="label"), pd.Series(["block", "block"], name="rules"))
    return {"rules": confusion, "learned": confusion}


def pattern_shares_by_layer() -> dict[tuple[str, str], pd.DataFrame]:
    """(task, model) -> `patterns.shares_by_layer`."""
    return {("topic", "pre-trained"): pd.DataFrame(rng.dirichlet(np.ones(len(patterns.KINDS)), L),
                                                   columns=list(patterns.KINDS), index=pd.Index([1, 2], name="layer"))}


def share_estimates() -> dict[str, pd.DataFrame]:
    groups = [("topic", "pre-trained"), ("topic", "fine-tuned")]
    estimate = pd.DataFrame([(t, m, kind, 0.2, 0.1, 0.3) for t, m in groups for kind in patterns.KINDS],
                            columns=["task", "model", "kind", "share", "low", "high"])
    return {"rules": estimate, "labels": estimate}


def map_similarities() -> dict[str, np.ndarray]:
    return {"topic": 1 - rng.random((L, H)) / 10, "pairs": 1 - rng.random((L, H)) / 5}


def relation_score_results() -> dict[str, relations.RelationScores]:
    """null -> `relations.score_maps` of one frame on four sentences."""
    maps = [random_row_stochastic(rng, (L, H, 6, 6)) for _ in range(4)]
    frames = [relations.Frame(k, 0, ((1, 2),), ("dobj",)) for k in range(4)]
    return {null: relations.score_maps(maps, frames, n_draws=100, null=null) for null in relations.NULLS}


def special_changes() -> dict[str, pd.DataFrame]:
    """task -> `tokentypes.special_change`."""
    change = pd.DataFrame({f"{t}_{q}": rng.random(L) for t in ("cls", "sep") for q in
                           ("before", "after", "change", "change_low", "change_high")},
                          index=pd.Index([1, 2], name="layer"))
    return {"topic": change, "pairs": change}


def cls_changes() -> dict[str, pd.DataFrame]:
    """task -> `tokentypes.cls_change`."""
    n = len(tokentypes.TYPES)
    return {"topic": pd.DataFrame({"category": list(tokentypes.TYPES), "before": rng.random(n),
                                   "after": rng.random(n), "change": np.zeros(n), "change_low": -np.ones(n) / 10,
                                   "change_high": np.ones(n) / 10, "base_rate": rng.random(n)})}


def stripe_tables() -> dict[str, pd.DataFrame]:
    """name -> `TokenTypeAttention.stripe_table`."""
    n = len(tokentypes.TYPES)
    return {"topic": pd.DataFrame({"category": list(tokentypes.TYPES), "share_of_tokens": rng.random(n),
                                   "share_of_stripes": rng.random(n)})}


def disabling_scans() -> dict[str, pd.DataFrame]:
    """task -> `disabling.Scan.frame`: nothing disabled, each head, each whole layer (head 0)."""
    scan = pd.DataFrame([(0, 0, 0.0)] + [(layer, head, rng.normal() / 50) for layer in (1, 2) for head in range(H + 1)],
                        columns=["layer", "head", "delta_accuracy"])
    return {"topic": scan}


def held_out_results() -> dict[str, disabling.HeldOut]:
    logits = rng.normal(size=(20, 1 + L * H + L, 2)).astype(np.float32)
    scan = disabling.Scan("topic", disabling.runs(L, H), logits, np.arange(20) % 2)
    held = disabling.held_out(scan, np.arange(10), np.arange(10, 20))
    return {"topic": held, "again": held}


def norm_result(n: int = 3) -> norms.NormResult:
    """`norms.NormResult` of n inputs: shares over the four categories per head and per layer, mixing ratios."""
    k = len(gradients.CATEGORIES)
    arrays = {key: rng.dirichlet(np.ones(k), (n, L, H)) for key in ("weight", "norm")}
    arrays |= {key: rng.dirichlet(np.ones(k), (n, L)) for key in ("layer_weight", "layer_norm", "layer_context")}
    return norms.NormResult(arrays | {"mixing": rng.random((n, L, len(norms.MIXING)))})


def explanation(words: int = 5) -> attribution.Explanation:
    """`attribution.explain` of one input: random scores per word and [CLS] rows per layer."""
    scores = pd.DataFrame({"word": [f"w{i}" for i in range(words)],
                           **{m: rng.normal(size=words) for m in (*attribution.METHODS, "leave_one_out")}})
    return attribution.Explanation(list(scores["word"]), 1, 0.8, scores,
                                   {m: rng.random((L, words)) for m in ("attention", "rollout")})


def importance_frames() -> dict[str, pd.DataFrame]:
    """task -> `importance.head_importance`."""
    return {"topic": per_head("importance", "low", "high", "normalised")}


def pruning_frames() -> dict[str, pd.DataFrame]:
    """task -> `importance.pruning_curves(...).frame`: least important first (normalised and raw) and two random
    orders."""
    shares = np.linspace(0, 1, 4)
    rows = [(order, s, round(s * L * H), 1 - s * rng.uniform(0.3, 0.6)) for order in
            ("importance", "raw importance", "random 1", "random 2") for s in shares]
    return {"topic": pd.DataFrame(rows, columns=["order", "share", "heads", "accuracy"])}


def removal_frames() -> dict[str, pd.DataFrame]:
    """task -> `importance.pattern_removal`."""
    kinds = list(patterns.KINDS[:3])
    random = rng.uniform(0.6, 0.8, len(kinds))
    return {"topic": pd.DataFrame({"kind": kinds, "heads": [1, 2, 3], "accuracy": rng.uniform(0.5, 0.9, len(kinds)),
                                   "random": random, "random low": random - 0.1, "random high": random + 0.1,
                                   "p": 0.5, "cls drained": [np.nan, np.nan, 0.85], "sets": 10, "full layers": 0,
                                   "none": 0.9})}


def one_input_attention(n: int = 6) -> np.ndarray:
    """One input's maps [L, H, n, n]."""
    return random_row_stochastic(rng, (L, H, n, n)).astype(np.float64)


def twin_maps() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """One head's map [6, 6] and `identifiability.null_space_twin` of it (values [6, 2]), and its tokens."""
    attn = one_input_attention()[0, 0]
    return attn, identifiability.null_space_twin(attn, rng.normal(size=(6, 2)), 0), PAIR_TOKENS[:6]


def token_maps() -> dict[str, np.ndarray]:
    """Last-layer attention (mean over heads), rollout and flow of one input."""
    attn = one_input_attention()
    return {"attention": attn[-1].mean(0), "rollout": attribution.rollout(attn)[-1], "flow": attribution.flow(attn)}


# -- notebook 11: synthetic results of analyses.sinks, 3 inputs ----------------------------------------------------
SINK_CATEGORIES = ["cls", "sep1", "sep2", "punct", "other"]


def sink_profile_result(eps: float = 0.3) -> sinkposition.SinkProfile:
    """`position.sink_profile`: rates and scores per (input, layer, category), the first token's curve over eps."""
    per_input = pd.DataFrame([(i, layer, c, rng.random(), rng.random() / 2) for i in range(3) for layer in (1, 2)
                              for c in SINK_CATEGORIES], columns=["input", "layer", "category", "sink_rate",
                                                                  "sink_score"])
    per_input["category"] = pd.Categorical(per_input["category"], categories=SINK_CATEGORIES, ordered=True)
    curve = pd.DataFrame([(i, e, 1 - e + rng.random() / 10) for i in range(3) for e in (0.1, 0.3, 0.5, 0.7)],
                         columns=["input", "eps", "sink_rate"])
    return sinkposition.SinkProfile(per_input, curve, eps)


def sink_heads_result(n: int = 3) -> sinkheads.SinkHeads:
    """`heads.sink_heads`: every measure per input [n, L, H]."""
    values = {name: rng.normal(size=(n, L, H)) for name in sinkheads.GEOMETRY}
    return sinkheads.SinkHeads(values | {"sink_mass": rng.random((n, L, H)), "update_ratio": rng.random((n, L, H)) / 5,
                                         "row_switch": rng.uniform(-1, 1, (n, L, H))})


def massive_result(n: int = 3) -> massive.MassiveActivations:
    """`massive.massive_activations`: [CLS] dimension 99 carries every largest value."""
    top = pd.DataFrame([(layer, i, 1, 0, "[CLS]", "cls", 99, 10.0, 10.0, 30.0) for layer in range(L + 1)
                        for i in range(n)], columns=["layer", "input", "rank", "position", "token", "kind", "dimension",
                                                     "value", "magnitude", "ratio"])
    zeros = np.zeros((n, L + 1))
    return massive.MassiveActivations(10 + rng.random((n, L + 1)), 0.3 + rng.random((n, L + 1)) / 10, zeros, zeros,
                                      top)


def intervention_result(targets: str = "massive", edits=("zero", "mean"), reference: float = 0.6, n: int = 3,
                        draws: int = 2) -> massive.Intervention:
    """`massive.massive_intervention` (or `layernorm_intervention` with targets "outlier", edit "disable")."""
    rows = [("none", "none", -1, i, 0.33, 0.0) for i in range(n)]
    rows += [(targets, e, -1, i, 0.1 + rng.random() / 20, 0.2 + rng.random() / 20) for e in edits for i in range(n)]
    rows += [("random", e, d, i, 0.33 - rng.random() / 100, rng.random() / 100) for e in edits for d in range(draws)
             for i in range(n)]
    return massive.Intervention(pd.DataFrame(rows, columns=massive.FRAME_COLUMNS), reference, (2,), pd.DataFrame())


def variant_frame(variants, columns, missing=()) -> pd.DataFrame:
    """A `position.position_or_content` / `registers` summary: per (variant, layer), each column with `_low`,
    `_high`; NaN in `missing` ((variant, column) pairs)."""
    rows = []
    for variant in variants:
        for layer in (1, 2):
            row = {"variant": variant, "layer": layer, "inputs": 3}
            for column in columns:
                value = np.nan if (variant, column) in missing else rng.random()
                row |= {column: value, f"{column}_low": value - 0.05, f"{column}_high": value + 0.05}
            rows.append(row)
    return pd.DataFrame(rows)


POSITION_VARIANTS = ["original", "first=the", "first=[SEP]", "cls<->middle"]
REGISTER_VARIANTS = ["original", "unused", "sep", "filler"]


def position_frame() -> pd.DataFrame:
    return variant_frame(POSITION_VARIANTS, ["first", "cls_content", "swapped", "sep", "other", "ordinary_change"],
                         {("first=the", "cls_content"), ("first=[SEP]", "cls_content")})


def register_frame() -> pd.DataFrame:
    return variant_frame(REGISTER_VARIANTS, ["first", "sep", "added", "added_max", "other", "ordinary_change"],
                         {("original", "added"), ("original", "added_max")})


def toy_frame() -> pd.DataFrame:
    """`toy.train_variants`: one row per variant and seed."""
    return pd.DataFrame([(v, s, rng.random(), 3 + rng.random(), 0.9 + rng.random() / 10, rng.random(), 1 / 32)
                         for v in ("softmax", "softmax1", "clipped", "gated") for s in (0, 1, 2)],
                        columns=["variant", "seed", "sink_mass", "activation_ratio", "accuracy", "query_accuracy",
                                 "chance"])


# -- every public figure, called once ---------------------------------------------------------------------------
CASES = {  # name -> a call of it on synthetic results
    "attention_and_gradient": lambda: figures.attention_and_gradient(gradient_result()),
    "sink_gradient_by_head": lambda: figures.sink_gradient_by_head(gradient_result()),
    "sink_ablation": lambda: figures.sink_ablation(ablation_result()),
    "value_norms": lambda: figures.value_norms(value_norm_frame()),
    "broad_definitions": lambda: figures.broad_definitions(broad_frame()),
    "entropy_by_layer": lambda: figures.entropy_by_layer(entropy_frame()),
    "relation_head": lambda: figures.relation_head(parsed_example(), 1, 2, "det"),
    "relation_heads": lambda: figures.relation_heads([parsed_example()] * 2, [("det", 1, 1, "dep->head"),
                                                                              ("nsubj", 2, 3, "head->dep")]),
    "accuracy_grid": lambda: figures.accuracy_grid(accuracy_frame(), title="det"),
    "table1": lambda: figures.table1(*table1_frames()),
    "antecedent_attention": lambda: figures.antecedent_attention(*passage_and_map()),
    "table2": lambda: figures.table2(coref_result()),
    "accuracy_by_rank": lambda: figures.accuracy_by_rank(by_rank_frame()),
    "probe_curves": lambda: figures.probe_curves(synthetic_probes()),
    "probe_weights": lambda: figures.probe_weights(synthetic_probes()),
    "weight_against_accuracy": lambda: figures.weight_against_accuracy(synthetic_probes()),
    "mds_map": lambda: figures.mds_map(synthetic_clusters()),
    "dendrogram": lambda: figures.dendrogram(synthetic_clusters()),
    "aligned_maps": lambda: figures.aligned_maps(synthetic_clusters(), synthetic_clusters()),
    "permutation_tests": lambda: figures.permutation_tests(group_tests(synthetic_clusters())),
    "finetuning_loss": lambda: figures.finetuning_loss(fine_tuned()),
    "pattern_examples": lambda: figures.pattern_examples(pattern_maps()),
    "pattern_gallery": lambda: figures.pattern_gallery(
        [("vertical", make_encoded(PAIR_TOKENS, random_row_stochastic(np.random.default_rng(0),
                                                                      (1, 1, len(PAIR_TOKENS), len(PAIR_TOKENS)))),
          1, 1, "a")]),
    "pattern_features": lambda: figures.pattern_features(labelled_features(), patterns.THRESHOLDS),
    "confusions": lambda: figures.confusions(confusion_matrices()),
    "pattern_shares": lambda: figures.pattern_shares(pattern_shares_by_layer()),
    "pattern_share_estimates": lambda: figures.pattern_share_estimates(share_estimates()),
    "map_similarity": lambda: figures.map_similarity(map_similarities()),
    "relation_scores": lambda: figures.relation_scores(relation_score_results()),
    "special_by_layer": lambda: figures.special_by_layer(special_changes()),
    "cls_by_type": lambda: figures.cls_by_type(cls_changes(), tokentypes.TYPES),
    "stripe_types": lambda: figures.stripe_types(stripe_tables(), tokentypes.TYPES),
    "disabling_scan": lambda: figures.disabling_scan(disabling_scans()),
    "held_out_disabling": lambda: figures.held_out_disabling(held_out_results()),
    "norm_shares": lambda: figures.norm_shares(norm_result()),
    "weight_against_norm": lambda: figures.weight_against_norm(norm_result().by_head()),
    "context_mixing": lambda: figures.context_mixing(norm_result().mixing()),
    "null_space_twin": lambda: figures.null_space_twin(*twin_maps(), title="head 1-1"),
    "effective_sinks": lambda: figures.effective_sinks(per_head("cls", "sep", "punct"),
                                                       per_head("cls", "sep", "punct", scale=0.2)),
    "flow_seconds": lambda: figures.flow_seconds(attribution.flow_seconds(L, H, [4, 8]), limit=1.0),
    "word_scores": lambda: figures.word_scores(explanation()),
    "explanation_correlations": lambda: figures.explanation_correlations(
        attribution.correlations([explanation() for _ in range(3)])),
    "head_importance": lambda: figures.head_importance(importance_frames()),
    "pruning_curves": lambda: figures.pruning_curves(pruning_frames()),
    "pattern_removal": lambda: figures.pattern_removal(removal_frames()),
    "rollout_and_flow": lambda: figures.rollout_and_flow(PAIR_TOKENS[:6], token_maps()),
    "sink_profile": lambda: figures.sink_profile(sink_profile_result()),
    "key_bias": lambda: figures.key_bias(sink_heads_result().key_bias()),
    "no_op": lambda: figures.no_op(sink_heads_result().no_op(), rho=0.1, interval=(-0.2, 0.4)),
    "massive_activations": lambda: figures.massive_activations(massive_result()),
    "sink_interventions": lambda: figures.sink_interventions(
        {"[CLS] dim 99": intervention_result(), "LayerNorm outliers": intervention_result("outlier", ("disable",))}),
    "position_or_content": lambda: figures.position_or_content(position_frame()),
    "registers": lambda: figures.registers(register_frame()),
    "toy_variants": lambda: figures.toy_variants(toy_frame()),
    "patching_scan": lambda: figures.patching_scan(scan_frame()),
    "patching_controls": lambda: figures.patching_controls(controls_frame()),
    "mixing_maps": lambda: figures.mixing_maps(PAIR_TOKENS[:6], {name: random_row_stochastic(rng, (L, 6, 6))
                                                                 for name in mixing.METHODS}, layer=2),
    "mixing_agreement": lambda: figures.mixing_agreement(planted_scoreboard().agreement()),
    "deletion_curves": lambda: figures.deletion_curves(planted_scoreboard().curve_means()),
}


def scan_frame() -> pd.DataFrame:
    """A `termheads.scan` frame of a 2 x 3 model: every head, attention block and MLP with a share and interval."""
    rows = [(kind, layer, head) for layer in (1, 2) for kind, head in
            [("head", 1), ("head", 2), ("head", 3), ("attention", 0), ("mlp", 0)]]
    share = rng.uniform(-0.2, 0.6, len(rows))
    return pd.DataFrame({"component": [f"{k} {la}-{h}" for k, la, h in rows], "kind": [r[0] for r in rows],
                         "layer": [r[1] for r in rows], "head": [r[2] for r in rows], "share": share,
                         "low": share - 0.05, "high": share + 0.05, "pairs": 9})


def controls_frame() -> pd.DataFrame:
    """A `termheads.confirm` table: the chosen set, its controls (the best random set without an interval)."""
    return pd.DataFrame({"set": ["chosen (2-1, 2-3)", "random sets of 2 heads (mean of 5)", "best random set",
                                 "same-layer sets of 2 other heads (mean of 5)", "best same-layer set", "every head",
                                 "the last layer (everything)", "self-patch (chosen, from the base)"],
                         "share": [0.3, 0.0, 0.1, 0.08, 0.12, 0.5, 1.0, 0.0],
                         "low": [0.2, -0.1, np.nan, 0.02, np.nan, 0.4, 1.0, 0.0],
                         "high": [0.4, 0.1, np.nan, 0.11, np.nan, 0.6, 1.0, 0.0], "pairs": 9})


def planted_scoreboard() -> scoreboard.Scoreboard:
    """Deletion curves that grow with k (random below every method) and Spearman correlations near 0.7."""
    n, depth, n_random = 5, 3, 4
    curves = rng.uniform(0.05, 0.2, (n, len(scoreboard.SCORED) + n_random, depth)).cumsum(-1)
    curves[:, len(scoreboard.SCORED):] *= 0.3
    return scoreboard.Scoreboard(curves, rng.uniform(0.6, 0.8, (n, L, 5, 5)), depth, n_random)


def public_figures() -> dict[str, object]:
    """name -> function, for every public function defined in the figure modules (one per paper)."""
    return {name: f for module in (figures.clark, figures.kovaleva, figures.later, figures.recent,
                                                      figures.causal)
            for name, f in inspect.getmembers(module, inspect.isfunction)
            if f.__module__ == module.__name__ and not name.startswith("_")}


@pytest.mark.parametrize("name", sorted(public_figures().keys() | CASES.keys()))
def test_every_public_figure_draws_a_figure(name):
    """Each public figure has a case here and is a name of `figures`; called on synthetic results, it draws one
    Figure with data on it (returned, or the figure of the Axes returned; scipy's tree for the dendrogram)."""
    assert name in public_figures(), f"a case for {name}, which is no public figure"
    assert name in CASES, f"figures.{name} has no case in CASES"
    assert getattr(figures, name) is public_figures()[name], f"figures/__init__.py does not re-export {name}"
    plt.close("all")  # figures an earlier test left open
    drawn = CASES[name]()
    fig = plt.gcf() if isinstance(drawn, dict) else getattr(np.ravel(drawn)[0], "figure", drawn)
    assert isinstance(fig, Figure) and plt.get_fignums() == [fig.number]
    assert fig.axes and any(ax.has_data() for ax in fig.axes)
    alt = alttext.describe(fig)  # its alt text: what it shows, with numbers read from what it draws
    assert len(alt) >= 40 and any(ch.isdigit() for ch in alt), alt
    assert viz.figure_png(fig).startswith(b"\x89PNG")


# -- what particular figures mark ------------------------------------------------------------------------------
def test_save_keeps_text_as_text_and_refuses_an_unknown_format(tmp_path):
    fig, ax = plt.subplots()
    ax.set_title("head 3-9 <det>")
    svg = viz.save(ax, tmp_path / "fig.svg").read_text()
    assert "head 3-9 &lt;det&gt;" in svg  # a searchable, editable label, escaped
    with pytest.raises(ValueError, match="save as one of .png, .svg, .pdf"):
        viz.save(fig, tmp_path / "fig.jpg")


def test_sep_noop_figures():
    result = gradient_result()
    assert len(figures.attention_and_gradient(result).axes) == 2
    assert colour_bars(figures.sink_gradient_by_head(result)) == 1  # coloured by layer
    fig = figures.sink_ablation(ablation_result())
    assert [len(ax.get_legend_handles_labels()[0]) for ax in fig.axes] == [4, 4]  # 3 edits + the yardstick
    rendered(fig)


def test_value_norms_figure_marks_the_sink_threshold_and_colours_by_layer():
    fig = figures.value_norms(value_norm_frame(), threshold=0.4)
    assert colour_bars(fig) == 1
    ax = fig.axes[0]
    assert any(np.allclose(line.get_xdata(), 0.4) for line in ax.lines)
    assert np.isfinite(ax.collections[0].get_offsets()).all()  # a NaN output ratio falls back to the value ratio
    rendered(fig)


def test_broad_definitions_draws_both_thresholds():
    fig = figures.broad_definitions(broad_frame(), max_weight=0.1, entropy_above=3.8)
    ax = fig.axes[0]
    assert any(np.allclose(line.get_xdata(), 0.1) for line in ax.lines)
    assert any(np.allclose(line.get_ydata(), 3.8) for line in ax.lines)
    assert len(ax.get_legend_handles_labels()[0]) == 2
    rendered(fig)


def test_entropy_by_layer_draws_the_uniform_reference():
    fig = figures.entropy_by_layer(entropy_frame())
    assert all(any(np.allclose(line.get_ydata(), np.log(128)) for line in ax.lines) for ax in fig.axes)
    rendered(fig)


def test_syntax_figures_mark_the_best_head():
    example = parsed_example()
    assert len(figures.relation_head(example, 1, 2, "det")) == 2
    focused = np.zeros((L, H, 7, 7), dtype=np.float32)
    focused[:, :, 1:6, 2] = 1  # every word attends to "cat": right for "The" (det), wrong for "cat" (nsubj)
    focused[:, :, [0, 6], 0] = 1
    left, _ = figures.relation_head(parsed_example(focused), 1, 1, "det")
    assert left.get_title() == "det: head 1-1 (dependent → head),\n1 of 1 right on this sentence"
    left, _ = figures.relation_head(parsed_example(focused), 1, 1, "nsubj")
    assert left.get_title().endswith("0 of 1 right on this sentence")
    fig = figures.relation_heads([example, example, example], [("det", 1, 1, "dep->head"), ("nsubj", 2, 3, "head->dep"),
                                                               ("det", 2, 1, "dep->head")])
    assert sum(ax.axison for ax in fig.axes) == 0 and len(fig.axes) == 8  # 3 pairs drawn, the 4th left blank
    ax = figures.accuracy_grid(accuracy_frame(), title="det")
    assert ax.get_title() == "det: best head 2-1 = 90.0 %"
    boxes = [p for p in ax.patches if p.get_edgecolor()[:3] == (0, 0, 0)]
    assert len(boxes) == 1 and boxes[0].get_xy() == (-0.5, 0.5)  # head 1 of layer 2
    assert colour_bars(ax.figure) == 1
    rendered(ax)


def test_accuracy_by_rank_labels_the_last_rank_as_that_or_more():
    fig = figures.accuracy_by_rank(by_rank_frame())
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()][-1] == "3+\n(n = 2)"
    rendered(fig)


def test_probe_figures():
    results = synthetic_probes()
    fig = figures.probe_curves(results)
    assert len(fig.axes[0].lines) == 5 + 1  # the trained probes and right-branching
    fig = figures.probe_weights(results)
    assert colour_bars(fig) == 2
    notes = [t.get_text() for t in fig.axes[0].texts] + [t.get_text() for t in fig.axes[1].texts]
    assert "det" in notes and "nsubj" in notes  # the best maps of notebook 04, named in their cells
    rendered(fig)
    table = probes.weight_table(results)
    assert table.set_index(["head", "direction"]).loc[("1-2", "dep->head"), "best for (nb 04)"] == "det"
    assert table.set_index(["head", "direction"]).loc[("2-1", "head->dep"), "best for (nb 04)"] == "-"


def test_clustering_figures():
    result = synthetic_clusters()
    ax = figures.mds_map(result, "behaviour", highlight=2)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["broad (1)", "previous token (1)", "[CLS] (2)",
                                                                   "other (2)"]
    assert colour_bars(figures.mds_map(result, "entropy").figure) == 1
    with pytest.raises(ValueError, match="colour_by"):
        figures.mds_map(result, "label")
    tree = figures.dendrogram(result)
    assert sorted(tree["ivl"]) == sorted(result.heads["label"])
    rendered(figures.aligned_maps(result, synthetic_clusters()))
    fig = figures.permutation_tests(group_tests(result))
    assert fig.axes[0].axison and not fig.axes[1].axison
    rendered(fig)


def test_dark_secrets_figures():
    fig = figures.pattern_features(labelled_features(), patterns.THRESHOLDS)
    assert len(fig.axes[0].collections) == len(patterns.KINDS)
    assert colour_bars(figures.confusions(confusion_matrices())) == 2
    fig = figures.pattern_shares(pattern_shares_by_layer())
    assert len(fig.axes[0].patches) == L * len(patterns.KINDS)
    fig = figures.pattern_share_estimates(share_estimates())
    assert [ax.get_title() for ax in fig.axes if ax.get_visible()] == list(patterns.KINDS)
    assert colour_bars(figures.map_similarity(map_similarities())) == 2
    fig = figures.disabling_scan(disabling_scans())
    assert colour_bars(fig) == 1 and len(fig.axes[1].patches) == L  # one bar per layer
    rendered(fig)


def test_notebook_09_figures():
    fig = figures.held_out_disabling(held_out_results())
    assert [ax.get_title() for ax in fig.axes] == ["topic", "again"]
    rendered(fig)
    assert colour_bars(figures.relation_scores(relation_score_results())) == 2
    assert len(figures.special_by_layer(special_changes()).axes) == 2
    types = tokentypes.TYPES
    assert len(figures.cls_by_type(cls_changes(), types).axes[0].patches) == 2 * len(types)


@pytest.mark.parametrize("kind", ["map", "lines"])
def test_plot_heads_draws_one_titled_panel_per_head(kind):
    enc = make_encoded(PAIR_TOKENS, random_row_stochastic(rng, (L, H, len(PAIR_TOKENS), len(PAIR_TOKENS))))
    fig = viz.plot_heads(enc, {"first": (1, 1), "last": (2, 3)}, kind=kind)
    assert [ax.get_title() for ax in fig.axes if ax.get_label() != "<colorbar>"] == ["first", "last"]
    with pytest.raises(ValueError, match="kind"):
        viz.plot_heads(enc, {"x": (1, 1)}, kind="bars")


def _sink_and_prev(tokens):
    """Every token: 0.6 to [CLS], 0.3 to the previous token, 0.1 to itself ([CLS]: 1.0 to itself)."""
    n = len(tokens)
    attn = np.zeros((n, n))
    attn[0, 0] = 1.0
    for i in range(1, n):
        attn[i, 0] += 0.6
        attn[i, i - 1] += 0.3
        attn[i, i] += 0.1
    return attn


def test_plot_lines_fades_the_sink_and_keeps_top_k():
    from matplotlib.colors import to_hex

    enc = make_encoded(PAIR_TOKENS, _sink_and_prev(PAIR_TOKENS))
    n = len(PAIR_TOKENS)
    colours = lambda ax: [to_hex(line.get_color()) for line in ax.lines]  # noqa: E731
    every = colours(viz.plot_lines(enc, 1, 1, stop=None))
    assert len(every) == 1 + 3 * (n - 1) - 1  # row 1's "previous token" is [CLS] itself: one line of 0.9
    attn = _sink_and_prev(PAIR_TOKENS)
    into_special = int((attn[:, [j for j, t in enumerate(PAIR_TOKENS) if t in ("[CLS]", "[SEP]")]] > 0).sum())
    assert into_special == n + 3  # every row to [CLS], both [SEP]s to themselves, "it" to the first [SEP]
    assert every.count("#bbbbbb") == into_special and every.count(viz.PALETTE["prev"]) == len(every) - into_special
    top1 = colours(viz.plot_lines(enc, 1, 1, stop=None, top_k=1))
    assert top1 == ["#bbbbbb"] * n  # each token's heaviest line goes to [CLS], drawn pale
    top2 = viz.plot_lines(enc, 1, 1, stop=None, top_k=2)
    assert len(top2.lines) == 1 + 2 * (n - 1)  # [CLS]: one line; every other row its two heaviest
    plain = colours(viz.plot_lines(enc, 1, 1, stop=None, fade_special=False))
    assert set(plain) == {viz.PALETTE["prev"]}
    with pytest.raises(ValueError, match="top_k"):
        viz.plot_lines(enc, 1, 1, top_k=0)


def test_plot_head_scales_a_broad_head_and_shows_a_colour_bar():
    n = len(PAIR_TOKENS)
    broad = np.full((n, n), 1 / n)
    broad[0] = 0
    broad[0, 0] = 1.0  # one large cell, as [CLS] -> [CLS] in a broad head
    ax = viz.plot_head(make_encoded(PAIR_TOKENS, broad), 1, 1, vmax=None)
    image, = ax.images
    assert image.norm.vmax == pytest.approx(1 / n)  # not 1.0: the broad rows are not blank
    bars = [a for a in ax.figure.axes if a.get_label() == "<colorbar>"]
    assert len(bars) == 1 and bars[0].get_ylabel() == "attention"
    assert image.colorbar.extend == "max"
    fixed = viz.plot_head(make_encoded(PAIR_TOKENS, broad), 1, 1)
    assert fixed.images[0].norm.vmax == 1.0 and fixed.images[0].colorbar.extend == "neither"
    assert not viz.plot_head(make_encoded(PAIR_TOKENS, broad), 1, 1, colorbar=False).images[0].colorbar


def test_pattern_examples_draws_one_titled_map_per_kind():
    maps = pattern_maps()
    fig = figures.pattern_examples(maps, captions={"vertical": "head 2-3"})
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert [ax.get_title() for ax in panels] == list(maps)
    assert panels[0].get_xlabel() == "head 2-3" and panels[1].get_xlabel() == ""
    assert len(fig.axes) == len(maps) + 1  # one shared colour bar
    shown = panels[0].images[0].get_array()
    np.testing.assert_allclose(shown, maps["vertical"] / np.percentile(maps["vertical"], 99))  # own 99th pct.
    rendered(fig)
    with pytest.raises(ValueError, match="at least one"):
        figures.pattern_examples({})


def test_table1_dot_plot_puts_paper_and_run_side_by_side():
    from bertlook_utils import paper

    heads, baseline = table1_frames()
    fig = figures.table1(heads, baseline)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == len(paper.TABLE1) and labels[0] == "all (7-6 | 1-2)"
    assert any(label.startswith("compound (") for label in labels)  # the paper's nn, in spaCy's name
    paper_heads, run_heads = ax.collections[2].get_offsets(), ax.collections[5].get_offsets()  # after lines, offsets
    np.testing.assert_allclose(paper_heads[:, 0], paper.TABLE1["accuracy"])
    np.testing.assert_allclose(run_heads[:, 0], 100 * heads["accuracy"])
    rendered(fig)
    with pytest.raises(ValueError, match="no relation"):
        figures.table1(heads.assign(relation="xyz"), baseline)


# -- tokens and words drawn as they are ---------------------------------------------------------------------------
DOLLARS = ["$$", r"$\frac$", r"\$5", "a$b"]  # paired "$" opens mathtext: "$$" and "$\frac$" fail to parse


def dollar_passage() -> tuple[corefdata.Passage, np.ndarray]:
    passage, head_map = passage_and_map()
    words = list(passage.words)
    for mention, text in zip(passage.mentions, DOLLARS):
        words[mention.start:mention.end] = [text] + words[mention.start + 1:mention.end]
    return corefdata.Passage(passage.id, words, passage.mentions), head_map


def dollar_encoded() -> Encoded:
    tokens = ["[CLS]", *DOLLARS, "[SEP]"]
    return make_encoded(tokens, random_row_stochastic(rng, (L, H, len(tokens), len(tokens))))


def dollar_explanation() -> attribution.Explanation:
    scored = explanation(len(DOLLARS))
    return dataclasses.replace(scored, words=DOLLARS, scores=scored.scores.assign(word=DOLLARS))


DOLLAR_CASES = {  # every figure that writes a token or a word
    "head_figure": lambda: viz.head_figure(dollar_encoded(), 1, 1),
    "plot_lines": lambda: viz.plot_lines(dollar_encoded(), 1, 1),
    "relation_head": lambda: figures.relation_head(
        syntax.ParsedAttention(rng.dirichlet(np.ones(6), (L, H, 6)).astype(np.float32), [2, 0, 2, 2],
                               ["det", "ROOT", "punct", "punct"], DOLLARS), 1, 1, "det"),
    "antecedent_attention": lambda: figures.antecedent_attention(*dollar_passage()),
    "null_space_twin": lambda: figures.null_space_twin(*twin_maps()[:2], ["[CLS]", *DOLLARS, "[SEP]"]),
    "word_scores": lambda: figures.word_scores(dollar_explanation()),
    "rollout_and_flow": lambda: figures.rollout_and_flow(["[CLS]", *DOLLARS, "[SEP]"], token_maps()),
}


@pytest.mark.parametrize("name", DOLLAR_CASES)
def test_tokens_and_words_with_dollars_are_drawn_as_they_are(name, tmp_path):
    """A "$" in a token or a word is a dollar sign, never mathtext (which fails on "$$" and "$\\frac$")."""
    svg = viz.save(DOLLAR_CASES[name](), tmp_path / "figure.svg").read_text()
    texts = re.findall(r"<text\b[^>]*>([^<]*)</text>", svg)  # the mentions' labels add their numbers
    assert all(any(word in text for text in texts) for word in DOLLARS), f"not drawn as they are: {texts}"


def kovaleva_scans(intervals: bool) -> dict[str, pd.DataFrame]:
    """Two tasks' `disabling.Scan.frame` of 6 x 12 heads: topic's changes within ±2 points, pairs' one head at
    -12; with `intervals`, `low`/`high` that include 0 exactly for the heads of layer 1 and for layer 2 as a whole."""
    runs = disabling.runs(6, 12)
    frames = {}
    for name, worst in (("topic", -0.02), ("pairs", -0.12)):
        change = np.where(runs["layer"] == 0, 0.0, 0.01)
        change[1] = worst  # head 1-1
        frame = runs.assign(delta_accuracy=change)
        if intervals:
            unsure = ((runs["layer"] == 1) & (runs["head"] > 0)) | ((runs["layer"] == 2) & (runs["head"] == 0))
            frame = frame.assign(low=np.where(unsure, -0.05, 0.005), high=0.2)
        frames[name] = frame
    return frames


@pytest.mark.parametrize("intervals", [False, True])
def test_disabling_scan_has_one_symmetric_scale_and_greys_changes_whose_interval_includes_0(intervals):
    from matplotlib.colors import to_hex

    fig = figures.disabling_scan(kovaleva_scans(intervals))
    maps = [ax for ax in fig.axes if ax.images]
    assert [im.get_clim() for ax in maps for im in ax.images] == [(-12.0, 12.0)] * 2  # pairs' -12 sets both
    bars = [ax for ax in fig.axes if ax.patches]
    assert [ax.get_ylim() for ax in bars] == [(-12.0, 12.0)] * 2 and all(ax.lines for ax in bars)  # zero line
    topic = maps[0].images[0]
    masked = np.ma.getmaskarray(topic.get_array())
    assert masked[0].all() == intervals and not masked[1:].any()  # layer 1's heads grey, only with intervals
    assert to_hex(topic.cmap.get_bad()) == figures.kovaleva.UNSURE
    colours = [to_hex(bar.get_facecolor()) for bar in bars[0].patches]
    assert (colours[1] == figures.kovaleva.UNSURE) == intervals  # layer 2 as a whole
    assert figures.kovaleva.UNSURE not in colours[:1] + colours[2:]
    assert len(bars[0].patches) == 6 and len(maps) == 2
    assert not viz.unreadable(fig)


def test_relation_scores_show_score_minus_null_and_box_the_papers_pick():
    results = relation_score_results()
    fig = figures.relation_scores(results)
    maps = [ax for ax in fig.axes if ax.images]
    limit = max(np.abs(r.score() - r.null_percentile(99)).max() for r in results.values())
    for ax, result in zip(maps, results.values()):
        np.testing.assert_allclose(ax.images[0].get_array(), result.score() - result.null_percentile(99))
        assert ax.images[0].get_clim() == pytest.approx((-limit, limit))
        boxed = [(round(p.get_y() + 1.5), round(p.get_x() + 1.5)) for p in ax.patches]
        assert boxed == [tuple(h) for h in np.argwhere(result.top_heads(99)) + 1]  # the paper's pick alone
    assert "boxed: the paper's pick" in fig.get_suptitle()


def test_heterogeneous_panel_draws_the_papers_band():
    from bertlook_utils import paper

    fig = figures.pattern_share_estimates(share_estimates())
    panel = next(ax for ax in fig.axes if ax.get_title() == "heterogeneous")
    band, = [p for p in panel.patches if p.get_label() == "paper (BERT-base, GLUE)"]
    assert (band.get_y(), band.get_y() + band.get_height()) == pytest.approx(paper.DARK_SECRETS["heterogeneous_share"])
    assert all(not any(p.get_label().startswith("paper") for p in ax.patches) for ax in fig.axes if ax is not panel)
    assert "paper (BERT-base, GLUE)" in [t.get_text() for t in fig.legends[0].get_texts()]


def test_pattern_shares_wrap_into_a_model_by_task_grid_at_the_real_size():
    layers = pd.Index(range(1, 7), name="layer")
    shares = {(task, model): pd.DataFrame(rng.dirichlet(np.ones(len(patterns.KINDS)), 6), columns=list(patterns.KINDS),
                                          index=layers)
              for task in ("topic", "next_paragraph", "sentiment") for model in ("pre-trained", "fine-tuned")}
    fig = figures.pattern_shares(shares)
    assert [ax.get_title() for ax in fig.axes[:3]] == ["topic, pre-trained", "next_paragraph, pre-trained",
                                                       "sentiment, pre-trained"]
    assert len(fig.legends) == 1 and not viz.unreadable(fig)  # one legend, readable in the column


# -- notebook 10 at the real sizes: 3 tasks, 6 layers x 12 heads, a 20-token sentence ------------------------------
TASKS3 = ("topic", "next_paragraph", "sentiment")


def test_notebook_10_multi_task_figures_are_readable_at_the_real_size_with_one_legend():
    """Three tasks of 6 x 12 heads fit the book's column (the autouse fixture checks each figure); the curves and
    bars share one legend below the panels."""
    per_task = {task: head_frame({c: rng.random((6, 12)) for c in ("importance", "low", "high", "normalised")})
                for task in TASKS3}
    fig = figures.head_importance(per_task)
    assert [ax.get_title() for ax in fig.axes[:3]] == list(TASKS3) and "normalised" in fig.get_suptitle()
    curves, removal = pruning_frames()["topic"], removal_frames()["topic"]
    for fig in (figures.pruning_curves(dict.fromkeys(TASKS3, curves)),
                figures.pattern_removal(dict.fromkeys(TASKS3, removal))):
        assert len(fig.legends) == 1 and not any(ax.get_legend() for ax in fig.axes)
    assert len(figures.norm_shares(norm_result()).legends) == 1


def test_rollout_and_flow_share_one_colour_scale_up_to_the_largest_value():
    """The three maps on one power-law scale from 0 to the largest value of any of them, with one colour bar."""
    tokens = [f"t{i}" for i in range(20)]
    attn = random_row_stochastic(rng, (L, H, 20, 20)).astype(np.float64)
    maps = {"attention": attn[-1].mean(0), "rollout": attribution.rollout(attn)[-1], "flow": np.full((20, 20), 0.9)}
    fig = figures.rollout_and_flow(tokens, maps, gamma=0.5)
    images = [image for ax in fig.axes for image in ax.images]
    assert len(images) == 3 and colour_bars(fig) == 1
    assert len({id(image.norm) for image in images}) == 1  # one norm object: one scale
    norm = images[0].norm
    assert (norm.vmin, norm.vmax, norm.gamma) == (0, pytest.approx(0.9), 0.5)
    assert norm(0.9 / 4) == pytest.approx(0.5)  # a quarter of the top is half-way up the colours
    assert "0.5" in next(ax for ax in fig.axes if ax.get_label() == "<colorbar>").get_ylabel()


def test_null_space_twin_shares_the_maps_colour_bar_and_the_token_rows():
    attn, twin, tokens = twin_maps()
    fig = figures.null_space_twin(attn, twin, tokens)
    assert colour_bars(fig) == 2  # 0 to 1 for both maps, ± for the difference
    maps = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    fig.canvas.draw()
    shown = [[label.get_text() for label in ax.get_yticklabels() if label.get_visible()] for ax in maps]
    assert shown[0] == list(tokens) and shown[1] == shown[2] == []  # the tokens once, left of the first map


def test_word_scores_title_names_the_predicted_class():
    """The title reads the task's class name (`TaskData.labels`), "label 1" only when none is given."""
    scored = explanation()  # predicted 1
    assert figures.word_scores(scored, ("rotten", "fresh")).axes[0].get_title().startswith('predicted "fresh"')
    assert figures.word_scores(scored).axes[0].get_title().startswith("predicted label 1")


@pytest.mark.parametrize("kind, n, grid", [("map", 3, (2, 2)), ("map", 2, (1, 2)), ("lines", 4, (1, 4)),
                                           ("lines", 5, (2, 3)), ("lines", 6, (2, 3))])
def test_plot_heads_wraps_panels_into_even_rows(kind, n, grid):
    """At most 2 maps or 4 line panels a row, rows evened out, the empty places blank; one row's height each."""
    enc = make_encoded(PAIR_TOKENS, random_row_stochastic(rng, (L, H, len(PAIR_TOKENS), len(PAIR_TOKENS))))
    heads = {f"head {i}": divmod(i, H) for i in range(n)}
    fig = viz.plot_heads(enc, {title: (layer + 1, head + 1) for title, (layer, head) in heads.items()}, kind=kind,
                         height=3)
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert len(panels) == grid[0] * grid[1] and fig.get_size_inches()[1] == 3 * grid[0]
    assert [ax.get_title() for ax in panels[:n]] == list(heads)
    assert not any(ax.axison for ax in panels[n:])
    assert panels[0].get_subplotspec().get_gridspec().get_geometry() == grid
    rows, columns = viz.plot_heads(enc, {"a": (1, 1), "b": (1, 2)}, columns=1).axes[0].get_subplotspec() \
        .get_gridspec().get_geometry()
    assert (rows, columns) == (2, 1)


def test_mds_map_labels_the_heads_with_a_behaviour_without_overlaps():
    """annotate=True labels the heads that have a behaviour (not "other", drawn pale and small), no two labels
    overlapping; a list labels those heads; False none."""
    from matplotlib.colors import to_hex

    result = synthetic_clusters()
    result.heads[["x", "y"]] = [[0, 0], [0.01, 0], [0.5, 0.5], [0, 0.01], [0.01, 0.01], [1, 1]]  # four in a clump
    ax = figures.mds_map(result, "behaviour")
    notes = [t for t in ax.texts if t.get_text()]
    assert sorted(t.get_text() for t in notes) == sorted(result.heads.loc[result.heads["behaviour"] != "other",
                                                                          "label"])
    renderer = ax.figure.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in notes]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    other = ax.collections[-1]  # BEHAVIOURS end with "other"
    assert other.get_label().startswith("other") and to_hex(other.get_facecolor()[0]) == "#cccccc"
    assert [t.get_text() for t in figures.mds_map(result, "layer", annotate=["2-3"]).texts] == ["2-3"]
    assert not figures.mds_map(result, "behaviour", annotate=False).texts


# -- notebook 11: what the sink figures mark ------------------------------------------------------------------------
def test_sink_profile_draws_each_category_and_marks_eps():
    fig = figures.sink_profile(sink_profile_result(eps=0.35))
    rate, score, curve = fig.axes
    assert len(rate.lines) == len(score.lines) == len(SINK_CATEGORIES)
    assert [line.get_linestyle() for line in rate.lines[1:3]] == ["-", "--"]  # the first and second [SEP]
    eps_lines = [line for line in curve.lines if np.allclose(line.get_xdata(), 0.35)]
    assert len(eps_lines) == 1 and eps_lines[0].get_label() == "eps = 0.35"
    assert "eps = 0.35" in [t.get_text() for t in fig.legends[0].get_texts()]
    rendered(fig)


def test_key_bias_plots_every_head_by_margin_and_its_split():
    table = sink_heads_result().key_bias()
    table["sink_mass"] = [0.1, 0.5, 0.2, 0.6, 0.7, 0.0]
    fig = figures.key_bias(table, threshold=0.3)
    assert colour_bars(fig) == 1  # one layer scale for both panels
    margin, split = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    np.testing.assert_allclose(margin.collections[0].get_offsets(), table[["margin", "sink_mass"]])
    hollow, filled = split.collections[:2]
    np.testing.assert_allclose(filled.get_offsets(), table.loc[table["sink_mass"] > 0.3,
                                                               ["margin_direction", "margin_length"]])
    assert len(hollow.get_offsets()) == 3 and any(np.allclose(line.get_ydata(), 0.3) for line in margin.lines)
    rendered(fig)


def test_no_op_shows_the_callers_rank_correlation_only():
    table = sink_heads_result().no_op()
    ax = figures.no_op(table, rho=-0.06, interval=(-0.2, 0.1)).axes[0]
    assert ax.get_title().endswith("Spearman ρ = -0.06 [-0.20, 0.10]")
    np.testing.assert_allclose(ax.collections[-1].get_offsets(), table[["sink_mass", "update_ratio"]])
    assert "ρ" not in figures.no_op(table).axes[0].get_title()


def test_massive_activations_mark_sun_et_al_thresholds_and_the_carrier():
    fig = figures.massive_activations(massive_result())
    ratio, magnitude = fig.axes
    assert any(np.allclose(line.get_ydata(), massive.RELATIVE) for line in ratio.lines)
    assert any(np.allclose(line.get_ydata(), massive.ABSOLUTE) for line in magnitude.lines)
    assert [t.get_text() for t in ratio.texts] == ["[CLS] 99\n100%"] * (L + 1)
    assert [t.get_text() for t in ratio.get_xticklabels()] == ["emb.", "1", "2"]
    rendered(fig)


def test_massive_activations_draw_every_site_and_the_layernorm_cap():
    before, after = massive_result(), massive_result()
    ffn = massive.MassiveActivations(before.maximum[:, 1:] * 2, before.median[:, 1:], before.above_absolute[:, 1:],
                                     before.massive[:, 1:], before.top[before.top["layer"] > 0], "ffn", 1)
    cap = [15.0, 16.0, 17.0]
    fig = figures.massive_activations({"pre_norm": before, "ffn": ffn, "output": after}, cap)
    magnitude = fig.axes[1]
    lines = {line.get_label(): line for line in magnitude.lines}
    np.testing.assert_allclose(lines["largest |x|, feed-forward output"].get_xdata(), [1, 2])  # no state 0
    np.testing.assert_allclose(lines["largest |x|, feed-forward output"].get_ydata(), ffn.maximum.mean(0))
    np.testing.assert_allclose(lines["the most a LayerNorm can output"].get_ydata(), cap)
    assert "before the LayerNorm" in fig.axes[0].get_title()
    rendered(fig)


def test_sink_interventions_put_each_edit_beside_its_control_and_the_yardstick():
    fig = figures.sink_interventions({"[CLS] dim 99": intervention_result(reference=0.6),
                                      "LayerNorm outliers": intervention_result("outlier", ("disable",), 0.5)})
    mass, distance = fig.axes
    assert [t.get_text() for t in mass.get_yticklabels()] == ["[CLS] dim 99: set to 0", "[CLS] dim 99: set to the mean",
                                                              "LayerNorm outliers"]
    yardsticks = sorted(line.get_xdata()[0] for line in distance.lines if line.get_label() == "yardstick: two inputs")
    assert yardsticks == [0.5, 0.6, 0.6]  # each row at its own intervention's reference
    assert all(np.allclose(line.get_xdata(), 0.33) for line in mass.lines if line.get_label() == "unedited")
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert {"targeted", "random dimensions (2 draws)", "unedited", "yardstick: two inputs"} <= set(labels)
    with pytest.raises(ValueError, match="at least one"):
        figures.sink_interventions({})
    rendered(fig)


def test_position_and_register_figures_draw_one_line_per_variant_where_measured():
    fig = figures.position_or_content(position_frame())
    first, content, other = fig.axes
    assert len(first.lines) == len(other.lines) == 4 and len(content.lines) == 2  # no [CLS] content on a stand-in
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "original", 'position 0 holds "the"', 'position 0 holds "[SEP]"', "[CLS] swapped with the middle token"]
    fig = figures.registers(register_frame())
    assert [ax.get_title() for ax in fig.axes] == ["sink mass on position 0", "sink mass on the added tokens",
                                                   "sink mass on the separators", "sink mass per ordinary token"]
    assert len(fig.axes[1].lines) == 3  # the original adds nothing
    with pytest.raises(ValueError, match="lacks"):
        figures.registers(register_frame().drop(columns="added"))
    rendered(fig)


def test_toy_variants_show_each_seed_and_the_mean_and_chance():
    frame = toy_frame()
    fig = figures.toy_variants(frame)
    assert len(fig.axes) == 4 and [t.get_text() for t in fig.axes[0].get_yticklabels()] == list(
        dict.fromkeys(frame["variant"]))
    sink = fig.axes[0]
    assert sum(len(c.get_offsets()) for c in sink.collections) == len(frame)  # every seed a dot
    np.testing.assert_allclose([bar.get_width() for bar in sink.patches],
                               frame.groupby("variant", sort=False)["sink_mass"].mean())
    assert any(np.allclose(line.get_xdata(), 1 / 32) for line in fig.axes[3].lines)  # chance
    rendered(fig)


# -- colours that survive colour blindness ----------------------------------------------------------------------
CVD = ("deuteranomaly", "protanomaly", "tritanomaly")  # colorspacious's names; at severity 100: -anopia


def seen_difference(a: str, b: str) -> dict[str, float]:
    """ΔE in CAM02-UCS between colours `a` and `b` as seen with normal vision and with each full colour-vision
    deficiency of `CVD` (Machado et al.'s simulation, as colorspacious implements it)."""
    from colorspacious import cspace_convert
    from matplotlib.colors import to_rgb

    def seen(colour: str, cvd: str | None) -> np.ndarray:
        rgb = np.array(to_rgb(colour))
        if cvd is not None:
            rgb = np.clip(cspace_convert(rgb, {"name": "sRGB1+CVD", "cvd_type": cvd, "severity": 100}, "sRGB1"), 0, 1)
        return cspace_convert(rgb, "sRGB1", "CAM02-UCS")

    return {cvd or "normal": float(np.linalg.norm(seen(a, cvd) - seen(b, cvd))) for cvd in (None, *CVD)}


def test_cvd_simulation_finds_the_red_green_pair_the_review_measured():
    """The check can fail: the kit's former right/wrong pair, green #2a9d4b and red #d1495b, is clear to normal
    vision and nearly one colour under deuteranopia (the review measured ΔE 4.8)."""
    seen = seen_difference("#2a9d4b", "#d1495b")
    assert seen["normal"] > 30 and seen["deuteranomaly"] < 6


def test_every_two_colours_of_the_palette_differ_under_each_colour_vision_deficiency():
    """Every two distinct colours a figure may draw side by side (the palette, the pattern, method and probe
    colours built from it) are at least 10 ΔE (CAM02-UCS) apart for normal vision and under simulated
    deuteranopia, protanopia and tritanopia; the pairs a figure must tell apart are distinct colours."""
    from bertlook_utils.present.figures import causal, clark

    groups = [viz.PALETTE, viz.PATTERN_COLOURS, causal.METHOD_COLOURS | causal.GRADIENT_COLOURS, clark.PROBE_COLOURS]
    for group in groups[1:]:  # the palette names some colours twice (right is next's, run is sep's)
        assert len(set(group.values())) == len(group), group
    colours = sorted({c.lower() for group in groups for c in group.values()})
    closest = min((min(seen_difference(a, b).values()), a, b) for i, a in enumerate(colours) for b in colours[i + 1:])
    assert closest[0] >= 10, closest
    for a, b in (("right", "wrong"), ("paper", "run")):
        assert viz.PALETTE[a] != viz.PALETTE[b]
