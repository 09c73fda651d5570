"""disabling: the fast scan equals one edited forward pass per run (BERT with its [CLS]-only last layer, and
DistilBERT through whole layers) while running fewer layers; the selection of heads never reads the evaluation
half, and the evaluation numbers read nothing else; intervals, tables and bad input."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from bertlook_utils import clspass, disabling, intervene
from bertlook_utils.extract import batches
from bertlook_utils.finetune import FineTuned
from bertlook_utils.models import default_model_path, load_encoder
from bertlook_utils.tasks import Example, TaskData

TEXTS = ["the cat sat on the mat", "a dog ran", ("rain fell all day long on the town", "snow"),
         "birds sang in the quiet hills at dawn while the river ran", ("it", "was late")]


# -- tiny models whose attention is sharp, so that disabling a head changes the logits -------------------
def save_sharp_model(folder, kind: str):
    """A random 3-layer, 3-head BERT or DistilBERT (hidden 24) with large initial weights (peaked attention)."""
    from transformers import AutoTokenizer, BertConfig, BertModel, DistilBertConfig, DistilBertModel

    tokenizer = AutoTokenizer.from_pretrained(default_model_path())
    torch.manual_seed(0)
    if kind == "bert":
        model = BertModel(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=24, num_hidden_layers=3,
                                     num_attention_heads=3, intermediate_size=32, max_position_embeddings=128,
                                     initializer_range=0.3))
    else:
        model = DistilBertModel(DistilBertConfig(vocab_size=tokenizer.vocab_size, dim=24, n_layers=3, n_heads=3,
                                                 hidden_dim=32, max_position_embeddings=128, initializer_range=0.3))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module", params=["bert", "distilbert"])
def sharp(request, tmp_path_factory):
    return load_encoder(save_sharp_model(tmp_path_factory.mktemp(request.param), request.param))


def classifier(n_labels: int = 3, seed: int = 1) -> torch.nn.Linear:
    torch.manual_seed(seed)
    head = torch.nn.Linear(24, n_labels)
    torch.nn.init.normal_(head.weight, std=1.0)
    return head


def reference_logits(encoder, head, batch) -> torch.Tensor:
    """[B, R, C] the slow way: one whole forward pass per run, with the run's heads made uniform."""
    out = []
    with torch.inference_mode():
        for layer, h in disabling.runs(encoder.n_layers, encoder.n_heads).itertuples(index=False):
            if layer == 0:
                out.append(head(encoder.model(**batch.model_inputs).last_hidden_state[:, 0]))
                continue
            edit = intervene.uniform_head(layer - 1, None if h == 0 else h - 1, valid=batch.valid)
            with intervene.edit_attention(encoder.model, edit):
                out.append(head(encoder.model(**batch.model_inputs).last_hidden_state[:, 0]))
    return torch.stack(out, 1)


def test_the_fast_scan_equals_one_edited_forward_pass_per_run(sharp):
    head = classifier()
    batch = next(batches(sharp, TEXTS, len(TEXTS), attention=False))
    assert not batch.valid.all()  # padded: uniform attention must cover each input's own tokens only
    expected = reference_logits(sharp, head, batch)
    found = disabling.scan_logits(sharp.model, head, batch.model_inputs, batch.valid)
    assert found.shape == (len(TEXTS), 1 + 3 * 3 + 3, 3)
    assert (expected - expected[:, :1]).abs().max() > 0.1  # disabling matters in this model: the test can fail
    torch.testing.assert_close(found, expected, rtol=1e-4, atol=1e-5)


def test_the_fast_scan_runs_fewer_layers(sharp):
    """3 layers: 3 for the unedited pass, then 2 + 1 + 0 for the variants of layers 1, 2, 3 in BERT (whose last
    layer's [CLS] row is computed apart) or 3 + 2 + 1 in DistilBERT, against 13 runs x 3 layers."""
    from transformers import BertModel

    layers = intervene.encoder_layers(sharp.model)
    first_token = clspass.first_token_step(layers[-1]) is not None
    assert first_token == isinstance(sharp.model, BertModel)
    batch = next(batches(sharp, TEXTS[:2], 2, attention=False))
    calls = []
    hooks = [layer.register_forward_hook(lambda *_: calls.append(1)) for layer in layers]
    try:
        disabling.scan_logits(sharp.model, classifier(), batch.model_inputs, batch.valid)
    finally:
        for hook in hooks:
            hook.remove()
    assert len(calls) == (3 + 3 if first_token else 3 + 6)


