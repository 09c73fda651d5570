"""Classroom mode: the sizes switch with BERTLOOK_FAST, fast runs say so, and the three task notebooks share one
setting."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bertlook_utils import classroom

ROOT = Path(__file__).resolve().parents[1]


def _fresh(env_value):
    code = ("from bertlook_utils import classroom as c; print(c.FAST, c.size(1000, 100), c.EPOCHS, c.TOPIC_SPLIT, "
            "c.banner() is None)")
    env = {k: v for k, v in os.environ.items() if k != "BERTLOOK_FAST"}
    if env_value is not None:
        env["BERTLOOK_FAST"] = env_value
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return run.stdout.split()


@pytest.mark.parametrize("value, fast", [(None, False), ("0", False), ("", False), ("1", True), ("yes", True)])
def test_the_environment_switches_every_size(value, fast):
    out = _fresh(value)
    assert out[0] == str(fast)
    assert out[1] == ("100" if fast else "1000")
    assert out[2] == ("1" if fast else "2")
    assert out[-1] == str(not fast)  # a banner only in fast mode


def test_fast_mode_banner_names_the_mode(monkeypatch):
    monkeypatch.setattr(classroom, "FAST", True)
    assert "Fast mode" in classroom.banner().data and "BERTLOOK_FAST" in classroom.banner().data
    monkeypatch.setattr(classroom, "FAST", False)
    assert classroom.banner() is None


def test_the_task_notebooks_read_one_setting():
    tasks = classroom.task_data(0)
    assert set(tasks) == {"topic", "next_paragraph", "sentiment"}
    n_labels = len(tasks["topic"].labels)
    assert len(tasks["topic"].train) == classroom.TOPIC_SPLIT[0] * n_labels
    assert len(tasks["sentiment"].test) == classroom.PAIRS_SPLIT[1]



def test_finetune_all_trains_what_the_task_notebooks_train(monkeypatch):
    from bertlook_utils.analyses import finetune as finetuning
    from bertlook_utils.core import models

    calls = []
    monkeypatch.setattr(models, "load_encoder", lambda name=None: "encoder")
    monkeypatch.setattr(finetuning, "finetune", lambda encoder, data, **options: calls.append((data.name, options)))
    assert classroom.finetune_all() == len(calls) == 3 + 2 * (len(classroom.FINETUNE_SEEDS) - 1)
    settings = {"epochs": classroom.EPOCHS, "max_length": classroom.MAX_LENGTH}
    assert all({k: v for k, v in options.items() if k in settings} == settings for _, options in calls)
    seeds = {name: {options["seed"] for task, options in calls if task == name} for name, _ in calls}
    assert seeds == {"topic": set(classroom.FINETUNE_SEEDS), "sentiment": set(classroom.FINETUNE_SEEDS),
                     "next_paragraph": {0}}
    # notebook 08 fine-tunes topic, notebook 09 sentiment, with every seed of their parameter SEEDS
    for notebook in ("08_dark_secrets_patterns", "09_dark_secrets_heads"):
        cells = json.loads((ROOT / "notebooks" / f"{notebook}.ipynb").read_text())["cells"]
        lines = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code").splitlines()
        line = next(line for line in lines if line.startswith("SEEDS = "))
        assert eval(ast.unparse(ast.parse(line).body[0].value), {"classroom": classroom}) == classroom.FINETUNE_SEEDS
