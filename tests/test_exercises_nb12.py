"""Notebook 12's exercises (restored_share, value_zeroing): the known answers agree with the kit's own functions,
the reference solutions pass on the real model, every listed mistake fails naming its own hint (and no other), a
learner's own versions of the common mistakes are named, and zeros and None get the checker's usual verdicts."""
from __future__ import annotations

import numpy as np
import pytest

from bertlook_utils.analyses import mixing
from bertlook_utils.lab.exercises import checker, nb12
import solutions
from tools import exercise_cells

EXERCISES = {e.name: e for e in nb12.EXERCISES}

# The solution cells' bodies, as the notebook holds them between nbgrader's markers (tools/exercise_cells.py).
BODIES = {
    "restored_share": """\
    def relevance(states):  # cosine of the query with the mean of the token states
        pooled = states.mean(axis=0)
        return query @ pooled / (np.linalg.norm(query) * np.linalg.norm(pooled))

    low, high = relevance(base), relevance(relevant)
    return (relevance(patched) - low) / (high - low)""",
    "value_zeroing": """\
    dot = (zeroed * outputs[None]).sum(-1)  # [j, i]
    lengths = np.linalg.norm(zeroed, axis=-1) * np.linalg.norm(outputs, axis=-1)
    scores = (1 - dot / lengths).T  # [i, j]: token i's change when j is zeroed
    return scores / scores.sum(axis=1, keepdims=True)""",
}


_source, _solution, _fails = solutions.by_name(EXERCISES, BODIES)


def test_two_exercises_of_notebook_12_whose_cells_render_within_the_notebooks_width():
    assert list(EXERCISES) == ["restored_share", "value_zeroing"]
    assert {e.notebook for e in nb12.EXERCISES} == {"12"}
    for name, exercise in EXERCISES.items():
        assert exercise.hints and exercise.mistakes and 1 <= exercise.difficulty <= 3
        assert len({m.hint for m in exercise.mistakes}) == len(exercise.mistakes)
        assert f"def {name}({exercise.parameters}):" in exercise_cells.markdown(exercise)
        assert max(len(line) for line in _source(name).splitlines()) <= exercise_cells.WIDTH


def test_the_value_zeroing_answers_are_the_kits_own_and_the_real_states_are_the_layers(encoder):
    for case in EXERCISES["value_zeroing"].synthetic():
        def kit(outputs, zeroed):
            outputs, zeroed = np.asarray(outputs), np.asarray(zeroed)
            distance = 1 - (zeroed * outputs).sum(-1) / (np.linalg.norm(zeroed, axis=-1) *
                                                         np.linalg.norm(outputs, axis=-1))
            return mixing.normalise_rows(distance.T)
        assert np.allclose(case.call(kit), case.expected, atol=1e-12), case.label
    outputs, zeroed = nb12.real_zeroed(checker.real_inputs(encoder))
    n = len(outputs)
    assert zeroed.shape == (n, n, outputs.shape[1])
    hidden = encoder.encode(*checker.REAL_TEXT)  # the unedited run: row 0 is the layer's ordinary output
    assert hidden.n_tokens == n


def _dot_relevance(query, base, relevant, patched):  # a learner's own: dot products
    low, high, mid = (query @ x.mean(0) for x in (base, relevant, patched))
    return (mid - low) / (high - low)


def _unnormalised(outputs, zeroed):  # a learner's own: distances without the row normalisation
    return np.array([[1 - outputs[i] @ zeroed[j, i] / (np.linalg.norm(outputs[i]) * np.linalg.norm(zeroed[j, i]))
                      for j in range(len(outputs))] for i in range(len(outputs))])


@pytest.mark.parametrize("name, fn, k", [
    ("restored_share", _dot_relevance, 0),
    ("value_zeroing", _unnormalised, 2),
])
def test_a_learners_common_mistake_is_named(name, fn, k, encoder):
    message = _fails(name, fn, encoder)
    assert EXERCISES[name].mistakes[k].hint in message and "got" in message


@pytest.mark.parametrize("name", list(EXERCISES))
def test_zeros_and_none_get_the_usual_verdicts(name, encoder):
    zeros = np.zeros_like(np.asarray(EXERCISES[name].synthetic()[0].expected, dtype=float))
    assert "returns zeros" in _fails(name, lambda *args: zeros, encoder)
    assert "did you forget `return`?" in _fails(name, lambda *args: None, encoder)
