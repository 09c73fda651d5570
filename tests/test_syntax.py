"""syntax: alignment of parser words with the encoder, and head accuracy / offset baselines on synthetic
maps whose best heads and offsets are known by construction."""
from __future__ import annotations

import numpy as np
import pytest

from bertlook_utils import compare, syntax, widgets
from bertlook_utils.parses import Sentence


def sentence(words, heads, relations, k=0, article="A"):
    pos = ["PUNCT" if w in ".," else "NOUN" for w in words]
    return Sentence(tuple(words), tuple(heads), tuple(relations), tuple(pos), tuple("X" for _ in words), article,
                    f"{article}#{k}")


# -- alignment with the real encoder ----------------------------------------------------------------
SPLIT_WORDS = sentence(["Tchaikovsky", "'s", "unaffordable", "symphonies", "re-emerged", "."],
                       [4, 1, 4, 5, 0, 5], ["poss", "case", "amod", "nsubj", "ROOT", "punct"])
SHORT = sentence(["Dogs", "bark", "."], [2, 0, 2], ["nsubj", "ROOT", "punct"], k=1)


def test_alignment_keeps_every_word(encoder):
    examples = syntax.parsed_attention(encoder, [SPLIT_WORDS, SHORT], batch_size=2, progress=False)
    for example, s in zip(examples, [SPLIT_WORDS, SHORT]):
        m = len(s.words) + 2
        assert example.word_attn.shape == (encoder.n_layers, encoder.n_heads, m, m)
        assert example.word_attn.dtype == np.float32
        np.testing.assert_allclose(example.word_attn.sum(-1), 1, atol=1e-4)
        assert example.words == list(s.words) and example.relations == list(s.relations)
        assert example.heads.tolist() == list(s.heads) and example.id == s.id
        assert example.is_punct == s.is_punct
    # split words really were split into several pieces (the test would be vacuous otherwise)
    assert len(encoder.prepare(list(SPLIT_WORDS.words)).tokens) > len(SPLIT_WORDS.words) + 4


def test_batched_alignment_equals_one_at_a_time(encoder):
    together = syntax.parsed_attention(encoder, [SHORT, SPLIT_WORDS], batch_size=2, progress=False)
    alone = [syntax.parsed_attention(encoder, [s], batch_size=1, progress=False)[0] for s in (SHORT, SPLIT_WORDS)]
    for a, b in zip(together, alone):
        np.testing.assert_allclose(a.word_attn, b.word_attn, atol=1e-5)


def test_a_word_without_wordpieces_is_a_clear_error(encoder):
    bad = sentence(["Hello", "\u200b", "world"], [0, 1, 1], ["ROOT", "dep", "dep"], k=5)
    with pytest.raises(ValueError, match=r"A#5.*no wordpieces"):
        syntax.parsed_attention(encoder, [SHORT, bad], progress=False)


def test_parsed_attention_checks_its_shapes():
    with pytest.raises(ValueError, match="word_attn"):
        syntax.ParsedAttention(np.zeros((1, 1, 4, 4), np.float32), np.array([0, 1, 1]), ["a"] * 3, ["w"] * 3,
                               [False] * 3)


# -- scoring on synthetic maps -----------------------------------------------------------------------
L, H = 2, 3


def synthetic(heads, relations=None, words=None, special=None, seed=0, k=0):
    """A ParsedAttention with random maps in every head except those in `special`: {(layer, head): rows},
    where rows(m) gives the target column(s) of each of the m rows (0 = [CLS], m-1 = [SEP])."""
    n = len(heads)
    m = n + 2
    rng = np.random.default_rng(seed)
    attn = rng.random((L, H, m, m)).astype(np.float32) + 0.01
    for (layer, head), rows in (special or {}).items():
        attn[layer - 1, head - 1] = 0
        for i, targets in enumerate(rows(m)):
            attn[layer - 1, head - 1, i, targets] = 1.0
    attn /= attn.sum(-1, keepdims=True)
    relations = relations or [("ROOT" if h == 0 else ("a" if i % 2 else "b")) for i, h in enumerate(heads)]
    words = words or [f"w{i + 1}" for i in range(n)]
    return syntax.ParsedAttention(attn, np.array(heads), list(relations), list(words), [False] * n, f"S#{k}")


TREES = [[2, 0, 2, 5, 3, 5, 6, 2], [3, 3, 0, 3, 4, 4, 6], [0, 1, 4, 2, 4, 5, 8, 6, 8]]


def to_gold_head(heads):
    """Row of word i (1-based) -> its gold head's column (ROOT -> [CLS]); [CLS] and [SEP] -> [SEP]."""
    return lambda m: [m - 1] + list(heads) + [m - 1]


