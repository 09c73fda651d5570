"""tokentypes: attention by token type, [CLS] / [SEP] per layer and the stripe test, on synthetic maps whose
answers are known by construction, and the streamed pass on the real encoder.

The single input used by most tests (every word one token, n = 9):
    0 [CLS] | 1 John | 2 did | 3 n't | 4 see | 5 the | 6 dog | 7 . | 8 [SEP]
    John: noun + subject; n't: negation; see: verb; dog: noun + object; ".": punctuation; did, the: other
"""
from __future__ import annotations

import numpy as np
import pytest

from bertlook_utils import tokentypes
from bertlook_utils.extract import Batch, reduce
from bertlook_utils.intervals import mean_interval
from bertlook_utils.models import Encoded
from bertlook_utils.parses import Sentence
from bertlook_utils.tokentypes import CATEGORIES, TYPES, TokenTypeAttention, of_batches, token_categories, word_types
from builders import make_encoded, random_row_stochastic, stack_heads, uniform_map

PARTITION = ("[CLS]", "[SEP]", "punctuation", "linguistic", "other")  # every token is in exactly one


def tagged(words, pos, relations, k=0) -> Sentence:
    """A tagged text; every word but the first hangs on the first (the tree plays no part here)."""
    return Sentence(tuple(words), (0,) + (1,) * (len(words) - 1), tuple(relations), tuple(pos),
                    tuple("X" for _ in words), "", f"text#{k}")


JOHN = tagged(["John", "did", "n't", "see", "the", "dog", "."],
              ["PROPN", "AUX", "PART", "VERB", "DET", "NOUN", "PUNCT"],
              ["nsubj", "aux", "neg", "ROOT", "det", "dobj", "punct"])
TOKENS = ["[CLS]", *JOHN.words, "[SEP]"]
N = len(TOKENS)
CLS, JOHN_AT, NOT_AT, DOG_AT, SEP = 0, 1, 3, 6, 8


def result_of(attn, tokens=TOKENS, tags=JOHN, thresholds=tokentypes.STRIPE_THRESHOLDS) -> TokenTypeAttention:
    return of_batches([Batch.from_encoded(make_encoded(tokens, attn))], [tags], thresholds)


def row(frame, category):
    return frame.set_index("category").loc[category]


def rows_of(weights: dict[int, float], spread: float = 0.0) -> np.ndarray:
    """[N, N] map in which every row puts weights[c] on column c and `spread` evenly over all N columns."""
    attn = np.full((N, N), spread / N)
    for column, weight in weights.items():
        attn[:, column] += weight
    return attn.astype(np.float32)


def with_cls_row(attn: np.ndarray, targets: dict[int, float]) -> np.ndarray:
    """attn [n, n] with the [CLS] row (row 0) replaced by `targets` (column -> weight)."""
    attn = attn.copy()
    attn[CLS] = 0
    for column, weight in targets.items():
        attn[CLS, column] = weight
    return attn


# -- types of words -------------------------------------------------------------------------------
def test_word_types_from_tags_and_relations():
    types = word_types(JOHN)
    named = [{t for t, on in zip(TYPES, r) if on} for r in types]
    assert named == [{"noun", "subject"}, {"other"}, {"negation"}, {"verb"}, {"other"}, {"noun", "object"},
                     {"punctuation"}]


def test_negation_words_count_beside_the_neg_relation_and_punctuation_is_only_punctuation():
    nobody = tagged(["Nobody", "saw", "nothing", "!"], ["PRON", "VERB", "PRON", "PUNCT"],
                    ["nsubj", "ROOT", "dobj", "nsubj"])  # a (wrong) parse that makes "!" a subject
    named = [{t for t, on in zip(TYPES, r) if on} for r in word_types(nobody)]
    assert named == [{"pronoun", "subject", "negation"}, {"verb"}, {"pronoun", "object", "negation"},
                     {"punctuation"}]


