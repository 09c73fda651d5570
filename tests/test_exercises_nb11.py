"""Notebook 11's exercises (sink_rate, softmax1): the known answers agree with the kit's own `sinks`, the reference
solutions pass on the real model, every listed mistake fails naming its own hint (and no other), a learner's own
versions of the common mistakes are named, a stable variant that only warns passes, and zeros, None and an unwritten
stub get the checker's usual verdicts."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from bertlook_utils.analyses import sinks
from bertlook_utils.lab.exercises import checker, nb11
import solutions
from tools import exercise_cells

EXERCISES = {e.name: e for e in nb11.EXERCISES}

# The solution cells' bodies, as the notebook holds them between nbgrader's markers (tools/exercise_cells.py).
BODIES = {
    "sink_rate": """\
    scores = attn.mean(axis=2)  # [L, H, n]: each column's mean over the query rows
    return (scores > eps).mean(axis=(0, 1))  # the share of all L x H heads, per key""",
    "softmax1": """\
    x = np.asarray(scores, dtype=np.float64)
    m = np.maximum(x.max(axis=-1, keepdims=True), 0)  # the empty slot's logit is 0
    shifted = np.exp(x - m)
    return shifted / (np.exp(-m) + shifted.sum(axis=-1, keepdims=True))""",
}


_source, _solution, _fails = solutions.by_name(EXERCISES, BODIES)


def test_two_exercises_of_notebook_11_whose_cells_render_within_the_notebooks_width():
    assert list(EXERCISES) == ["sink_rate", "softmax1"]
    assert {e.notebook for e in nb11.EXERCISES} == {"11"}
    assert [checker._promised(e) for e in nb11.EXERCISES] == ["[n]", "[..., n]"]
    for name, exercise in EXERCISES.items():
        assert exercise.hints and exercise.mistakes and 1 <= exercise.difficulty <= 3
        assert len({m.hint for m in exercise.mistakes}) == len(exercise.mistakes)
        assert f"def {name}({exercise.parameters}):" in exercise_cells.markdown(exercise)
        assert max(len(line) for line in _source(name).splitlines()) <= exercise_cells.WIDTH


def test_the_known_answers_are_the_kits_own():
    for case in EXERCISES["sink_rate"].synthetic():
        assert np.allclose(case.call(lambda attn, eps: sinks.sink_rate(attn, eps)), case.expected, atol=1e-12), \
            case.label
    for case in EXERCISES["softmax1"].synthetic():
        assert np.allclose(case.call(sinks.softmax1), case.expected, atol=1e-12), case.label


def test_the_solutions_agree_with_the_kit_on_random_inputs():
    rng = np.random.default_rng(0)
    sink_rate, softmax1 = _solution("sink_rate"), _solution("softmax1")
    attn = rng.dirichlet(np.full(7, 0.3), size=(3, 4, 7))  # [3, 4, 7, 7], rows sum to 1
    attn[:, :2, :, 0] += 1  # some heads sink on column 0
    attn /= attn.sum(-1, keepdims=True)
    for eps in (0.05, 0.2, 0.3, 0.5):
        assert np.array_equal(sink_rate(attn, eps), sinks.sink_rate(attn, eps))
    logits = np.concatenate([rng.normal(0, 5, (3, 4, 5)), rng.choice([-1000.0, 0.0, 1000.0], (2, 4, 5))])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the solution is stable: no overflow, no 0 / 0
        got = softmax1(logits)
    assert np.isfinite(got).all() and np.allclose(got, sinks.softmax1(logits), rtol=1e-12, atol=1e-300)


def test_the_real_softmax1_input_is_the_heads_logits(encoder):
    real = checker.real_inputs(encoder)
    logits = nb11.real_logits(real)
    assert logits.shape == real.head_map().shape
    assert np.allclose(torch.softmax(torch.from_numpy(logits), -1).numpy(), real.head_map(), atol=1e-4)


# A learner's own versions of the common mistakes (written here, not taken from the module's list).
def _rate_over_keys(attn, eps):
    return (attn.mean(-1) > eps).mean((0, 1))


def _rate_at_least(attn, eps):
    return (attn.mean(2) >= eps).mean((0, 1))


def _rate_per_layer(attn, eps):
    return np.stack([(layer.mean(1) > eps).mean(0) for layer in attn])


def _rate_counts(attn, eps):
    return (attn.mean(2) > eps).sum((0, 1))


def _naive(scores):
    e = np.exp(scores)
    return e / (1 + e.sum(-1, keepdims=True))