def to_dependents(heads):
    """Row of each word -> all its dependents' columns (none -> [SEP])."""
    def rows(m):
        out = [[m - 1] for _ in range(m)]
        for dep, head in enumerate(heads, start=1):
            if head:
                out[head] = [c for c in out[head] if c != m - 1] + [dep]
        return out
    return rows


def test_a_head_attending_from_each_dependent_to_its_gold_head_scores_100_percent():
    examples = [synthetic(t, special={(2, 2): to_gold_head(t)}, seed=i, k=i) for i, t in enumerate(TREES)]
    table = syntax.head_accuracy(syntax.score_examples(examples, scoring="kit")).set_index("relation")
    assert set(table.index) == {"all", "a", "b"}
    for relation in table.index:
        row = table.loc[relation]
        assert (row["layer"], row["head"], row["direction"], row["accuracy"]) == (2, 2, "dep->head", 1.0)
        assert (row["low"], row["high"]) == (1.0, 1.0)
    assert table.loc["all", "n"] == sum(len(t) - 1 for t in TREES)
    # Clark's scoring counts the roots in "all", where no head can be right: 3 roots among the words
    clark = syntax.head_accuracy(examples, relations=["all", "a"]).set_index("relation")
    words = sum(len(t) for t in TREES)
    assert clark.loc["all", "n"] == words and clark.loc["all", "accuracy"] == pytest.approx((words - 3) / words)
    assert clark.loc["a", "accuracy"] == 1.0
    grid = syntax.accuracy_grid(syntax.score_examples(examples, scoring="kit"))
    assert grid[0, 1, 1] == 1 and (np.delete(grid[0].ravel(), 1 * H + 1) < 1).all()


def test_a_head_attending_from_heads_to_dependents_is_found_in_the_transposed_direction():
    examples = [synthetic(t, special={(1, 3): to_dependents(t)}, seed=i, k=i) for i, t in enumerate(TREES)]
    row = syntax.head_accuracy(syntax.score_examples(examples, scoring="kit"), relations=["all"]).iloc[0]
    assert (row["layer"], row["head"], row["direction"], row["accuracy"]) == (1, 3, "head->dep", 1.0)
    scores = syntax.score_examples(examples)
    assert syntax.accuracy_grid(scores)[0, 0, 2] < 1  # read the other way, the same head is not perfect


def test_offsets_are_exact_on_chain_trees():
    n = 9
    right = [i + 2 for i in range(n - 1)] + [0]  # every word's head is the next word
    left = [0] + [i for i in range(1, n)]  # ... the previous word
    skip = [0, 1] + [i for i in range(1, n - 1)]  # word i's head is word i - 2 (word 2's is word 1)
    table = syntax.offset_baseline(syntax.score_examples([synthetic(right, k=0)], scoring="kit")).set_index("relation")
    assert (table.loc["all", "offset"], table.loc["all", "accuracy"], table.loc["all", "n"]) == (1, 1.0, n - 1)
    table = syntax.offset_baseline([synthetic(right, k=0)]).set_index("relation")  # Clark's: the root counts
    assert (table.loc["all", "offset"], table.loc["all", "accuracy"], table.loc["all", "n"]) == (1, (n - 1) / n, n)
    table = syntax.offset_baseline([synthetic(left, k=1)]).set_index("relation")
    assert (table.loc["all", "offset"], table.loc["all", "accuracy"]) == (-1, (n - 1) / n)
    relations = ["ROOT", "b"] + ["a"] * (n - 2)
    table = syntax.offset_baseline([synthetic(skip, relations=relations, k=2)]).set_index("relation")
    assert (table.loc["a", "offset"], table.loc["a", "accuracy"]) == (-2, 1.0)
    assert (table.loc["b", "offset"], table.loc["b", "accuracy"]) == (-1, 1.0)
    assert table.loc["all", "accuracy"] == pytest.approx((n - 2) / n)
    scores = syntax.score_examples([synthetic(skip, relations=relations, k=2)])
    assert scores.offset_correct[:, syntax.OFFSETS.index(-2)].sum() == n - 2  # offsets past the start never hit


def test_offset_baseline_needs_scored_offsets():
    scores = syntax.score_examples([synthetic(TREES[0])], offsets=(-1, 1))
    with pytest.raises(ValueError, match="not scored"):
        syntax.offset_baseline(scores, offsets=(-2, -1, 1))


