"""The implement-it-yourself exercises: every committed solution passes its check on the real model, every listed
mistake, a learner's own version of the common mistakes, a function that returns zeros and an unwritten stub all
fail with the right hint; the notebooks' exercise cells are in sync with the modules, and the student copies hold
each solution with its body replaced by nbgrader's stub, nothing of the solution left."""
from __future__ import annotations

import re
import shutil
import signal
import threading
import time
import warnings
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

from bertlook_utils import exercises
from bertlook_utils.exercises import checker
from tools import exercise_cells, student_copy
from tools.navigation import notebooks

ROOT = Path(__file__).resolve().parents[1]

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


def test_every_notebook_has_exercises_and_their_names_are_unique():
    assert len(NAMES) >= 12 and len(set(NAMES)) == len(NAMES)
    assert {exercises.get(n).notebook for n in NAMES} == {path.name[:2] for path in notebooks()}
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


ALONE = [n for n in NAMES if exercises.get(n).notebook >= "11"]  # written to name one mistake at a time


@pytest.mark.parametrize("name, k", [(n, k) for n in ALONE for k in range(len(exercises.get(n).mistakes))])
def test_a_listed_mistake_is_named_alone_beside_the_expected_answer(name, k, encoder):
    mistakes = exercises.get(name).mistakes
    message = _fails(name, mistakes[k].fn, encoder)
    assert "expected" in message
    assert not [m.hint for j, m in enumerate(mistakes) if j != k and m.hint in message]


@pytest.mark.parametrize("name", NAMES)
def test_zeros_fail_with_their_hint(name, encoder):
    expected = exercises.get(name).cases(encoder)[0].expected
    if isinstance(expected, dict):
        zeros = {k: 0.0 for k in expected}
    elif isinstance(expected, tuple):
        zeros = tuple(0 for _ in expected)
    else:
        zeros = np.zeros_like(np.asarray(expected, dtype=float))
    assert "returns zeros" in _fails(name, lambda *args: zeros, encoder)


def test_a_crash_in_the_learners_code_is_reported_with_the_input(encoder):
    def broken(attn):
        raise IndexError("index 9 is out of bounds")
    message = _fails("mean_entropy", broken, encoder)
    assert "uniform 5-token map" in message and "IndexError: index 9 is out of bounds" in message
    with pytest.raises(TypeError, match="must be your function"):
        exercises.check("mean_entropy", 0.5, encoder)


@pytest.mark.parametrize("name", NAMES)
def test_a_function_that_returns_none_is_told_it_forgot_return(name, encoder):
    message = _fails(name, lambda *args: None, encoder)
    assert "your function returned None: did you forget `return`?" in message and "got      None" in message
    assert "log of 0" not in message and "likely mistake" in message


def _solution(name: str):
    return _function(_cells()[name]["solution"], name)


@pytest.mark.parametrize("name, change, words", [
    ("mean_entropy", lambda answer: str(answer), "returned a str where the answer is a number"),
    ("mean_entropy", lambda answer: np.array([answer]), "returned numbers of shape (1,) where the answer is a number"),
    ("word_level", lambda answer: answer.ravel(), "returned numbers of shape (9,) where the answer is numbers of "
                                                  "shape (3, 3)"),
    ("word_level", lambda answer: answer.astype(str), "returned an array of strings where the answer is numbers of "
                                                      "shape (3, 3)"),
    ("best_offset", lambda answer: (str(answer[0]), answer[1]), "returned a tuple where the answer is numbers of "
                                                                "shape (2,)"),
    ("surface_shares", lambda answer: {**answer, "cls": f"{answer['cls']}"}, "'cls': a str"),
])
def test_an_answer_of_another_kind_that_prints_alike_fails_naming_both_kinds(name, change, words, encoder):
    solution = _solution(name)
    message = _fails(name, lambda *args: change(solution(*args)), encoder)
    assert words in message and "expected" in message


def test_a_function_that_never_returns_is_stopped_at_the_time_limit(monkeypatch, encoder):
    monkeypatch.setattr(checker, "TIME_LIMIT", 0.5)

    def stubborn(attn):  # even a loop that swallows every Exception is stopped
        while True:
            try:
                time.sleep(0.01)
            except Exception:
                pass

    start = time.perf_counter()
    message = _fails("mean_entropy", stubborn, encoder)
    assert time.perf_counter() - start < 10
    assert "mean_entropy, on a uniform 5-token map: your function ran for more than 0.5 s: look for a loop that " \
           "never ends" in message
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # the alarm is off and the handler restored
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL
    assert exercises.check("mean_entropy", _solution("mean_entropy"), encoder)  # a quick function is not stopped


def test_a_loop_whose_bare_except_swallows_the_stop_still_fails_at_the_time_limit(monkeypatch, encoder):
    monkeypatch.setattr(checker, "TIME_LIMIT", 0.3)
    solution = _solution("mean_entropy")

    def swallowing(attn):  # catches the stop and runs on, then returns the right answer
        for _ in range(60):
            try:
                time.sleep(0.01)
            except:  # noqa: E722
                pass
        return solution(attn)

    message = _fails("mean_entropy", swallowing, encoder)
    assert "mean_entropy, on a uniform 5-token map: your function ran for more than 0.3 s" in message
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0) and signal.getsignal(signal.SIGALRM) is signal.SIG_DFL


def test_an_answer_as_a_bfloat16_tensor_is_compared_not_a_crash(encoder):
    solution = _solution("word_level")
    message = _fails("word_level", lambda *args: torch.as_tensor(solution(*args), dtype=torch.bfloat16), encoder)
    assert "expected array of shape (3, 3)" in message and "got      array of shape (3, 3)" in message


