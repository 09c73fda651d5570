"""Coreference analysis on hand-made passages and synthetic attention whose answers are known."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from bertlook_utils import compare, coref, corefdata, figures, paper
from bertlook_utils.extract import Batch
from bertlook_utils.corefdata import Mention, Passage
from bertlook_utils.present.viz import PALETTE

# 0 John 1 Smith 2 met 3 Mary 4 Lee 5 . 6 He 7 thanked 8 her 9 . 10 Smith 11 left 12 the 13 lamp
# 14 . 15 The 16 lamp 17 broke 18 . 19 Mary 20 smiled 21 .
WORDS = "John Smith met Mary Lee . He thanked her . Smith left the lamp . The lamp broke . Mary smiled .".split()


def person(start, end, entity, type_, gender):
    return Mention(start, end, end - 1, entity, type_, "sg", gender, "animate")


def lamp(start, end):
    return Mention(start, end, end - 1, 2, "nominal", "sg", "n", "inanimate")


MENTIONS = [person(0, 2, 0, "proper", "m"),    # 0 John Smith
            person(3, 5, 1, "proper", "f"),    # 1 Mary Lee
            person(6, 7, 0, "pronoun", "m"),   # 2 He        -> John Smith
            person(8, 9, 1, "pronoun", "f"),   # 3 her       -> Mary Lee
            person(10, 11, 0, "proper", "m"),  # 4 Smith     -> John Smith / He
            lamp(12, 14),                      # 5 the lamp  (first mention)
            lamp(15, 17),                      # 6 The lamp  -> the lamp
            person(19, 20, 1, "proper", "f")]  # 7 Mary      -> Mary Lee / her
PASSAGE = Passage("hand", WORDS, MENTIONS)


def test_mention_table_ranks_and_distances():
    table = coref.mention_table([PASSAGE])
    assert list(table["mention"]) == [2, 3, 4, 6, 7]
    assert list(table["type"]) == ["pronoun", "pronoun", "proper", "nominal", "proper"]
    assert list(table["rank"]) == [2, 2, 2, 1, 4]  # "Mary": the nearest antecedent "her" is 4 mentions back
    assert list(table["distance"]) == [6 - 1, 8 - 4, 10 - 6, 16 - 13, 19 - 8]
    with pytest.raises(ValueError, match="no coreferent"):
        coref.mention_table([Passage("x", WORDS, MENTIONS[:2])])


@pytest.mark.parametrize("system, expected", [
    (coref.nearest_mention, [1, 2, 3, 5, 6]),
    (coref.head_word_match, [1, 2, 0, 5, 6]),   # "Smith" matches "John Smith"; the rest fall back to nearest
    (coref.sieve, [0, 1, 0, 5, 3]),             # agreement resolves He/her; "Mary": nearest agreeing = "her"
])
def test_baselines_on_a_hand_made_passage(system, expected):
    table = coref.mention_table([PASSAGE])
    assert list(coref.choose([PASSAGE], table, system)) == expected


def test_correctness_and_accuracy_by_type():
    table = coref.mention_table([PASSAGE])
    ok = coref.is_correct([PASSAGE], table, coref.choose([PASSAGE], table, coref.sieve))
    assert list(ok) == [True, True, True, True, True]
    ok = coref.is_correct([PASSAGE], table, coref.choose([PASSAGE], table, coref.nearest_mention))
    assert list(ok) == [False, False, False, True, False]  # "Smith" -> "her", "Mary" -> "The lamp"
    assert coref.accuracy_by_type(ok, table["type"]) == {"all": 0.2, "pronoun": 0.0, "proper": 0.0, "nominal": 1.0}
    with pytest.raises(ValueError, match="earlier mention"):
        coref.is_correct([PASSAGE], table, np.array([2, 0, 0, 0, 0]))  # mention 2 cannot pick itself


def test_position_tables_on_the_hand_made_passage():
    table = coref.mention_table([PASSAGE])
    pos = coref.positions(table).set_index("type")
    assert pos.loc["all", "n"] == 5 and pos.loc["all", "rank_1"] == 0.2 and pos.loc["pronoun", "rank_2"] == 1.0
    base = coref.position_baselines([PASSAGE], table, max_k=2).set_index("k")
    assert base.loc[1, "all"] == 0.2  # the nearest mention
    assert base.loc[2, "all"] == 0.6  # two back: He -> John Smith, her -> Mary Lee, Smith -> He


def test_sieve_prefers_exact_string_over_a_nearer_head_match():
    words = "Ann Park met Bob Park . Ann Park left .".split()
    ms = [person(0, 2, 0, "proper", "f"), person(3, 5, 1, "proper", "m"), person(6, 8, 0, "proper", "f")]
    p = Passage("x", words, ms)
    table = coref.mention_table([p])
    assert coref.choose([p], table, coref.sieve)[0] == 0
    assert coref.choose([p], table, coref.head_word_match)[0] == 1


def oracle_attention(p: Passage, target, n_heads: int = 2) -> np.ndarray:
    """[1, n_heads, m, m] word-level maps ([CLS] word 0, [SEP] word m-1): head 0 sends each coreferent
    mention's head word to the head word of mention target(i); every other row and head is uniform."""
    m = len(p.words) + 2
    attn = np.full((1, n_heads, m, m), 1 / m, dtype=np.float32)
    for i in p.coreferent():
        row = p.mentions[i].head + 1
        attn[0, 0, row] = 0
        attn[0, 0, row, p.mentions[target(p, i)].head + 1] = 1
    return attn