# -- [CLS]'s attention by type ----------------------------------------------------------------------
def test_a_cls_row_all_on_nouns_gives_noun_share_one():
    attn = with_cls_row(uniform_map(N), {JOHN_AT: 0.5, DOG_AT: 0.5})
    table = result_of(attn).cls_by_type(layer=1)
    assert row(table, "noun")["share"] == pytest.approx(1)
    assert row(table, "linguistic")["share"] == pytest.approx(1)
    assert row(table, "subject")["share"] == pytest.approx(0.5) and row(table, "object")["share"] == pytest.approx(0.5)
    for category in ("[CLS]", "[SEP]", "punctuation", "verb", "negation", "other"):
        assert row(table, category)["share"] == pytest.approx(0)
    assert row(table, "noun")["base_rate"] == pytest.approx(2 / N)
    assert row(table, "noun")["relative"] == pytest.approx(N / 2)
    assert row(table, "other")["base_rate"] == pytest.approx(2 / N)
    assert list(table["category"]) == list(CATEGORIES)


def test_the_last_layer_is_the_default_and_heads_are_averaged():
    noun_head = with_cls_row(uniform_map(N), {DOG_AT: 1.0})
    sep_head = with_cls_row(uniform_map(N), {SEP: 1.0})
    result = result_of(stack_heads([[uniform_map(N), uniform_map(N)], [noun_head, sep_head]]))
    last = result.cls_by_type()
    assert row(last, "noun")["share"] == pytest.approx(0.5) and row(last, "[SEP]")["share"] == pytest.approx(0.5)
    assert row(last, "noun")["head_min"] == pytest.approx(0) and row(last, "noun")["head_max"] == pytest.approx(1)
    assert row(result.cls_by_type(layer=1), "noun")["share"] == pytest.approx(2 / N)  # uniform: the base rate
    heads = result.by_head("noun", source="cls")
    assert list(heads["mass"]) == pytest.approx([2 / N, 2 / N, 1, 0])


# -- [CLS] and [SEP] per layer ------------------------------------------------------------------------
def test_cls_and_sep_shares_of_a_known_map():
    sinks = rows_of({CLS: 0.3, SEP: 0.7})
    by_layer = result_of(stack_heads([[sinks], [uniform_map(N)]])).special_by_layer()
    assert list(by_layer.index) == [1, 2]
    assert by_layer.loc[1, "cls"] == pytest.approx(0.3) and by_layer.loc[1, "sep"] == pytest.approx(0.7)
    assert by_layer.loc[1, "punctuation"] == pytest.approx(0)
    assert by_layer.loc[2, ["cls", "sep", "punctuation"]].tolist() == pytest.approx([1 / N] * 3)
    assert by_layer["cls_base"].tolist() == pytest.approx([1 / N] * 2)


def test_special_and_cls_change_before_and_after():
    before = result_of(uniform_map(N))
    after = result_of(with_cls_row(rows_of({CLS: 0.75, SEP: 0.25}), {DOG_AT: 1.0}))
    change = tokentypes.special_change(before, after)
    assert change.loc[1, "cls_before"] == pytest.approx(1 / N)
    assert change.loc[1, "cls_after"] == pytest.approx(0.75 * (N - 1) / N)  # the [CLS] row looks at "dog"
    assert change.loc[1, "sep_change"] == pytest.approx(0.25 * (N - 1) / N - 1 / N)
    cls = tokentypes.cls_change(before, after)
    assert row(cls, "noun")[["before", "after", "change"]].tolist() == pytest.approx([2 / N, 1, 1 - 2 / N])
    assert row(cls, "noun")["after_relative"] == pytest.approx(N / 2)


