"""sinks.position: the sink metric by token category on hand-built maps with planted sink columns; position or
content on tiny random encoders (word embeddings in place of ids reproduce the ordinary forward pass; a swap is
the forward pass on the swapped ids); registers placed where asked and their mass equal to a direct forward pass;
a RoBERTa-style model (sink <s>, three separators in a pair)."""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest
import torch
from builders import column_map, make_encoded, stack_heads, uniform_map
from test_any_encoder import _roberta_tokenizer
from transformers import (AutoTokenizer, BertConfig, BertModel, DistilBertConfig, DistilBertModel, RobertaConfig,
                          RobertaModel)

from bertlook_utils import sinks
from bertlook_utils.analyses.sinks import position
from bertlook_utils.extract import batches
from bertlook_utils.models import Encoder, default_model_path

PAIRS = [("The cat sat on the mat.", "It was warm, and it slept."), "Paris is large, old."]
TOKENS = ["[CLS]", "the", "cat", ".", "[SEP]", "it", ",", "[SEP]"]  # cls 0, sep 4 and 7, punct 3 and 6


@lru_cache(maxsize=1)
def wordpiece():
    return AutoTokenizer.from_pretrained(default_model_path())


def tiny_bert(seed: int = 0) -> Encoder:
    """2 layers x 2 heads, hidden 16, random weights (spread enough for uneven maps), float64."""
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=wordpiece().vocab_size, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64, initializer_range=0.3,
                        attn_implementation="eager")
    return Encoder("tiny-bert", BertModel(config).double().eval(), wordpiece(), None, 64)


def tiny_distilbert(seed: int = 0) -> Encoder:
    torch.manual_seed(seed)
    config = DistilBertConfig(vocab_size=wordpiece().vocab_size, n_layers=2, n_heads=2, dim=16, hidden_dim=32,
                              max_position_embeddings=64, initializer_range=0.3, attn_implementation="eager")
    return Encoder("tiny-distilbert", DistilBertModel(config).double().eval(), wordpiece(), None, 64)


@pytest.fixture(scope="module")
def tiny_roberta(tmp_path_factory):
    tokenizer = _roberta_tokenizer(tmp_path_factory.mktemp("bpe") / "bpe")
    torch.manual_seed(0)
    config = RobertaConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=32, max_position_embeddings=66, type_vocab_size=1, pad_token_id=1,
                           bos_token_id=0, eos_token_id=2, initializer_range=0.3, attn_implementation="eager")
    return Encoder("tiny-roberta", RobertaModel(config).double().eval(), tokenizer, None, 64)


# -- section 1 --------------------------------------------------------------------------------------
def planted_encoded():
    """Layer 1: head 1 looks at [CLS], head 2 at the first [SEP], heads 3-4 uniform; layer 2: every head splits
    each row between [CLS] and the second [SEP]."""
    n = len(TOKENS)
    attn = stack_heads([[column_map(n, [0]), column_map(n, [4]), uniform_map(n), uniform_map(n)],
                        [column_map(n, [0, 7])] * 4])
    return make_encoded(TOKENS, attn)


def test_categories_split_the_separators_in_order_and_keep_punctuation_apart():
    batch = next(iter(position.encoded_batches([planted_encoded()])))
    found = position.token_categories(batch)
    assert list(found) == ["cls", "sep1", "sep2", "punct", "other"]
    assert [list(np.flatnonzero(m)) for m in found.values()] == [[0], [4], [7], [3, 6], [1, 2, 5]]


def test_planted_sink_columns_give_the_hand_computed_rates_and_scores():
    profile = position.sink_profile([planted_encoded(), planted_encoded()], eps=0.3, eps_grid=[0.1, 0.4, 0.6])
    table = profile.table().set_index(["layer", "category"])
    # layer 1: per head the score of [CLS] is 1, 0, 1/8, 1/8 -> mean 0.3125, one head of four above 0.3
    expected = {(1, "cls"): (0.25, 0.3125), (1, "sep1"): (0.25, 0.3125), (1, "sep2"): (0, 0.0625),
                (1, "punct"): (0, 0.0625), (1, "other"): (0, 0.0625),
                (2, "cls"): (1, 0.5), (2, "sep1"): (0, 0), (2, "sep2"): (1, 0.5), (2, "punct"): (0, 0),
                (2, "other"): (0, 0)}
    for key, (rate, score) in expected.items():
        assert table.loc[key, "sink_rate"] == pytest.approx(rate)
        assert table.loc[key, "sink_score"] == pytest.approx(score)
        assert table.loc[key, "sink_score_low"] == pytest.approx(score)  # two identical inputs: no spread
        assert table.loc[key, "inputs"] == 2
    # the first token over all 8 heads: scores 1, 0, 1/8, 1/8, 1/2 x 4
    curve = profile.curve().set_index("eps")["sink_rate"]
    assert curve.to_dict() == pytest.approx({0.1: 7 / 8, 0.4: 5 / 8, 0.6: 1 / 8})
    assert curve[0.4] == pytest.approx(sinks.sink_rate(planted_encoded().attn, 0.4)[0])
    assert len(profile.per_input) == 2 * 2 * 5


