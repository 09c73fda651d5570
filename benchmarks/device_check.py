"""The device checks: the kit's GPU path end to end, against the CPU on the same machine, in one run.

    python -m benchmarks.device_check                  # on a machine with a CUDA GPU: every step, about 5 minutes
    python -m benchmarks.device_check --steps agree    # one step
    python -m benchmarks.device_check --device cpu --n 16 --bench-n 32 --steps agree tests   # a dry run

Steps (each prints its own table; a summary table ends the run):

  agree      notebooks 01 and 03's analysis (`surface.analyse`: token statistics, entropies, example maps) on --n
             segments, with the default model and with a BERT-base-size model (random weights, the benchmark's
             `size_encoder("base")`), once on the CPU and once on the device: seconds of each and the largest
             |difference| of any head's statistic (float32 on both; a GPU sums in another order).
  notebooks  notebooks 01 and 03 executed end to end (nbconvert) with MODEL=the BERT-base-size folder and
             BERTLOOK_DEVICE=the device, into a temporary folder: passed or failed, and seconds.
  tests      the tests of every module that runs the model (TESTS) with the model on the device
             (BERTLOOK_DEVICE and BERTLOOK_TEST_DEVICE): passed and failed, the failures whose error names a device
             (a tensor left on the wrong one: a bug) listed apart from the others (known answers computed on the
             CPU, compared to the last digits).
  bench      benchmarks.bench at every size (default, base, large) on the device with --bench-n segments, and the
             CPU baseline on the same machine (default and base, --cpu-n segments, --cpu-threads threads).

Without a CUDA GPU (torch.cuda.is_available() False) and without --device, it says so and exits with status 3: no
figure is made up. With --device cpu every step runs on the CPU (a dry run of the script itself).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

STEPS = ("agree", "notebooks", "tests", "bench")
NOTEBOOKS = ("notebooks/01_surface_attention.ipynb", "notebooks/03_entropy.ipynb")
TESTS = ("test_models", "test_device", "test_extract", "test_surface", "test_norms", "test_gradients",
         "test_disabling", "test_importance", "test_identifiability", "test_attribution", "test_finetune",
         "test_intervene", "test_probes", "test_sinks_heads", "test_sinks_massive", "test_sinks_position",
         "test_exercises")
DEVICE_WORDS = ("device", "cuda", "Expected all tensors")


def _env(device: str, **extra: str) -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "BERTLOOK_DEVICE": device,
            "BERTLOOK_TEST_DEVICE": device, **extra}


def agree(device: str, n: int) -> list[dict]:
    """Notebooks 01/03's analysis on the CPU and on `device`, for the default and the BERT-base-size model."""
    import numpy as np

    from benchmarks.bench import make_segments, size_encoder
    from bertlook_utils.analyses import surface
    from bertlook_utils.core.models import load_encoder

    rows = []
    for size in ("default", "base"):
        folder = size_encoder(size).folder
        runs = {}
        for where in ("cpu", device):
            encoder = load_encoder(None if size == "default" else folder, device=where)
            segments = make_segments(encoder.tokenizer, n)
            surface.analyse(encoder, segments[:8], cache_dir=None, progress=False)  # warm-up, not timed
            start = time.perf_counter()
            result = surface.analyse(encoder, segments, cache_dir=None, progress=False)
            runs[where] = (time.perf_counter() - start, result)
        (cpu_s, cpu), (dev_s, dev) = runs["cpu"], runs[device]
        gaps = [np.nanmax(np.abs(a.drop(columns=["layer", "head"]).to_numpy(float)
                                 - b.drop(columns=["layer", "head"]).to_numpy(float)))
                for a, b in ((cpu.tokens, dev.tokens), (cpu.entropy, dev.entropy))]
        maps = max(float(np.abs(a.attn - b.attn).max()) for a, b in zip(cpu.examples, dev.examples))
        rows.append({"step": "agree", "size": size, "n": n, "cpu_s": cpu_s, "device_s": dev_s,
                     "token_gap": float(gaps[0]), "entropy_gap": float(gaps[1]), "map_gap": maps})
    print("| size | N | CPU s | device s | max |Δ| token shares | max |Δ| entropy | max |Δ| map weight |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['size']} | {r['n']} | {r['cpu_s']:.1f} | {r['device_s']:.1f} | {r['token_gap']:.1e} | "
              f"{r['entropy_gap']:.1e} | {r['map_gap']:.1e} |")
    return rows


def notebooks(device: str) -> list[dict]:
    """Notebooks 01 and 03 executed with the BERT-base-size model on `device`."""
    from benchmarks.bench import size_encoder

    folder = size_encoder("base").folder
    rows = []
    with tempfile.TemporaryDirectory() as out:
        for path in NOTEBOOKS:
            start = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
                                   "--ExecutePreprocessor.timeout=1200", "--output-dir", out, path], cwd=REPO,
                                  env=_env(device, BERTLOOK_MODEL=str(folder)), capture_output=True, text=True)
            seconds = time.perf_counter() - start
            rows.append({"step": "notebooks", "notebook": Path(path).stem, "ok": proc.returncode == 0,
                         "seconds": seconds, "error": proc.stderr[-1500:] if proc.returncode else ""})
            print(f"{Path(path).stem}: {'passed' if proc.returncode == 0 else 'FAILED'} in {seconds:.0f} s")
            if proc.returncode:
                print(proc.stderr[-1500:])
    return rows