def test_a_head_pointing_at_antecedents_scores_100_and_one_pointing_at_the_nearest_scores_the_baseline():
    table = coref.mention_table([PASSAGE])
    gold = coref.choose_by_attention(oracle_attention(PASSAGE, lambda p, i: p.antecedents(i)[0]), PASSAGE)
    assert gold.shape == (5, 1, 2)
    assert coref.is_correct([PASSAGE], table, gold[:, 0, 0]).all()
    near = coref.choose_by_attention(oracle_attention(PASSAGE, coref.nearest_mention), PASSAGE)
    assert list(near[:, 0, 0]) == list(coref.choose([PASSAGE], table, coref.nearest_mention))


def test_only_earlier_mention_heads_are_candidates():
    attn = oracle_attention(PASSAGE, lambda p, i: 0)
    row = PASSAGE.mentions[2].head + 1  # "He": most attention to a later word and to a non-head word
    attn[0, 0, row] = 0
    attn[0, 0, row, [PASSAGE.mentions[7].head + 1, 3, PASSAGE.mentions[1].head + 1]] = [0.6, 0.3, 0.1]
    weights = coref.antecedent_attention(attn, PASSAGE)
    assert weights.shape == (5, 1, 2, 7)
    assert np.allclose(weights[0, 0, 0, :2], [0, 0.1]) and np.all(weights[0, 0, 0, 2:] == -1)
    assert coref.choose_by_attention(attn, PASSAGE)[0, 0, 0] == 1  # Mary Lee, the only earlier head it sees


def test_unrestricted_readings_score_the_word_the_head_attends_to_most():
    """Clark et al.'s definition read strictly: the argmax over every earlier word (or every word) must land on
    an antecedent's head word; the kit's reading only compares the earlier mentions' head words."""
    attn = oracle_attention(PASSAGE, lambda p, i: p.antecedents(i)[0])
    m = attn.shape[-1]

    def point(word, weights):  # row of passage word `word` -> {passage word: weight}
        attn[0, 0, word + 1] = 0
        for w, a in weights.items():
            attn[0, 0, word + 1, w + 1] = a

    point(6, {0: 0.5, 1: 0.3, 4: 0.2})     # He: most on "John", not the head word "Smith"
    point(10, {19: 0.6, 1: 0.3, 4: 0.1})   # Smith: most on a later "Mary", then "Smith"
    point(16, {15: 0.7, 13: 0.3})          # The lamp: most on its own "The", then the earlier "lamp"
    point(19, {19: 0.9, 4: 0.1})           # Mary: most on itself, then "Lee"
    table = coref.mention_table([PASSAGE])  # mentions 2 He, 3 her, 4 Smith, 6 The lamp, 7 Mary
    words = coref.choose_words_by_attention(attn, PASSAGE)
    assert words.shape == (5, 1, 2, 2) and words.dtype == np.int16
    assert list(words[:, 0, 0, 0]) == [0, 4, 1, 13, 4]   # every word before the mention
    assert list(words[:, 0, 0, 1]) == [0, 4, 19, 15, 4]  # every word but the head word itself
    mention_heads = coref.is_correct([PASSAGE], table, coref.choose_by_attention(attn, PASSAGE)[:, 0, 0])
    assert list(mention_heads) == [True] * 5
    assert list(coref.lands_on_antecedent([PASSAGE], table, words[:, 0, 0, 0])) == [False, True, True, True, True]
    assert list(coref.lands_on_antecedent([PASSAGE], table, words[:, 0, 0, 1])) == [False, True, False, False, True]
    assert coref.lands_on_antecedent([PASSAGE], table, words[..., 0]).shape == (5, 1, 2)
    with pytest.raises(ValueError, match="one word per row"):
        coref.lands_on_antecedent([PASSAGE], table, words[:3, 0, 0, 0])
    with pytest.raises(ValueError, match="words of the map"):
        coref.word_choices(attn[:, :, :5, : m - 1], PASSAGE)
    assert coref.best_head_label((2, 2), coref.Reading.EARLIER_WORDS) == "best head 2-2 (argmax over earlier words)"
    with pytest.raises(ValueError, match="reading"):
        coref.best_head_label((2, 2), "later words")