def test_a_roberta_pair_has_three_separators_and_its_sink_is_s():
    tokens = ["<s>", "a", "</s>", "</s>", "b", ".", "</s>"]
    n = len(tokens)
    enc = make_encoded(tokens, stack_heads([[column_map(n, [0])]]), cls_token="<s>", sep_token="</s>")
    table = position.sink_profile([enc]).table().set_index("category")
    assert list(table.index) == ["cls", "sep1", "sep2", "sep3", "punct", "other"]
    assert table.loc["cls", "sink_rate"] == 1 and table.loc["sep3", "sink_score"] == 0
    assert np.isnan(table.loc["cls", "sink_rate_low"])  # one input: no interval


def test_sink_profile_refuses_bad_eps_and_no_inputs():
    with pytest.raises(ValueError, match="eps must"):
        position.sink_profile([planted_encoded()], eps=1.5)
    with pytest.raises(ValueError, match="eps_grid"):
        position.sink_profile([planted_encoded()], eps_grid=[0.0, 0.5])
    with pytest.raises(ValueError, match="no inputs"):
        position.sink_profile([])


# -- section 5: position or content -------------------------------------------------------------------
def one_batch(encoder, items):
    return next(batches(encoder, items, len(items), attention=False))


@pytest.mark.parametrize("build", [tiny_bert, tiny_distilbert])
def test_word_embeddings_in_place_of_ids_reproduce_the_forward_pass(build):
    encoder = build()
    inputs = one_batch(encoder, PAIRS).model_inputs
    direct = encoder.model(**inputs).last_hidden_state
    via = position.run_pass(encoder, inputs, inputs["input_ids"])
    plain = position.run_pass(encoder, inputs)
    real = inputs["attention_mask"].bool()
    assert torch.equal(via.hidden[:, -1][real], direct[real])
    assert torch.equal(via.attn, plain.attn) and torch.equal(via.hidden, plain.hidden)


def test_a_swapped_embedding_is_the_forward_pass_on_the_swapped_ids():
    encoder = tiny_bert()
    inputs = one_batch(encoder, PAIRS).model_inputs
    content = inputs["input_ids"].clone()
    content[:, 0] = wordpiece().convert_tokens_to_ids("the")
    swapped = position.run_pass(encoder, inputs, content)
    typed = position.run_pass(encoder, dict(inputs, input_ids=content))
    assert torch.equal(swapped.hidden, typed.hidden) and torch.equal(swapped.attn, typed.attn)
    assert not torch.allclose(swapped.hidden, position.run_pass(encoder, inputs).hidden)


def test_the_identity_swap_changes_nothing_and_the_moved_content_is_tracked():
    encoder = tiny_bert()
    frame = position.position_or_content(encoder, PAIRS, stand_ins=["[CLS]", "the"], moved_to=2, per_input=True)
    assert list(frame["variant"].unique()) == ["original", "first=[CLS]", "first=the", "cls<->2"]
    assert len(frame) == 4 * 2 * 2  # variants x inputs x layers
    by = {v: g.drop(columns="variant").reset_index(drop=True) for v, g in frame.groupby("variant", sort=False)}
    assert np.allclose(by["first=[CLS]"].to_numpy(), by["original"].to_numpy(), equal_nan=True)
    assert by["original"]["ordinary_change"].to_numpy() == pytest.approx(0, abs=1e-12)
    assert by["first=the"]["cls_content"].isna().all() and (by["first=the"]["ordinary_change"] > 0).all()
    moved = by["cls<->2"]
    assert np.array_equal(moved["cls_content"], moved["swapped"])  # [CLS]'s content now sits at position 2
    # the mass on position 2 is what a forward pass on ids with [CLS] and token 2 exchanged gives
    prepared = one_batch(encoder, PAIRS[:1]).inputs[0]
    ids = list(prepared.input_ids)
    ids[0], ids[2] = ids[2], ids[0]
    attn = position.run_pass(encoder, encoder.pad([type(prepared)(**{**vars(prepared), "input_ids": ids})])).attn
    expected = sinks.sink_scores(attn[0].numpy()).mean(1)
    first = moved[moved["input"] == 0]
    assert first["swapped"].to_numpy() == pytest.approx(expected[:, 2])
    assert first["first"].to_numpy() == pytest.approx(expected[:, 0])