def test_the_possessive_marker_may_stand_for_the_possessor():
    # John 's dog barked . : poss(dog, John), case(John, 's); head 1-1: "'s" -> dog, John -> barked
    heads, relations = [3, 1, 4, 0, 4], ["poss", "case", "nsubj", "ROOT", "punct"]
    rows = lambda m: [[m - 1], [4], [3], [4], [m - 1], [4], [m - 1]]  # noqa: E731
    with_marker = synthetic(heads, relations, ["John", "'s", "dog", "barked", "."], {(1, 1): rows})
    without = synthetic(heads, relations, ["John", "xs", "dog", "barked", "."], {(1, 1): rows})
    poss = lambda e, scoring: syntax.score_examples([e], scoring=scoring).correct[0, 0, 0, 0]  # noqa: E731  (John)
    assert poss(with_marker, "clark") and poss(with_marker, "kit") and not poss(without, "clark")
    markers = syntax.possessive_markers(heads, relations, ["John", "'s", "dog", "barked", "."])
    assert markers.tolist() == [1, -1, -1, -1, -1]


def test_clark_scores_a_possessor_by_its_marker_alone_the_kit_by_either_row():
    # John 's dog barked . : head 1-1 points John -> dog (right) but "'s" -> barked (wrong)
    heads, relations = [3, 1, 4, 0, 4], ["poss", "case", "nsubj", "ROOT", "punct"]
    rows = lambda m: [[m - 1], [3], [4], [4], [m - 1], [4], [m - 1]]  # noqa: E731
    example = synthetic(heads, relations, ["John", "'s", "dog", "barked", "."], {(1, 1): rows})
    clark = syntax.score_examples([example])
    assert not clark.correct[0, 0, 0, 0] and clark.with_scoring("kit").correct[0, 0, 0, 0]
    # the offsets too: +2 from John is dog, but Clark's baseline guesses from "'s", where +1 is dog
    column = {o: clark.offsets.index(o) for o in (1, 2)}
    assert clark.offset_correct[0, column[1]] and not clark.offset_correct[0, column[2]]
    assert clark.with_scoring("kit").offset_correct[0, [column[1], column[2]]].all()
    with pytest.raises(ValueError, match="scoring must be one of"):
        clark.with_scoring("lenient")


def test_heldout_table_scores_the_selected_head_on_the_other_half():
    selection = [synthetic(t, special={(1, 1): to_gold_head(t)}, seed=i, k=i) for i, t in enumerate(TREES)]
    heldout = [synthetic(t, special={(2, 3): to_gold_head(t)}, seed=9 + i, k=i) for i, t in enumerate(TREES)]
    table = syntax.heldout_table(syntax.score_examples(selection, scoring="kit"),
                                 syntax.score_examples(heldout, scoring="kit"),
                                 relations=["all"]).iloc[0]
    assert (table["layer"], table["head"], table["selection"], table["heldout_best"]) == (1, 1, 1.0, 1.0)
    assert table["heldout"] < 1 and table["low"] <= table["heldout"] <= table["high"]


def test_table1_comparison_maps_stanford_names_to_spacy():
    examples = [synthetic(t, relations=["compound" if h else "ROOT" for h in t],
                          special={(2, 2): to_gold_head(t)}, seed=i, k=i) for i, t in enumerate(TREES)]
    table = compare.table1(syntax.head_accuracy(examples), syntax.offset_baseline(examples)).set_index("quantity")
    assert table.loc["nn", "paper"] == "4-10: 70.4 | offset +1: 70.2"
    assert table.loc["nn", "this run"].startswith("2-2: 100.0 [100.0–100.0] | offset ")
    assert "compound" in table.loc["nn", "what differs"]
    assert table.loc["prt", "this run"] == "–"  # no prt in these sentences
    assert table.loc["pobj", "paper"].startswith("9-6 (head→dep): 76.3")


def test_streamed_cached_scores_equal_in_memory_scores(encoder, tmp_path):
    sentences = [SPLIT_WORDS, SHORT]
    expected = syntax.score_examples(syntax.parsed_attention(encoder, sentences, progress=False))
    for _ in range(2):  # computed, then read from the cache
        got = syntax.score_sentences(encoder, sentences, cache_dir=tmp_path, progress=False)
        for field in ("correct", "offset_correct", "relations", "sentence"):
            np.testing.assert_array_equal(getattr(got, field), getattr(expected, field))
    assert len(list(tmp_path.glob("syntax_scores-*.npz"))) == 1  # one block


def test_split_scores_follows_the_article_halves():
    trees = TREES * 2
    sentences = [sentence([f"w{j}" for j in range(len(t))], t, ["ROOT" if h == 0 else "a" for h in t], k=i,
                          article="AB"[i % 2]) for i, t in enumerate(trees)]
    examples = [synthetic(t, special={(1, 1): to_gold_head(t)} if i % 2 else None, seed=i, k=i)
                for i, t in enumerate(trees)]
    selection, heldout = syntax.split_scores(syntax.score_examples(examples, scoring="kit"), sentences)
    assert set(selection.sentence) == {0, 2, 4} and set(heldout.sentence) == {1, 3, 5}
    assert syntax.accuracy_grid(heldout)[0, 0, 0] == 1 and syntax.accuracy_grid(selection)[0, 0, 0] < 1