def test_the_scan_keeps_the_input_order_and_is_cached(sharp, tmp_path):
    """Inputs run in order of length; the scan gives them back in the task's order, each as if run alone."""
    head = classifier(2)
    examples = tuple(Example(*(t if isinstance(t, tuple) else (t, None)), i % 2) for i, t in enumerate(TEXTS))
    data = TaskData("tiny", ("a", "b"), examples, examples)
    tuned = FineTuned("tiny", sharp, head, None, 32, pd.DataFrame(columns=["step", "epoch", "loss"]))
    scan = disabling.disabling_scan(tuned, data, batch_size=2, cache_dir=tmp_path, progress=False)
    assert scan.logits.shape == (5, 13, 2) and list(scan.labels) == [0, 1, 0, 1, 0]
    for i, item in enumerate(TEXTS):
        alone = next(batches(sharp, [item], 1, attention=False, max_tokens=32))
        np.testing.assert_allclose(scan.logits[i], disabling.scan_logits(sharp.model, head, alone.model_inputs,
                                                                         alone.valid)[0].numpy(), rtol=1e-4, atol=1e-5)
    again = disabling.disabling_scan(tuned, data, batch_size=2, cache_dir=tmp_path, progress=False)
    assert np.array_equal(again.logits, scan.logits) and list(tmp_path.glob("disabling_scan-*"))
    assert disabling.disabling_scan(tuned, data, 3, cache_dir=None, progress=False).logits.shape == (3, 13, 2)
    with pytest.raises(ValueError, match="no test examples"):
        disabling.disabling_scan(tuned, data, 0, cache_dir=None, progress=False)


# -- synthetic scans --------------------------------------------------------------------------------
def scan_from_correct(correct: np.ndarray, margin: np.ndarray | None = None, task: str = "t") -> disabling.Scan:
    """A 2-label scan of 2 layers x 2 heads (7 runs) whose run r classifies input i right iff correct[i, r], with
    logit margin |margin[i, r]| (1 by default): the loss falls as the margin grows."""
    n, r = correct.shape
    margin = np.ones((n, r)) if margin is None else margin
    labels = np.arange(n) % 2
    signed = np.where(correct, 1.0, -1.0) * margin
    logits = np.zeros((n, r, 2), dtype=np.float32)
    logits[np.arange(n), :, labels] = signed / 2
    logits[np.arange(n), :, 1 - labels] = -signed / 2
    return disabling.Scan(task, disabling.runs(2, 2), logits, labels)


def test_runs_and_the_per_run_frame():
    runs = disabling.runs(2, 2)
    assert list(zip(runs["layer"], runs["head"])) == [(0, 0), (1, 1), (1, 2), (2, 1), (2, 2), (1, 0), (2, 0)]
    assert [disabling.run_label(layer, h) for layer, h in zip(runs["layer"], runs["head"])] == [
        "none", "1-1", "1-2", "2-1", "2-2", "layer 1", "layer 2"]
    correct = np.ones((4, 7), dtype=bool)
    correct[:2, 2] = False  # head 1-2 breaks inputs 0 and 1
    correct[3, 6] = False  # layer 2 breaks input 3
    scan = scan_from_correct(correct)
    frame = scan.frame()
    assert list(frame.columns) == ["layer", "head", "accuracy", "loss", "delta_accuracy", "delta_loss"]
    assert list(frame["delta_accuracy"]) == [0, 0, -0.5, 0, 0, 0, -0.25]
    assert frame["loss"].iloc[0] == pytest.approx(np.log1p(np.exp(-1.0)))  # margin 1 on every input
    assert scan.frame(np.array([2, 3]))["delta_accuracy"].tolist() == [0, 0, 0, 0, 0, 0, -0.5]