def _shift_but_not_the_one(scores):  # shifted by max(x, 0), the right m, but the 1 left as it is
    m = np.maximum(scores.max(-1, keepdims=True), 0)
    e = np.exp(scores - m)
    return e / (1 + e.sum(-1, keepdims=True))


def _global_shift(scores):
    m = max(scores.max(), 0)
    e = np.exp(scores - m)
    return e / (np.exp(-m) + e.sum(-1, keepdims=True))


def _slot_of_one(scores):  # the empty slot appended with logit 1
    x = np.concatenate([scores, np.ones(scores.shape[:-1] + (1,))], -1)
    e = np.exp(x - x.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True))[..., :-1]


@pytest.mark.parametrize("name, fn, k", [
    ("sink_rate", _rate_over_keys, 0),
    ("sink_rate", _rate_at_least, 1),
    ("sink_rate", _rate_per_layer, 2),
    ("sink_rate", _rate_counts, 3),
    ("softmax1", lambda s: torch.softmax(torch.as_tensor(s), -1), 0),
    ("softmax1", _naive, 1),
    ("softmax1", _shift_but_not_the_one, 2),
    ("softmax1", _global_shift, 4),
    ("softmax1", _slot_of_one, 5),
])
def test_a_learners_common_mistake_is_named(name, fn, k, encoder):
    message = _fails(name, fn, encoder)
    assert EXERCISES[name].mistakes[k].hint in message and "got" in message


def test_what_each_wrong_shift_shows(encoder):
    naive = _fails("softmax1", _naive, encoder)  # no shift: exp(1000) = inf, inf / inf
    assert "on huge logits, [1000, 1000]" in naive and "NaN" in naive
    unshifted = _fails("softmax1", _shift_but_not_the_one, encoder)  # shift-invariant, like softmax: 1 / 2, not 2 / 3
    assert "on [log 2]" in unshifted and "got      array of shape (1,):\n[0.5]" in unshifted
    assert "NaN" in _fails("softmax1", _global_shift, encoder)  # a row far below the array's max: 0 / 0
    assert "an axis too many" in _fails("sink_rate", _rate_per_layer, encoder)


def _shift_by_max(scores):  # m = max(x): the right numbers, but exp(-m) overflows when every logit is below -709
    m = scores.max(-1, keepdims=True)
    e = np.exp(scores - m)
    return e / (np.exp(-m) + e.sum(-1, keepdims=True))


def _appended_zero_in_torch(scores):  # the empty slot as one more logit, 0, in torch: a tensor answer
    x = torch.as_tensor(scores)
    return torch.softmax(torch.cat([x, torch.zeros(x.shape[:-1] + (1,), dtype=x.dtype)], -1), -1)[..., :-1]


def test_stable_variants_pass_and_the_shift_by_max_only_warns(encoder, capsys):
    with pytest.warns(RuntimeWarning, match="overflow"):
        assert checker.check(EXERCISES["softmax1"], _shift_by_max, encoder) is True
    assert checker.check(EXERCISES["softmax1"], _appended_zero_in_torch, encoder) is True
    assert checker.check(EXERCISES["sink_rate"], lambda a, e: (a.sum(2) / a.shape[2] > e).mean((0, 1)), encoder)
    assert capsys.readouterr().out.count("✓") == 3


@pytest.mark.parametrize("name", list(EXERCISES))
def test_zeros_and_none_get_the_usual_verdicts(name, encoder):
    zeros = np.zeros_like(np.asarray(EXERCISES[name].synthetic()[0].expected, dtype=float))
    assert "returns zeros" in _fails(name, lambda *args: zeros, encoder)
    assert "did you forget `return`?" in _fails(name, lambda *args: None, encoder)


@pytest.mark.parametrize("name", list(EXERCISES))
def test_an_unwritten_function_gets_a_note_and_fails_only_under_the_autograder(name, encoder, capsys, monkeypatch):
    def stub(*args):
        raise NotImplementedError()
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    assert checker.check(EXERCISES[name], stub, encoder) is False
    assert capsys.readouterr().out.startswith(f"✎ {name} is not written yet")
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    with pytest.raises(checker.NotWritten, match="is not written yet"):
        checker.check(EXERCISES[name], stub, encoder)


def test_softmax1_known_values():
    softmax1 = _solution("softmax1")
    assert softmax1(np.array([math.log(2)])) == pytest.approx([2 / 3])
    assert softmax1(np.array([1000.0, -1000.0, 0.0])) == pytest.approx([1.0, 0.0, 0.0])
