"""benchmarks: the timed kit method runs through extract.reduce (which makes a fresh reducer for each block)
and reports every reducer's time and the same statistics as the list functions."""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks import bench
from benchmarks.bench import _Timed, run_kit, run_kit_js
from bertlook_utils.extract import reduce
from bertlook_utils.surface import TokenStats, token_stats


@pytest.mark.slow
def test_the_kit_method_times_every_reducer_and_gives_the_statistics(encoder, segments, reference_encodeds):
    info, frames = run_kit(encoder, segments[:5], batch_size=2)
    assert info["segments_seen"] == 5
    assert set(info["reducer_seconds"]) == {"token_stats", "entropy_stats"}
    assert all(seconds > 0 for seconds in info["reducer_seconds"].values())
    np.testing.assert_allclose(frames["prev"], token_stats(reference_encodeds[:5])["prev"], atol=1e-5)


@pytest.mark.slow
def test_the_timer_adds_up_over_the_copies_made_for_each_block(encoder, segments):
    _Timed.seconds = {}
    timed = reduce(encoder, segments[:5], [_Timed(TokenStats())], batch_size=2, block_size=2, cache_dir=None,
                   progress=False)[0]
    assert _Timed.seconds["token_stats"] > 0
    assert timed.reducer.count == 5  # the wrapped reducer holds the merged result


@pytest.mark.slow
def test_the_kit_with_distances_times_the_js_reducer_too(encoder, segments, reference_encodeds):
    info, frames = run_kit_js(encoder, segments[:5], batch_size=2)
    assert set(info["reducer_seconds"]) == {"token_stats", "entropy_stats", "js_distances"}
    np.testing.assert_allclose(frames["prev"], token_stats(reference_encodeds[:5])["prev"], atol=1e-5)


def test_a_size_is_a_bert_shape_with_random_weights_built_once(tmp_path, monkeypatch):
    monkeypatch.setitem(bench.SIZES, "tiny", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                                  intermediate_size=64))
    tiny = bench.size_encoder("tiny", tmp_path)
    assert (tiny.n_layers, tiny.n_heads, tiny.model.config.hidden_size) == (2, 4, 32)
    assert tiny.tokenizer.vocab_size == bench.size_encoder("default").tokenizer.vocab_size
    written = (tmp_path / "tiny" / "config.json").stat().st_mtime_ns
    again = bench.size_encoder("tiny", tmp_path)  # loaded from the folder, not rebuilt
    assert (tmp_path / "tiny" / "config.json").stat().st_mtime_ns == written
    assert again.fingerprint == tiny.fingerprint
    with pytest.raises(ValueError, match="size must be one of"):
        bench.size_encoder("huge", tmp_path)


def test_each_size_is_compared_with_its_own_floor():
    runs = [{"size": size, "method": method, "n": 8, "seconds": seconds, "peak_rss_mb": 1.0, "growth_mb": 1.0}
            for size, method, seconds in (("default", "floor", 2.0), ("default", "kit", 2.5),
                                          ("large", "floor", 20.0), ("large", "kit_js", 30.0))]
    rows = {(r["size"], r["method"]): r["ratio_to_floor"] for r in bench.summarise(runs)}
    assert rows == {("default", "floor"): 1.0, ("default", "kit"): 1.25, ("large", "floor"): 1.0,
                    ("large", "kit_js"): 1.5}
    assert "| large | cpu | kit_js | 8 |" in bench.table(bench.summarise(runs))
    on_gpu = [dict(run, device="cuda:0", gpu_peak_mb=512.0) for run in runs[:2]]
    assert "| default | cuda:0 | kit | 8 | 2.5 | 3.20 | 1 | 1 | 512 | 1.25x |" in bench.table(bench.summarise(on_gpu))