def tests(device: str) -> list[dict]:
    """The model-running tests with the model on `device`; failures naming a device are listed apart."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-m", "not slow and not browser",
                        f"--junitxml={report}", *[f"tests/{name}.py" for name in TESTS]], cwd=REPO, env=_env(device),
                       capture_output=True, text=True)
        seconds = time.perf_counter() - start
        import xml.etree.ElementTree as ElementTree

        cases = ElementTree.parse(report).getroot().iter("testcase")
        failed = {}
        total = 0
        for case in cases:
            total += 1
            problem = case.find("failure") if case.find("failure") is not None else case.find("error")
            if problem is not None:
                failed[f"{case.get('classname')}::{case.get('name')}"] = (problem.get("message") or "")[:300]
    on_device = {k: v for k, v in failed.items() if any(word in v for word in DEVICE_WORDS)}
    print(f"{total} tests in {seconds:.0f} s: {total - len(failed)} passed, {len(failed)} failed, "
          f"{len(on_device)} of them naming a device")
    for name, message in failed.items():
        print(f"  {'DEVICE ' if name in on_device else ''}{name}: {message}")
    return [{"step": "tests", "total": total, "failed": len(failed), "device_failures": len(on_device),
             "seconds": seconds, "failures": failed}]


def bench(device: str, n: int, cpu_n: int, cpu_threads: int) -> list[dict]:
    """benchmarks.bench on `device` at every size, and the CPU baseline on this machine."""
    rows = []
    runs = [(device, ["default", "base", "large"], n, 2)]
    if device != "cpu":
        runs.append(("cpu", ["default", "base"], cpu_n, cpu_threads))
    for where, sizes, count, threads in runs:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "results.json"
            subprocess.run([sys.executable, "-m", "benchmarks.bench", "--device", where, "--sizes", *sizes,
                            "--methods", "bare", "floor", "kit", "kit_js", "--n", str(count), "--no-flatness",
                            "--retry-noisy", "0", "--threads", str(threads), "--out", str(out)], cwd=REPO,
                           env=_env(where), check=True)
            rows += [{"step": "bench", **row} for row in json.loads(out.read_text())["summary"]]
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", help="the device to check (default: cuda, when torch sees a GPU)")
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS))
    parser.add_argument("--n", type=int, default=200, help="segments of the agreement step (default 200)")
    parser.add_argument("--bench-n", type=int, default=1000, help="segments per benchmark run on the device")
    parser.add_argument("--cpu-n", type=int, default=200, help="segments per CPU baseline run (default 200)")
    parser.add_argument("--cpu-threads", type=int, default=os.cpu_count() or 2, help="threads of the CPU baseline")
    parser.add_argument("--out", type=Path, default=Path("build/device_check.json"))
    args = parser.parse_args(argv)

    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else None)
    if device is None:
        print("no CUDA GPU here (torch.cuda.is_available() is False): the device checks were not run")
        return 3
    from bertlook_utils.core.models import pick_device

    name = torch.cuda.get_device_name(pick_device(device)) if pick_device(device).type == "cuda" else "CPU"
    print(f"device checks on {device} ({name}), torch {torch.__version__}, {os.cpu_count()} CPUs")
    rows: list[dict] = []
    for step in args.steps:
        print(f"\n## {step}", flush=True)
        if step == "agree":
            rows += agree(device, args.n)
        elif step == "notebooks":
            rows += notebooks(device)
        elif step == "tests":
            rows += tests(device)
        else:
            rows += bench(device, args.bench_n, args.cpu_n, args.cpu_threads)
    out = args.out if args.out.is_absolute() else REPO / args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"device": device, "name": name, "torch": torch.__version__, "rows": rows}, indent=2))
    print(f"\n## summary ({device}: {name})")
    for r in rows:
        if r["step"] == "bench":
            floor = f"{r['ratio_to_bare']:.2f}x bare" if r.get("ratio_to_bare") else ""
            print(f"bench   {r['size']:8} {r['device']:7} {r['method']:7} {r['n']:5} {r['segments_per_s']:9.1f} "
                  f"segments/s {floor}")
        elif r["step"] == "agree":
            print(f"agree   {r['size']:8} CPU {r['cpu_s']:.1f} s, {device} {r['device_s']:.1f} s, max |Δ| "
                  f"{max(r['token_gap'], r['entropy_gap']):.1e}")
        elif r["step"] == "notebooks":
            print(f"notebook {r['notebook']}: {'passed' if r['ok'] else 'FAILED'} in {r['seconds']:.0f} s")
        else:
            print(f"tests   {r['total'] - r['failed']} of {r['total']} passed; {r['device_failures']} failures "
                  "name a device")
    print(f"written to {out}")
    bad = [r for r in rows if (r["step"] == "notebooks" and not r["ok"]) or r.get("device_failures")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
