"""Other BERT-family encoders: randomly initialised models saved to local folders load and give correct maps.

A start on issue 10: BERT at BERT-base's 12 x 12 geometry, DistilBERT and ELECTRA (WordPiece, the default
model's vocabulary) and RoBERTa (a byte-level BPE tokenizer trained here on the shipped Wikipedia text).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import (AutoTokenizer, BertConfig, BertModel, DistilBertConfig, DistilBertModel, ElectraConfig,
                          ElectraModel, RobertaConfig, RobertaModel, RobertaTokenizerFast)

from bertlook_utils import load_encoder
from bertlook_utils.corpora import wiki_articles
from bertlook_utils.models import default_model_path
from bertlook_utils.surface import entropy_stats, token_stats
from bertlook_utils.wordlevel import to_word_level

SMALL = dict(hidden_size=32, intermediate_size=64, max_position_embeddings=128)
TEXT_A, TEXT_B = "The cat sat, happily. Unbelievable!", "It purrs loudly."
WORDS = ["The", "cat", "sat", ",", "happily", "."]


def _roberta_tokenizer(folder):
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    paragraphs = [p for _, article in wiki_articles()[:10] for p in article]
    bpe.train_from_iterator(paragraphs, vocab_size=1500, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                            show_progress=False)
    folder.mkdir(parents=True)
    bpe.save_model(str(folder))
    return RobertaTokenizerFast(vocab=str(folder / "vocab.json"), merges=str(folder / "merges.txt"))


@pytest.fixture(scope="module")
def model_folders(tmp_path_factory):
    """name -> (folder, n_layers, n_heads) of randomly initialised encoders saved with save_pretrained."""
    root = tmp_path_factory.mktemp("encoders")
    wordpiece = AutoTokenizer.from_pretrained(default_model_path())
    torch.manual_seed(0)
    models = {
        "bert-12x12": (BertModel(BertConfig(vocab_size=wordpiece.vocab_size)), wordpiece, 12, 12),
        "distilbert": (DistilBertModel(DistilBertConfig(vocab_size=wordpiece.vocab_size, n_layers=2, n_heads=4,
                                                        dim=32, hidden_dim=64)), wordpiece, 2, 4),
        "electra": (ElectraModel(ElectraConfig(vocab_size=wordpiece.vocab_size, embedding_size=32, num_hidden_layers=3,
                                               num_attention_heads=4, **SMALL)), wordpiece, 3, 4),
    }
    roberta_tok = _roberta_tokenizer(root / "bpe")
    models["roberta"] = (RobertaModel(RobertaConfig(vocab_size=len(roberta_tok), num_hidden_layers=2,
                                                    num_attention_heads=2, type_vocab_size=1, pad_token_id=1,
                                                    bos_token_id=0, eos_token_id=2, **{**SMALL,
                                                    "max_position_embeddings": 130})), roberta_tok, 2, 2)
    folders = {}
    for name, (model, tokenizer, n_layers, n_heads) in models.items():
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
        folders[name] = (root / name, n_layers, n_heads)
    return folders


@pytest.mark.parametrize("name", ["bert-12x12", "distilbert", "electra", "roberta"])
def test_a_pair_encodes_with_its_special_tokens_words_and_segments(model_folders, name):
    folder, n_layers, n_heads = model_folders[name]
    encoder = load_encoder(folder)
    assert (encoder.n_layers, encoder.n_heads) == (n_layers, n_heads)
    enc = encoder.encode(TEXT_A, TEXT_B)
    n = len(enc.tokens)
    assert enc.attn.shape == (n_layers, n_heads, n, n)
    np.testing.assert_allclose(enc.attn.sum(-1), 1, atol=1e-5)
    assert enc.tokens[0] == encoder.cls_token and enc.tokens[-1] == encoder.sep_token
    special = [w for w in enc.words if w in (encoder.cls_token, encoder.sep_token)]
    assert special[0] == encoder.cls_token and special.count(encoder.sep_token) == (3 if name == "roberta" else 2)
    # every word of both texts survives, in order, between the special tokens
    real = [w for w in enc.words if w not in special]
    assert real == ["The", "cat", "sat", ",", "happily", ".", "Unbelievable", "!", "It", "purrs", "loudly", "."]
    assert enc.segment_ids[0] == 0 and enc.segment_ids[-1] == 1 and sorted(set(enc.segment_ids)) == [0, 1]
    words = to_word_level(enc.attn, enc.word_ids)
    assert words.shape == (n_layers, n_heads, len(enc.words), len(enc.words))
    np.testing.assert_allclose(words.sum(-1), 1, atol=1e-5)


@pytest.mark.parametrize("name", ["bert-12x12", "distilbert", "electra"])
def test_statistics_have_one_row_per_head_and_batching_changes_nothing(model_folders, name):
    folder, n_layers, n_heads = model_folders[name]
    encoder = load_encoder(folder)
    items = [(TEXT_A, TEXT_B), "A single text, with a comma.", (WORDS, ["It", "purrs", "."])]
    alone = [encoder.encode(*(item if isinstance(item, tuple) else (item,))) for item in items]
    batched = list(encoder.encode_many(items, batch_size=3))
    for a, b in zip(alone, batched):
        assert a.tokens == b.tokens
        np.testing.assert_allclose(a.attn, b.attn, atol=1e-5)
    stats = token_stats(batched)
    assert len(stats) == n_layers * n_heads and stats[["layer", "head"]].iloc[-1].tolist() == [n_layers, n_heads]
    entropy = entropy_stats(batched)
    assert (entropy["entropy"] > 0).all() and np.isfinite(entropy["cls_entropy"]).all()


def test_roberta_pre_split_words_tokenize_as_in_running_text(model_folders):
    """Byte-level BPE spells a word after a space with "\u0120" ("\u0120cat"); a pre-split word must get the
    same tokens as in running text, not those of a text-initial word ("cat"), in both texts of a pair, while
    the first word of each text stays as the tokenizer spells it in running text."""
    encoder = load_encoder(model_folders["roberta"][0])
    assert encoder.encode(WORDS[:3]).tokens == encoder.encode(" ".join(WORDS[:3])).tokens
    split = encoder.encode(["The", "cat", "sat"], ["It", "purrs", "loudly"])
    text = encoder.encode("The cat sat", "It purrs loudly")
    assert split.tokens == text.tokens and split.word_ids == text.word_ids and split.words == text.words
    assert split.tokens[1] == "The" and "\u0120cat" in "".join(split.tokens)
    np.testing.assert_allclose(split.attn, text.attn, atol=1e-6)


def test_wordpiece_pre_split_words_get_no_extra_spaces(model_folders):
    """WordPiece ignores spaces, so its pre-split words are passed through unchanged."""
    encoder = load_encoder(model_folders["distilbert"][0])
    assert not encoder._space_before_words
    assert encoder.encode(WORDS).tokens == encoder.encode(" ".join(WORDS)).tokens


@pytest.mark.parametrize("name", ["bert-12x12", "roberta"])
def test_token_counts_are_those_of_prepare(model_folders, name):
    """`count_tokens` (one batched call, for ordering sentences by length) spells words as `prepare` does."""
    encoder = load_encoder(model_folders[name][0])
    word_lists = [WORDS, WORDS[:3], ["Hello", ",", "world", "!"]]
    assert encoder.count_tokens(word_lists) == [len(encoder.prepare(words).input_ids) for words in word_lists]


@pytest.mark.parametrize("name", ["bert-12x12", "distilbert", "electra", "roberta"])
def test_the_beyond_attention_analyses_run_on_texts_and_pairs(model_folders, name):
    import pandas as pd

    from bertlook_utils import attribution, identifiability, importance, norms
    from bertlook_utils.finetune import FineTuned
    from bertlook_utils.tasks import Example

    folder, n_layers, n_heads = model_folders[name]
    encoder = load_encoder(folder)
    items = [TEXT_A, (TEXT_A, TEXT_B)]
    shares = norms.norm_shares(encoder, items, cache_dir=None, progress=False)
    assert shares.arrays["norm"].shape == (2, n_layers, n_heads, 4)
    assert norms.decomposition_error(encoder, items[1]) < 1e-4
    effective = identifiability.effective_encoder(encoder)
    enc, eff = encoder.encode(TEXT_A, TEXT_B), effective.encode(TEXT_A, TEXT_B)
    assert eff.attn.shape == enc.attn.shape and np.isfinite(eff.attn).all()
    assert attribution.rollout(enc.attn).shape == (n_layers, len(enc.tokens), len(enc.tokens))
    torch.manual_seed(0)
    classifier = FineTuned("toy", encoder, torch.nn.Linear(encoder.model.config.hidden_size, 2), None, 32,
                           pd.DataFrame())
    for item in items:
        assert len(attribution.explain(classifier, item).scores) >= 2
    examples = [Example(TEXT_A, None, 0), Example(TEXT_A, TEXT_B, 1), Example("A dog ran.", None, 1)]
    table = importance.head_importance(classifier, examples, cache_dir=None, progress=False)
    assert len(table) == n_layers * n_heads


@pytest.mark.parametrize("name", ["bert-12x12", "distilbert", "electra", "roberta"])
def test_notebook_12s_patching_maps_and_scoreboard_run_on_every_family(model_folders, name):
    pytest.importorskip("captum")
    from bertlook_utils import mixing, patching, scoreboard, termheads
    from bertlook_utils.termpairs import TermPair

    folder, n_layers, n_heads = model_folders[name]
    encoder = load_encoder(folder)
    def passage(query, other):
        return ("A", query, "saw", "the", other, ".")

    def length(words):
        return len(encoder.prepare(list(words)).tokens)

    words = ("cat", "dog", "house", "river", "city", "town", "man")
    query, other = next((q, o) for q in words for o in words  # a pair whose passages align in this vocabulary
                        if q != o and length(passage(q, o)) == length(passage(q, q)))
    pair = TermPair("toy", query, passage(query, other), passage(query, query), 4, other)
    components = patching.every_component(encoder)
    assert len(components) == n_layers * (n_heads + 2)
    shares, gaps = termheads.restored_shares(encoder, [pair], [[c] for c in components] + [[("layer", n_layers - 1,
                                                                                               None)]])
    assert shares.shape == (1, len(components) + 1) and np.isfinite(shares).all()
    assert shares[0, -1] == pytest.approx(1.0, abs=1e-3)  # the last layer carries everything
    maps = mixing.layer_maps(encoder, TEXT_A)
    assert set(maps) == set(mixing.METHODS)
    for value in maps.values():
        assert value.shape[0] == n_layers and np.allclose(value.sum(-1), 1, atol=1e-6)
    board = scoreboard.scoreboard(encoder, [TEXT_A], depth=2, n_random=2, n_steps=4, cache_dir=None, progress=False)
    assert board.curves.shape == (1, len(scoreboard.SCORED) + 2, 2) and np.isfinite(board.curves).all()