def test_split_halves_is_stratified_seeded_and_disjoint():
    labels = np.array([0] * 7 + [1] * 6 + [2] * 3)
    selection, evaluation = disabling.split_halves(labels, seed=3)
    assert np.array_equal(np.sort(np.concatenate([selection, evaluation])), np.arange(16))
    assert abs(len(selection) - len(evaluation)) <= 1
    for label in (0, 1, 2):
        assert abs((labels[selection] == label).sum() - (labels[evaluation] == label).sum()) <= 1
    again = disabling.split_halves(labels, seed=3)
    assert np.array_equal(again[0], selection) and np.array_equal(again[1], evaluation)
    assert not np.array_equal(disabling.split_halves(labels, seed=4)[0], selection)
    with pytest.raises(ValueError, match="at least two"):
        disabling.split_halves(np.array([1]))


def test_choose_breaks_ties_by_loss_then_by_order():
    correct = np.zeros((4, 7), dtype=bool)
    correct[2:] = True  # nothing disabled: 2 of 4 right
    correct[1, 1:5] = True  # every single head turns input 1 right: +1/4 each
    correct[:, 6] = False  # layer 2: 0 of 4 (-1/2); layer 1 changes nothing
    margin = np.ones((4, 7))
    margin[1:, 3] = 3.0  # head 2-1 is right by a larger margin: the lowest loss
    picks = disabling.choose(scan_from_correct(correct, margin), np.arange(4))
    assert list(picks.index) == list(disabling.PICKS)
    assert set(picks.columns) == {"run", "layer", "head", "label", "selection", "selection_loss"}
    assert picks["label"].tolist() == ["2-1", "1-1", "layer 1", "layer 2"]  # worst head: 1-1, 1-2, 2-2 tie: order
    assert picks["selection"].tolist() == [0.25, 0.25, 0, -0.5]  # the worst head still helps: reported as is
    assert picks.loc["best head", "selection_loss"] < picks.loc["worst head", "selection_loss"]
    margin[1:, 2] = 0.5  # head 1-2 is right by a smaller margin: the highest loss among the tied heads
    assert disabling.choose(scan_from_correct(correct, margin), np.arange(4)).loc["worst head", "label"] == "1-2"


def random_scan(n: int = 40, seed: int = 0) -> disabling.Scan:
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, 7, 2)).astype(np.float32)
    return disabling.Scan("t", disabling.runs(2, 2), logits, rng.integers(0, 2, n))


def with_rows(scan: disabling.Scan, rows: np.ndarray, value) -> disabling.Scan:
    logits = scan.logits.copy()
    logits[rows] = value(logits[rows].shape) if callable(value) else value
    return disabling.Scan(scan.task, scan.runs, logits, scan.labels)


@pytest.mark.parametrize("seed", range(5))
def test_the_choice_never_sees_the_evaluation_half(seed):
    scan = random_scan(seed=seed)
    selection, evaluation = disabling.split_halves(scan.labels, seed)
    chosen = disabling.held_out(scan, selection, evaluation).picks
    rng = np.random.default_rng(seed + 100)
    for value in (np.nan, lambda shape: rng.normal(scale=5, size=shape)):
        other = disabling.held_out(with_rows(scan, evaluation, value), selection, evaluation).picks
        columns = list(disabling.choose(scan, selection).columns)
        pd.testing.assert_frame_equal(other[columns], chosen[columns])


@pytest.mark.parametrize("seed", range(5))
def test_the_evaluation_numbers_read_only_the_evaluation_half(seed):
    scan = random_scan(seed=seed)
    selection, evaluation = disabling.split_halves(scan.labels, seed)
    runs = list(range(7))
    expected = disabling.evaluate(scan, runs, evaluation)
    for value in (np.nan, 99.0):
        found = disabling.evaluate(with_rows(scan, selection, value), runs, evaluation)
        pd.testing.assert_frame_equal(found, expected)
    result = disabling.held_out(scan, selection, evaluation)
    frame = scan.frame(evaluation)
    assert result.accuracy["evaluation"] == frame["accuracy"].iloc[0]
    assert result.heads.tolist() == frame[frame["head"] > 0]["delta_accuracy"].tolist()
    assert result.picks["evaluation"].tolist() == pytest.approx(frame["delta_accuracy"].iloc[result.picks["run"]])
    assert (result.n_selection, result.n_evaluation) == (len(selection), len(evaluation))