def test_accuracy_frame_and_relation_explorer_draw_every_head_without_stray_figures():
    import matplotlib.pyplot as plt

    examples = [synthetic(t, special={(2, 2): to_gold_head(t), (1, 3): to_dependents(t)}, seed=i, k=i)
                for i, t in enumerate(TREES)]
    scores = syntax.score_examples(examples, scoring="kit")
    frame = syntax.accuracy_frame(scores, "all", "best")
    assert len(frame) == L * H and frame.set_index(["layer", "head"]).loc[(2, 2), "accuracy"] == 1
    assert frame.set_index(["layer", "head"]).loc[(1, 3), "accuracy"] == 1  # found only through head->dep
    with pytest.raises(ValueError, match="direction"):
        syntax.accuracy_frame(scores, "all", "sideways")
    before = plt.get_fignums()
    explorer = widgets.relation_explorer(scores, min_n=1, snapshot=False)
    first = explorer.png
    explorer.controls["relation"].value = "a"
    explorer.controls["direction"].value = "head->dep"
    assert explorer.draws == 3 and explorer.png != first and explorer.png.startswith(b"\x89PNG")
    assert plt.get_fignums() == before


def test_parsed_attention_needs_only_maps_heads_and_relations():
    """The public form of SPEC §3: ParsedAttention(word_attn, heads, relations); words default to placeholders
    (no possessive marker), punctuation to none, or to the words made of punctuation when words are given."""
    full = synthetic(TREES[0], special={(2, 2): to_gold_head(TREES[0])})
    bare = syntax.ParsedAttention(full.word_attn, TREES[0], full.relations)
    assert bare.words == [f"w{i}" for i in range(1, len(TREES[0]) + 1)] and bare.is_punct == [False] * len(TREES[0])
    table = syntax.head_accuracy(syntax.score_examples([bare], scoring="kit"), relations=["all"], n_boot=10).iloc[0]
    assert (table["layer"], table["head"], table["accuracy"]) == (2, 2, 1.0)
    words = ["The", "cat", ",", "sat", "...", "on", "it", "!"]
    assert syntax.ParsedAttention(full.word_attn, TREES[0], full.relations, words).is_punct == \
        [False, False, True, False, True, False, False, True]
    with pytest.raises(ValueError, match="one entry per word"):
        syntax.ParsedAttention(full.word_attn, TREES[0], full.relations[:-1])


def test_scoring_variants_and_where_keep_the_words_asked_for():
    examples = [synthetic(t, special={(2, 2): to_gold_head(t)}, seed=i, k=i) for i, t in enumerate(TREES)]
    scores = syntax.score_examples(examples)
    table = syntax.scoring_variants(scores, relations=["all"]).set_index(["scoring", "offsets"])
    words = sum(len(t) for t in TREES)
    assert table.loc[("kit", "-3..+2"), "accuracy"] == 1 and table.loc[("kit", "-3..+2"), "n"] == words - 3
    assert table.loc[("clark", "-3..+3"), "accuracy"] == pytest.approx((words - 3) / words)
    assert table.loc[("clark", "-3..+3"), "n"] == words
    first = scores.where(scores.sentence == 0)
    assert len(first.relations) == len(TREES[0]) and first.scoring == "clark"
    with pytest.raises(ValueError, match="one entry per word"):
        scores.where(np.ones(3, dtype=bool))


def test_on_subset_rescores_the_chosen_head_on_the_kept_words():
    # head 2-2 is right on every word of the first two trees, head 1-1 on the third: keep only the third
    special = [{(2, 2): to_gold_head(TREES[0])}, {(2, 2): to_gold_head(TREES[1])}, {(1, 1): to_gold_head(TREES[2])}]
    examples = [synthetic(t, special=sp, seed=i, k=i) for i, (t, sp) in enumerate(zip(TREES, special))]
    scores = syntax.score_examples(examples, scoring="kit")
    table = syntax.on_subset(scores, scores.sentence == 2, ["all"]).iloc[0]
    assert table["head"] == "2-2" and table["best_kept"] == "1-1" and table["best_kept_accuracy"] == 1
    assert table["kept"] == pytest.approx((len(TREES[2]) - 1) / sum(len(t) - 1 for t in TREES))
    assert table["accuracy_kept"] < 1 and table["accuracy"] < 1
