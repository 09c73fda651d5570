"""Layers and heads are 1-indexed everywhere: every public function with a `layer` or `head` parameter refuses
layer 0, head 0, one past the model's last and a bool, with an error that names the argument (layer 0 never draws
or scores the last head by negative indexing), except the listed functions that count from 0 or whose `head` is
something else. A new public function with such a parameter and no case here fails the enumeration test.
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from builders import PAIR_TOKENS, make_encoded, random_row_stochastic  # noqa: E402

import bertlook_utils  # noqa: E402
from bertlook_utils import (  # noqa: E402
    conventions, coref, figures, identifiability, relations, syntax, tokentypes, views, viz, widgets)
from bertlook_utils.exercises import checker, nb12 as exercises_nb12  # noqa: E402
from bertlook_utils.extract import Batch  # noqa: E402
from bertlook_utils.parses import Sentence  # noqa: E402
from bertlook_utils.readings import nb04, nb12  # noqa: E402
from bertlook_utils.analyses.sinks import heads as sink_heads, massive  # noqa: E402

L, H = 2, 3  # the synthetic inputs' model; the tiny random BERT (fixture `tiny`) has 2 x 4
TINY = (2, 4)
rng = np.random.default_rng(0)

# Public functions with a `layer` or `head` parameter that is not a 1-indexed head of a model, and why.
NOT_ONE_INDEXED = {
    # 0-based on purpose: layers and heads as intervene.edit_attention counts them (each docstring says so)
    "core.intervene.value_projection", "core.intervene.uniform_head", "core.intervene.drain_tokens",
    "core.intervene.drain_random", "analyses.gradients.output_projection", "analyses.norms.attention_layernorm",
    "analyses.norms.head_vectors", "analyses.norms.decompose_layer", "analyses.norms.contribution_norms",
    # labels, not indices: no model to check against, and run_label's 0 means "nothing" / "the whole layer"
    "core.conventions.head_label", "analyses.disabling.run_label",
    # records of a reading: their fields hold the head an analysis found, they look nothing up by it
    "lab.readings.nb00.StrongestHead.__init__", "lab.readings.nb02.SinkAblationReading.__init__",
    "lab.readings.nb09.Effect.__init__",
    # a hidden-state index, 0 = the embeddings' output, l = layer l's output (as output_hidden_states counts)
    "analyses.sinks.massive.set_hidden", "analyses.sinks.massive.massive_intervention",
    # the same for the structural probes' layers (0 = the embeddings), checked against the results they read
    "lab.readings.nb13.ranks", "lab.readings.nb13.sentence_tree", "present.figures.vectors.rank_sweep",
    "present.figures.vectors.structural_tree", "lab.readings.nb13.RanksReading.__init__",
    "lab.readings.nb13.SentenceReading.__init__",
    # `head` is not an attention head: a classifier module, a word's syntactic head
    "analyses.disabling.scan_logits", "analyses.finetune.FineTuned.__init__", "data.corefdata.Mention.__init__",
    "data.parsecheck.Arc.__init__",
    # 0-based on purpose, as intervene counts layers (the docstring says so); a reading's record
    "analyses.mixing.value_zeroed_states", "lab.readings.nb12.MapsReading.__init__",
}


def public_functions_with_layer_or_head() -> set[str]:
    """Every public function and method (`__init__` included) of the package with a parameter named `layer` or
    `head`, as "layer.module.name" ("analyses.syntax.head_outcomes", "present.widgets.HeadExplorer.__init__")."""
    found = set()
    for info in pkgutil.walk_packages(bertlook_utils.__path__, "bertlook_utils."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        module = importlib.import_module(info.name)
        where = info.name.removeprefix("bertlook_utils.")
        for name, value in vars(module).items():
            if name.startswith("_") or getattr(value, "__module__", None) != info.name:
                continue
            functions = {name: value} if inspect.isfunction(inspect.unwrap(value)) else {}  # @functools.cache too
            if inspect.isclass(value):
                functions |= {f"{name}.{m}": inspect.unwrap(getattr(value, m)) for m, member in vars(value).items()
                              if (not m.startswith("_") or m == "__init__")
                              and inspect.isfunction(getattr(member, "__func__", member))}
            found |= {f"{where}.{qualified}" for qualified, function in functions.items()
                      if {"layer", "head"} & set(inspect.signature(function).parameters)}
    return found


# -- minimal valid inputs (2 layers x 3 heads unless said) ------------------------------------------
WORDS = ["The", "dog", "chased", "a", "cat", "."]
HEADS, RELATIONS = [2, 3, 0, 5, 3, 3], ["det", "nsubj", "ROOT", "det", "dobj", "punct"]
SENTENCE = Sentence(tuple(WORDS), tuple(HEADS), tuple(RELATIONS), ("DET", "NOUN", "VERB", "DET", "NOUN", "PUNCT"),
                    ("DT", "NN", "VBD", "DT", "NN", "."), "A", "A#0")


def parsed() -> syntax.ParsedAttention:
    return syntax.ParsedAttention(random_row_stochastic(rng, (L, H, len(WORDS) + 2, len(WORDS) + 2)), HEADS,
                                  RELATIONS, WORDS)


def encoded():
    return make_encoded(PAIR_TOKENS, random_row_stochastic(rng, (L, H, len(PAIR_TOKENS), len(PAIR_TOKENS))))


def hidden_of(tiny) -> torch.Tensor:
    """A layer input [1, 3, D] for the tiny encoder: three tokens of ones."""
    return torch.ones(1, 3, tiny.model.config.hidden_size)


def coref_result() -> coref.CorefResult:
    """No mentions: `failures` of a valid head is an empty table."""
    mentions = pd.DataFrame(columns=["id", "mention", "text", "type", "half", "passage", "rank"])
    return coref.CorefResult([], mentions, np.zeros((0, L, H), int), np.zeros((0, L, H), bool), pd.DataFrame(),
                             (1, 1), pd.DataFrame())


def relation_scores() -> relations.RelationScores:
    maps = [random_row_stochastic(rng, (L, H, len(WORDS) + 2, len(WORDS) + 2))]
    return relations.score_maps(maps, [relations.Frame(0, 2, ((3, 5),), ("dobj",))], n_draws=100)


def token_types() -> tokentypes.TokenTypeAttention:
    tokens = ["[CLS]", *WORDS, "[SEP]"]
    enc = make_encoded(tokens, random_row_stochastic(rng, (L, H, len(tokens), len(tokens))))
    return tokentypes.of_batches([Batch.from_encoded(enc)], [SENTENCE])


# name -> (call(layer, head, tiny), n_layers, n_heads): n_heads None for a function of a layer only, n_layers
# None where the layer has no upper bound (head_index knows only the number of heads)
CASES = {
    "core.conventions.check_head": (lambda layer, head, tiny: conventions.check_head(layer, head, L, H), L, H),
    "core.conventions.head_index": (lambda layer, head, tiny: conventions.head_index(layer, head, H), None, H),
    "analyses.syntax.head_outcomes": (
        lambda layer, head, tiny: syntax.head_outcomes(syntax.score_examples([parsed()]), "det", layer, head,
                                                       "dep->head"), L, H),
    "analyses.coref.failures": (lambda layer, head, tiny: coref.failures(coref_result(), layer, head), L, H),
    "analyses.relations.RelationScores.examples": (
        lambda layer, head, tiny: relation_scores().examples([SENTENCE], layer, head), L, H),
    "analyses.identifiability.head_values": (
        lambda layer, head, tiny: identifiability.head_values(tiny, "the dog chased a cat", layer, head), *TINY),
    "analyses.tokentypes.TokenTypeAttention.cls_by_type": (
        lambda layer, head, tiny: token_types().cls_by_type(layer), L, None),
    "analyses.tokentypes.TokenTypeAttention.stripe_table": (
        lambda layer, head, tiny: token_types().stripe_table(layer=layer), L, None),
    "analyses.tokentypes.cls_change": (
        lambda layer, head, tiny: tokentypes.cls_change(*[token_types()] * 2, layer), L, None),
    "analyses.tokentypes.exclusive_cls_change": (
        lambda layer, head, tiny: tokentypes.exclusive_cls_change(*[token_types()] * 2, layer), L, None),
    "present.figures.clark.relation_head": (
        lambda layer, head, tiny: figures.relation_head(parsed(), layer, head, "det"), L, H),
    "present.viz.head_map": (lambda layer, head, tiny: viz.head_map(encoded(), layer, head), L, H),
    "analyses.sinks.heads.queries_keys": (
        lambda layer, head, tiny: sink_heads.queries_keys(tiny.model, layer, hidden_of(tiny), TINY[1]), TINY[0], None),
    "analyses.sinks.heads.update_ratios": (
        lambda layer, head, tiny: sink_heads.update_ratios(tiny.model, layer, hidden_of(tiny),
                                                           torch.full((1, TINY[1], 3, 3), 1 / 3),
                                                           torch.ones(1, 3, dtype=torch.bool), TINY[1]),
        TINY[0], None),
    "analyses.sinks.heads.row_updates": (
        lambda layer, head, tiny: sink_heads.row_updates(tiny.model, layer, hidden_of(tiny),
                                                         torch.full((1, TINY[1], 3, 3), 1 / 3),
                                                         torch.ones(1, 3, dtype=torch.bool), TINY[1]),
        TINY[0], None),
    "analyses.sinks.massive.layernorm": (lambda layer, head, tiny: massive.layernorm(tiny.model, layer), TINY[0], None),
    "lab.readings.nb04.strongest_targets": (
        lambda layer, head, tiny: nb04.strongest_targets(encoded(), layer, head, "[CLS]"), L, H),
    "present.viz.plot_head": (lambda layer, head, tiny: viz.plot_head(encoded(), layer, head), L, H),
    "present.viz.plot_lines": (lambda layer, head, tiny: viz.plot_lines(encoded(), layer, head), L, H),
    "present.viz.head_figure": (lambda layer, head, tiny: viz.head_figure(encoded(), layer, head), L, H),
    "present.views.head_view": (lambda layer, head, tiny: views.head_view(encoded(), layer), L, None),
    "present.widgets.HeadExplorer.__init__": (
        lambda layer, head, tiny: widgets.HeadExplorer([encoded()], layer, head), L, H),
    "present.widgets.head_explorer": (lambda layer, head, tiny: widgets.head_explorer([encoded()], layer, head), L, H),
    "present.figures.causal.mixing_maps": (
        lambda layer, head, tiny: figures.mixing_maps(PAIR_TOKENS[:3], {"attention": np.full((L, 3, 3), 1 / 3)},
                                                      layer), L, None),
    "lab.readings.nb12.one_sentence": (
        lambda layer, head, tiny: nb12.one_sentence({"attention": np.full((L, 3, 3), 1 / 3)}, layer), L, None),
    "lab.exercises.nb12.real_zeroed": (
        lambda layer, head, tiny: exercises_nb12.real_zeroed(checker.RealInputs(tiny), layer), TINY[0], None),
    "lab.exercises.checker.RealInputs.head_map": (
        lambda layer, head, tiny: checker.RealInputs(tiny).head_map(layer, head), *TINY),
}


def bad_values(n_layers: int | None, n_heads: int | None) -> list[tuple[str, object, object, type]]:
    """(argument, layer, head, error) for layer 0, head 0, one past the last and a bool, on a valid other argument."""
    cases = [("layer", 0, 1, ValueError), ("layer", True, 1, TypeError)]
    cases += [("layer", n_layers + 1, 1, ValueError)] if n_layers is not None else []
    cases += [("head", 1, 0, ValueError), ("head", 1, n_heads + 1, ValueError),
              ("head", 1, True, TypeError)] if n_heads is not None else []
    return cases


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_every_public_function_with_a_layer_or_head_has_a_case_or_is_listed_as_not_1_indexed():
    found = public_functions_with_layer_or_head()
    assert not NOT_ONE_INDEXED & set(CASES)
    assert found - NOT_ONE_INDEXED - set(CASES) == set(), "add a case to CASES (or, if 0-based, to NOT_ONE_INDEXED)"
    assert (NOT_ONE_INDEXED | set(CASES)) - found == set(), "a listed function no longer takes `layer` or `head`"


@pytest.mark.parametrize("name, argument, layer, head, error", [
    (name, *bad) for name, (_, n_layers, n_heads) in CASES.items() for bad in bad_values(n_layers, n_heads)])
def test_layer_or_head_outside_the_model_is_refused_with_the_arguments_name(name, argument, layer, head, error, tiny):
    call, n_layers, n_heads = CASES[name]
    call(1, 1, tiny)  # the inputs are valid: the error below is about the head alone
    call(n_layers or 1, n_heads or 1, tiny)
    limit = n_layers if argument == "layer" else n_heads
    valid = "1 or more" if limit is None else f"1-{limit}"
    with pytest.raises(error, match=rf"\b{argument} must be (an integer|{valid} \(1-indexed)"):
        call(layer, head, tiny)


def test_layer_0_is_not_the_last_layer_in_the_three_functions_that_wrapped_around():
    """The review's probe: failures(res, 0, 0) was failures(res, L, H), and the figure was titled "head 0-0"."""
    scores = syntax.score_examples([parsed()])
    for call in (lambda: syntax.head_outcomes(scores, "det", 0, 0, "dep->head"),
                 lambda: coref.failures(coref_result(), 0, 0), lambda: figures.relation_head(parsed(), 0, 0, "det")):
        with pytest.raises(ValueError, match=r"layer must be 1-2 \(1-indexed, as in the papers\); got 0"):
            call()
    assert not plt.get_fignums()  # refused before any figure is made
    with pytest.raises(TypeError, match="layer must be an integer"):
        coref.failures(coref_result(), head=2)  # a head alone is not the best head's layer


@pytest.mark.parametrize("draw", [
    lambda: figures.relation_heads([parsed()] * 2, [("det", 1, 1, "dep->head"), ("nsubj", 0, 1, "dep->head")]),
    lambda: viz.plot_heads(encoded(), {"a": (1, 1), "b": (2, 0)}),
    lambda: viz.heatmap_by_head(np.zeros((L, H)), boxes=[(3, 1)]),
    lambda: viz.heatmap_by_head(np.zeros((L, H)), notes={(1, 4): "x"}),
    lambda: widgets.GalleryExplorer([("g", encoded(), 1, 1, "ok"), ("g", encoded(), 0, 2, "bad")]),
    lambda: views.head_view(encoded(), 1, heads=[1, 0]),
    lambda: views.model_view(encoded(), include_layers=[3]),
    lambda: views.model_view(encoded(), include_heads=[True]),
])
def test_layers_and_heads_inside_sequences_are_checked_before_anything_is_drawn(draw):
    with pytest.raises((ValueError, TypeError), match=r"(layer|head|include_layers|include_heads|heads) must be"):
        draw()
    assert not plt.get_fignums()
