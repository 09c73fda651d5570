"""The claim mechanism: a sentence of prose that stops holding fails the notebook, under nbval too."""
from __future__ import annotations

import subprocess
import sys

import nbformat
import numpy as np
import pytest

from bertlook_utils import claims


def test_claims_that_hold_are_printed_with_a_tick(capsys):
    gain = {"auxpass": 8.3}
    claims.check({"auxpass beats its baseline by more than 5 points": gain["auxpass"] > 5,
                  "numpy comparisons count": np.float64(3.4) > 1}, model=None)
    assert capsys.readouterr().out.splitlines() == ["✔ auxpass beats its baseline by more than 5 points",
                                                    "✔ numpy comparisons count"]


def test_a_broken_claim_raises_and_names_itself(capsys):
    with pytest.raises(claims.ClaimFailed, match="auxpass gains nothing"):
        claims.check({"layer 3 holds the best head": True, "auxpass gains nothing": 8.3 < 1})
    assert "✘ auxpass gains nothing" in capsys.readouterr().out


def test_for_another_model_a_broken_claim_is_a_warning(capsys):
    claims.check({"auxpass gains nothing": False}, model="bert-base-uncased")
    out = capsys.readouterr().out
    assert "✘ auxpass gains nothing" in out and "do not hold for bert-base-uncased" in out


@pytest.mark.parametrize("value", [np.array([True, False]), 1.0, "yes", None])
def test_a_claim_must_be_one_truth_value(value):
    with pytest.raises(TypeError, match="single True/False"):
        claims.check({"a claim": value})


def test_empty_input_is_refused():
    with pytest.raises(ValueError, match="no claims"):
        claims.check({})
    with pytest.raises(ValueError, match="Markdown"):
        claims.say("  ")


def test_say_renders_markdown_from_numbers():
    assert claims.say(f"the best head finds **{34.64:.1f} %**").data == "the best head finds **34.6 %**"


def test_say_and_takeaways_show_interpolated_html_as_text_and_keep_the_markdown():
    model = "<img src=x onerror=alert(1)>"
    shown = claims.say(f"**{model}** attends to `[CLS]`<!-- x --></b>")
    assert shown.data == "**&lt;img src=x onerror=alert(1)>** attends to `[CLS]`&lt;!-- x -->&lt;/b>"
    kept = "nearest mention < head-word match, `cls<->middle`, ``a `<b>` b``, Abnar & Zuidema, share > 0"
    assert claims.say(kept).data == kept  # the kit's own text: comparisons, code spans, entities stay as written
    listed = claims.takeaways({f"the sink is {model}": True})
    assert listed.data == "**Takeaways**\n\n1. the sink is &lt;img src=x onerror=alert(1)>"


@pytest.mark.slow
@pytest.mark.parametrize("holds", [True, False])
def test_nbval_fails_a_notebook_whose_claim_breaks(tmp_path, holds):
    """A notebook whose numbers moved under its prose fails `make test` (nbval), one that holds passes."""
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("The best head beats the baseline by more than 5 points."),
        nbformat.v4.new_code_cell(f"gain = {8.3 if holds else 0.4}"),
        nbformat.v4.new_code_cell("from bertlook_utils import claims\n"
                                  "claims.check({'the best head beats the baseline by more than 5 points': gain > 5})"),
    ])
    path = tmp_path / "claim.ipynb"
    nbformat.write(nb, path)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                          "--nbval-lax", str(path)], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert (run.returncode == 0) == holds, run.stdout[-2000:]
    if not holds:
        assert "ClaimFailed" in run.stdout and "more than 5 points" in run.stdout


def test_takeaways_render_a_numbered_list_and_refuse_one_that_fails():
    shown = claims.takeaways({"the sink is [CLS]": True, "layer 1 is broad (3.9 nats)": 3.9 > 3.5})
    assert shown.data == "**Takeaways**\n\n1. the sink is [CLS]\n2. layer 1 is broad (3.9 nats)"
    with pytest.raises(claims.ClaimFailed, match="✘ layer 1 is broad"):
        claims.takeaways({"the sink is [CLS]": True, "layer 1 is broad": 3.1 > 3.5})
    other = claims.takeaways({"layer 1 is broad": 3.1 > 3.5}, model="bert-base-uncased")
    assert "(does not hold for bert-base-uncased)" in other.data
    with pytest.raises(TypeError, match="single True/False"):
        claims.takeaways({"a claim": np.array([True, False])})


def test_in_fast_mode_a_failed_claim_is_reported_not_raised(monkeypatch, capsys):
    from bertlook_utils import classroom

    monkeypatch.setattr(classroom, "FAST", True)
    claims.check({"layer 1 is broad": 3.1 > 3.5})
    assert "do not hold for the default model in fast mode" in capsys.readouterr().out
    assert "(does not hold for the default model in fast mode)" in claims.takeaways({"layer 1 is broad": False}).data