def test_attention_input_is_checked():
    with pytest.raises(ValueError, match="layers, heads"):
        coref.antecedent_attention(np.ones((3, 3)), PASSAGE)
    with pytest.raises(ValueError, match="beyond"):
        coref.antecedent_attention(np.full((1, 1, 5, 5), 0.2, dtype=np.float32), PASSAGE)
    bad = oracle_attention(PASSAGE, coref.nearest_mention)
    bad[0, 1] *= 2
    with pytest.raises(ValueError, match="sum to 1"):
        coref.antecedent_attention(bad, PASSAGE)


def test_halves_split_passages_deterministically():
    passages = corefdata.generate(9, seed=2)
    a, b = coref.halves(passages, seed=0), coref.halves(passages, seed=0)
    assert a.sum() == 4 and np.array_equal(a, b)
    assert not np.array_equal(a, coref.halves(passages, seed=1))


class OracleEncoder:
    """Stands in for an Encoder: one token per word, and attention whose layer 1 head 2 points every
    coreferent mention at its nearest antecedent, layer 2 head 1 at the nearest mention; the rest uniform."""

    name, fingerprint, cls_token, sep_token = "oracle", "oracle-v1", "[CLS]", "[SEP]"
    n_layers, n_heads, signed_attention = 2, 3, False
    model = torch.nn.Module().eval()  # no layers, no hooks, not training: the cache serves it

    def __init__(self, passages):
        self.by_words = {tuple(p.words): p for p in passages}

    def prepare(self, a, b=None, max_tokens=None):  # every passage is valid input
        assert tuple(a) in self.by_words

    def batches(self, items, batch_size=32, attention=True, max_tokens=None, reuse=False):
        items = list(items)
        for start in range(0, len(items), batch_size):
            chunk = items[start:start + batch_size]
            width = max(len(w) for w in chunk) + 2
            attn = torch.zeros(len(chunk), self.n_layers, self.n_heads, width, width)
            valid = torch.zeros(len(chunk), width, dtype=torch.bool)
            prepared = []
            for b, words in enumerate(chunk):
                p = self.by_words[tuple(words)]
                n = len(words) + 2
                maps = np.full((self.n_layers, self.n_heads, n, n), 1 / n, dtype=np.float32)
                maps[0, 1] = oracle_attention(p, lambda q, i: max(q.antecedents(i)))[0, 0]
                maps[1, 0] = oracle_attention(p, coref.nearest_mention)[0, 0]
                attn[b, :, :, :n, :n] = torch.from_numpy(maps)
                valid[b, :n] = True
                tokens = ["[CLS]", *words, "[SEP]"]
                prepared.append(SimpleNamespace(tokens=tokens, word_ids=list(range(n)), words=tokens,
                                                segment_ids=[0] * n))
            yield prepared, {"attention_mask": valid.long()}, attn