def test_position_or_content_summary_and_errors():
    encoder = tiny_bert()
    table = position.position_or_content(encoder, PAIRS)
    assert list(table["variant"].unique()) == ["original", "first=the", "first=[SEP]", "cls<->middle"]
    assert {"first", "first_low", "first_high", "cls_content", "sep", "ordinary_change", "inputs"} <= set(table)
    assert (table["inputs"] == 2).all() and list(table["layer"][:2]) == [1, 2]
    with pytest.raises(ValueError, match="moved_to"):
        position.position_or_content(encoder, PAIRS, moved_to=0)
    with pytest.raises(ValueError, match="moved_to"):
        position.position_or_content(encoder, PAIRS, moved_to=50)
    with pytest.raises(ValueError, match="stand_ins"):
        position.position_or_content(encoder, PAIRS, stand_ins=["unbelievably"])
    with pytest.raises(ValueError, match="items"):
        position.position_or_content(encoder, [])
    with pytest.raises(ValueError, match="content_ids"):
        position.run_pass(encoder, one_batch(encoder, PAIRS).model_inputs, torch.zeros(1, 3, dtype=torch.long))


# -- section 5: registers -----------------------------------------------------------------------------
def test_registers_are_inserted_where_asked():
    encoder = tiny_bert()
    prepared = one_batch(encoder, [("the cat", "a dog")]).inputs[0]  # [CLS] the cat [SEP] a dog [SEP]
    ids = position.register_ids(encoder, "unused", 2)
    assert wordpiece().convert_ids_to_tokens(ids) == ["[unused0]", "[unused1]"]
    grown, added = position.append_registers(encoder, prepared, ids, "before_sep")
    assert grown.tokens == ["[CLS]", "the", "cat", "[SEP]", "a", "dog", "[unused0]", "[unused1]", "[SEP]"]
    assert list(np.flatnonzero(added)) == [6, 7]
    assert grown.token_type_ids == [0, 0, 0, 0, 1, 1, 1, 1, 1] and len(grown.word_ids) == 9
    at_end, added = position.append_registers(encoder, prepared, position.register_ids(encoder, "sep", 2), "end")
    assert at_end.tokens[-3:] == ["[SEP]"] * 3 and list(np.flatnonzero(added)) == [7, 8]
    assert position.register_ids(encoder, "filler", 3) == [wordpiece().convert_tokens_to_ids("the")] * 3
    with pytest.raises(ValueError, match="where"):
        position.append_registers(encoder, prepared, ids, "middle")
    with pytest.raises(ValueError, match="kind"):
        position.register_ids(encoder, "random", 2)
    with pytest.raises(ValueError, match="k must"):
        position.register_ids(encoder, "sep", 0)


def test_register_mass_is_that_of_a_forward_pass_on_the_typed_text():
    encoder = tiny_bert()
    frame = position.registers(encoder, ["the cat"], k=1, kinds=["sep"], per_input=True)
    typed = sinks.sink_scores(encoder.encode("the cat [SEP]").attn).mean(1)  # [CLS] the cat [SEP] [SEP]
    sep = frame[frame["variant"] == "sep"]
    assert sep["added"].to_numpy() == pytest.approx(typed[:, 3])
    assert sep["first"].to_numpy() == pytest.approx(typed[:, 0])
    assert sep["sep"].to_numpy() == pytest.approx(typed[:, 4])
    original = frame[frame["variant"] == "original"]
    assert original["added"].isna().all() and original["ordinary_change"].to_numpy() == pytest.approx(0, abs=1e-12)


def test_registers_summary_has_one_row_per_variant_and_layer():
    table = position.registers(tiny_bert(), PAIRS, k=2)
    assert list(table["variant"]) == [v for v in ["original", "unused", "sep", "filler"] for _ in range(2)]
    assert {"added", "added_low", "added_max", "ordinary_change_high", "inputs"} <= set(table)
    assert (table.loc[table["variant"] != "original", "ordinary_change"] > 0).all()
    # mass is conserved: per row the weights sum to 1, so the groups' sums never exceed 1
    assert (table["first"] + table["sep"] + table["added"].fillna(0) <= 1 + 1e-9).all()


# -- a RoBERTa-style model ----------------------------------------------------------------------------
def test_roberta_style_model(tiny_roberta):
    encoder = tiny_roberta
    inputs = one_batch(encoder, PAIRS).model_inputs  # padded: the second input is shorter
    real = inputs["attention_mask"].bool()
    via = position.run_pass(encoder, inputs, inputs["input_ids"]).hidden[:, -1][real]
    assert torch.allclose(via, encoder.model(**inputs).last_hidden_state[real], atol=1e-12)
    table = position.sink_profile(encoder.encode_many(PAIRS[:1])).table()
    assert list(table["category"].unique()) == ["cls", "sep1", "sep2", "sep3", "punct", "other"]
    frame = position.position_or_content(encoder, PAIRS)
    assert list(frame["variant"].unique()) == ["original", "first=the", "first=</s>", "cls<->middle"]
    with pytest.raises(ValueError, match="kind"):
        position.registers(encoder, PAIRS, kinds=["unused"])
    grown = position.registers(encoder, PAIRS, k=2, kinds=["sep", "filler"], where="end", per_input=True)
    assert set(grown["variant"]) == {"original", "sep", "filler"} and len(grown) == 3 * 2 * 2
