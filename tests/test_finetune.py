"""finetune: cached, seeded fine-tuning of a copy of a tiny model, and the baselines: the untrained head is the
head fine-tuning starts from, both frozen features come from one pass, and mean pooling ignores padding."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from bertlook_utils import finetune, intervene
from bertlook_utils.extract import batches
from bertlook_utils.models import load_encoder
from bertlook_utils.core.threads import TRAINING_THREADS
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
    logits, labels = tuned.predict(data.test, cache_dir=tmp_path)
    assert logits.shape == (4, 2) and list(labels) == [0, 1, 0, 1]
    batch = next(batches(tuned.encoder, [e.item for e in data.test], 4, attention=False, max_tokens=tuned.max_length))
    with torch.inference_mode():
        expected = tuned.head(tuned.encoder.model(**batch.model_inputs).last_hidden_state[:, 0])
    np.testing.assert_allclose(logits, expected.numpy(), rtol=1e-5, atol=1e-6)
    assert np.array_equal(tuned.predict(data.test, cache_dir=tmp_path)[0], logits)  # from the cache
    cached = set(tmp_path.glob("frozen_states-*"))
    assert len(cached) == 1
    np.testing.assert_allclose(fresh.predict(data.test, cache_dir=tmp_path)[0], logits, atol=1e-4)
    assert set(tmp_path.glob("frozen_states-*")) == cached  # an uncached model has its base's fingerprint: no cache


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
    assert len(tuned.history) == 2 and tuned.predict(small_task().test, cache_dir=None)[0].shape == (4, 2)


def test_the_untrained_head_is_the_head_fine_tuning_starts_from(tiny_folder):
    data = small_task()
    base = load_encoder(tiny_folder)
    state = torch.random.get_rng_state()
    head = finetune.untrained_head(24, 2, seed=5)
    assert torch.equal(torch.random.get_rng_state(), state)  # the global random state is left alone
    start = finetune.finetune(base, data, epochs=0, seed=5, cache_dir=None, progress=False)
    assert torch.equal(start.head.weight, head.weight) and torch.equal(start.head.bias, head.bias)
    assert not torch.equal(finetune.untrained_head(24, 2, seed=6).weight, head.weight)


def test_untrained_head_accuracies_are_each_seeded_heads_accuracy():
    rng = np.random.default_rng(0)
    states, labels = rng.normal(size=(50, 24)).astype(np.float32), rng.integers(0, 3, 50)
    found = finetune.untrained_head_accuracies(states, labels, 3, n_heads=4)
    with torch.inference_mode():
        expected = [np.mean(finetune.untrained_head(24, 3, s)(torch.from_numpy(states)).argmax(1).numpy() == labels)
                    for s in range(4)]
    assert found.tolist() == expected and len(set(expected)) > 1
    with pytest.raises(ValueError, match="at least 1"):
        finetune.untrained_head_accuracies(states, labels, 3, n_heads=0)


def test_frozen_states_come_from_one_pass_and_mean_pooling_ignores_padding(tiny_folder, tmp_path):
    encoder = load_encoder(tiny_folder)
    examples = small_task().train  # 6 texts of 1 to 8 words: padded batches
    calls = []
    hook = encoder.model.register_forward_hook(intervene.reads_only(lambda *_: calls.append(1)))  # it only counts
    try:
        states = finetune.frozen_states(encoder, examples, max_length=32, cache_dir=tmp_path, progress=False)
    finally:
        hook.remove()
    assert len(calls) == 1 and set(states) == {"cls", "mean"}  # one pass (batches of 32) gives both
    for i, example in enumerate(examples):
        alone = next(batches(encoder, [example.item], 1, attention=False, max_tokens=32))
        with torch.inference_mode():
            hidden = encoder.model(**alone.model_inputs).last_hidden_state[0]  # no padding: every row is real
        np.testing.assert_allclose(states["cls"][i], hidden[0].numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(states["mean"][i], hidden.mean(0).numpy(), rtol=1e-4, atol=1e-5)
    cached = finetune.frozen_states(encoder, examples, max_length=32, cache_dir=tmp_path, progress=False)
    assert all(np.array_equal(cached[k], states[k]) for k in states)


def test_a_linear_probe_separates_separable_features():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 2, 80)
    features = rng.normal(size=(80, 5)) + 4 * labels[:, None]
    assert finetune.probe_accuracy(features[:40], labels[:40], features[40:], labels[40:]) == 1.0


def test_task_scores_puts_the_baselines_beside_the_fine_tuned_model(tiny_folder, tmp_path):
    data = small_task()
    base = load_encoder(tiny_folder)
    tuned = finetune.finetune(base, data, epochs=1, batch_size=4, cache_dir=tmp_path, progress=False)
    scores = finetune.task_scores(base, {"tiny": data}, {"tiny": tuned}, max_length=32, cache_dir=tmp_path,
                                  progress=False, untrained_heads=3)
    assert list(scores.columns) == list(finetune.Score) and list(scores.index) == ["tiny"]
    row = scores.loc["tiny"]
    assert row[finetune.Score.MAJORITY] == finetune.majority_accuracy(data)
    assert row[finetune.Score.FINE_TUNED] == finetune.accuracy_and_loss(*tuned.predict(data.test, cache_dir=None))[0]
    test = finetune.frozen_states(base, data.test, 32, tmp_path, progress=False)
    train = finetune.frozen_states(base, data.train, 32, tmp_path, progress=False)
    labels = np.array([e.label for e in data.test])
    untrained = finetune.untrained_head_accuracies(test["cls"], labels, 2, 3)
    assert row[finetune.Score.UNTRAINED] == pytest.approx(untrained.mean())
    train_labels = np.array([e.label for e in data.train])
    for column, kind in ((finetune.Score.FROZEN_CLS, "cls"), (finetune.Score.FROZEN_MEAN, "mean")):
        assert row[column] == finetune.probe_accuracy(train[kind], train_labels, test[kind], labels)
    with pytest.raises(ValueError, match="no fine-tuned model"):
        finetune.task_scores(base, {"tiny": data}, {}, max_length=32, cache_dir=tmp_path, progress=False)


def test_fine_tuning_trains_the_same_weights_on_any_core_count(tmp_path, monkeypatch):
    """Wide enough (256 dimensions) that PyTorch splits its ops across threads when it may; the weights are bit for
    bit the same whether the caller runs 1 or 4 threads, because training always runs on TRAINING_THREADS."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from bertlook_utils.models import default_model_path

    folder = tmp_path / "wide"
    tokenizer = AutoTokenizer.from_pretrained(default_model_path())
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=1024, max_position_embeddings=128)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    data = small_task()
    threads_seen = []
    step = torch.optim.AdamW.step
    monkeypatch.setattr(torch.optim.AdamW, "step",
                        lambda self, *a, **k: threads_seen.append(torch.get_num_threads()) or step(self, *a, **k))
    outer = torch.get_num_threads()
    weights = []
    try:
        for threads in (1, 4):
            torch.set_num_threads(threads)
            tuned = finetune.finetune(load_encoder(folder), data, epochs=1, batch_size=3, seed=0,
                                      cache_dir=tmp_path / str(threads), progress=False)
            assert torch.get_num_threads() == threads  # restored after training
            weights.append([p.detach().clone() for p in [*tuned.encoder.model.parameters(), *tuned.head.parameters()]])
            meta = (tuned.folder / finetune.META_FILE).read_text()
            assert f'"threads": {TRAINING_THREADS}' in meta and '"cpu_capability"' in meta
    finally:
        torch.set_num_threads(outer)
    assert all(torch.equal(a, b) for a, b in zip(*weights))
    assert set(threads_seen) == {TRAINING_THREADS}
