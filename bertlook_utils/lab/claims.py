"""Prose that cannot drift from the numbers. Every model-dependent sentence of a notebook is either rendered
from the computed results (`say`) or guarded by a claim that is checked when the notebook runs (`check`):
under nbval a claim that stops holding fails the cell, so `make test` fails.

    claims.check({"auxpass beats its offset baseline by more than 5 points": gain["auxpass"] > 5,
                  "the sink is [CLS], not [SEP], in layers 2-5": cls_share > sep_share}, model=MODEL)
    claims.say(f"The best head finds **{acc:.1f} %** of the heads, the next word {base:.1f} %.")

The prose of the notebooks is written for the default model's full run: with `model=None` (the default model) a
failed claim raises `ClaimFailed`; with another model, or in fast mode (`classroom.FAST`), it is reported as
"does not hold for this model" (this fast run).
"""
from __future__ import annotations

import re
from typing import Mapping

import numpy as np
from IPython.display import Markdown

from . import classroom


# A code span (shown as written) or a `<` that could open raw HTML: a tag, a closing tag, a comment, a declaration.
_CODE_OR_TAG = re.compile(r"(?<!`)(`+)(?!`)[\s\S]*?(?<!`)\1(?!`)|<(?=[A-Za-z/!?])")


class ClaimFailed(AssertionError):
    """A sentence of the notebook's prose no longer holds for the numbers computed above it."""


def _verdict(statement: str, value) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"claim {statement!r} must be a single True/False (a comparison of numbers), got "
                    f"{type(value).__name__}; reduce arrays with .all() or .any() first")


def check(statements: Mapping[str, bool], model: str | None = None) -> None:
    """Print each statement with ✔ (holds) or ✘ (does not hold). For the default model (`model` None) any ✘
    raises ClaimFailed naming every failed statement; for another model the ✘ lines are a warning that the
    prose above was written for the default model."""
    if not statements:
        raise ValueError("no claims given; pass {statement: condition}")
    verdicts = {statement: _verdict(statement, value) for statement, value in statements.items()}
    for statement, holds in verdicts.items():
        print(f"{'✔' if holds else '✘'} {statement}")
    failed = [statement for statement, holds in verdicts.items() if not holds]
    if failed and _enforced(model):
        raise ClaimFailed("the text says what the numbers no longer show; rewrite it or fix the analysis:\n"
                          + "\n".join(f"  ✘ {statement}" for statement in failed))
    if failed:
        print(f"({len(failed)} of {len(verdicts)} statements of the text, written for the default model's full run, "
              f"do not hold for {_run(model)})")


def _enforced(model: str | None) -> bool:
    """Whether a failed claim raises: for the default model's full run only."""
    return model is None and not classroom.FAST


def _run(model: str | None) -> str:
    return (model or "the default model") + (" in fast mode" if classroom.FAST else "")


def _no_html(markdown: str) -> str:
    """`markdown` with each `<` that could open raw HTML written `&lt;` (outside code spans, which show it as it is):
    an interpolated word shows as text; the Markdown, and a `<` between words, stay as written."""
    return _CODE_OR_TAG.sub(lambda found: found.group() if found.group(1) else "&lt;", markdown)


def say(text: str) -> Markdown:
    """Markdown rendered from the results (write it as an f-string of the computed numbers); HTML in it is shown
    as text."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("say() needs the Markdown text to render")
    return Markdown(_no_html(text))


def takeaways(statements: Mapping[str, bool], model: str | None = None) -> Markdown:
    """A notebook's closing "Takeaways": each statement (an f-string of the computed numbers) with the condition
    that makes it true. Rendered as a Markdown list; a statement that does not hold raises ClaimFailed for the
    default model's full run (`model` None) and is marked "(does not hold for ...)" for another model or in fast
    mode."""
    if not statements:
        raise ValueError("no takeaways given; pass {statement: condition}")
    verdicts = {statement: _verdict(statement, value) for statement, value in statements.items()}
    failed = [statement for statement, holds in verdicts.items() if not holds]
    if failed and _enforced(model):
        raise ClaimFailed("a takeaway no longer holds; rewrite it or fix the analysis:\n"
                          + "\n".join(f"  ✘ {statement}" for statement in failed))
    return Markdown(_no_html("**Takeaways**\n\n" + "\n".join(
        f"{k}. {statement}" + ("" if verdicts[statement] else f" *(does not hold for {_run(model)})*")
        for k, statement in enumerate(verdicts, 1))))
