"""The implement-it-yourself exercises: every committed solution passes its check on the real model, every listed
mistake, a learner's own version of the common mistakes, a function that returns zeros and an unwritten stub all
fail with the right hint; the notebooks' exercise cells and the student copies' stubs are in sync."""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

from bertlook_utils import exercises

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import exercise_cells  # noqa: E402
import student_copy  # noqa: E402
from navigation import notebooks  # noqa: E402

NAMES = exercises.names()


def _cells(folder: Path = ROOT / "notebooks") -> dict[str, dict]:
    """exercise name -> {"solution": source, "check": source, "text": source} from the notebooks of `folder`."""
    found: dict[str, dict] = {}
    for path in notebooks(folder):
        for cell in nbformat.read(path, as_version=4).cells:
            for key, kind in (("exercise", "solution"), ("exercise_check", "check"), ("exercise_text", "text")):
                if key in cell.metadata:
                    found.setdefault(cell.metadata[key], {})[kind] = cell.source
                    found[cell.metadata[key]].setdefault("notebook", path.name[:2])
    return found


def _function(source: str, name: str):
    namespace: dict = {}
    exec(source, namespace)
    return namespace[name]


def _fails(name, fn, encoder) -> str:
    with pytest.raises(AssertionError) as error, np.errstate(all="ignore"):
        exercises.check(name, fn, encoder)
    return str(error.value)


def test_at_least_twelve_exercises_across_the_notebooks():
    assert len(NAMES) >= 12 and len(set(NAMES)) == len(NAMES)
    assert {exercises.get(n).notebook for n in NAMES} == {f"{k:02d}" for k in range(11)}
    with pytest.raises(KeyError, match="no exercise 'nope'"):
        exercises.get("nope")


@pytest.mark.parametrize("name", NAMES)
def test_the_committed_solution_passes(name, encoder, capsys):
    solution = _cells()[name]["solution"]
    assert "NotImplementedError" not in solution
    assert exercises.check(name, _function(solution, name), encoder) is True
    assert capsys.readouterr().out.startswith(f"✓ {name}: right on")


@pytest.mark.parametrize("name, k", [(n, k) for n in NAMES for k in range(len(exercises.get(n).mistakes))])
def test_every_listed_mistake_fails_with_its_hint(name, k, encoder):
    mistake = exercises.get(name).mistakes[k]
    assert mistake.hint in _fails(name, mistake.fn, encoder)


@pytest.mark.parametrize("name", NAMES)
def test_zeros_and_an_unwritten_stub_fail_with_their_hints(name, encoder):
    expected = exercises.cases(name, encoder)[0].expected
    if isinstance(expected, dict):
        zeros = {k: 0.0 for k in expected}
    elif isinstance(expected, tuple):
        zeros = tuple(0 for _ in expected)
    else:
        zeros = np.zeros_like(np.asarray(expected, dtype=float))
    assert "returns zeros" in _fails(name, lambda *args: zeros, encoder)
    assert "is not written yet" in _fails(name, _function(exercises.get(name).stub, name), encoder)


def test_a_crash_in_the_learners_code_is_reported_with_the_input(encoder):
    def broken(attn):
        raise IndexError("index 9 is out of bounds")
    message = _fails("mean_entropy", broken, encoder)
    assert "uniform 5-token map" in message and "IndexError: index 9 is out of bounds" in message
    with pytest.raises(TypeError, match="must be your function"):
        exercises.check("mean_entropy", 0.5, encoder)


# A learner's own versions of the common mistakes (written here, not taken from the module's list).
def _entropy_base_2(attn):
    p = 0.9999 * attn + 0.0001 / attn.shape[-1]
    return (-(p * np.log2(p)).sum(-1)).mean()


def _word_level_mean_to(attn, word_ids):
    ids = np.asarray(word_ids)
    out = np.zeros((ids.max() + 1, ids.max() + 1))
    for w in range(ids.max() + 1):
        for v in range(ids.max() + 1):
            out[w, v] = attn[np.ix_(ids == w, ids == v)].mean(1).mean()  # mean over the columns: wrong
    return out


def _surface_off_by_one(attn, tokens):
    n = len(tokens)
    return {"prev": sum(attn[i, i + 1] for i in range(n - 1)) / n, "next": sum(attn[i, i - 1] for i in range(1, n)) / n,
            "cls": attn[:, 0].mean(), "sep": attn[:, [j for j, t in enumerate(tokens) if t == "[SEP]"]].sum(1).mean()}


def _relation_with_specials(word_attn, heads, relations, relation):
    right = [int(np.argmax(np.where(np.arange(len(word_attn)) == i + 1, -1, word_attn[i + 1]))) == heads[i]
             for i, r in enumerate(relations) if r == relation]
    return float(np.mean(right))


def _uniform_not_renormalised(probs, head, valid):
    out = probs.clone()
    out[:, head] = valid[:, None, :].to(probs.dtype)  # ones, not 1 / n
    return out


def _rollout_without_half(attn):
    mixed = attn.mean(1) + np.eye(attn.shape[-1])
    out = [mixed[0]]
    for layer in mixed[1:]:
        out.append(layer @ out[-1])
    return np.stack(out)


def _uas_without_root(predicted, gold, is_punct):
    keep = [not p and g != 0 for p, g in zip(is_punct, gold)]
    return np.mean([a == b for a, b, k in zip(predicted, gold, keep) if k])


@pytest.mark.parametrize("name, fn, words", [
    ("mean_entropy", _entropy_base_2, "not log base 2"),
    ("word_level", _word_level_mean_to, "must be the SUM over its tokens' columns, not their mean"),
    ("surface_shares", _surface_off_by_one, "prev and next are swapped"),
    ("relation_accuracy", _relation_with_specials, "[CLS] and [SEP] are not words"),
    ("uniform_head", _uniform_not_renormalised, "rows not renormalised"),
    ("rollout", _rollout_without_half, "rows not renormalised"),
    ("uas", _uas_without_root, "ROOT left out"),
])
def test_a_learners_common_mistake_is_named(name, fn, words, encoder):
    message = _fails(name, fn, encoder)
    assert words in message and "expected" in message and "got" in message


def test_the_notebooks_hold_every_exercise_in_sync_with_the_module():
    found = _cells()
    assert set(found) == set(NAMES)
    for name, cells in found.items():
        assert cells["notebook"] == exercises.get(name).notebook
        assert cells["text"] == exercises.markdown(name)
        assert cells["check"] == exercise_cells.check_source(name)
    for path in notebooks():  # re-running the tool would change nothing
        nb = nbformat.read(path, as_version=4)
        ours = [c.source for c in nb.cells if exercise_cells._is_ours(c)]
        expected = [c.source for c in exercise_cells.section(nb, path.name[:2])]
        assert ours == (expected if len(expected) > 1 else [])


def test_the_student_copies_start_from_stubs_that_fail_with_their_hint(encoder):
    for path in notebooks():
        student = student_copy.student_version(nbformat.read(path, as_version=4))
        stubs = {c.metadata["exercise"]: c for c in student.cells if "exercise" in c.metadata}
        checks = [c for c in student.cells if "exercise_check" in c.metadata]
        assert set(stubs) == set(exercises.names(path.name[:2]))
        for cell in checks:
            name = cell.metadata["exercise_check"]
            assert stubs[name].source == exercises.get(name).stub and "raises-exception" in cell.metadata["tags"]
            namespace = {"encoder": encoder}
            exec(stubs[name].source, namespace)
            with pytest.raises(AssertionError, match="is not written yet"):
                exec(cell.source, namespace)