def test_paired_intervals_of_the_change_over_inputs():
    batches = lambda *maps: [Batch.from_encoded(make_encoded(TOKENS, m)) for m in maps]  # noqa: E731
    before = of_batches(batches(uniform_map(N), uniform_map(N)), [JOHN, JOHN])
    after = of_batches(batches(rows_of({CLS: 0.5}, 0.5), rows_of({CLS: 0.9}, 0.1)), [JOHN, JOHN])
    differences = [0.5 + 0.5 / N - 1 / N, 0.9 + 0.1 / N - 1 / N]  # per input, every row the same
    mean, low, high = mean_interval(np.array(differences))
    change = tokentypes.special_change(before, after)
    assert change.loc[1, ["cls_change", "cls_change_low", "cls_change_high"]].tolist() == pytest.approx(
        [mean, low, high])
    assert change.loc[1, ["sep_change", "sep_change_low", "sep_change_high"]].tolist() == pytest.approx(
        [-np.mean(differences) / 8] + [x / -8 for x in (high, low)])  # [SEP] is one of the 8 other columns
    cls = row(tokentypes.cls_change(before, after), "[CLS]")
    assert cls[["change", "change_low", "change_high"]].tolist() == pytest.approx([mean, low, high])
    assert row(after.cls_by_type(), "[CLS]")[["share_low", "share_high"]].tolist() == pytest.approx(
        mean_interval(np.array(differences) + 1 / N)[1:])
    assert after.special_by_layer().loc[1, "cls"] == pytest.approx(after.rows_by_input[:, 0, 0].mean())
    assert np.isnan(row(result_of(uniform_map(N)).cls_by_type(), "noun")["share_low"])  # one input: no interval


def test_exclusive_categories_put_each_token_in_one_and_add_up_to_one():
    """JOHN's tokens by coarse tag: [CLS], [SEP], "." punctuation, John and dog nouns, see a verb, did, n't and
    the other words (n't is a negation and a subject noun is a subject too, but each counts once here). Input A's
    [CLS] row goes to "dog", input B's to "n't"; before, both are uniform: a paired bootstrap of two inputs spans
    from B's change to A's."""
    batches = lambda *maps: [Batch.from_encoded(make_encoded(TOKENS, m)) for m in maps]  # noqa: E731
    before = of_batches(batches(uniform_map(N), uniform_map(N)), [JOHN, JOHN])
    after = of_batches(batches(with_cls_row(uniform_map(N), {DOG_AT: 1.0}),
                               with_cls_row(uniform_map(N), {NOT_AT: 1.0})), [JOHN, JOHN])
    table = tokentypes.exclusive_cls_change(before, after).set_index("category")
    assert tuple(table.index) == tokentypes.EXCLUSIVE and tokentypes.EXCLUSIVE[-1] == tokentypes.UNTYPED
    counts = {"[CLS]": 1, "[SEP]": 1, "punctuation": 1, "noun": 2, "verb": 1, "pronoun": 0, tokentypes.UNTYPED: 3}
    assert table["base_rate"].to_dict() == pytest.approx({c: k / N for c, k in counts.items()})
    assert table["before"].to_dict() == pytest.approx({c: k / N for c, k in counts.items()})
    assert table["before"].sum() == pytest.approx(1) and table["after"].sum() == pytest.approx(1)
    assert table.loc[["noun", tokentypes.UNTYPED], "after"].tolist() == pytest.approx([0.5, 0.5])
    assert table.loc["noun", ["change", "change_low", "change_high"]].tolist() == pytest.approx(
        [0.5 - 2 / N, -2 / N, 1 - 2 / N])
    assert table.loc["verb", ["change", "change_low", "change_high"]].tolist() == pytest.approx([-1 / N] * 3)
    with pytest.raises(ValueError, match="same tagged inputs"):
        tokentypes.exclusive_cls_change(before, result_of(uniform_map(N)))


