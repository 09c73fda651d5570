"""Grading a submitted notebook outside the learner's kernel: the learner's functions run in a process of their own,
their answers are judged in the grader's.

    python -m bertlook_utils.cli grade submitted/*/00/00_tour.ipynb --csv grades.csv

Code in the learner's kernel can change any verdict computed there (`checker`), so `grade` computes none there. It
reads a submitted notebook, named as it was handed out (NN_*.ipynb), and first builds the cases of that notebook's
exercises, expected answers included, in its own process. Then a fresh Python process (this module run with `-m`, in
a temporary folder and a session of its own, without NBGRADER_* variables, offline, on the CPU) runs the notebook's
solution cells, and no other cell, in order in one namespace, and calls each exercise's function on the same cases
right after its cell, with the checker's time limit and error handling. It writes back only data: per case, the
answer or why there is none, as JSON with tagged values (`encode`, `decode`; never pickle, so nothing a learner's
object defines runs in the grader), of which the grader reads at most MAX_BYTES. The process is stopped
LEARNER_SECONDS past its cells' and cases' time limits, and whatever it started ends with it. The grader judges each
answer with the checker's own code: a `Grade` passes, or fails with the message the learner would see in the kernel.

The learner's process runs as the grader's user. The grader refuses a grade (`KitChanged`) when the kit's source
files changed while the learner's code ran, and checks nothing else on disk: grade as a user who can write neither
the kit nor what it runs on (its data and cache, the Python environment).
"""
from __future__ import annotations

import base64
import functools
import json
import linecache
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import nbformat
import numpy as np

from ...core.cache_pack import code_key
from ...core.models import load_encoder
from ...core.source import PACKAGE_DIR
from . import POINTS, get, names
from .checker import (TIME_LIMIT, Case, CheckFailed, Exercise, _answer, _judge, _plain, _same, _time_limit, _TimeUp,
                      _where_in, real_inputs)

MAX_BYTES = 64 * 2**20  # the most of the learner's answers the grader reads
MAX_DEPTH = 32  # lists, tuples and dicts inside one another, at most, in an answer on the wire
MAX_REPR = 200  # characters of a stand-in's repr
ARRAY_KINDS = "biufcSU"  # numpy arrays sent as bytes: bools, integers, floats, complex numbers, fixed-width text
NUMBER_KINDS = "biufc"
LEARNER_SECONDS = 120.0  # the learner's process, beyond its cells' and cases' time limits: starting, loading the model
_FIELDS = {"float": {"value"}, "tuple": {"items"}, "dict": {"items"}, "array": {"dtype", "shape", "bytes"},
           "opaque": {"type", "repr"}}  # the tagged JSON objects of the wire, and their fields besides "$"


