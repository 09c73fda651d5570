"""corpora: Wikipedia articles from gensim's test data cut into BERT-style [CLS] A [SEP] B [SEP] segments.

The full corpus is segmented once per session (the `segments` fixture); tests that call make_segments
repeatedly use `small_corpus` (the first 4 real articles) to stay quick."""
from __future__ import annotations

import re

import pytest

from bertlook_utils import corpora
from bertlook_utils.corpora import Segment, make_segments, segments_fingerprint, split_sentences, wiki_articles


def n_tokens(tokenizer, segment: Segment) -> int:
    return len(tokenizer(segment.a, segment.b)["input_ids"])


def squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def assert_well_formed(tokenizer, segments, max_len: int, articles) -> None:
    texts = {title: squeeze(" ".join(paragraphs)) for title, paragraphs in articles}
    for segment in segments:
        assert segment.a.strip() and segment.b.strip()
        assert n_tokens(tokenizer, segment) <= max_len
        # A and B are text of their article, A before B (compared without whitespace: sentences are
        # re-joined with single spaces)
        text = texts[segment.article]
        start_a, start_b = text.find(squeeze(segment.a)), text.find(squeeze(segment.b))
        assert start_a >= 0 and start_b >= 0, segment
        assert start_a + len(squeeze(segment.a)) <= start_b
        assert segment.pair == (segment.a, segment.b)


# -- the real corpus ---------------------------------------------------------------------------------
def test_real_segments_fit_128_tokens_and_are_about_that_long(tokenizer, segments):
    assert len(segments) == 12
    assert_well_formed(tokenizer, segments, 128, wiki_articles())
    lengths = sorted(n_tokens(tokenizer, s) for s in segments)
    assert lengths[len(lengths) // 2] >= 120  # "about 128 tokens long"


def test_wiki_articles_are_cleaned_prose_paragraphs():
    articles = wiki_articles()
    assert len(articles) >= 90
    assert wiki_articles() is articles  # parsed once (lru_cache)
    for title, paragraphs in articles:
        assert title and paragraphs
        for paragraph in paragraphs:
            assert len(paragraph) >= corpora.MIN_PARAGRAPH_CHARS
            assert "[[" not in paragraph and "]]" not in paragraph and "''" not in paragraph
            assert "  " not in paragraph and paragraph == paragraph.strip()


def test_split_sentences_splits_on_sentence_ends():
    assert split_sentences("The sky is blue. Grass is green! Is water wet?") == [
        "The sky is blue.", "Grass is green!", "Is water wet?"]


# -- make_segments on a small slice of the corpus ----------------------------------------------------
def test_make_segments_is_deterministic_for_a_seed(tokenizer, small_corpus):
    first = make_segments(tokenizer, 20, seed=3, cache_dir=None)
    second = make_segments(tokenizer, 20, seed=3, cache_dir=None)
    assert len(first) == 20
    assert first == second


def test_make_segments_differs_across_seeds(tokenizer, small_corpus):
    assert make_segments(tokenizer, 20, seed=0, cache_dir=None) != make_segments(tokenizer, 20, seed=1,
                                                                                 cache_dir=None)


@pytest.mark.parametrize("max_len", [48, 128])
def test_every_segment_fits_max_len_with_non_empty_halves(tokenizer, small_corpus, max_len):
    segments = make_segments(tokenizer, 30, seed=2, max_len=max_len, cache_dir=None)
    assert len(segments) == 30
    assert_well_formed(tokenizer, segments, max_len, small_corpus)


def test_segments_keep_corpus_order(tokenizer, small_corpus):
    order = {title: i for i, (title, _) in enumerate(small_corpus)}
    segments = make_segments(tokenizer, 30, seed=4, cache_dir=None)
    positions = [order[s.article] for s in segments]
    assert positions == sorted(positions)
    assert len(set(positions)) > 1


def test_asking_for_more_segments_than_the_corpus_gives_is_an_error(tokenizer, small_corpus):
    with pytest.raises(ValueError, match="only"):
        make_segments(tokenizer, 100_000, seed=0, cache_dir=None)


@pytest.mark.parametrize("n", [0, -3])
def test_n_must_be_positive(tokenizer, n):
    with pytest.raises(ValueError, match="at least 1"):
        make_segments(tokenizer, n, cache_dir=None)


def test_segments_are_cached_by_seed(tokenizer, small_corpus, tmp_path, monkeypatch):
    first = make_segments(tokenizer, 10, seed=5, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("*.npz"))) == 1 and not list(tmp_path.glob("*.tmp"))

    def no_corpus():
        raise AssertionError("the corpus was read although the segments were cached")

    monkeypatch.setattr(corpora, "wiki_articles", no_corpus)
    assert make_segments(tokenizer, 10, seed=5, cache_dir=tmp_path) == first
    with pytest.raises(AssertionError, match="corpus was read"):
        make_segments(tokenizer, 10, seed=6, cache_dir=tmp_path)  # another key: recomputed


# -- fingerprints ------------------------------------------------------------------------------------
def test_segments_fingerprint_follows_the_text():
    base = [Segment("Art", "First half.", "Second half."), Segment("Art", "More.", "Text.")]
    fp = segments_fingerprint(base)
    assert len(fp) == 64
    assert segments_fingerprint([Segment("Art", "First half.", "Second half."), Segment("Art", "More.", "Text.")]) == fp
    changed = [
        [Segment("Art", "First half!", "Second half."), base[1]],  # A
        [Segment("Art", "First half.", "Second half"), base[1]],  # B
        [Segment("Other", "First half.", "Second half."), base[1]],  # article
        [Segment("Art", "First half.Second", " half."), base[1]],  # the A/B boundary
        base[::-1],  # order
        base[:1],  # fewer
    ]
    fingerprints = {segments_fingerprint(c) for c in changed}
    assert len(fingerprints) == len(changed) and fp not in fingerprints