# -- the stripe test --------------------------------------------------------------------------------
def test_a_planted_stripe_on_a_negation_word_is_counted_there():
    stripe = rows_of({NOT_AT: 0.5}, spread=0.5)
    result = result_of(stack_heads([[stripe, uniform_map(N)]]))
    for threshold in (0.2, 0.4):  # the column gets 0.5 + 0.5 / 9 = 0.56, the others 0.056
        table = result.stripe_table(threshold)
        assert row(table, "negation")["stripes"] == 1 and table["stripes"].max() == 1
        assert row(table, "negation")["share_of_stripes"] == 1 and row(table, "linguistic")["share_of_stripes"] == 1
        assert row(table, "special or punctuation")["share_of_stripes"] == 0
        assert row(table, "negation")["share_of_tokens"] == pytest.approx(1 / N)
        assert row(table, "negation")["ratio"] == pytest.approx(N)
    # at 0.1 every column of the uniform head (1/9 each) is a stripe too: 10 stripes, 2 on "n't"
    low = result.stripe_table(0.1)
    assert row(low, "negation")["stripes"] == 2 and row(low, "[CLS]")["stripes"] == 1
    assert row(low, "linguistic")["share_of_stripes"] == pytest.approx(5 / 10)  # John, n't twice, see, dog
    # received: per head (0.5 + 0.5/N) and 1/N against the mean 1/N over all tokens -> (4.5 + 0.5 + 1) / 2
    assert row(result.stripe_table(), "negation")["received"] == pytest.approx(3)
    assert row(result.stripe_table(), "other")["received"] == pytest.approx((0.5 + 1) / 2)
    layers = result.stripes_by_layer()
    assert layers.loc[1, ["maps", "striped_maps", "stripes", "negation", "noun"]].tolist() == [2, 0.5, 1, 1, 0]
    by_layer = result_of(stack_heads([[uniform_map(N)], [stripe]]))  # the stripe in layer 2 only
    assert row(by_layer.stripe_table(0.2, layer=2), "negation")["stripes"] == 1
    assert by_layer.stripe_table(0.2, layer=1)["stripes"].sum() == 0
    assert np.isnan(row(by_layer.stripe_table(0.2, layer=1), "negation")["share_of_stripes"])
    assert by_layer.stripes_by_layer(0.2)["negation"].isna().tolist() == [True, False]


def test_the_stripe_summary_counts_where_the_stripes_fall_per_task_model_and_threshold():
    """A stripe on "n't" (a linguistic token) for one model, a [CLS] stripe for the other: at 0.2 each has one
    stripe, all linguistic or all special; at 0.1 the uniform head's columns count as stripes too."""
    negation = result_of(stack_heads([[rows_of({NOT_AT: 0.5}, spread=0.5), uniform_map(N)]]))
    sink = result_of(stack_heads([[rows_of({CLS: 0.5}, spread=0.5), uniform_map(N)]]))
    summary = tokentypes.stripe_summary({"task": {"before": negation, "after": sink}}, thresholds=(0.1, 0.2))
    assert summary[["task", "model", "threshold"]].values.tolist() == [
        ["task", "before", 0.1], ["task", "before", 0.2], ["task", "after", 0.1], ["task", "after", 0.2]]
    assert list(summary.columns[4:]) == list(tokentypes.Stripes)
    at = summary.set_index(["model", "threshold"])
    assert at.loc[("before", 0.2), "stripes"] == 1 and at.loc[("before", 0.1), "stripes"] == 10
    assert at.loc[("before", 0.2), tokentypes.Stripes.LINGUISTIC] == 1
    assert at.loc[("before", 0.2), tokentypes.Stripes.SPECIAL] == 0
    assert at.loc[("after", 0.2), tokentypes.Stripes.SPECIAL] == at.loc[("after", 0.2), tokentypes.Stripes.CLS] == 1
    assert at.loc[("before", 0.1), tokentypes.Stripes.LINGUISTIC] == pytest.approx(5 / 10)
    assert at.loc[("after", 0.2), tokentypes.Stripes.SPECIAL_TOKENS] == pytest.approx(3 / N)  # [CLS], [SEP], "."
    assert at.loc[("after", 0.2), tokentypes.Stripes.LINGUISTIC_TOKENS] == pytest.approx(4 / N)  # John n't see dog


def test_the_threshold_decides_what_is_a_stripe():
    sink = rows_of({CLS: 1 / 7}, spread=6 / 7)  # [CLS] column: 1/7 + 6/63 = 0.238
    result = result_of(sink)
    assert [row(result.stripe_table(t), "[CLS]")["stripes"] for t in (0.1, 0.2, 0.4)] == [1, 1, 0]
    assert row(result.stripe_table(0.1), "other")["stripes"] == 0  # every other column: 6 / 63 = 0.095
    assert np.isnan(row(result.stripe_table(0.4), "[CLS]")["share_of_stripes"])  # no stripe at all


