"""Throughput and peak memory of surface-statistics extraction: the kit vs the naive way vs the bare forward pass.

    python -m benchmarks.bench                 # N=1000 for all three methods, plus kit/naive/floor at N/4
    python benchmarks/bench.py --n 200 --no-flatness --methods floor kit
    python -m benchmarks.bench --sizes default base large --methods floor kit kit_js --n 1000 --no-flatness
    python -m benchmarks.bench --device cuda --sizes base large --methods bare kit kit_js --no-flatness

Methods (each in its own fresh subprocess, so peak RSS is per method):

  bare   transformers alone: the tokenizer on a whole batch of pairs (padded), then the forward pass with
         output_attentions=True, tensors discarded. No word alignment, no checks: what any analysis must pay.
  floor  encoder.attention_batches(...), tensors discarded: the kit's own forward pass (inputs prepared and
         word-aligned one by one, the layers' maps stacked into one tensor).
  kit    bertlook_utils.extract.reduce(encoder, segments, [TokenStats(), EntropyStats()], cache_dir=None):
         streaming extraction, running sums only.
  kit_js the kit with notebook 07's streaming Jensen-Shannon distances between every pair of heads as well
         (clustering.JSDistances): extraction + surface statistics + entropy + JS distances.
  naive  the original code's way: encode_many(...) -> keep every float32 [L, H, n, n] map in a list, then
         surface.token_stats(list) and surface.entropy_stats(list).

Model sizes (--sizes): "default" is the embedded all-MiniLM-L6-v2 (6 layers x 12 heads, 384 wide); "base" and
"large" are BERT-base (12 x 12, 768) and BERT-large (24 x 16, 1024) shapes with random weights (torch seed 0) and
the default model's tokenizer, built locally once into build/bench-models/<size>/ and loaded with
`load_encoder(folder)`: the attention's cost depends on the shapes, not on what the weights learned (the
statistics of random weights mean nothing, and none is reported for them). The naive method keeps every map:
at BERT-large size 1,000 segments of 128 tokens hold about 25 GB, so run it there only on small N.

--device (cpu, cuda; default: $BERTLOOK_DEVICE, else a GPU when torch sees one) is where every child runs the
model (`load_encoder`); the maps come back to the CPU for the reducers either way, so on a GPU even `bare` includes
that copy (the model's outputs are CPU tensors, `models.place`), and `gpu_peak_mb` is torch's peak of allocated GPU
memory during the method. Model loading and segment building are not timed. Each child sets
torch.set_num_threads(2) (override with --threads), runs one warm-up batch (not timed, not counted), then times
the whole method with time.perf_counter. Memory: `peak_rss_mb` is the child's lifetime peak (resource.getrusage
ru_maxrss); `growth_mb` is the peak RSS reached while running the method (warm-up included) minus the RSS right after
loading the model and building the segments: what the method itself holds. The peak is re-armed at that
point through /proc/self/clear_refs (Linux); where that is unavailable growth is ru_maxrss - baseline,
which can under-report when loading peaked higher.

Segments are corpora.make_segments(tokenizer, n, seed=0), built in every child with cache_dir=None (the
package's cache key changes with each edit of the package, so hits and misses would make children differ).
Shared machines: each run records how much CPU other processes used while it was timed (other_cpu_s);
--retry-noisy K reruns a run disturbed by more than 5% of a core. The kit's two reducers are wrapped to
time their update() calls (reducer_seconds); the naive run reports its encode and statistics phases.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # `python benchmarks/bench.py` puts benchmarks/ first, not the repo root
    sys.path.insert(0, str(REPO))

METHODS = ("bare", "floor", "kit", "kit_js", "naive")
SIZES = {  # BertConfig fields of each size; "default" loads the embedded model itself
    "default": None,
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
}
MODELS_DIR = REPO / "build" / "bench-models"
MB = 1024 * 1024


# -- memory helpers (child side) --------------------------------------------------------------------
def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _ru_maxrss_bytes() -> int:
    import resource

    value = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return value if sys.platform == "darwin" else value * 1024  # kilobytes on Linux, bytes on macOS


def _current_rss_bytes() -> int:
    kb = _status_kb("VmRSS")
    if kb is not None:
        return kb * 1024
    return _ru_maxrss_bytes()  # no /proc: the best we have


def _cpu_snapshot() -> tuple[float, float, float] | None:
    """(machine busy CPU seconds, machine steal seconds, this process's CPU seconds), or None without /proc."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    tick = os.sysconf("SC_CLK_TCK")
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq) / tick, steal / tick, own.ru_utime + own.ru_stime


