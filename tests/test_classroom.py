"""Classroom mode: the sizes switch with BERTLOOK_FAST, fast runs say so, and the three task notebooks share one
setting."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bertlook_utils import classroom


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
