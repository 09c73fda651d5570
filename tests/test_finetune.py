"""finetune: task data builders (deterministic, balanced, no leaks), cached fine-tuning on a tiny model,
and head disabling (exactly the chosen head becomes uniform over the real tokens)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from bertlook_utils import finetune, intervene
from bertlook_utils.models import load_encoder


# -- data -------------------------------------------------------------------------------------------
def test_topic_data_is_deterministic_balanced_and_disjoint():
    first = finetune.topic_data(n_train_per_label=3, n_test_per_label=2, seed=1)
    assert first == finetune.topic_data(n_train_per_label=3, n_test_per_label=2, seed=1)
    assert first != finetune.topic_data(n_train_per_label=3, n_test_per_label=2, seed=2)
    assert len(first.labels) == 12 and not first.is_pair
    counts = first.counts()
    assert (counts["train"] == 3).all() and (counts["test"] == 2).all()
    assert not {e.a for e in first.train} & {e.a for e in first.test}
    assert finetune.majority_accuracy(first) == pytest.approx(1 / 12)


@pytest.fixture
def four_articles(monkeypatch):
    from bertlook_utils import corpora

    articles = corpora.wiki_articles()[:8]
    monkeypatch.setattr(finetune, "wiki_articles", lambda: articles)
    return articles


def test_next_paragraph_pairs_are_true_and_balanced(four_articles):
    data = finetune.next_paragraph_data(n_train=20, n_test=6, seed=0, test_fraction=0.25, cache_dir=None)
    assert data == finetune.next_paragraph_data(n_train=20, n_test=6, seed=0, test_fraction=0.25, cache_dir=None)
    assert data.is_pair and len(data.train) == 20 and len(data.test) == 6
    assert sum(e.label for e in data.train) == 10 and sum(e.label for e in data.test) == 3
    paragraphs = {title: [finetune.split_sentences(p) for p in ps] for title, ps in four_articles}
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
        finetune.next_paragraph_data(n_train=5, n_test=2, cache_dir=None)


# -- a tiny model to train and edit -----------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    """A randomly initialised 2-layer, 3-head BERT with the default model's tokenizer, saved to a folder."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from bertlook_utils.models import default_model_path

    folder = tmp_path_factory.mktemp("tiny-bert")
    tokenizer = AutoTokenizer.from_pretrained(default_model_path())
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=24, num_hidden_layers=2, num_attention_heads=3,
                        intermediate_size=32, max_position_embeddings=128)
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def small_task() -> finetune.TaskData:
    texts = ["the cat sat on the mat", "a dog ran", "rain fell all day long on the town", "snow",
             "the sun rose over the quiet hills", "birds sang"]
    examples = tuple(finetune.Example(t, None, i % 2) for i, t in enumerate(texts))
    return finetune.TaskData("tiny", ("even", "odd"), examples, examples[:4])


def test_finetuning_is_seeded_and_cached(tiny_folder, tmp_path):
    data = small_task()
    tuned = finetune.finetune(tiny_folder, data, epochs=2, batch_size=4, seed=3, cache_dir=tmp_path)
    assert list(tuned.history["step"]) == [1, 2, 3, 4] and (tuned.folder / finetune.META_FILE).exists()
    assert load_encoder(tuned.folder).n_layers == 2  # the folder is a model folder
    again = finetune.finetune(tiny_folder, data, epochs=2, batch_size=4, seed=3, cache_dir=tmp_path)
    assert again.folder == tuned.folder
    assert torch.equal(again.head.weight, tuned.head.weight)
    fresh = finetune.finetune(tiny_folder, data, epochs=2, batch_size=4, seed=3, cache_dir=None, progress=False)
    assert torch.allclose(fresh.head.weight, tuned.head.weight, atol=1e-6)  # same seed, same training
    logits, labels = tuned.predict(data.test)
    assert logits.shape == (4, 2) and list(labels) == [0, 1, 0, 1]


def test_distilbert_fine_tunes_with_its_own_dropout_and_no_segment_ids(tmp_path):
    """DistilBERT's config says `dropout`, not `hidden_dropout_prob`, and its tokenizer gives no token_type_ids."""
    from transformers import DistilBertConfig, DistilBertModel, DistilBertTokenizerFast, PretrainedConfig

    from bertlook_utils.models import default_model_path

    tokenizer = DistilBertTokenizerFast.from_pretrained(default_model_path())
    torch.manual_seed(0)
    config = DistilBertConfig(vocab_size=tokenizer.vocab_size, dim=24, n_layers=2, n_heads=3, hidden_dim=32,
                              dropout=0.25)
    DistilBertModel(config).save_pretrained(tmp_path / "distil")
    tokenizer.save_pretrained(tmp_path / "distil")
    assert finetune._hidden_dropout(config) == 0.25
    with pytest.raises(ValueError, match="names no hidden dropout"):
        finetune._hidden_dropout(PretrainedConfig())
    tuned = finetune.finetune(tmp_path / "distil", small_task(), epochs=1, batch_size=4, cache_dir=None,
                              progress=False)
    assert len(tuned.history) == 2 and tuned.predict(small_task().test)[0].shape == (4, 2)


def test_disabling_a_head_makes_exactly_it_uniform(tiny_folder):
    encoder = load_encoder(tiny_folder)
    inputs = finetune._tensors(encoder, small_task().train[:3], 32)  # padded: lengths differ
    valid = inputs["attention_mask"].bool()
    with torch.inference_mode():
        before = encoder.model(**inputs, output_attentions=True).attentions
    seen = {}

    def disable_and_record(layer, probs):
        out = intervene.uniform_head(1, 2, valid=valid)(layer, probs)
        seen[layer] = out
        return out

    with torch.inference_mode(), intervene.edit_attention(encoder.model, disable_and_record):
        encoder.model(**inputs)
    lengths = valid.sum(1)
    for b in range(3):
        n = int(lengths[b])
        assert torch.allclose(seen[1][b, 2, :n, :n], torch.full((n, n), 1.0 / n))
        assert torch.all(seen[1][b, 2, :, n:] == 0)  # no attention on padding
    assert torch.allclose(seen[1][:, :2], before[1][:, :2], atol=1e-6)  # the layer's other heads: unchanged
    assert torch.allclose(seen[0], before[0], atol=1e-6)  # the layer below: unchanged
    assert not torch.allclose(seen[1][:, 2], before[1][:, 2])


def test_disabling_scan_covers_every_head_and_layer(tiny_folder, tmp_path):
    data = small_task()
    tuned = finetune.finetune(tiny_folder, data, epochs=1, batch_size=4, cache_dir=tmp_path, progress=False)
    scan = finetune.disabling_scan(tuned, data, cache_dir=None, progress=False)
    assert len(scan) == 1 + 2 * 3 + 2
    assert scan.iloc[0][["layer", "head", "delta_accuracy", "delta_loss"]].tolist() == [0, 0, 0, 0]
    assert set(zip(scan["layer"], scan["head"])) == {(0, 0)} | {(l, h) for l in (1, 2) for h in range(4)}
    assert np.isfinite(scan["loss"]).all() and (scan["delta_loss"].abs() > 0).any()


def test_clipped_item_fits_and_keeps_whole_words(encoder):
    example = finetune.Example("one two three " * 40, "four five " * 40, 1)
    a, b = finetune.clipped_item(encoder.tokenizer, example, 64)
    assert len(encoder.encode(a, b).tokens) <= 64
    assert set(a.split()) <= {"one", "two", "three"} and set(b.split()) <= {"four", "five"}