def test_analyse_finds_the_oracle_head_and_reports_it_on_the_held_out_half(tmp_path):
    passages = corefdata.generate(12, seed=4)
    result = coref.analyse(OracleEncoder(passages), passages, n_boot=200, cache_dir=tmp_path, progress=False)
    assert result.best == (1, 2)
    label = coref.best_head_label(result.best)
    table = result.table.set_index(["system", "type"])
    assert table.loc[(label, "all"), "accuracy"] == 1.0
    assert set(table.loc[label].index) == {"all", "pronoun", "proper", "nominal"}
    held = result.mentions[result.mentions["half"] == "held-out"]
    nearest = coref.System.NEAREST
    assert table.loc[(nearest, "all"), "n"] == len(held)
    assert table.loc[(nearest, "all"), "accuracy"] == pytest.approx(held[f"{nearest} ok"].mean())
    heads = result.heads.set_index(["layer", "head"])
    assert heads.loc[(2, 1), "all"] == pytest.approx(
        result.mentions.loc[result.mentions["half"] == "selection", f"{nearest} ok"].mean())
    assert len(result.heads) == 6 and result.correct.shape == (len(result.mentions), 2, 3)
    # the cached second run gives the same choices
    again = coref.analyse(OracleEncoder(passages), passages, n_boot=200, cache_dir=tmp_path, progress=False)
    assert np.array_equal(again.choices, result.choices)
    # every reading finds the oracle head: its one weight per row is on the nearest antecedent's head word
    readings = result.readings.set_index("reading")
    assert list(readings.index) == list(coref.READINGS)
    assert (readings["label"] == "1-2").all()
    assert (readings["held_out"] == 1).all() and (readings["selection"] == 1).all()
    side = compare.table2(result).set_index("quantity")
    systems = list(paper.TABLE2["system"])
    assert list(side.index) == systems[:-1] + [systems[-1], "BERT head 5-4, argmax over earlier words"]
    assert side.loc["BERT head 5-4", "paper"].startswith("all 65 · pronoun 64")
    assert side.loc["BERT head 5-4", "this run"].startswith("all 100.0 [100–100]")  # the oracle head
    assert side.loc["BERT head 5-4, argmax over earlier words", "this run"].startswith("all 100.0 [100–100]")
    assert "Wiseman et al. 2015" in paper.TABLE2_NEURAL and "pronoun –" in side.loc[paper.TABLE2_NEURAL, "paper"]
    assert side.loc[paper.TABLE2_NEURAL, "this run"].startswith("not run")  # the learned row is not its counterpart
    assert not side.apply(lambda column: column.str.contains("learned")).any().any()
    learned = compare.coref_learned(result).set_index("system")
    assert coref.System.COMBINED in learned.index and learned.loc["best head 1-2", "all"] == "100 [100–100]"
    assert list(compare.coref_readings(result)["best head"]) == ["1-2"] * 3
    assert len(figures.table2(result).axes) == 4
    assert (coref.by_head_word(result, [label])[label] == 1).all()
    by_rank = coref.accuracy_by_rank(result, [nearest]).set_index("rank")[nearest]
    assert by_rank.loc[1] == 1 and (by_rank.drop(1) == 0).all()  # right exactly when the antecedent is next
    assert len(coref.failures(result)) == 0  # the oracle head never fails
    assert not coref.failures(result, 2, 1).empty


def test_reducer_rejects_words_that_are_not_the_passage():
    passages = corefdata.generate(2, seed=4)
    reducer = coref.AntecedentAttention(passages)
    prepared, inputs, attn = next(OracleEncoder(passages).batches([p.words for p in passages[::-1]]))
    with pytest.raises(ValueError, match="differ"):
        reducer.update(Batch.build(attn, inputs["attention_mask"].bool(), prepared, "[CLS]", "[SEP]"))


def test_real_encoder_streaming_equals_one_passage_at_a_time(encoder):
    passages = corefdata.generate(3, seed=7)
    reducer = coref.AntecedentAttention(passages)
    coref.reduce(encoder, [p.words for p in passages], [reducer], batch_size=2, cache_dir=None, progress=False,
                 block_size=2)  # two blocks, merged
    full = [coref.antecedent_attention(coref.word_attention(encoder, p), p, width=reducer.width) for p in passages]
    single = np.concatenate(full)
    assert single.shape[:3] == (len(coref.mention_table(passages)), encoder.n_layers, encoder.n_heads)
    assert np.allclose(reducer.arrays["weights"], single, atol=2e-3)  # float16 storage
    assert np.array_equal(reducer.arrays["choices"], np.argmax(single, axis=-1))
    words = np.concatenate([coref.choose_words_by_attention(coref.word_attention(encoder, p), p) for p in passages])
    assert np.array_equal(reducer.arrays["words"], words)


@pytest.mark.parametrize("from_mode", ["mean", "first", "max"])
def test_word_rows_equal_the_word_level_map(from_mode):
    rng = np.random.default_rng(0)
    word_ids = [0, 1, 1, 2, 3, 3, 3, 4, 5]
    raw = rng.random((2, 3, 9, 9)) + 1e-3
    attn = (raw / raw.sum(-1, keepdims=True)).astype(np.float32)
    full = coref.to_word_level(attn, word_ids, from_mode)
    assert np.allclose(coref.word_rows(attn, word_ids, [3, 1], from_mode), full[..., [3, 1], :], atol=1e-6)
    shuffled = [0, 1, 2, 1, 3, 3, 3, 4, 5]  # a word split around another: the general path
    assert np.allclose(coref.word_rows(attn, shuffled, [1], from_mode),
                       coref.to_word_level(attn, shuffled, from_mode)[..., [1], :], atol=1e-6)


def test_the_figure_marks_wrong_picks_in_the_wrong_colour():
    import matplotlib.pyplot as plt

    attn = oracle_attention(PASSAGE, coref.nearest_mention)
    ax = figures.antecedent_attention(PASSAGE, attn[0, 0])
    colours = [line.get_color() for line in ax.lines]
    assert len(colours) == 5 and colours.count(PALETTE["wrong"]) == 4  # nearest mention: 1 of 5 right
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="one head"):
        figures.antecedent_attention(PASSAGE, attn)
