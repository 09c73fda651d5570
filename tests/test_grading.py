"""Grading outside the learner's kernel (`exercises.grading`): the answers' wire format carries every kind of answer
and refuses what it cannot read, a forged answer file passes nothing without the right numbers, the grader's verdict
on an answer is the kernel's, word for word, and a notebook whose cells fail, that lacks a cell or a function, whose
process dies, hangs or changes the kit gets a reason per exercise or none at all. The slow tests grade notebook 00's
submissions (tests/submissions.py: only the solved copy passes, every attack scores 0) and every committed notebook's
solutions (full marks)."""
from __future__ import annotations

import functools
import json
import math
import os
import time
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch
from submissions import submissions

from bertlook_utils import cli, exercises
from bertlook_utils.lab.exercises import checker, grading
from tools.navigation import notebooks

NAMES = exercises.names()


class Foo:
    def __repr__(self) -> str:
        return "Foo(1)"


# -- the wire format ---------------------------------------------------------------------------------------
def _identical(a, b) -> bool:
    """The same value of the same type: arrays of one dtype, shape and bytes; NaN equal to NaN."""
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if isinstance(a, dict):
        return type(b) is dict and list(a) == list(b) and all(_identical(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_identical(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _wire(value):
    """`value` sent as the learner's process sends it: encoded, as JSON text, decoded."""
    return grading.decode(json.loads(json.dumps(grading.encode(value), allow_nan=False)))


ARRAYS = [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([[1, -2]], dtype=">i8"), np.array([True, False]),
          np.arange(4, dtype=np.uint8), np.array([1 + 2j], dtype=np.complex64), np.array(["a", "bcd"]),
          np.array([b"xy", b""]), np.zeros((0, 3)), np.array(2.5), np.array([np.nan, np.inf, -np.inf])]


@pytest.mark.parametrize("value", [
    None, True, False, 0, -5, 2 ** 70, 1.5, -0.0, float("nan"), float("inf"), float("-inf"), "", "text ✓",
    [1, [2.5, "a"], []], (1, "a", (None,)), {"a": 1, 2: [3], 1.5: None, True: "x", None: (0,)},
    *ARRAYS, [ARRAYS[0], {"k": ARRAYS[5]}],
], ids=repr)
def test_every_kind_of_answer_comes_back_as_it_was_sent(value):
    assert _identical(_wire(value), value)


def test_tensors_numpy_scalars_and_other_objects_arrive_as_the_checker_reads_them():
    assert _identical(_wire(torch.tensor([[1.0, 2.0]])), np.array([[1.0, 2.0]], dtype=np.float32))
    assert _identical(_wire(torch.tensor([0.5], dtype=torch.bfloat16)), np.array([0.5], dtype=np.float32))
    assert _identical(_wire({"x": torch.tensor(3)}), {"x": np.array(3)})
    assert _identical(_wire(np.float32(0.5)), np.array(0.5, dtype=np.float32))
    assert _identical(_wire({np.int64(1): np.bool_(True)}), {1: np.array(True)})
    assert _identical(_wire(range(3)), np.arange(3))  # a sequence of numbers: its numbers, as the checker reads it
    for value, name in ((Foo(), "Foo"), ({1, 2}, "set"), (np.array([None]), "ndarray"), (b"raw", "bytes"),
                        ({(1, 2): 3}, "dict")):
        stand_in = _wire(value)
        assert type(stand_in).__name__ == name and repr(stand_in) == repr(value)
    assert repr(_wire(type("Long", (), {"__repr__": lambda self: "x" * 10_000})())) == "x" * 199 + "…"
    looped = []
    looped.append(looped)
    deep = _wire(looped)  # nested past MAX_DEPTH: the innermost list arrives as a stand-in, not a recursion error
    for _ in range(grading.MAX_DEPTH):
        deep = deep[0]
    assert type(deep).__name__ == "list" and repr(deep) == "[[...]]"


def test_a_stand_in_keeps_the_checkers_message_about_the_kind_of_answer(encoder):
    exercise = exercises.get("word_level")
    case = exercise.cases(encoder)[0]
    with pytest.raises(checker.CheckFailed) as kernel:
        checker._judge(exercise, case, Foo())
    with pytest.raises(checker.CheckFailed) as graded:
        checker._judge(exercise, case, _wire(Foo()))
    assert str(graded.value) == str(kernel.value)
    assert "your function returned a Foo where the answer is numbers of shape (3, 3)" in str(graded.value)


def _answers_file(tmp_path: Path, data) -> Path:
    path = tmp_path / "answers.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def _nested(depth: int):
    return [_nested(depth - 1)] if depth else 0


@pytest.mark.parametrize("data, words", [
    ("{not json", "not JSON"),
    ([1, 2], "not a JSON object"),
    ({"word_level": {"answer": 1}}, "word_level: not a list"),
    ({"word_level": [{"passed": True}]}, "neither an answer nor a failure"),
    ({"word_level": [{"failure": 3}]}, "a failure is a text"),
    ({"word_level": [{"answer": {"k": 1}}]}, "a JSON object without a known '\\$' tag"),
    ({"word_level": [{"answer": {"$": "pickle", "data": "gASVAAAA"}}]}, "a JSON object without a known '\\$' tag"),
    ({"word_level": [{"answer": {"$": "list", "items": [1]}}]}, "a JSON object without a known '\\$' tag"),
    ({"word_level": [{"answer": {"$": "array", "dtype": ["x", "<f8"], "shape": [], "bytes": ""}}]}, "a numpy dtype's"),
    ({"word_level": [{"answer": {"$": "array", "dtype": "|O", "shape": [1], "bytes": ""}}]}, "dtype \\|O: only"),
    ({"word_level": [{"answer": {"$": "array", "dtype": "<f8", "shape": [2], "bytes": "AAAAAAAA8D8="}}]},
     "shape \\[2\\] and dtype <f8 takes 16 bytes, not 8"),
    ({"word_level": [{"answer": {"$": "array", "dtype": "<f8", "shape": [True], "bytes": ""}}]}, "shape"),
    ({"word_level": [{"answer": {"$": "dict", "items": [[[1], 2]]}}]}, "a dict key"),
    ({"word_level": [{"answer": {"$": "float", "value": "1e400"}}]}, "a tagged float is 'nan', 'inf' or '-inf'"),
    ({"word_level": [{"answer": {"$": "opaque", "type": "a b", "repr": "x"}}]}, "type name"),
    ({"word_level": [{"answer": _nested(grading.MAX_DEPTH + 1)}]}, f"nested deeper than {grading.MAX_DEPTH}"),
    ("[" * 100_000 + "]" * 100_000, "nested too deep"),
])
def test_an_answer_file_that_cannot_be_read_is_refused_with_the_reason(tmp_path, data, words):
    with pytest.raises(ValueError, match=words):
        grading.read_answers(_answers_file(tmp_path, data))


def test_an_answer_file_larger_than_the_bound_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    path = _answers_file(tmp_path, {"word_level": [{"answer": [0.5] * 100}]})
    assert grading.read_answers(path)["word_level"] == [{"answer": [0.5] * 100}]
    monkeypatch.setattr(grading, "MAX_BYTES", 100)
    with pytest.raises(ValueError, match="larger than 100 bytes"):
        grading.read_answers(path)


# -- forged answers --------------------------------------------------------------------------------------
def test_a_forged_answer_file_passes_nothing_without_the_right_numbers(tmp_path, encoder):
    exercise = exercises.get("word_level")
    cases = exercise.cases(encoder)
    right = [{"answer": grading.encode(case.expected)} for case in cases]

    def judged(outcomes) -> grading.Grade:
        answers = grading.read_answers(_answers_file(tmp_path, {exercise.name: outcomes}))
        return grading._judged(exercise, cases, answers[exercise.name], "its process ended")

    assert judged(right).passed and judged(right).points == exercises.POINTS  # the test can fail: this passes
    zeros = [{"answer": grading.encode(np.zeros_like(case.expected))} for case in cases]
    lookalike = {"answer": {"$": "opaque", "type": "ndarray", "repr": repr(cases[0].expected)}}
    for outcomes, words in [
        (right[:-1], f"on {cases[-1].label}: no answer (its process ended)"),  # the real case left out
        (right[-1:], f"on {cases[0].label}:\n  expected"),  # only the real case's answer, in the first place
        ([], f"on {cases[0].label}: no answer"),
        (zeros, "it returns zeros"),
        ([lookalike, *right[1:]], "your function returned a ndarray where the answer is numbers of shape (3, 3)"),
        ([{"failure": "✓ word_level: right on every input"}, *right], "✓ word_level: right on every input"),
    ]:
        grade = judged(outcomes)
        assert not grade.passed and grade.points == 0 and words in grade.message


# -- the grader's verdict is the kernel's -----------------------------------------------------------------------
def _kernel_verdict(exercise, fn) -> str:
    try:
        with np.errstate(all="ignore"):
            checker.check(exercise, fn)
    except checker.CheckFailed as failure:
        return str(failure)
    return "passed"


def _graded_verdict(exercise, fn, tmp_path) -> str:
    """What the grader says of `fn`: its answers obtained as in the learner's process, sent through a file."""
    with np.errstate(all="ignore"):
        outcomes = grading._outcomes(exercise, fn, None)
    answers = grading.read_answers(_answers_file(tmp_path, {exercise.name: outcomes}))
    grade = grading._judged(exercise, exercise.cases(), answers[exercise.name], "")
    return "passed" if grade.passed else grade.message


@functools.cache
def _committed_solutions() -> dict[str, str]:
    """exercise -> its solution cell in the committed notebooks."""
    return {c.metadata["exercise"]: c.source for path in notebooks() for c in nbformat.read(path, as_version=4).cells
            if "exercise" in c.metadata}


def _committed_solution(name: str):
    namespace: dict = {}
    exec(_committed_solutions()[name], namespace)
    return namespace[name]


@pytest.mark.parametrize("name", NAMES)
def test_the_grader_says_what_the_kernel_says_of_every_solution_mistake_and_slip(name, tmp_path, monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")  # an unwritten function fails, as under the autograder
    exercise = exercises.get(name)

    def stub(*args):
        raise NotImplementedError()

    functions = [_committed_solution(name), stub, lambda *args: None, *(m.fn for m in exercise.mistakes)]
    verdicts = [(_kernel_verdict(exercise, fn), _graded_verdict(exercise, fn, tmp_path))
                for fn in functions]
    assert verdicts[0] == ("passed", "passed")
    assert "is not written yet" in verdicts[1][0]
    assert all(graded == kernel for kernel, graded in verdicts)


# -- grading a notebook ------------------------------------------------------------------------------------
def _notebook(tmp_path: Path, name: str, cells: dict[str, str]) -> Path:
    """A notebook `name` whose solution cells (exercise -> source) stand among ordinary cells the grader skips: the
    first imports torch and defines `encoder`."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("import torch\n\nencoder = object()")]  # never run
    for exercise, source in cells.items():
        notebook.cells += [nbformat.v4.new_code_cell(source, metadata={"exercise": exercise}),
                           nbformat.v4.new_code_cell(f"exercises.check({exercise!r}, {exercise}, encoder)")]
    path = tmp_path / name
    nbformat.write(notebook, path)
    return path


def _messages(grades: list[grading.Grade]) -> dict[str, str]:
    assert not any(g.passed for g in grades)
    return {g.exercise: g.message for g in grades}


def test_cells_that_do_not_compile_or_raise_and_a_missing_cell_fail_with_their_reason(tmp_path):
    said = _messages(grading.grade(_notebook(tmp_path, "11_cells.ipynb", {
        "sink_rate": "def sink_rate(attn, eps):\n    return attn.sum(\n", "softmax1": "x = encoder.name\n"})))
    assert said["sink_rate"].startswith("sink_rate: its solution cell is not valid Python: '(' was never closed "
                                        "(line 2: return attn.sum(); the grader runs the cell as plain Python")
    assert said["softmax1"].startswith("softmax1: its solution cell raised NameError: name 'encoder' is not defined "
                                       "(line 1: x = encoder.name)")
    assert "the grader runs only the solution cells" in said["softmax1"]
    said = _messages(grading.grade(_notebook(tmp_path, "12_missing.ipynb", {
        "value_zeroing": "def value_zeroed(outputs, zeroed):\n    return 0\n"})))
    assert said == {"restored_share": "restored_share: the notebook has no solution cell for it (a code cell whose "
                                      "metadata has \"exercise\": \"restored_share\")",
                    "value_zeroing": "value_zeroing: its solution cell defines no function `value_zeroing`"}


def test_a_function_that_needs_another_cell_or_ends_the_process_fails_with_the_reason(tmp_path):
    said = _messages(grading.grade(_notebook(tmp_path, "04_process.ipynb", {
        "relation_accuracy": "def relation_accuracy(word_attn, heads, relations, relation):\n    return torch.ones(1)",
        "best_offset": "import os\n\n\ndef best_offset(heads, relations, relation, offsets):\n    os._exit(3)\n"})))
    assert "relation_accuracy, on " in said["relation_accuracy"]
    assert "your function raised NameError: name 'torch' is not defined (line 2:" in said["relation_accuracy"]
    assert "the grader runs only the solution cells" in said["relation_accuracy"]
    assert said["best_offset"].startswith("best_offset, on ")
    assert said["best_offset"].endswith(": no answer (its process ended with exit code 3)")


def test_a_notebook_the_grader_cannot_read_is_refused_with_the_reason(tmp_path):
    (tmp_path / "00_text.ipynb").write_text("not a notebook")
    (tmp_path / "00_list.ipynb").write_text("[1, 2]")
    named = _notebook(tmp_path, "homework.ipynb", {})
    for path, words in ((tmp_path / "00_none.ipynb", "00_none.ipynb: no such file"),
                        (tmp_path / "00_text.ipynb", "00_text.ipynb is no readable notebook"),
                        (tmp_path / "00_list.ipynb", "00_list.ipynb is no readable notebook"),
                        (named, "homework.ipynb: not named as a BERTLook notebook is handed out")):
        with pytest.raises(ValueError, match=words):
            grading.grade(path)
        with pytest.raises(SystemExit, match=words):
            cli.main(["grade", str(path)])


def test_the_grade_is_refused_when_the_kits_files_change_while_the_learners_code_runs(tmp_path, monkeypatch):
    keys = iter(["before", "after"])
    monkeypatch.setattr(grading, "code_key", lambda: next(keys))
    with pytest.raises(grading.KitChanged, match="the kit's files changed while the learner's code ran"):
        grading.grade(_notebook(tmp_path, "03_kit.ipynb", {"mean_entropy": "x = 1"}))


def test_the_command_line_prints_each_verdict_and_a_total_and_writes_a_csv(tmp_path, capsys):
    path = _notebook(tmp_path, "03_line.ipynb", {"mean_entropy": "def mean_entropy(attn):\n    return 'high'"})
    cli.main(["grade", str(path), "--csv", str(tmp_path / "grades.csv")])
    shown = capsys.readouterr().out
    assert shown.startswith(f"{path}\n  ✗ mean_entropy, on ") and "returned a str where the answer is a number" in shown
    assert shown.endswith(f"  0 of {exercises.POINTS} points\n")
    rows = (tmp_path / "grades.csv").read_text().splitlines()
    assert rows[0] == "notebook,exercise,points,max,message"
    assert rows[1].startswith(f"{path},mean_entropy,0,{exercises.POINTS},\"mean_entropy, on ")


def _ended(pid: int) -> bool:
    """Whether process `pid` is gone (or a zombie, waiting for its parent's wait)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rpartition(")")[2].split()[0] == "Z"


@pytest.mark.slow
def test_a_process_that_outlives_its_time_is_ended_with_everything_it_started(tmp_path, monkeypatch):
    monkeypatch.setattr(grading, "LEARNER_SECONDS", 20.0)
    monkeypatch.setattr(grading, "TIME_LIMIT", 0.0)  # no time for the cells and cases: the process gets 20 s
    child = tmp_path / "child.pid"
    stubborn = ("import signal, subprocess\n\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                f"open({str(child)!r}, 'w').write(str(subprocess.Popen(['sleep', '600']).pid))\n"
                "while True:\n    pass\n")
    start = time.perf_counter()
    said = _messages(grading.grade(_notebook(tmp_path, "03_hang.ipynb", {"mean_entropy": stubborn})))
    assert time.perf_counter() - start < 60
    assert said["mean_entropy"].endswith("no answer (its process ran past 20 s and was stopped)")
    time.sleep(1)
    assert _ended(int(child.read_text()))


# -- the submissions -----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_only_the_solved_copy_passes_every_attack_and_the_handout_score_nothing(tmp_path):
    seconds, messages = {}, {}
    for who, notebook in submissions().items():
        (tmp_path / who).mkdir()
        nbformat.write(notebook, tmp_path / who / "00_tour.ipynb")
        start = time.perf_counter()
        grades = grading.grade(tmp_path / who / "00_tour.ipynb")
        seconds[who] = time.perf_counter() - start
        assert [g.exercise for g in grades] == exercises.names("00")
        messages[who] = " ".join(g.message for g in grades)
        assert sum(g.points for g in grades) == (len(grades) * exercises.POINTS if who == "solved" else 0), who
    print("grade() seconds per notebook:", {who: round(s, 1) for who, s in seconds.items()})
    assert "is not written yet" in messages["handout"]
    assert "it returns zeros" in messages["one_liner"] and "it returns zeros" in messages["patched_check"]
    assert "NameError: name 'get_ipython' is not defined" in messages["skipped_cells"]


@pytest.mark.slow
@pytest.mark.parametrize("path", notebooks(), ids=lambda path: path.name[:2])
def test_every_committed_notebooks_solutions_get_full_marks(path):
    grades = grading.grade(path)
    assert [g.exercise for g in grades] == exercises.names(path.name[:2])
    assert all(g.passed for g in grades), [g.message for g in grades if not g.passed]