def _reset_peak() -> bool:
    """Re-arm the peak-RSS high-water mark (Linux >= 4.0); True when it worked."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


# -- the methods (child side) -----------------------------------------------------------------------
class _Timed:
    """Delegates to a reducer and adds the wall time of its update() calls (two perf_counter calls per batch:
    negligible) to `_Timed.seconds[name]`, which the fresh copies `extract.reduce` makes for each block share.
    Lets the kit report which reducer costs what without a separate profiling run."""

    seconds: dict[str, float] = {}

    def __init__(self, reducer):
        self.reducer = reducer

    def __getattr__(self, name):
        if name == "reducer":  # not set yet: copy.deepcopy builds the copy without __init__
            raise AttributeError(name)
        return getattr(self.reducer, name)

    def fresh(self):
        return _Timed(self.reducer.fresh())  # the engine's empty copy for each block, still timed

    def update(self, batch):
        start = time.perf_counter()
        self.reducer.update(batch)
        name = self.reducer.name
        _Timed.seconds[name] = _Timed.seconds.get(name, 0.0) + time.perf_counter() - start


def _frames_to_json(token_frame, entropy_frame) -> dict[str, list[float]]:
    out = {}
    for frame in (token_frame, entropy_frame):
        for col in frame.columns:
            if col not in ("layer", "head"):
                out[col] = [float(v) for v in frame[col]]
    return out


def run_bare(encoder, segments, batch_size):
    import torch

    pairs = [s.pair for s in segments]
    with torch.inference_mode():
        for start in range(0, len(pairs), batch_size):
            a, b = zip(*pairs[start:start + batch_size])
            inputs = encoder.tokenizer(list(a), list(b), padding=True, return_tensors="pt")
            encoder.model(**inputs, output_attentions=True)  # the maps are made, then dropped
    return {"segments_seen": len(pairs)}, None


def run_floor(encoder, segments, batch_size):
    n = 0
    for prepared, attn, valid in encoder.attention_batches((s.pair for s in segments), batch_size):
        n += len(prepared)
        del attn, valid  # discard: nothing else
    return {"segments_seen": n}, None


def run_kit(encoder, segments, batch_size, distances: bool = False):
    from bertlook_utils import clustering, extract, surface

    _Timed.seconds = {}
    timed = [_Timed(surface.TokenStats()), _Timed(surface.EntropyStats())]
    timed += [_Timed(clustering.JSDistances())] if distances else []
    tokens, entropy, *_ = extract.reduce(encoder, segments, timed, batch_size=batch_size, cache_dir=None,
                                         progress=False)
    info = {"segments_seen": tokens.count, "reducer_seconds": dict(_Timed.seconds)}
    return info, _frames_to_json(tokens.frame(), entropy.frame())


def run_kit_js(encoder, segments, batch_size):
    return run_kit(encoder, segments, batch_size, distances=True)


def run_naive(encoder, segments, batch_size):
    from bertlook_utils import surface

    start = time.perf_counter()
    maps = []
    for enc in encoder.encode_many((s.pair for s in segments), batch_size=batch_size):
        maps.append(enc)  # every float32 [L, H, n, n] map kept
    encoded_at = time.perf_counter()
    held = sum(e.attn.nbytes for e in maps)
    token_frame = surface.token_stats(maps)
    entropy_frame = surface.entropy_stats(maps)
    end = time.perf_counter()
    info = {"segments_seen": len(maps), "maps_held_mb": held / MB,
            "phase_seconds": {"encode": encoded_at - start, "stats": end - encoded_at}}
    return info, _frames_to_json(token_frame, entropy_frame)


RUNNERS = {"bare": run_bare, "floor": run_floor, "kit": run_kit, "kit_js": run_kit_js, "naive": run_naive}


def size_encoder(size: str, models_dir: Path = MODELS_DIR):
    """The encoder of a benchmark size: the embedded default model, or a BERT-shaped model with random weights
    (torch seed 0) and the default model's tokenizer, saved once under models_dir/<size>/ and loaded from there."""
    import torch
    from transformers import BertConfig, BertModel

    from bertlook_utils import load_encoder
    from bertlook_utils.models import save_folder

    if size not in SIZES:
        raise ValueError(f"size must be one of {tuple(SIZES)}, got {size!r}")
    default = load_encoder()
    if SIZES[size] is None:
        return default
    folder = models_dir / size
    if not (folder / "config.json").exists():
        config = BertConfig(vocab_size=default.tokenizer.vocab_size, max_position_embeddings=512,
                            **SIZES[size])
        torch.manual_seed(0)
        save_folder(folder, BertModel(config), default.tokenizer)
    return load_encoder(folder)


