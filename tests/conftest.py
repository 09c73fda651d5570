"""Shared fixtures: the real default model and the real Wikipedia segments, loaded once per session, and a tiny
random BERT saved to disk. The synthetic inputs everything else uses are built by tests/builders.py.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# Never touch the network: set before transformers / huggingface_hub are imported anywhere.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest
import torch
from builders import save_tiny_model
from hypothesis import settings

# The forward passes here are small (a few inputs of <= 512 tokens): one intra-op thread is as fast on a
# quiet machine and avoids OpenMP spin-waiting when the cores are shared (measured: a 1-input forward pass
# took 1.2 s with 2 threads on 2 busy cores, 0.06 s with 1).
torch.set_num_threads(1)

settings.register_profile("bertlook", deadline=None, max_examples=60)
settings.load_profile("bertlook")


# -- the real model and data (once per session) ------------------------------------------------------
@pytest.fixture(scope="session")
def encoder():
    """The embedded default encoder (all-MiniLM-L6-v2, 6 layers x 12 heads), loaded once, on the CPU (the tests'
    known answers and the committed notebooks' numbers are the CPU's) unless $BERTLOOK_TEST_DEVICE names another
    device (benchmarks/device_check.py runs the tests on a GPU)."""
    from bertlook_utils import load_encoder

    return load_encoder(device=os.environ.get("BERTLOOK_TEST_DEVICE") or "cpu")


@pytest.fixture(scope="session")
def tokenizer(encoder):
    return encoder.tokenizer


@pytest.fixture(scope="session")
def segments(tokenizer):
    """12 real segments from the gensim Wikipedia articles (the full corpus, parsed once, no disk cache)."""
    from bertlook_utils.corpora import make_segments

    return make_segments(tokenizer, 12, seed=0, cache_dir=None)


@pytest.fixture(scope="session")
def reference_encodeds(encoder, segments):
    """The segments encoded one at a time (batch_size=1): the reference for the streaming reducers."""
    return list(encoder.encode_many([s.pair for s in segments], batch_size=1))


@pytest.fixture(scope="session")
def tiny_folder(tokenizer, tmp_path_factory):
    """The tiny random BERT with the default WordPiece tokenizer, saved once per session."""
    return save_tiny_model(tmp_path_factory.mktemp("tiny-bert"), tokenizer)


@pytest.fixture(scope="session")
def tiny(tiny_folder):
    from bertlook_utils import load_encoder

    return load_encoder(tiny_folder)


@pytest.fixture
def small_corpus(monkeypatch):
    """make_segments over only the first 4 real articles: the same code path, a fraction of the time."""
    from bertlook_utils import corpora

    articles = corpora.wiki_articles()[:4]
    monkeypatch.setattr(corpora, "wiki_articles", lambda: articles)
    return articles


# -- the static book (tests/test_book.py, tests/test_accessibility.py) --------------------------------------
@pytest.fixture(scope="session")
def books(tmp_path_factory):
    """Both editions of the book, built once by the command line: {"student": folder, "instructor": folder}."""
    root = tmp_path_factory.mktemp("books")
    folders = {"student": root / "book", "instructor": root / "book-instructor"}
    for edition, out in folders.items():
        subprocess.run([sys.executable, "-m", "tools.book", "--edition", edition, "--out", str(out)], check=True,
                       cwd=Path(__file__).resolve().parents[1])
    return folders
