"""Notebook 13's exercises (probe_distances, uuas_from_distances): the known answers agree with the kit's own
functions, the reference solutions pass on the real model, every listed mistake fails naming its own hint (and no
other), a learner's own versions of the common mistakes are named, and zeros and None get the checker's usual
verdicts."""
from __future__ import annotations

import numpy as np
import pytest
from builders import random_tree
from scipy.sparse.csgraph import minimum_spanning_tree

from bertlook_utils.analyses import structural
from bertlook_utils.lab.exercises import checker, nb13
import solutions
from tools import exercise_cells

EXERCISES = {e.name: e for e in nb13.EXERCISES}

# The solution cells' bodies, as the notebook holds them between nbgrader's markers (tools/exercise_cells.py).
BODIES = {
    "probe_distances": """\
    P = H @ B.T  # [n, k]: every word's vector through the probe
    diff = P[:, None, :] - P[None, :, :]  # [n, n, k]: every pair's difference
    return (diff**2).sum(-1)""",
    "uuas_from_distances": """\
    words = [i for i in range(len(heads)) if not is_punct[i]]
    gold = set()  # the silver edges between kept words, with no direction
    for i in words:
        if heads[i] != 0 and not is_punct[heads[i] - 1]:
            gold.add(frozenset((i, heads[i] - 1)))
    tree, found = [words[0]], set()  # Prim's algorithm: grow one tree from a word
    while len(tree) < len(words):
        pairs = [(i, j) for i in tree for j in words if j not in tree]
        i, j = min(pairs, key=lambda pair: dist[pair[0]][pair[1]])
        tree.append(j)
        found.add(frozenset((i, j)))
    return len(gold & found) / len(gold)""",
}


_source, _solution, _fails = solutions.by_name(EXERCISES, BODIES)


def test_two_exercises_of_notebook_13_whose_cells_render_within_the_notebooks_width():
    assert list(EXERCISES) == ["probe_distances", "uuas_from_distances"]
    assert {e.notebook for e in nb13.EXERCISES} == {"13"}
    assert [checker._promised(e) for e in nb13.EXERCISES] == ["[n, n]", None]
    for name, exercise in EXERCISES.items():
        assert exercise.hints and exercise.mistakes and 1 <= exercise.difficulty <= 3
        assert len({m.hint for m in exercise.mistakes}) == len(exercise.mistakes)
        assert f"def {name}({exercise.parameters}):" in exercise_cells.markdown(exercise)
        assert max(len(line) for line in _source(name).splitlines()) <= exercise_cells.WIDTH


def test_the_probe_answers_are_the_kits_own_and_the_tree_case_gives_the_tree_distances():
    cases = EXERCISES["probe_distances"].synthetic()
    for case in cases:
        assert np.allclose(case.call(lambda B, H: structural.squared_distances(B, H).numpy()), case.expected,
                           atol=1e-12), case.label
    assert np.array_equal(cases[1].expected, structural.tree_distances(nb13.CAT_HEADS))
    rng = np.random.default_rng(0)
    for n in (1, 2, 7, 12):  # the construction holds for any tree
        heads = random_tree(rng, n)
        vectors = nb13.tree_vectors(heads)
        assert vectors.shape == (n, n - 1)
        assert np.array_equal(structural.squared_distances(np.eye(n - 1), vectors).numpy() if n > 1 else
                              np.zeros((1, 1)), structural.tree_distances(heads))
    assert [case.call(lambda B, H: np.shape(B)) for case in cases] == [(2, 2), (5, 6), (2, 2), (1, 3)]


def test_the_uuas_answers_are_the_kits_own():
    for case in EXERCISES["uuas_from_distances"].synthetic():
        def kit(dist, heads, is_punct):
            hits, total = structural.edge_hits(dist, heads, is_punct)
            assert np.isclose(structural.uuas([dist], [heads], [is_punct]), hits / total)
            return hits / total
        assert case.call(kit) == pytest.approx(case.expected, abs=1e-12), case.label
    # the tie-breaking amount leaves each predicted tree the unique minimum spanning tree of its distances
    chain = nb13._perturbed(np.arange(6))
    assert structural.min_spanning_tree(chain).tolist() == [-1, 0, 1, 2, 3, 4]


def test_the_real_inputs_are_the_layers_word_vectors_of_a_sentence_with_punctuation(encoder):
    real = checker.real_inputs(encoder)
    sentence, _ = real.parsed
    B, H = nb13.real_vectors(real)
    assert H.shape == (len(sentence), encoder.model.config.hidden_size) and B.shape == (nb13.REAL_RANK, H.shape[1])
    assert np.array_equal(H, structural.layer_vectors(encoder, [sentence], progress=False)[nb13.REAL_LAYER])
    assert sum(sentence.is_punct) >= 2  # "self - governed" and the full stop: punctuation's handling is tested
    case = EXERCISES["uuas_from_distances"].real(real)
    assert 0 < case.expected < 1


@pytest.mark.parametrize("name", list(EXERCISES))
def test_the_reference_solution_passes_on_the_real_model(name, encoder, capsys):
    assert checker.check(EXERCISES[name], _solution(name), encoder) is True
    assert capsys.readouterr().out.startswith(f"✓ {name}: right on")


@pytest.mark.parametrize("name, k", [(n, k) for n, e in EXERCISES.items() for k in range(len(e.mistakes))])
def test_every_listed_mistake_fails_naming_its_hint_and_no_other(name, k, encoder):
    mistakes = EXERCISES[name].mistakes
    message = _fails(name, mistakes[k].fn, encoder)
    assert mistakes[k].hint in message and "expected" in message
    assert not [m.hint for j, m in enumerate(mistakes) if j != k and m.hint in message]
    assert "returns zeros" not in message