# -- the wire: answers as JSON -----------------------------------------------------------------------------
class StandIn:
    """An answer the wire does not carry, as its type's name (the class's) and the start of its repr: enough for the
    checker to say "your function returned a Foo"."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


@functools.cache
def _stand_in_type(name: str) -> type:
    return type(name, (StandIn,), {})


def _opaque(value) -> dict:
    name = type(value).__name__[:100]
    try:
        text = repr(value)
    except Exception:  # the learner's __repr__ failed: the type's name says enough
        text = f"<{name}>"
    return {"$": "opaque", "type": name if name.isidentifier() else "object",
            "repr": text if len(text) <= MAX_REPR else text[:MAX_REPR - 1] + "…"}


def _array(array: np.ndarray) -> dict:
    return {"$": "array", "dtype": array.dtype.str, "shape": list(array.shape),
            "bytes": base64.b64encode(array.tobytes()).decode("ascii")}


def encode(value, depth: int = 0):
    """An answer as JSON data, after `checker._plain` (tensors as numpy arrays): None, bools, ints, texts and lists as
    themselves; a NaN or infinite float, a tuple, a dict whose keys are None, bools, numbers or texts, and a numpy
    array of ARRAY_KINDS or a numpy number (dtype, shape, bytes in base64) as objects tagged "$"; anything else numpy
    reads as numbers (a range, a pandas Series) as that array, as the checker reads it; the rest, and containers
    nested MAX_DEPTH deep, as a stand-in ("opaque": its type's name and the start of its repr)."""
    value = _plain(value)
    if value is None:
        return None
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, np.generic) and value.dtype.kind in NUMBER_KINDS:
        return _array(np.asarray(value))
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else {"$": "float", "value": repr(float(value))}
    if isinstance(value, np.ndarray) and value.dtype.kind in ARRAY_KINDS:
        return _array(value)
    if isinstance(value, (list, tuple, dict)) and depth >= MAX_DEPTH:
        return _opaque(value)
    if isinstance(value, list):
        return [encode(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return {"$": "tuple", "items": [encode(v, depth + 1) for v in value]}
    keys = [k.item() if isinstance(k, np.generic) else k for k in value] if isinstance(value, dict) else None
    if keys is not None and all(k is None or isinstance(k, (bool, int, float, str)) for k in keys):
        return {"$": "dict", "items": [[encode(k), encode(v, depth + 1)] for k, v in zip(keys, value.values())]}
    try:
        array = np.asarray(value)
    except Exception:  # a ragged sequence, an object numpy cannot read
        return _opaque(value)
    return _array(array) if array.dtype.kind in NUMBER_KINDS else _opaque(value)


def _short(data) -> str:
    return json.dumps(data)[:80]


def _decoded_array(data: dict) -> np.ndarray:
    try:
        if not isinstance(data["dtype"], str):
            raise TypeError
        dtype = np.dtype(data["dtype"])
    except (TypeError, ValueError):
        raise ValueError(f"an array's dtype is a numpy dtype's name, not {_short(data['dtype'])}") from None
    if dtype.kind not in ARRAY_KINDS or dtype.fields is not None or dtype.subdtype is not None or not dtype.itemsize:
        raise ValueError(f"an array of dtype {dtype.str}: only {ARRAY_KINDS} kinds travel")
    shape = data["shape"]
    if not isinstance(shape, list) or len(shape) > MAX_DEPTH or not all(
            type(n) is int and n >= 0 for n in shape):
        raise ValueError(f"an array's shape is a list of at most {MAX_DEPTH} sizes, not {_short(shape)}")
    if not isinstance(data["bytes"], str):
        raise ValueError("an array's bytes are a base64 text")
    raw = base64.b64decode(data["bytes"], validate=True)
    if math.prod(shape) * dtype.itemsize != len(raw):
        raise ValueError(f"an array of shape {shape} and dtype {dtype.str} takes {math.prod(shape) * dtype.itemsize} "
                         f"bytes, not {len(raw)}")
    return np.frombuffer(raw, dtype=dtype).reshape(shape)


def decode(data, depth: int = 0):
    """The answer `encode` wrote; ValueError for anything else (an untagged object, an unknown tag, a dtype beyond
    ARRAY_KINDS, bytes that do not fill the shape, containers nested MAX_DEPTH deep)."""
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    tag = list if isinstance(data, list) else data.get("$")
    if tag is not list and (not isinstance(tag, str) or tag not in _FIELDS or set(data) != {"$", *_FIELDS[tag]}):
        raise ValueError(f"a JSON object without a known '$' tag and its fields: {_short(data)}")
    if tag in (list, "tuple", "dict") and depth >= MAX_DEPTH:
        raise ValueError(f"an answer nested deeper than {MAX_DEPTH} levels")
    if tag is list:
        return [decode(v, depth + 1) for v in data]
    if tag == "float":
        if data["value"] not in ("nan", "inf", "-inf"):
            raise ValueError(f"a tagged float is 'nan', 'inf' or '-inf', not {_short(data['value'])}")
        return float(data["value"])
    if tag == "array":
        return _decoded_array(data)
    if tag == "opaque":
        name, text = data["type"], data["repr"]
        if not (isinstance(name, str) and name.isidentifier() and len(name) <= 100):
            raise ValueError(f"a stand-in's type name is an identifier, not {_short(name)}")
        if not (isinstance(text, str) and len(text) <= MAX_REPR):
            raise ValueError(f"a stand-in's repr is a text of at most {MAX_REPR} characters")
        return _stand_in_type(name)(text)
    items = data["items"]
    if not isinstance(items, list):
        raise ValueError(f"a tagged {tag}'s items are a list")
    if tag == "tuple":
        return tuple(decode(v, depth + 1) for v in items)
    if not all(isinstance(pair, list) and len(pair) == 2 for pair in items):
        raise ValueError("a tagged dict's items are [key, value] pairs")
    keys = [decode(k) for k, _ in items]
    if not all(k is None or isinstance(k, (bool, int, float, str)) for k in keys):
        raise ValueError("a dict key is None, a bool, a number or a text")
    return {k: decode(v, depth + 1) for k, (_, v) in zip(keys, items)}


def _outcome(name: str, outcome) -> dict:
    """One case's outcome as read: {"answer": value} or {"failure": message}."""
    if isinstance(outcome, dict) and set(outcome) == {"failure"}:
        if not isinstance(outcome["failure"], str):
            raise ValueError(f"{name}: a failure is a text, not {_short(outcome['failure'])}")
        return outcome
    if isinstance(outcome, dict) and set(outcome) == {"answer"}:
        try:
            return {"answer": decode(outcome["answer"])}
        except ValueError as error:
            raise ValueError(f"{name}: {error}") from None
    raise ValueError(f"{name}: an outcome that is neither an answer nor a failure: {_short(outcome)}")


def read_answers(path: Path) -> dict[str, list[dict]]:
    """The answers the learner's process wrote: exercise -> its outcomes in case order, each {"answer": value} or
    {"failure": message}; ValueError saying why the file cannot be read (more than MAX_BYTES, not JSON, nested too
    deep, not the wire format)."""
    with open(path, "rb") as file:
        text = file.read(MAX_BYTES + 1)
    if len(text) > MAX_BYTES:
        raise ValueError(f"the answers are larger than {MAX_BYTES} bytes")
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError("the answers are nested too deep to read") from None
    except ValueError as error:  # not JSON, not UTF-8, an integer of too many digits
        raise ValueError(f"the answers are not JSON ({error})") from None
    if not isinstance(data, dict):
        raise ValueError("the answers are not a JSON object")
    for name, outcomes in data.items():
        if not isinstance(outcomes, list):
            raise ValueError(f"{name}: not a list of outcomes")
    return {name: [_outcome(name, outcome) for outcome in outcomes] for name, outcomes in data.items()}


# -- the learner's process ---------------------------------------------------------------------------------
@functools.cache
def _encoder(model: str | None):
    """The model the real cases read (None: the default, which `real_inputs` loads), on the CPU."""
    return None if model is None else load_encoder(model, device="cpu")


def _note(error: BaseException | None) -> str:
    return ("\n  note: the grader runs only the solution cells: import or define in the cell every name your "
            "function uses" if isinstance(error, NameError) else "")


def _run_cell(name: str, source: str, namespace: dict) -> str | None:
    """Run the solution cell of exercise `name` in `namespace`; why it failed, or None."""
    filename = f"<solution cell of {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # tracebacks quote the cell
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as error:
        return (f"{name}: its solution cell is not valid Python: {error.msg} (line {error.lineno}: "
                f"{(error.text or '').strip()}); the grader runs the cell as plain Python, without %magics or "
                "!commands")
    try:
        with _time_limit(TIME_LIMIT):
            exec(code, namespace)
    except _TimeUp:
        return f"{name}: its solution cell ran for more than {TIME_LIMIT:g} s"
    except Exception as error:
        return f"{name}: its solution cell raised {type(error).__name__}: {error}{_where_in(error)}{_note(error)}"
    return None


def _cases(exercise: Exercise, model: str | None) -> Iterator[Case]:
    yield from exercise.synthetic()
    yield exercise.real(real_inputs(_encoder(model)))  # built only once every synthetic answer was right


def _outcomes(exercise: Exercise, fn, model: str | None) -> list[dict]:
    """`fn` on each case of `exercise` in turn, up to the first failure or wrong answer (the grader's verdict stops
    there too): per case {"answer": encoded} or {"failure": message}."""
    if not callable(fn):
        return [{"failure": f"{exercise.name}: its solution cell defines no function `{exercise.name}`"}]
    outcomes = []
    for case in _cases(exercise, model):
        try:
            got = _answer(exercise, fn, case)
        except CheckFailed as failure:
            return outcomes + [{"failure": f"{failure}{_note(failure.__cause__)}"}]
        outcomes.append({"answer": encode(got)})
        if not _same(got, case.expected):
            break
    return outcomes


def _learn(request: str, answers: str) -> None:
    """The learner's process: the solution cells of `request` (JSON: model, exercises, cells [[exercise, source]])
    run in order in one namespace, each graded exercise's outcomes written to `answers` right after its cell."""
    asked = json.loads(Path(request).read_text())
    namespace: dict = {"__name__": "__main__"}
    found: dict[str, list[dict]] = {}
    for name, source in asked["cells"]:
        failure = _run_cell(name, source, namespace)
        if name in asked["exercises"]:
            found[name] = [{"failure": failure}] if failure else _outcomes(get(name), namespace.get(name),
                                                                           asked["model"])
            Path(f"{answers}.tmp").write_text(json.dumps(found, allow_nan=False))
            os.replace(f"{answers}.tmp", answers)


# -- the grader ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Grade:
    """One exercise's verdict: passed, and the message the learner sees in the kernel ("✓"'s note, or why not)."""

    exercise: str
    passed: bool
    message: str

    @property
    def points(self) -> int:
        return POINTS if self.passed else 0


class KitChanged(RuntimeError):
    """The kit's source files changed while the learner's code ran: no grade."""


def _solution_cells(path: Path) -> list[tuple[str, str]]:
    """(exercise, source) of each solution cell of the notebook at `path`, in order; ValueError when there is no
    readable notebook."""
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    try:
        notebook = nbformat.reads(path.read_text(encoding="utf-8"), as_version=4)
        nbformat.validate(notebook)
    except Exception as error:  # nbformat meets a malformed file with whatever its parsing raises
        raise ValueError(f"{path} is no readable notebook ({type(error).__name__}: "
                         f"{str(error).partition(chr(10))[0]})") from None
    return [(c.metadata["exercise"], c.source) for c in notebook.cells
            if c.cell_type == "code" and isinstance(c.metadata.get("exercise"), str)]


def _exercises(path: Path) -> list[str]:
    """The exercises of the notebook `path` was handed out as (its name's NN_), in order."""
    number = re.match(r"(\d\d)_", path.name)
    found = names(number.group(1)) if number else []
    if not found:
        raise ValueError(f"{path.name}: not named as a BERTLook notebook is handed out (NN_*.ipynb): no exercises "
                         "to grade")
    return found


def _learner_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NBGRADER")}
    path = os.pathsep.join(filter(None, [str(PACKAGE_DIR.parent), env.get("PYTHONPATH")]))  # this kit, not another
    return env | {"PYTHONPATH": path, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                  "TOKENIZERS_PARALLELISM": "false", "BERTLOOK_DEVICE": "cpu"}


def _traceback_end(stderr: Path) -> str:
    """": <last line>" of the learner process's error output when it ends with a Python traceback, else ""."""
    with open(stderr, "rb") as file:
        file.seek(max(0, stderr.stat().st_size - 65536))
        text = file.read().decode(errors="replace")
    return f": {text.strip().splitlines()[-1]}" if "Traceback (most recent call last)" in text else ""


def _run_learner(cells: list[tuple[str, str]], graded: list[str], model: str | None,
                 cases: int) -> tuple[dict[str, list[dict]], str]:
    """The outcomes the learner's process wrote (exercise -> outcomes), and how it ended (why answers are missing)."""
    limit = LEARNER_SECONDS + TIME_LIMIT * (len(cells) + cases)
    with tempfile.TemporaryDirectory(prefix="bertlook-grading-", ignore_cleanup_errors=True) as folder:
        request, answers, stderr = (Path(folder) / name for name in ("request.json", "answers.json", "stderr.txt"))
        request.write_text(json.dumps({"model": model, "exercises": graded, "cells": cells}))
        with open(stderr, "wb") as errors:
            process = subprocess.Popen([sys.executable, "-m", __name__, str(request), str(answers)], cwd=folder,
                                       env=_learner_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=errors, start_new_session=True)
            try:
                ended = f"its process ended with exit code {process.wait(timeout=limit)}{_traceback_end(stderr)}"
            except subprocess.TimeoutExpired:
                ended = f"its process ran past {limit:g} s and was stopped"
            finally:
                with suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)  # the process, and whatever it started
                process.wait()
        if not answers.exists():
            return {}, ended
        try:
            return read_answers(answers), ended
        except ValueError as error:
            return {}, f"its answers could not be read: {error}"


def _judged(exercise: Exercise, cases: list[Case], outcomes: list[dict], ended: str) -> Grade:
    """The verdict on the learner's `outcomes` (in case order): the first failure, wrong answer or missing answer
    (`ended`: why) fails the exercise."""
    for k, case in enumerate(cases):
        if k == len(outcomes):
            return Grade(exercise.name, False, f"{exercise.name}, on {case.label}: no answer ({ended})")
        if "failure" in outcomes[k]:
            return Grade(exercise.name, False, outcomes[k]["failure"])
        try:
            with np.errstate(all="ignore"):
                _judge(exercise, case, outcomes[k]["answer"])
        except CheckFailed as wrong:
            return Grade(exercise.name, False, str(wrong))
    return Grade(exercise.name, True, f"{exercise.name}: right on {len(cases) - 1} inputs with known answers and on "
                                      f"{cases[-1].label}")


def grade(notebook: Path | str, model: str | None = None) -> list[Grade]:
    """The grade of each exercise of a submitted notebook (NN_*.ipynb), in order, judged outside the learner's kernel
    on `model` (a name or folder; None: the default model), as the module's docstring says. ValueError when the file is
    no readable notebook or not named as handed out; KitChanged when the kit's files changed while the learner's
    code ran."""
    path = Path(notebook)
    cells, graded = _solution_cells(path), _exercises(path)
    encoder = _encoder(model)
    cases = {name: get(name).cases(encoder) for name in graded}  # the expected answers, before any learner code runs
    before = code_key()
    outcomes, ended = _run_learner(cells, graded, model, sum(map(len, cases.values())))
    if code_key() != before:
        raise KitChanged(f"{path}: not graded: the kit's files changed while the learner's code ran; grade as a user "
                         f"who cannot write {PACKAGE_DIR.parent}")
    present = {name for name, _ in cells}
    return [_judged(get(name), cases[name], outcomes.get(name, []), ended) if name in present else
            Grade(name, False, f"{name}: the notebook has no solution cell for it (a code cell whose metadata has "
                               f"\"exercise\": \"{name}\")") for name in graded]


if __name__ == "__main__":
    _learn(*sys.argv[1:])