def test_every_token_is_in_one_part_of_the_partition():
    rng = np.random.default_rng(0)
    peaked = random_row_stochastic(rng, (2, 3, N, N)) ** 6
    result = result_of(peaked / peaked.sum(-1, keepdims=True))
    for frame, column in ((result.cls_by_type(1), "share"), (result.cls_by_type(2), "share"),
                          (result.stripe_table(0.1), "share_of_stripes"), (result.stripe_table(0.1), "stripes"),
                          (result.stripe_table(0.1), "share_of_tokens")):
        parts = frame.set_index("category").loc[list(PARTITION), column]
        total = 1 if column != "stripes" else result.stripe_columns[0].sum()
        assert parts.sum() == pytest.approx(total)
        assert row(frame, "special or punctuation")[column] == pytest.approx(parts.iloc[:3].sum())
    assert result.stripe_columns[0].sum() > 0
    assert result.tokens[[CATEGORIES.index(c) for c in PARTITION]].sum() == result.n_tokens == N


# -- wordpieces and pairs ------------------------------------------------------------------------------
def test_wordpieces_of_a_word_share_its_types():
    tags = tagged(["Johnson", "saw", "it"], ["PROPN", "VERB", "PRON"], ["nsubj", "ROOT", "dobj"])
    tokens = ["[CLS]", "john", "##son", "saw", "it", "[SEP]"]
    attn = with_cls_row(uniform_map(6), {2: 1.0})  # the [CLS] row on the second piece of "Johnson"
    enc = Encoded(tokens, [0, 1, 1, 2, 3, 4], ["[CLS]", "Johnson", "saw", "it", "[SEP]"], [0] * 6, attn[None, None])
    result = of_batches([Batch.from_encoded(enc)], [tags])
    table = result.cls_by_type()
    assert row(table, "noun")["share"] == pytest.approx(1) and row(table, "subject")["share"] == pytest.approx(1)
    assert row(table, "noun")["base_rate"] == pytest.approx(2 / 6)  # two of six tokens are pieces of a noun
    assert result.tokens[CATEGORIES.index("noun")] == 2 and result.tokens[CATEGORIES.index("object")] == 1


def test_real_wordpieces_take_their_word_types(encoder):
    tags = tagged(["Kovaleva", "wrote", "it"], ["PROPN", "VERB", "PRON"], ["nsubj", "ROOT", "dobj"])
    prepared = encoder.prepare(list(tags.words))
    pieces = [t for t, w in zip(prepared.tokens, prepared.word_ids) if w == 1]
    assert len(pieces) > 1  # the name is split
    cats = token_categories(prepared.words, prepared.word_ids, prepared.segment_ids,
                            [t == encoder.cls_token for t in prepared.tokens],
                            [t == encoder.sep_token for t in prepared.tokens], tags)
    noun = cats[:, CATEGORIES.index("noun")]
    assert noun.tolist() == [w == 1 for w in prepared.word_ids]


def test_pairs_align_each_text_with_its_own_tags():
    a = tagged(["John", "ran"], ["PROPN", "VERB"], ["nsubj", "ROOT"])
    b = tagged(["it", "rained"], ["PRON", "VERB"], ["nsubj", "ROOT"], k=1)
    tokens = ["[CLS]", "John", "ran", "[SEP]", "it", "rained", "[SEP]"]
    attn = with_cls_row(uniform_map(7), {4: 1.0})  # the [CLS] row on "it", the first word of text b
    result = result_of(attn, tokens, (a, b))
    table = result.cls_by_type()
    assert row(table, "pronoun")["share"] == pytest.approx(1) and row(table, "noun")["share"] == pytest.approx(0)
    assert result.tokens[CATEGORIES.index("[SEP]")] == 2 and result.tokens[CATEGORIES.index("verb")] == 2
    assert result.tokens[CATEGORIES.index("noun")] == 1 and result.tokens[CATEGORIES.index("pronoun")] == 1


