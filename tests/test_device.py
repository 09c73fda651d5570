"""Where the model runs: `pick_device`, the hooks that keep its inputs and outputs on the CPU, the placement in the
cache key, reduced-precision extraction against float32, and the reused attention buffer. CI has no GPU: the CPU
path runs with device="cpu" explicitly; the CUDA branch is the same code (benchmarks/device_check.py runs it)."""
import numpy as np
import pytest
import torch

from bertlook_utils.core import models
from bertlook_utils.core.models import load_encoder, pick_device
from bertlook_utils.analyses import surface
from bertlook_utils.data import corpora
from bertlook_utils.engine import extract

# bf16 keeps 8 bits of mantissa, fp16 11: on 16 segments a head's token shares move by at most about 0.003 (bf16)
# and 0.0004 (fp16), its entropies by 0.03 and 0.003 nats (measured on 64 segments); the bounds leave room for that.
TOLERANCE = {"bf16": (0.01, 0.05), "fp16": (0.002, 0.01)}


def test_an_explicit_device_wins_over_the_variable_and_the_default(monkeypatch):
    monkeypatch.setenv("BERTLOOK_DEVICE", "cuda")
    assert pick_device("cpu") == torch.device("cpu")
    monkeypatch.setenv("BERTLOOK_DEVICE", " cpu ")
    assert pick_device() == torch.device("cpu")


def test_without_a_choice_a_gpu_is_used_when_torch_sees_one(monkeypatch):
    monkeypatch.delenv("BERTLOOK_DEVICE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert pick_device() == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert pick_device() == torch.device("cuda")


@pytest.mark.parametrize("value, named", [("tpu", "is not a device"), ("mps", "CPU or a CUDA GPU"),
                                          ("cuda:7", "CUDA GPU")])
def test_a_bad_device_is_refused_naming_where_it_came_from(monkeypatch, value, named):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    with pytest.raises(ValueError, match=f"device='{value}'.*{named}"):
        pick_device(value)
    monkeypatch.setenv("BERTLOOK_DEVICE", value)
    with pytest.raises(ValueError, match=r"\$BERTLOOK_DEVICE="):
        pick_device()


def test_a_bad_precision_is_refused_naming_the_argument_or_the_variable(monkeypatch):
    with pytest.raises(ValueError, match="precision='fp8'"):
        load_encoder(device="cpu", precision="fp8")
    monkeypatch.setenv("BERTLOOK_PRECISION", "half")
    with pytest.raises(ValueError, match=r"\$BERTLOOK_PRECISION='half'"):
        load_encoder(device="cpu")


def test_on_the_cpu_the_hooks_hand_back_the_very_tensors_and_half_floats_come_back_as_float32():
    hidden, ids = torch.randn(2, 3), torch.ones(2, 3, dtype=torch.long)
    out = models._on_cpu({"hidden": hidden, "pair": (hidden, [ids]), "none": None})
    assert out["hidden"] is hidden and out["pair"][0] is hidden and out["pair"][1][0] is ids and out["none"] is None
    half = models._on_cpu((hidden.bfloat16(), hidden.half()))
    assert [t.dtype for t in half] == [torch.float32, torch.float32]
    assert torch.allclose(half[1], hidden, atol=1e-2)


def test_the_model_reads_cpu_inputs_and_returns_a_cpu_model_output(encoder):
    inputs = encoder.pad([encoder.prepare("The cat sat.", "It slept.")])
    out = encoder.model(**inputs, output_attentions=True)
    assert type(out).__name__ == "BaseModelOutputWithPoolingAndCrossAttentions"
    assert out.last_hidden_state.device.type == "cpu" and out.attentions[0].dtype == torch.float32
    assert encoder.device == torch.device("cpu") and encoder.placement == ("cpu", "fp32")
    copy = encoder.copy()
    assert len(copy.model._forward_hooks) == len(encoder.model._forward_hooks) == 1  # hooked once, copies too


def test_the_cache_key_names_the_placement_only_off_the_cpu_in_float32(encoder):
    from bertlook_utils.core.fingerprints import config_fingerprint, tokenizer_fingerprint, weights_fingerprint
    import hashlib

    kind = type(encoder.model)
    parts = (weights_fingerprint(encoder.model), config_fingerprint(encoder.model.config),
             tokenizer_fingerprint(encoder.tokenizer), f"{kind.__module__}.{kind.__qualname__}", "signed=False")
    assert encoder.fingerprint == hashlib.sha256("|".join(parts).encode()).hexdigest()  # as before devices
    low = load_encoder(device="cpu", precision="bf16")
    assert low.fingerprint != encoder.fingerprint and low.copy().fingerprint == low.fingerprint
    assert models.random_init_encoder(low).precision == "bf16"


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_reduced_precision_extraction_agrees_with_float32_within_the_stated_tolerance(encoder, precision):
    segments = corpora.make_segments(encoder.tokenizer, 16, seed=0)
    low = load_encoder(device="cpu", precision=precision)

    def stats(enc):
        tokens, entropy = extract.reduce(enc, segments, [surface.TokenStats(), surface.EntropyStats()],
                                         cache_dir=None, progress=False)
        return tokens.frame().drop(columns=["layer", "head"]), entropy.frame().drop(columns=["layer", "head"])

    (tokens, entropy), (tokens_low, entropy_low) = stats(encoder), stats(low)
    share_bound, entropy_bound = TOLERANCE[precision]
    share_gap = np.nanmax(np.abs(tokens_low.to_numpy(float) - tokens.to_numpy(float)))
    entropy_gap = np.nanmax(np.abs(entropy_low.to_numpy(float) - entropy.to_numpy(float)))
    assert 0 < share_gap < share_bound and 0 < entropy_gap < entropy_bound  # rounded, and not by much


def test_a_reused_buffer_gives_each_batch_the_maps_of_a_fresh_one(encoder):
    texts = ["The cat sat on the mat.", "Dogs bark.", "A much longer sentence, with a comma, than the others.",
             "Short.", "Birds sing in the morning."]
    fresh = [attn.clone() for _, _, attn in encoder.batches(texts, batch_size=2)]
    reused, pointers = [], set()
    for _, _, attn in encoder.batches(texts, batch_size=2, reuse=True):
        reused.append(attn.clone())
        pointers.add(attn.untyped_storage().data_ptr())
    assert len(pointers) < len(reused)  # the memory was reused ...
    assert all(torch.equal(a, b) for a, b in zip(fresh, reused))  # ... and every batch's maps are its own


def test_the_device_check_says_it_did_not_run_where_there_is_no_gpu(monkeypatch, capsys):
    from benchmarks import device_check

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert device_check.main(["--steps", "agree"]) == 3
    assert "the device checks were not run" in capsys.readouterr().out
