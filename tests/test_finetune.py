"""finetune: cached fine-tuning of a copy of a tiny model, baselines, head disabling (exactly the chosen head
becomes uniform over the real tokens) and the scan's summary."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from bertlook_utils import finetune, intervene
from bertlook_utils.extract import batches
from bertlook_utils.models import load_encoder
from bertlook_utils.tasks import Example, TaskData


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


def small_task() -> TaskData:
    texts = ["the cat sat on the mat", "a dog ran", "rain fell all day long on the town", "snow",
             "the sun rose over the quiet hills", "birds sang"]
    examples = tuple(Example(t, None, i % 2) for i, t in enumerate(texts))
    return TaskData("tiny", ("even", "odd"), examples, examples[:4])


def test_finetuning_is_seeded_and_cached(tiny_folder, tmp_path):
    data = small_task()
    base = load_encoder(tiny_folder)
    before = {k: v.clone() for k, v in base.model.state_dict().items()}
    tuned = finetune.finetune(base, data, epochs=2, batch_size=4, seed=3, cache_dir=tmp_path)
    assert list(tuned.history["step"]) == [1, 2, 3, 4] and (tuned.folder / finetune.META_FILE).exists()
    assert all(torch.equal(v, before[k]) for k, v in base.model.state_dict().items())  # a copy was trained
    assert any(not torch.equal(v, before[k]) for k, v in tuned.encoder.model.state_dict().items())
    assert load_encoder(tuned.folder).n_layers == 2  # the folder is a model folder
    assert not list(tmp_path.glob("*.tmp"))  # saved atomically: no temporary folder left
    again = finetune.finetune(base, data, epochs=2, batch_size=4, seed=3, cache_dir=tmp_path)
    assert again.folder == tuned.folder
    assert torch.equal(again.head.weight, tuned.head.weight)
    fresh = finetune.finetune(base, data, epochs=2, batch_size=4, seed=3, cache_dir=None, progress=False)
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
    tuned = finetune.finetune(load_encoder(tmp_path / "distil"), small_task(), epochs=1, batch_size=4, cache_dir=None,
                              progress=False)
    assert len(tuned.history) == 2 and tuned.predict(small_task().test)[0].shape == (4, 2)


def test_disabling_a_head_makes_exactly_it_uniform(tiny_folder):
    encoder = load_encoder(tiny_folder)
    batch = next(batches(encoder, [e.item for e in small_task().train[:3]], 3, attention=False, max_tokens=32))
    inputs = batch.model_inputs  # padded: lengths differ
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
    tuned = finetune.finetune(load_encoder(tiny_folder), data, epochs=1, batch_size=4, cache_dir=tmp_path,
                              progress=False)
    scan = finetune.disabling_scan(tuned, data, cache_dir=None, progress=False)
    assert len(scan) == 1 + 2 * 3 + 2
    assert scan.iloc[0][["layer", "head", "delta_accuracy", "delta_loss"]].tolist() == [0, 0, 0, 0]
    assert set(zip(scan["layer"], scan["head"])) == {(0, 0)} | {(l, h) for l in (1, 2) for h in range(4)}
    assert np.isfinite(scan["loss"]).all() and (scan["delta_loss"].abs() > 0).any()


def test_task_scores_and_the_scan_summary(tiny_folder, tmp_path):
    data = small_task()
    base = load_encoder(tiny_folder)
    tuned = finetune.finetune(base, data, epochs=1, batch_size=4, cache_dir=tmp_path, progress=False)
    scores = finetune.task_scores(base, {"tiny": data}, {"tiny": tuned}, max_length=32, cache_dir=tmp_path,
                                  progress=False)
    assert list(scores.columns) == list(finetune.SCORE_COLUMNS) and list(scores.index) == ["tiny"]
    assert scores.loc["tiny", "majority class"] == finetune.majority_accuracy(data)
    assert scores.loc["tiny", "fine-tuned"] == finetune.accuracy_and_loss(*tuned.predict(data.test))[0]
    assert 0 <= scores.loc["tiny", "frozen encoder + linear head"] <= 1


def test_scan_summary_reads_the_best_and_worst_head_and_layer():
    """A scan of 2 layers x 2 heads with known changes: head 2-1 helps most, 1-2 hurts most, layer 2 hurts."""
    rows = [(0, 0, 0.5, 1.0), (1, 1, 0.5, 1.0), (1, 2, 0.25, 1.2), (2, 1, 0.75, 0.9), (2, 2, 0.5, 0.95),
            (1, 0, 0.5, 1.1), (2, 0, 0.0, 2.0)]
    scan = pd.DataFrame(rows, columns=["layer", "head", "accuracy", "loss"])
    scan["delta_accuracy"] = scan["accuracy"] - 0.5
    scan["delta_loss"] = scan["loss"] - 1.0
    summary = finetune.scan_summary({"task": scan}).loc["task"]
    assert summary["accuracy"] == 0.5
    assert (summary["heads that help when disabled"], summary["heads that hurt"]) == (1, 1)
    assert (summary["best head"], summary["best gain"]) == ("2-1", 0.25)
    assert (summary["worst head"], summary["worst loss"]) == ("1-2", -0.25)
    assert summary["heads lowering the loss"] == 2
    assert (summary["worst layer"], summary["worst layer change"]) == (2, -0.5)
