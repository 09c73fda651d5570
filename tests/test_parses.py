"""parses: CoNLL-U round trips, sentence checks, halves by article, and the cached spaCy parses."""
from __future__ import annotations

import pytest

from bertlook_utils import parses
from bertlook_utils.parses import Sentence, from_conllu, split_halves, to_conllu


def sentence(words, heads, relations, article="A", k=0, pos=None):
    pos = pos or ["PUNCT" if w in ".," else "NOUN" for w in words]
    return Sentence(tuple(words), tuple(heads), tuple(relations), tuple(pos), tuple("X" for _ in words), article,
                    f"{article}#{k}")


JOHN = sentence(["John", "'s", "dog", "barked", "."], [3, 1, 4, 0, 4], ["poss", "case", "nsubj", "ROOT", "punct"],
                pos=["PROPN", "PART", "NOUN", "VERB", "PUNCT"])


def test_conllu_round_trip_keeps_every_field():
    other = sentence(["Yes", "!"], [0, 1], ["ROOT", "punct"], article="B b", k=7)
    text = to_conllu([JOHN, other])
    assert text.count("# sent_id = ") == 2
    assert "1\tJohn\t_\tPROPN\tX\t_\t3\tposs\t_\t_" in text.splitlines()
    assert from_conllu(text) == [JOHN, other]
    spaced = Sentence(("Yes", "!"), (0, 1), ("ROOT", "punct"), ("INTJ", "PUNCT"), ("UH", "."), "B", "B#0",
                      (False, True))
    assert "1\tYes\t_\tINTJ\tUH\t_\t0\tROOT\t_\tSpaceAfter=No" in to_conllu([spaced]).splitlines()
    assert from_conllu(to_conllu([spaced]))[0].space_after == (False, True)
    assert from_conllu(text)[0].space_after == (True,) * len(JOHN)  # no MISC: a space after every word


def test_from_conllu_rejects_multiword_lines():
    with pytest.raises(ValueError, match="CoNLL-U"):
        from_conllu("# sent_id = x\n1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n1\tdo\t_\tAUX\tVB\t_\t0\tROOT\t_\t_\n")


def test_sentence_is_punct_follows_the_part_of_speech():
    assert JOHN.is_punct == [False, False, False, False, True]


@pytest.mark.parametrize("heads", [[3, 1, 4, 0, 9], [1, 1, 4, 0, 4], [3, 1, 4, 0]])
def test_sentence_rejects_bad_heads(heads):
    with pytest.raises(ValueError, match="heads|one entry"):
        Sentence(JOHN.words, tuple(heads), JOHN.relations, JOHN.pos, JOHN.tags, "A", "A#0")


def test_split_halves_keeps_articles_whole_and_balances_them():
    sentences = [sentence(["w", "."], [0, 1], ["ROOT", "punct"], article=a, k=k)
                 for a, size in zip("ABCDEF", [5, 1, 1, 1, 2, 2]) for k in range(size)]
    selection, heldout = split_halves(sentences)
    assert sorted(selection + heldout, key=sentences.index) == sentences
    assert not {s.article for s in selection} & {s.article for s in heldout}
    assert [sorted({x.article for x in h}) for h in (selection, heldout)] == [["A", "F"], ["B", "C", "D", "E"]]
    assert [len(selection), len(heldout)] == [7, 5]  # each article goes to the half that is smaller so far
    assert split_halves(sentences) == (selection, heldout)


def test_split_halves_needs_two_articles():
    with pytest.raises(ValueError, match="two articles"):
        split_halves([JOHN])


def test_parse_texts_gives_one_tree_per_sentence():
    parsed = parses.parse_texts(["John's dog chased the cat.", "It rained. Then it stopped."])
    john = parsed[0]
    assert john.words == ("John", "'s", "dog", "chased", "the", "cat", ".")
    assert john.heads.count(0) == 1 and john.relations[john.heads.index(0)] == "ROOT"
    assert john.relations[0] == "poss" and john.heads[1] == 1  # 's hangs on its possessor
    assert john.is_punct[-1]
    assert parsed[1] is None  # two sentences: two roots


def test_parsed_sentences_are_cached_sized_and_in_corpus_order(small_corpus, tmp_path):
    got = parses.parsed_sentences(n=40, seed=3, min_words=5, max_words=30, cache_dir=tmp_path, progress=False)
    assert len(got) == 40 and all(5 <= len(s) <= 30 for s in got)
    titles = [t for t, _ in small_corpus]
    positions = [(titles.index(s.article), int(s.id.rpartition("#")[2])) for s in got]
    assert positions == sorted(positions)
    assert len(list(tmp_path.glob("parses-*.npz"))) == 1
    again = parses.parsed_sentences(n=40, seed=3, min_words=5, max_words=30, cache_dir=tmp_path, progress=False)
    assert again == got
    other_seed = parses.parsed_sentences(n=40, seed=4, min_words=5, max_words=30, cache_dir=None, progress=False)
    assert other_seed != got


def test_parsed_sentences_says_when_the_corpus_is_too_small(small_corpus):
    with pytest.raises(ValueError, match="only"):
        parses.parsed_sentences(n=500, min_words=5, max_words=6, cache_dir=None, progress=False)