def test_the_paired_interval_and_the_discordant_pairs():
    """Disabling head 1-1 turns 11 of 40 evaluation inputs right and 1 wrong: +10/40; Bonett & Price's interval by
    hand: discordant shares 12/42 and 2/42, half-width 1.96 * sqrt((14/42 - (10/42)^2) / 42)."""
    correct = np.zeros((40, 7), dtype=bool)
    correct[:20] = True  # nothing disabled: 20 of 40 right
    correct[20:31, 1] = True
    correct[0, 1] = False
    scan = scan_from_correct(correct)
    found = disabling.evaluate(scan, [1, 2], np.arange(40)).iloc[0]
    assert found["evaluation"] == 0.25 and (found["gained"], found["lost"]) == (11, 1)
    half = 1.959964 * np.sqrt((14 / 42 - (10 / 42) ** 2) / 42)
    assert (found["low"], found["high"]) == (pytest.approx(10 / 42 - half), pytest.approx(10 / 42 + half))
    assert found["evaluation_loss"] < 0  # more inputs right at the same margin: a lower loss
    unchanged = disabling.evaluate(scan, [1, 2], np.arange(40)).iloc[1]  # head 1-2 changes no input...
    assert unchanged[["evaluation", "gained", "lost"]].tolist() == [0, 0, 0]
    assert unchanged["low"] == pytest.approx(-unchanged["high"])  # ...yet the interval is not [0, 0]
    assert unchanged["high"] == pytest.approx(1.959964 * np.sqrt(2) / 42)


@pytest.mark.parametrize("gain, loss", [(0.02, 0.0), (0.05, 0.05), (0.1, 0.03), (0.2, 0.2)])
def test_the_paired_interval_covers_the_true_change_about_95_percent_of_the_time(gain, loss):
    rng = np.random.default_rng(0)
    n, draws = 96, 3000
    counts = rng.multinomial(n, [gain, loss, 1 - gain - loss], size=draws)
    covered = [low <= gain - loss <= high for low, high in
               (disabling.paired_interval(int(gains), int(losses), n) for gains, losses, _ in counts)]
    assert 0.93 <= np.mean(covered) <= 1.0


def test_the_paired_interval_refuses_impossible_counts():
    for gained, lost, n in ((-1, 0, 10), (6, 5, 10), (0, 0, 0)):
        with pytest.raises(ValueError, match="need n >= 1"):
            disabling.paired_interval(gained, lost, n)