# -- bad input ----------------------------------------------------------------------------------------
def test_bad_input_is_a_clear_error(encoder):
    result = result_of(uniform_map(N))
    with pytest.raises(ValueError, match="unknown token type 'adjective'"):
        result.by_head("adjective")
    with pytest.raises(ValueError, match="'cls' or 'rows'"):
        result.by_head("noun", source="columns")
    with pytest.raises(ValueError, match=r"counted at thresholds \(0.1, 0.2, 0.4\), not 0.3"):
        result.stripe_table(0.3)
    with pytest.raises(ValueError, match=r"layer must be 1-1 \(1-indexed, as in the papers\); got 2"):
        result.cls_by_type(layer=2)
    with pytest.raises(ValueError, match="distinct numbers"):
        result_of(uniform_map(N), thresholds=(0, 0.2))
    other = tagged(["Mary", "did", "n't", "see", "the", "cat", "."], JOHN.pos, JOHN.relations)
    with pytest.raises(ValueError, match="differ from the tagged words"):
        result_of(uniform_map(N), tags=other)
    with pytest.raises(ValueError, match="no tagged words"):
        of_batches([Batch.from_encoded(make_encoded(TOKENS, uniform_map(N)))], [])
    with pytest.raises(ValueError, match="1 inputs but 2 tagged"):
        of_batches([Batch.from_encoded(make_encoded(TOKENS, uniform_map(N)))], [JOHN, JOHN])
    shorter = of_batches([Batch.from_encoded(make_encoded(["[CLS]", "John", "[SEP]"], uniform_map(3)))],
                         [tagged(["John"], ["PROPN"], ["ROOT"])])
    with pytest.raises(ValueError, match="same tagged inputs"):
        tokentypes.special_change(result, shorter)
    with pytest.raises(ValueError, match="no inputs"):
        tokentypes.token_type_attention(encoder, [], cache_dir=None, progress=False)
    with pytest.raises(ValueError, match="2 inputs but 1 tagged"):
        tokentypes.token_type_attention(encoder, ["a b", "c"], tags=[JOHN], cache_dir=None, progress=False)
    with pytest.raises(ValueError, match="a pair needs a pair"):
        tokentypes.token_type_attention(encoder, [("a", "b")], tags=[JOHN], cache_dir=None, progress=False)
    with pytest.raises(ValueError, match="a text or an \\(a, b\\) pair"):
        tokentypes.token_type_attention(encoder, [["John", "ran"]], cache_dir=None, progress=False)


# -- the real encoder ----------------------------------------------------------------------------------
ITEMS = ["John didn't see the dog. It ran away, barking.", ("Nobody came.", "The results, however, were mixed.")]


def test_streamed_pass_equals_the_maps_in_memory_and_is_cached(encoder, tmp_path):
    tags = tokentypes.tag_items(ITEMS, cache_dir=tmp_path, progress=False)
    assert isinstance(tags[1], tuple) and tags[1][1].words[-1] == "."
    streamed = tokentypes.token_type_attention(encoder, ITEMS, batch_size=1, cache_dir=tmp_path, progress=False)
    words = [list(tags[0].words), (list(tags[1][0].words), list(tags[1][1].words))]
    in_memory = of_batches([Batch.from_encoded(e) for e in encoder.encode_many(words)], tags)
    arrays = ("cls_mass", "row_mass", "cls_by_input", "rows_by_input", "stripes", "stripe_columns", "striped_maps",
              "tokens", "base_rate")
    for name in arrays:
        np.testing.assert_allclose(getattr(streamed, name), getattr(in_memory, name), atol=1e-5, err_msg=name)
    assert streamed.cls_mass.shape == (len(CATEGORIES), encoder.n_layers, encoder.n_heads)
    assert streamed.n_inputs == 2 and streamed.inputs_key == in_memory.inputs_key
    assert streamed.tokens[CATEGORIES.index("[SEP]")] == 3  # one after the text, two in the pair
    assert len(list(tmp_path.glob("token_types-*.npz"))) == 1
    cached = tokentypes.token_type_attention(encoder, ITEMS, cache_dir=tmp_path, progress=False)
    np.testing.assert_array_equal(cached.row_mass, streamed.row_mass)
    assert tokentypes.special_change(streamed, cached)["cls_change"].abs().max() == 0
    (blocks,) = reduce(encoder, words, [tokentypes.TokenTypeSums(tags)], block_size=1, cache_dir=None, progress=False)
    merged = TokenTypeAttention.from_sums(blocks.result(), blocks.thresholds, streamed.inputs_key)
    for name in arrays:  # one input per block, merged: the same as one block
        np.testing.assert_allclose(getattr(merged, name), getattr(streamed, name), atol=1e-5, err_msg=name)