def make_segments(tokenizer, n: int):
    """corpora.make_segments(tokenizer, n, seed=0), built in this process every time: not read from (or
    written to) the package's on-disk cache, whose key changes with every edit of the package, so that
    every child starts alike (building loads gensim and spaCy: ~95 MB of RSS, in the baseline)."""
    import inspect

    from bertlook_utils import corpora

    if "cache_dir" in inspect.signature(corpora.make_segments).parameters:
        return corpora.make_segments(tokenizer, n, seed=0, cache_dir=None)
    return corpora.make_segments(tokenizer, n, seed=0)


def child(method: str, n: int, batch_size: int, threads: int, warmup: bool, size: str = "default") -> dict:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(threads)
    code = package_fingerprint()
    setup_start = time.perf_counter()
    encoder = size_encoder(size)
    segments = make_segments(encoder.tokenizer, n)
    setup_seconds = time.perf_counter() - setup_start
    n_tokens = [len(encoder.prepare(*s.pair).input_ids) for s in segments]

    setup_peak = _ru_maxrss_bytes()
    baseline = _current_rss_bytes()
    peak_rearmed = _reset_peak()

    runner = RUNNERS[method]
    keep_stats = SIZES[size] is None  # a random-weight model's statistics mean nothing: only its cost is kept
    warmup_seconds = None
    if warmup:  # one batch, same code path, not timed, results thrown away
        start = time.perf_counter()
        runner(encoder, segments[:batch_size], batch_size)
        warmup_seconds = time.perf_counter() - start

    if encoder.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    cpu_before = _cpu_snapshot()
    start = time.perf_counter()
    info, stats = runner(encoder, segments, batch_size)
    seconds = time.perf_counter() - start
    cpu_after = _cpu_snapshot()
    contention = None
    if cpu_before and cpu_after:  # CPU the rest of the machine used meanwhile: should be ~0 on a quiet machine
        busy, steal, own = (b - a for a, b in zip(cpu_before, cpu_after))
        contention = {"own_cpu_s": own, "other_cpu_s": max(0.0, busy - own), "steal_s": steal}

    gpu_peak = torch.cuda.max_memory_allocated() / MB if encoder.device.type == "cuda" else None
    method_peak = _ru_maxrss_bytes()
    lifetime_peak = max(setup_peak, method_peak) if peak_rearmed else method_peak
    return {
        "method": method, "size": size, "device": str(encoder.device), "gpu_peak_mb": gpu_peak,
        "n_layers": encoder.n_layers, "n_heads": encoder.n_heads,
        "hidden_size": encoder.model.config.hidden_size, "n": n, "batch_size": batch_size, "threads": threads,
        "package_sha256": code,
        "seconds": seconds, "segments_per_s": n / seconds,
        "peak_rss_mb": lifetime_peak / MB,
        "growth_mb": (method_peak - baseline) / MB,
        "method_peak_rss_mb": method_peak / MB if peak_rearmed else None,
        "baseline_rss_mb": baseline / MB, "setup_peak_rss_mb": setup_peak / MB,
        "peak_rearmed": peak_rearmed,
        "warmup_seconds": warmup_seconds, "setup_seconds": setup_seconds,
        "mean_tokens": sum(n_tokens) / len(n_tokens), "max_tokens": max(n_tokens),
        "contention": contention, **info, "stats": stats if keep_stats else None,
    }