def test_random_heads_and_the_tables():
    results = {}
    for seed in range(3):
        scan = random_scan(seed=seed)
        results[seed] = disabling.held_out(scan, *disabling.split_halves(scan.labels, 0))
    spread = results[0].random_heads()
    heads = results[0].heads.to_numpy()
    assert spread == {"mean": pytest.approx(heads.mean()), "p5": pytest.approx(np.percentile(heads, 5)),
                      "p95": pytest.approx(np.percentile(heads, 95)), "share > 0": np.mean(heads > 0)}
    assert list(results[0].heads.index) == ["1-1", "1-2", "2-1", "2-2"]
    table = disabling.seeds_table(results)
    assert list(table.index) == ["seed 0", "seed 1", "seed 2", "mean", "sd"]
    values = [r.picks.loc["best head", "evaluation"] for r in results.values()]
    assert table.loc["mean", ("best head", "evaluation")] == pytest.approx(np.mean(values))
    assert table.loc["sd", ("best head", "evaluation")] == pytest.approx(np.std(values, ddof=1))
    assert table.loc["seed 1", ("random heads", "share > 0")] == results[1].random_heads()["share > 0"]
    choices = [r.picks.loc["worst layer", "label"] for r in results.values()]
    top = max(set(choices), key=choices.count)
    assert table.loc["mean", ("worst layer", "choice")] == f"{top} ({choices.count(top)} of 3)"
    assert np.isnan(table.loc["mean", ("best head", "low")])
    assert table.loc["seed 2", ("best head", "high")] == results[2].picks.loc["best head", "high"]
    tasks = disabling.held_out_table({"topic": results[0], "sentiment": results[1]})
    assert list(tasks.index) == ["topic", "sentiment"] and ("accuracy", "evaluation") in tasks.columns
    for pick in disabling.PICKS:  # the evaluation inputs each pick turns right and wrong, as counts
        assert tasks.loc["sentiment", [(pick, "gained"), (pick, "lost")]].tolist() == (
            results[1].picks.loc[pick, ["gained", "lost"]].tolist())
    with pytest.raises(ValueError, match="at least two seeds"):
        disabling.seeds_table({0: results[0]})
    scan = random_scan()
    other = disabling.held_out(disabling.Scan("other", scan.runs, scan.logits, scan.labels), np.arange(20),
                               np.arange(20, 40))
    with pytest.raises(ValueError, match="one task"):
        disabling.seeds_table({0: results[0], 1: other})
    with pytest.raises(ValueError, match="no held-out results"):
        disabling.held_out_table({})


def test_input_flips_and_near_ties_count_which_inputs_the_single_heads_move():
    """Runs: 0 nothing, 1-4 the heads, 5-6 the layers. Input 0 is right by a margin of 0.05 and lost under heads
    1-3 (and layer 1, which is no single head); input 1 is wrong by 0.02 and gained under heads 1 and 4; input 2
    is right by 2 and lost under head 2; inputs 3-5 never move; input 5 is outside the inputs read."""
    correct = np.ones((6, 7), dtype=bool)
    correct[0, [1, 2, 3, 5]] = False
    correct[1] = False
    correct[1, [1, 4]] = True
    correct[2, 2] = False
    margin = np.ones((6, 7))
    margin[0], margin[1], margin[2] = 0.05, 0.02, 2.0
    scan = scan_from_correct(correct, margin)
    inputs = np.arange(5)
    table = disabling.input_flips(scan, inputs)
    assert table["input"].tolist() == [0, 1, 2, 3, 4]  # most often flipped first, then by input
    assert table[["gained", "lost", "flips"]].values.tolist() == [[0, 3, 3], [2, 0, 2], [0, 1, 1], [0, 0, 0], [0, 0, 0]]
    assert table["margin"].tolist() == pytest.approx([0.05, 0.02, 2.0, 1.0, 1.0])
    assert table["correct"].tolist() == [True, False, True, True, True]
    assert table["runner_up_true"].tolist() == [False, True, False, False, False]  # two labels: wrong = true second
    ties = disabling.near_ties(scan, inputs, 0.1)
    assert (ties.n_inputs, ties.n_heads, ties.close, ties.close_right) == (5, 4, 2, 1)
    assert (ties.flips, ties.close_flips, ties.gained, ties.lost) == (6, 5, 2, 4)
    assert ties.close_share == pytest.approx(5 / 6)
    assert ties.mean_change == pytest.approx((2 - 4) / 20) and ties.mean_change_far == pytest.approx(-1 / 20)
    held = disabling.held_out(scan, np.array([5]), inputs)
    assert ties.mean_change == pytest.approx(held.random_heads()["mean"])  # the random heads' mean, by inputs
    assert disabling.near_ties(scan, inputs, 3.0).mean_change_far == 0  # every input close: nothing left to move
    with pytest.raises(ValueError, match="above 0"):
        disabling.near_ties(scan, inputs, 0)


@pytest.mark.parametrize("selection, evaluation, message", [
    (np.arange(0, 25), np.arange(20, 40), "share 5 inputs"),
    (np.array([], dtype=int), np.arange(20, 40), "non-empty"),
    (np.arange(20), np.array([], dtype=int), "non-empty"),
    (np.arange(20), np.arange(20, 41), "distinct indices in 0..39"),
    (np.array([0, 0, 1]), np.arange(20, 40), "distinct"),
    (np.arange(20) / 1.0, np.arange(20, 40), "input indices"),
])
def test_bad_halves_are_refused(selection, evaluation, message):
    with pytest.raises(ValueError, match=message):
        disabling.held_out(random_scan(), selection, evaluation)