# A learner's own versions of the common mistakes (written here, not taken from the module's list).
def _lengths(B, H):  # np.linalg.norm: the length, not its square
    P = H @ B.T
    return np.linalg.norm(P[:, None] - P[None], axis=-1)


def _raw(B, H):  # the vectors' own squared distances, B forgotten
    return np.array([[((a - b) ** 2).sum() for b in H] for a in H])


def _right_multiplied(B, H):  # H @ B
    P = H @ B
    return ((P[:, None] - P[None]) ** 2).sum(-1)


def _scipy_over_every_word(dist, heads, is_punct):  # the minimum spanning tree of every word, punctuation included
    tree = minimum_spanning_tree(np.asarray(dist)).toarray()
    found = {frozenset((int(i), int(j))) for i, j in zip(*np.nonzero(tree))}
    gold = {frozenset((i, h - 1)) for i, h in enumerate(heads) if h and not is_punct[i] and not is_punct[h - 1]}
    return len(gold & found) / len(gold)


def _nearest(dist, heads, is_punct):  # each word linked to its nearest other word
    words = [i for i, p in enumerate(is_punct) if not p]
    found = {frozenset((i, min((j for j in words if j != i), key=lambda j: dist[i][j]))) for i in words}
    gold = {frozenset((i, h - 1)) for i, h in enumerate(heads) if h and not is_punct[i] and not is_punct[h - 1]}
    return len(gold & found) / len(gold)


def _prim(dist, words):
    """(word, the tree word it joined through) for every word but the first, by Prim's algorithm."""
    tree, edges = [words[0]], []
    while len(tree) < len(words):
        i, j = min(((i, j) for i in tree for j in words if j not in tree), key=lambda e: dist[e[0]][e[1]])
        tree.append(j)
        edges.append((j, i))
    return edges


def _directed(dist, heads, is_punct):  # (word, head) tuples: an edge found the other way round does not count
    words = [i for i, p in enumerate(is_punct) if not p]
    gold = {(i, h - 1) for i, h in enumerate(heads) if h and not is_punct[i] and not is_punct[h - 1]}
    return len(gold & set(_prim(dist, words))) / len(gold)


def _every_silver_edge(dist, heads, is_punct):  # every word's edge to its head in the denominator, punctuation's too
    words = [i for i, p in enumerate(is_punct) if not p]
    found = {frozenset(e) for e in _prim(dist, words)}
    gold = [frozenset((i, h - 1)) for i, h in enumerate(heads) if h]
    return sum(g in found for g in gold) / len(gold)


def _with_root(dist, heads, is_punct):  # the root word's link to ROOT (-1) among the edges
    words = [i for i, p in enumerate(is_punct) if not p]
    found = {frozenset(e) for e in _prim(dist, words)}
    gold = [frozenset((i, h - 1)) for i, h in enumerate(heads) if not is_punct[i] and (h == 0 or not is_punct[h - 1])]
    return sum(g in found for g in gold) / len(gold)


@pytest.mark.parametrize("name, fn, k", [
    ("probe_distances", _lengths, 0),
    ("probe_distances", _raw, 2),
    ("probe_distances", _right_multiplied, 4),
    ("uuas_from_distances", _scipy_over_every_word, 0),
    ("uuas_from_distances", _nearest, 2),
    ("uuas_from_distances", _directed, 3),
    ("uuas_from_distances", _with_root, 4),
    ("uuas_from_distances", _every_silver_edge, 5),
])
def test_a_learners_common_mistake_is_named(name, fn, k, encoder):
    message = _fails(name, fn, encoder)
    mistakes = EXERCISES[name].mistakes
    assert mistakes[k].hint in message and "got" in message
    assert not [m.hint for j, m in enumerate(mistakes) if j != k and m.hint in message]


def _scipy_over_the_words(dist, heads, is_punct):  # right: scipy's minimum spanning tree of the kept words
    words = np.flatnonzero(~np.asarray(is_punct))
    tree = minimum_spanning_tree(np.asarray(dist)[np.ix_(words, words)]).toarray()
    found = {frozenset((int(words[a]), int(words[b]))) for a, b in zip(*np.nonzero(tree))}
    gold = {frozenset((i, h - 1)) for i, h in enumerate(heads) if h and not is_punct[i] and not is_punct[h - 1]}
    return len(gold & found) / len(gold)


def test_other_right_ways_pass(encoder, capsys):
    import torch

    def in_torch(B, H):  # the same computation in torch, returning a tensor
        P = torch.as_tensor(H) @ torch.as_tensor(B).T
        return ((P[:, None] - P[None]) ** 2).sum(-1)
    assert checker.check(EXERCISES["probe_distances"], in_torch, encoder) is True
    uuas = _solution("uuas_from_distances")  # dist as nested lists: the solution indexes dist[i][j]
    assert checker.check(EXERCISES["uuas_from_distances"], lambda d, h, p: uuas(np.asarray(d).tolist(), h, p),
                         encoder) is True
    assert checker.check(EXERCISES["uuas_from_distances"], _scipy_over_the_words, encoder) is True


@pytest.mark.parametrize("name", list(EXERCISES))
def test_zeros_and_none_get_the_usual_verdicts(name, encoder):
    zeros = np.zeros_like(np.asarray(EXERCISES[name].synthetic()[0].expected, dtype=float))
    assert "returns zeros" in _fails(name, lambda *args: zeros, encoder)
    assert "did you forget `return`?" in _fails(name, lambda *args: None, encoder)