# -- the second parser and agreement --------------------------------------------------------------
def relabelled(s, heads=None, relations=None):
    return Sentence(s.words, tuple(heads or s.heads), tuple(relations or s.relations), s.pos, s.tags, s.article, s.id)


def test_arc_agreement_compares_heads_and_labels_word_by_word():
    # md moves "'s" under the dog (head wrong), and labels "dog" nsubjpass (head right, label wrong)
    md = relabelled(JOHN, heads=[3, 3, 4, 0, 4], relations=["poss", "case", "nsubjpass", "ROOT", "punct"])
    (heads,) = parses.arc_agreement([JOHN], [md])
    (labelled,) = parses.arc_agreement([JOHN], [md], labels=True)
    assert heads.dtype == bool and heads.tolist() == [True, False, True, True, True]
    assert labelled.tolist() == [True, False, False, True, True]
    assert parses.arc_agreement([JOHN], [JOHN])[0].all()


def test_arc_agreement_counts_root_as_a_head():
    md = relabelled(JOHN, heads=[3, 1, 0, 3, 4], relations=["poss", "case", "ROOT", "ccomp", "punct"])
    assert parses.arc_agreement([JOHN], [md])[0].tolist() == [True, True, False, False, True]


def test_agreement_table_per_relation_with_punctuation_apart():
    other = sentence(["Dogs", "bark", "."], [2, 0, 2], ["nsubj", "ROOT", "punct"], k=1,
                     pos=["NOUN", "VERB", "PUNCT"])
    md_john = relabelled(JOHN, heads=[3, 3, 4, 0, 3], relations=["poss", "case", "dobj", "ROOT", "punct"])
    md_other = relabelled(other, heads=[2, 0, 1], relations=["nsubj", "ROOT", "punct"])
    table = parses.agreement_table([JOHN, other], [md_john, md_other]).set_index("relation")
    assert list(table.index) == ["all", "ROOT", "nsubj", "punct", "case", "poss"]  # by n, then name
    assert table.loc["all", "n"] == 6  # every word but the two full stops
    assert table.loc["all", "head_agreement"] == pytest.approx(100 * 5 / 6)  # only "'s" moved
    assert table.loc["all", "labelled_agreement"] == pytest.approx(100 * 4 / 6)  # and "dog" relabelled
    assert table.loc["nsubj"].tolist() == [2, 100.0, 50.0]
    assert table.loc["punct"].tolist() == [2, 0.0, 0.0]
    assert table.loc["case", "head_agreement"] == 0
    assert list(parses.agreement_table([JOHN, other], [md_john, md_other], min_count=2)["relation"]) == [
        "all", "ROOT", "nsubj", "punct"]


def test_agreement_needs_the_same_words():
    with pytest.raises(ValueError, match="other words"):
        parses.arc_agreement([JOHN], [sentence(["A", "dog", "barked", ".", "!"], [2, 3, 0, 3, 3], ["det"] * 5)])
    with pytest.raises(ValueError, match="same sentences"):
        parses.agreement_table([JOHN], [])


def test_md_parses_keep_the_words_one_tree_each_and_are_cached(tmp_path):
    sm = [s for s in parses.parse_texts(["John's dog chased the cat.", "The results, however, were mixed."])]
    md = parses.md_parses(sm, cache_dir=tmp_path, progress=False)
    assert [s.words for s in md] == [s.words for s in sm] and [s.id for s in md] == [s.id for s in sm]
    assert all(s.heads.count(0) == 1 for s in md)
    assert md[0].relations[:2] == ("poss", "case") and md[0].is_punct[-1]
    assert len(list(tmp_path.glob("md-parses-*.npz"))) == 1
    assert parses.md_parses(sm, cache_dir=tmp_path, progress=False) == md
    # a sentence md would split in two is still one tree: the first word is the only sentence start
    (forced,) = parses.md_parses(parses.parse_texts(["He left it was late ."]), cache_dir=None, progress=False)
    assert forced.heads.count(0) == 1 and len(forced) == 6


def test_tag_texts_keeps_every_sentence_of_a_text_and_is_cached(tmp_path):
    texts = ["It rained.  Then it\n stopped.", "Nobody came"]
    tagged = parses.tag_texts(texts, cache_dir=tmp_path, progress=False)
    rained, nobody = tagged
    assert rained.words == ("It", "rained", ".", "Then", "it", "stopped", ".")  # no word is a space
    assert rained.heads.count(0) == 2 and rained.heads[1] == 0 and rained.heads[5] == 0  # one root per sentence
    assert rained.pos[1] == "VERB" and rained.relations[0] == "nsubj" and rained.is_punct == [
        False, False, True, False, False, False, True]
    assert nobody.words == ("Nobody", "came") and nobody.pos[0] == "PRON" and [s.id for s in tagged] == [
        "text#0", "text#1"]
    assert len(list(tmp_path.glob("tags-*.npz"))) == 1
    assert parses.tag_texts(texts, cache_dir=tmp_path, progress=False) == tagged
    assert len(list(tmp_path.glob("tags-*.npz"))) == 1


@pytest.mark.parametrize("texts, match", [([], "non-empty list"), (["a b", "  "], r"texts \[1\] are empty"),
                                          ([("a", "b")], "non-empty list of strings")])
def test_tag_texts_refuses_bad_input(texts, match):
    with pytest.raises(ValueError, match=match):
        parses.tag_texts(texts, cache_dir=None, progress=False)