def test_a_scan_whose_arrays_disagree_is_refused():
    scan = random_scan(10)
    with pytest.raises(ValueError, match="must be"):
        disabling.Scan("t", scan.runs, scan.logits[:, :5], scan.labels)
    with pytest.raises(ValueError, match="must be"):
        disabling.Scan("t", scan.runs, scan.logits, scan.labels[:9])


def test_the_heads_comparison_reads_each_finding_off_the_results():
    """compare.dark_secrets_heads on hand-made results: head 1-2 helps on the selection half (inputs 0, 2) and does
    nothing on the evaluation half (inputs 1, 3); the relation scores of a planted head; sinks, [CLS] rows and stripes
    given as numbers."""
    from bertlook_utils import compare, relations, tokentypes

    correct = np.zeros((4, 7), dtype=bool)
    correct[:, 0] = [False, True, True, False]
    correct[:, 1:] = correct[:, :1]
    correct[0, 2] = True  # disabling head 1-2 turns input 0 right
    result = disabling.held_out(scan_from_correct(correct, task="sentiment"), np.array([0, 2]), np.array([1, 3]))
    assert result.picks.loc["best head", "label"] == "1-2"
    maps = [np.full((2, 2, 6, 6), 1 / 6) for _ in range(3)]
    for attn in maps:
        attn[1, 1, 1] = [0, 0, 0.9, 0.1, 0, 0]  # head 2-2: the predicate (word 0) looks at its argument (word 1)
    frames = [relations.Frame(k, 0, ((1, 2),), ("dobj",)) for k in range(3)]
    scores = {"shifted": relations.score_maps(maps, frames, n_draws=100)}
    layers = pd.Index([1, 2], name="layer")
    special = {"sentiment": pd.DataFrame({"cls_change": [-0.01, -0.2], "sep_change": [0.005, -0.002]}, index=layers)}
    cls = pd.DataFrame({"category": list(tokentypes.EXCLUSIVE), "before": 0.1,
                        "after": np.linspace(0.1, 0.01, len(tokentypes.EXCLUSIVE))})
    cls.loc[cls["category"] == "noun", ["before", "after"]] = [0.4, 0.5]
    cls.loc[cls["category"] == tokentypes.UNTYPED, "after"] = 0.6  # more than nouns, but not a typed category
    stripes = pd.DataFrame({"threshold": [0.1, 0.2], "special or punct.": [0.7, 0.95], "linguistic": [0.2, 0.03]})
    table = compare.dark_secrets_heads(scores, special, {"sentiment": cls}, stripes, {"sentiment": result},
                                       {0: result, 1: result})
    found = dict(zip(table["quantity"], table["this run"]))
    assert list(table.columns) == list(compare.COLUMNS)
    assert found["relation-specific heads (§4.2)"].startswith("1 of 4 heads above it: 2-2 (0.90), effect over the "
                                                              "null [95 %]: shifted +")
    assert found["[CLS] and [SEP] after fine-tuning (§4.5)"] == ("[CLS] -0.20 in layer 2, [SEP] at most 0.005 "
                                                                 "(sentiment)")
    assert found["what [CLS] attends to in the last layer (§4.5)"] == (
        "noun 0.40 -> 0.50, [SEP] 0.09, other words 0.60 (sentiment)")
    assert found["where vertical stripes fall (§4.4)"] == ("special tokens or punctuation 95-95 % of stripes, "
                                                           "linguistic types 3-3 %")
    assert found["best single-head disabling (§4.6)"].startswith("chosen on one half -> scored on the other [95 %]: "
                                                                 "1-2 +50.0 -> +0.0 [")
    assert found["best head over fine-tuning seeds"] == "sentiment, 2 seeds: held-out change +0.0, +0.0 points"
