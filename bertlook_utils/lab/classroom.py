"""Classroom mode: the sizes of the notebooks' runs, full or fast.

    BERTLOOK_FAST=1 jupyter lab          # or: make run FAST=1, make prefill FAST=1
    N_SEGMENTS = classroom.size(1000, 100)
    classroom.banner()                   # a warning in fast mode, nothing in a full run

Fast mode shrinks every sample (segments, sentences, fine-tuning sets, bootstrap resamples, seeds) so that a
notebook runs from a cold cache in about a minute on a 2-core laptop. Its numbers differ from the committed
notebooks (full runs) and from their prose, so a claim that does not hold is reported, not raised (`claims`), and
every notebook says at its top that it ran fast. Fast results are cached apart from full ones (the cache keys hold
the sizes).
"""
from __future__ import annotations

import os

from IPython.display import Markdown

FAST = os.environ.get("BERTLOOK_FAST", "").strip() not in ("", "0")
MODE = "fast" if FAST else "full"

# The fine-tuning tasks of notebooks 08-10 (one setting, so the three notebooks share the cached models):
# train / test examples per topic label, and train / test pairs of the two-class tasks.
TOPIC_SPLIT = (16, 4) if FAST else (48, 16)
PAIRS_SPLIT = (128, 64) if FAST else (576, 192)
EPOCHS = 1 if FAST else 2
MAX_LENGTH = 64  # tokens per task input


def size(full, fast):
    """`full` in a full run, `fast` in fast mode: a sample size, a number of epochs, a tuple of seeds ..."""
    return fast if FAST else full


# fine-tuning seeds of notebook 08's topic task and notebook 09's sentiment task (the others: seed 0 only)
FINETUNE_SEEDS = size((0, 1, 2), (0, 1))


def task_data(seed: int = 0) -> dict:
    """The three fine-tuning tasks of notebooks 08-10, name -> `tasks.TaskData`, at this mode's sizes."""
    from ..data.tasks import next_paragraph_data, sentiment_data, topic_data

    return {"topic": topic_data(*TOPIC_SPLIT, seed), "next_paragraph": next_paragraph_data(*PAIRS_SPLIT, seed),
            "sentiment": sentiment_data(*PAIRS_SPLIT, seed)}


def finetune_all(model: str | None = None, progress: bool = True) -> int:
    """Fine-tune into the cache every model that notebooks 08-10 and the talk train (each task with seed 0, the
    topic and sentiment tasks with every seed of `FINETUNE_SEEDS`), with the notebooks' settings, so that notebooks
    run side by side (`make nbval`) load them and none trains what another is training; the number of models."""
    from ..analyses.finetune import finetune
    from ..core.models import load_encoder

    encoder, tasks = load_encoder(model), task_data(0)
    runs = [(name, 0) for name in tasks] + [(name, seed) for name in ("topic", "sentiment")
                                            for seed in FINETUNE_SEEDS if seed != 0]
    for name, seed in runs:
        finetune(encoder, tasks[name], epochs=EPOCHS, max_length=MAX_LENGTH, seed=seed, progress=progress)
    return len(runs)


def banner() -> Markdown | None:
    """In fast mode, the warning a notebook shows under its parameters; None (no output) in a full run."""
    if not FAST:
        return None
    return Markdown("> ⚠ **Fast mode** (`BERTLOOK_FAST=1`): every sample below is smaller than in the committed "
                    "notebook, so every number differs from it and from the prose. The prose's claims are reported "
                    "(✘ where they do not hold), not enforced. Unset `BERTLOOK_FAST` for the full run.")
