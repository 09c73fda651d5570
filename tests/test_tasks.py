"""tasks: the fine-tuning tasks are deterministic, balanced and leak no text between splits; clipping keeps
whole words."""
from __future__ import annotations

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


def test_clipped_item_fits_and_keeps_whole_words(encoder):
    example = tasks.Example("one two three " * 40, "four five " * 40, 1)
    a, b = tasks.clipped_item(encoder.tokenizer, example, 64)
    assert len(encoder.encode(a, b).tokens) <= 64
    assert set(a.split()) <= {"one", "two", "three"} and set(b.split()) <= {"four", "five"}