# -- the driver (parent side) -----------------------------------------------------------------------
def _env() -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def spawn(method: str, n: int, batch_size: int, threads: int, warmup: bool, size: str = "default") -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        result_file = Path(tmp) / "result.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", method, "--n", str(n),
               "--batch-size", str(batch_size), "--threads", str(threads), "--result-file", str(result_file),
               "--sizes", size]
        if not warmup:
            cmd.append("--no-warmup")
        proc = subprocess.run(cmd, cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0 or not result_file.exists():
            raise RuntimeError(f"{method} (size {size}, n={n}) failed with exit code {proc.returncode}:\n"
                               f"{proc.stdout[-4000:]}")
        return json.loads(result_file.read_text())


def _other_cpu(run: dict) -> float:
    return (run.get("contention") or {}).get("other_cpu_s", 0.0)


def _noisy(run: dict, share: float = 0.05) -> bool:
    """True when other processes used more than `share` of one core while `run` was timed."""
    return _other_cpu(run) > share * run["seconds"]


def summarise(runs: list[dict]) -> list[dict]:
    """One row per (size, method, n): the median-time run; ratios to the floor of the same size at the same n."""
    groups: dict[tuple[str, str, int], list[dict]] = {}
    for run in runs:
        groups.setdefault((run.get("size", "default"), run["method"], run["n"]), []).append(run)
    rows = []
    for (size, method, n), group in groups.items():
        seconds = statistics.median(r["seconds"] for r in group)
        rows.append({"size": size, "method": method, "n": n, "repeats": len(group), "seconds": seconds,
                     "segments_per_s": n / seconds,
                     "peak_rss_mb": max(r["peak_rss_mb"] for r in group),
                     "growth_mb": max(r["growth_mb"] for r in group),
                     "other_cpu_s": max(_other_cpu(r) for r in group),
                     "device": group[0].get("device", "cpu"),
                     "gpu_peak_mb": max((r.get("gpu_peak_mb") or 0 for r in group), default=0) or None})
    for reference in ("floor", "bare"):
        times = {(r["size"], r["n"]): r["seconds"] for r in rows if r["method"] == reference}
        for row in rows:
            time_there = times.get((row["size"], row["n"]))
            row[f"ratio_to_{reference}"] = row["seconds"] / time_there if time_there is not None else None
    order = {m: i for i, m in enumerate(METHODS)}
    sizes = {s: i for i, s in enumerate(SIZES)}
    rows.sort(key=lambda r: (sizes[r["size"]], -r["n"], order[r["method"]]))
    return rows


def agreement(runs: list[dict]) -> dict[str, float]:
    """Largest |kit - naive| per statistic, for every n where both ran (they must agree)."""
    out = {}
    by = {(r.get("size", "default"), r["method"], r["n"]): r for r in runs if r.get("stats")}
    for (size, method, n), run in by.items():
        other = by.get((size, "naive", n))
        if method != "kit" or other is None:
            continue
        out[str(n) if size == "default" else f"{size}/{n}"] = max(
            abs(a - b) for col in run["stats"] for a, b in zip(run["stats"][col], other["stats"][col]))
    return out


def table(rows: list[dict]) -> str:
    lines = ["| size | device | method | N | seconds | segments/s | peak RSS MB | growth MB | GPU peak MB | "
             "time / floor | time / bare |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        floor, bare = (f"{r[key]:.2f}x" if r.get(key) is not None else "-"
                       for key in ("ratio_to_floor", "ratio_to_bare"))
        gpu = f"{r['gpu_peak_mb']:.0f}" if r.get("gpu_peak_mb") else "-"
        lines.append(f"| {r['size']} | {r.get('device', 'cpu')} | {r['method']} | {r['n']} | {r['seconds']:.1f} | "
                     f"{r['segments_per_s']:.2f} | {r['peak_rss_mb']:.0f} | {r['growth_mb']:.0f} | {gpu} | {floor} | "
                     f"{bare} |")
    return "\n".join(lines)


def package_fingerprint() -> str:
    """sha256 of the package's source files: tells which code a run measured."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted((REPO / "bertlook_utils").rglob("*.py")):
        digest.update(path.relative_to(REPO).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()


def code_state() -> dict:
    """The git commit measured, whether the package's files differ from it, and their fingerprint."""
    def git(*args):
        try:
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    status = git("status", "--porcelain", "--", "bertlook_utils")
    return {"commit": git("rev-parse", "HEAD"), "package_modified": bool(status) if status is not None else None,
            "package_sha256": package_fingerprint()}


def machine() -> dict:
    import torch

    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "torch": torch.__version__}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000, help="segments per run (default 1000)")
    parser.add_argument("--batch-size", type=int, default=32, help="batch size for every method (default 32)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results.json"),
                        help="results JSON (default benchmarks/results.json)")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=["floor", "kit", "naive"])
    parser.add_argument("--sizes", nargs="+", choices=list(SIZES), default=["default"],
                        help="model sizes: the default model, and BERT-base and BERT-large shapes (random weights)")
    parser.add_argument("--flat-n", type=int, default=None,
                        help="the smaller N of the memory-flatness check (default N/4)")
    parser.add_argument("--no-flatness", action="store_true", help="skip the runs at the smaller N")
    parser.add_argument("--repeat", type=int, default=1, help="runs per (method, N); the table shows the median")
    parser.add_argument("--retry-noisy", type=int, default=2,
                        help="rerun a run up to this many times while other processes used >5%% of a core "
                             "during it (shared machines); the least disturbed attempt is kept (default 2)")
    parser.add_argument("--device", help="where the children run the model: cpu, cuda or cuda:N (default: "
                        "$BERTLOOK_DEVICE, else a GPU when torch sees one)")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads in each child (default 2)")
    parser.add_argument("--no-warmup", action="store_true", help="skip the untimed warm-up batch")
    parser.add_argument("--child", choices=METHODS, help=argparse.SUPPRESS)
    parser.add_argument("--result-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        result = child(args.child, args.n, args.batch_size, args.threads, not args.no_warmup, args.sizes[0])
        args.result_file.write_text(json.dumps(result))
        return 0

    if args.device:
        os.environ["BERTLOOK_DEVICE"] = args.device  # the children inherit it (`_env`)
    sizes = [args.n]
    if not args.no_flatness:
        flat_n = args.flat_n or max(1, args.n // 4)
        if flat_n != args.n:
            sizes.append(flat_n)
    code_before = code_state()
    runs, discarded = [], []
    for size, n, _, method in itertools.product(args.sizes, sizes, range(args.repeat), args.methods):
        attempts = []
        for attempt in range(1 + args.retry_noisy):
            print(f"running {method} ({size}) on {n} segments ..." + (f" (retry {attempt})" if attempt else ""),
                  file=sys.stderr, flush=True)
            run = spawn(method, n, args.batch_size, args.threads, not args.no_warmup, size)
            busy = run["contention"]
            other = f", other processes used {busy['other_cpu_s']:.0f} CPU-s" if busy else ""
            print(f"  {run['seconds']:.1f} s, {run['segments_per_s']:.2f} segments/s, "
                  f"peak {run['peak_rss_mb']:.0f} MB, growth {run['growth_mb']:.0f} MB{other}",
                  file=sys.stderr, flush=True)
            attempts.append(run)
            if not _noisy(run):
                break
        best = min(attempts, key=_other_cpu)  # the least disturbed attempt
        runs.append(best)
        discarded += [a for a in attempts if a is not best]

    rows = summarise(runs)
    code_after = code_state()
    measured = {r["package_sha256"] for r in runs}
    changed = code_after != code_before or measured != {code_before["package_sha256"]}
    results = {"created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(),
               "code": {**code_before, "changed_during_run": changed},
               "settings": {"n": args.n, "sizes": sizes, "model_sizes": args.sizes, "batch_size": args.batch_size,
                            "threads": args.threads, "device": args.device or os.environ.get("BERTLOOK_DEVICE"),
                            "warmup": not args.no_warmup, "repeat": args.repeat, "seed": 0,
                            "retry_noisy": args.retry_noisy},
               "summary": rows, "kit_vs_naive_max_abs_diff": agreement(runs), "runs": runs,
               "discarded_noisy_runs": [{k: v for k, v in r.items() if k != "stats"} for r in discarded]}
    out = args.out if args.out.is_absolute() else Path.cwd() / args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(table(rows))
    if changed:
        print("\nWARNING: the package's code changed while the benchmark ran, so the runs measured different "
              "code (package_sha256 per run in the JSON). Rerun.")
    noisy = [f"{r['method']}@{r['n']}" for r in runs if _noisy(r)]
    if noisy:
        print(f"\nWARNING: other processes used more than 5% of a core during {', '.join(noisy)}; "
              "the timings are contaminated (see other_cpu_s in the JSON). Rerun on a quiet machine.")
    for n, diff in results["kit_vs_naive_max_abs_diff"].items():
        print(f"\nkit vs naive statistics at N={n}: max |difference| = {diff:.2e}")
    print(f"\nresults written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