def test_outside_the_main_thread_the_check_runs_without_a_time_limit_and_says_so(encoder):
    seen = {}

    def run():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            seen["passed"] = exercises.check("mean_entropy", _solution("mean_entropy"), encoder)
        seen["warnings"] = [str(w.message) for w in caught]

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen["passed"] is True
    assert "no time limit here: signals need the main thread" in " ".join(seen["warnings"])


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


def test_the_notebooks_hold_every_exercise_in_sync_with_the_module(tmp_path):
    found = _cells()
    assert set(found) == set(NAMES)
    for name, cells in found.items():
        exercise = exercises.get(name)
        assert cells["notebook"] == exercise.notebook
        assert cells["text"] == exercise_cells.markdown(exercise)
        assert exercise_cells.definition(exercise) in cells["solution"]
        assert cells["check"] == exercise_cells.check_source(name)
    for path in notebooks():  # re-running the tool would change nothing
        shutil.copy(path, tmp_path / path.name)
        assert not exercise_cells.update(tmp_path / path.name), f"run `python -m tools.exercise_cells`: {path.name}"


def test_a_solution_without_markers_is_refused():
    with pytest.raises(ValueError, match="no '### BEGIN SOLUTION' line"):
        exercise_cells.solution_source(exercises.get("uas"), "def uas(predicted, gold, is_punct):\n    return 1.0")


def _body(solution: str) -> list[str]:
    """The lines between a solution's markers, stripped."""
    marked = re.search(r"### BEGIN SOLUTION\n(.*)\n[ \t]*### END SOLUTION", solution, re.DOTALL)
    return [line.strip() for line in marked.group(1).splitlines()]


def test_the_student_copies_hold_the_solutions_with_nbgraders_stub_and_nothing_of_the_body(encoder, capsys,
                                                                                         monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    stub = "    # YOUR CODE HERE\n    raise NotImplementedError()"
    for path in notebooks():
        teacher = nbformat.read(path, as_version=4)
        solutions = {c.metadata["exercise"]: c.source for c in teacher.cells if "exercise" in c.metadata}
        student = student_copy.student_version(teacher)
        stubs = {c.metadata["exercise"]: c.source for c in student.cells if "exercise" in c.metadata}
        checks = [c for c in student.cells if "exercise_check" in c.metadata]
        assert set(stubs) == set(solutions) == set(exercises.names(path.name[:2])) == {
            c.metadata["exercise_check"] for c in checks}
        lines = {line.strip() for cell in student.cells for line in cell.source.splitlines()}
        for name, solution in solutions.items():
            assert stubs[name] == solution.partition("    ### BEGIN SOLUTION")[0] + stub
            leaked = [line for line in _body(solution) if len(line) >= 20 and line in lines]
            assert not leaked, f"{path.name}: {name}'s solution leaks into the student copy: {leaked}"
        assert "BEGIN SOLUTION" not in student_copy.render(student)
        for cell in checks:  # the handout runs: each check says its function is not written yet (a note)
            assert "raises-exception" in cell.metadata["tags"]  # a wrong answer, or the autograder, raises
            namespace = {"encoder": encoder}
            exec(stubs[cell.metadata["exercise_check"]], namespace)
            exec(cell.source, namespace)
            assert "is not written yet" in capsys.readouterr().out


def _summed_surface_shares(attn, tokens):
    """surface_shares with sums over the rows where means are due."""
    cls = [j for j, t in enumerate(tokens) if t == "[CLS]"]
    sep = [j for j, t in enumerate(tokens) if t == "[SEP]"]
    return {"prev": np.diagonal(attn, -1).sum(), "next": np.diagonal(attn, 1).sum(),
            "cls": attn[:, cls].sum(), "sep": attn[:, sep].sum()}


def test_common_slips_are_named(encoder):
    assert "x too large: a sum where a mean is due?" in _fails("surface_shares", _summed_surface_shares, encoder)
    rollout = _solution("rollout")
    last_only = _fails("rollout", lambda attn: rollout(attn)[-1], encoder)
    assert "an axis too few" in last_only and "return [L, n, n] (here (" in last_only
    per_head = _fails("rollout", lambda attn: np.stack([rollout(attn)] * attn.shape[1], 1), encoder)  # heads kept
    assert "an axis too many" in per_head and "an axis too few" not in per_head
    torch_style = _fails("mean_entropy", lambda attn: attn.mean(dim=1), encoder)
    assert "numpy takes axis= (and keepdims=), not torch's dim=" in torch_style and "(line " in torch_style
    assert "likely mistake" not in _fails("mean_entropy", lambda attn: -1.0, encoder)  # no slip claimed for a guess


def test_a_wrong_answer_shows_its_message_without_a_traceback(encoder, capsys):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.user_ns.update(exercises=exercises, encoder=encoder, wrong=_summed_surface_shares)
    shell.run_cell('exercises.check("surface_shares", wrong, encoder)')
    shown = capsys.readouterr().out
    assert shown.startswith("✗ surface_shares, on ") and "sum where a mean is due" in shown
    assert "Traceback" not in shown and "checker.py" not in shown and "_verdict" not in shown


def test_an_unwritten_function_gets_a_note_and_fails_only_under_the_autograder(encoder, capsys, monkeypatch):
    def stub(attn):
        raise NotImplementedError()
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    assert exercises.check("mean_entropy", stub, encoder) is False
    assert capsys.readouterr().out.startswith("✎ mean_entropy is not written yet")
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    with pytest.raises(checker.NotWritten, match="is not written yet"):
        exercises.check("mean_entropy", stub, encoder)
