"""The portability sweep: run notebooks from an empty cache as another laptop would, and list every checked output
that differs from the committed one.

    python -m tools.portability notebooks/08_*.ipynb --kernels avx2 default      # make portability
    python -m tools.portability notebooks/[0-9]*.ipynb --threads 1 8 --alone --report benchmarks/portability.md

A setting is PyTorch's vector kernels (`ATEN_CPU_CAPABILITY`: default, avx2, avx512; a kernel this CPU lacks
falls back to the best it has, which the report names), the thread count (`OMP_NUM_THREADS`, which PyTorch and
the BLAS libraries read) and whether each notebook runs alone from an empty cache or after the ones before it.
Each setting runs on a fresh copy of the checkout (its tracked and unignored files, so uncommitted edits count)
with its own empty cache, under nbval exactly as `make nbval` checks the notebooks; the machine's own cache is
never read or written. The report lists, per setting, the seconds each notebook took and every checked output
that differed, with the first lines of nbval's diff.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ("default", "avx2", "avx512")
NBVAL = ["--nbval-lax", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg", "--nbval-cell-timeout=1800",
         "-p", "no:randomly", "-p", "no:cacheprovider", "-q"]
DIFF_LINES = 12  # lines of nbval's message kept per failing cell
ANSI = re.compile(r"(\x1b|#x1B)\[[0-9;]*m")  # colours, as nbval writes them and as junit escapes them
SIDES = {"+ ": "committed: ", "- ": "this run:  "}


@dataclass(frozen=True)
class Setting:
    kernel: str
    threads: int
    alone: bool

    def __str__(self) -> str:
        order = "each alone" if self.alone else "in order"
        return f"{self.kernel}, {self.threads} thread{'s' * (self.threads != 1)}, {order}"

    def env(self, copy: Path) -> dict[str, str]:
        threads = str(self.threads)
        return {**os.environ, "ATEN_CPU_CAPABILITY": self.kernel, "OMP_NUM_THREADS": threads,
                "MKL_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads, "BERTLOOK_DEVICE": "cpu",
                "PYTHONPATH": str(copy), "HF_HUB_OFFLINE": "1"}


@dataclass
class Outcome:
    """One setting's run: seconds per notebook, the differing checked outputs [(notebook, cell, diff)], the
    cells that failed otherwise (an error, a timeout) and the kernel PyTorch reported using."""
    setting: Setting
    seconds: dict[str, float] = field(default_factory=dict)
    differences: list[tuple[str, str, str]] = field(default_factory=list)
    errors: list[tuple[str, str, str]] = field(default_factory=list)
    kernel_used: str = ""


def checkout_copy(folder: Path) -> Path:
    """A copy of the checkout's tracked and unignored files under `folder` (no cache, no build, no .venv)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            check=True, capture_output=True).stdout.decode().split("\0")
    copy = folder / "kit"
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file() and not source.is_symlink():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
        elif source.is_symlink():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            (copy / name).symlink_to(os.readlink(source))
    return copy


def kernel_in_use(env: dict[str, str]) -> str:
    """The vector kernels PyTorch picks under `env` (a CPU without AVX-512 runs avx2 when asked for avx512)."""
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout.strip()


def failures(junit: Path) -> list[tuple[str, str, str, bool]]:
    """(notebook, cell, excerpt, is a differing output) for each failed test case of a junit XML file: for a
    differing output, the lines of nbval's diff, named ("committed:", "this run:"); else the traceback's lines."""
    found = []
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        for problem in [*case.findall("failure"), *case.findall("error")]:
            text = ANSI.sub("", problem.text or problem.get("message") or "")
            notebook = case.get("classname", "").removesuffix(".ipynb").rpartition(".")[2]
            differs = "Cell outputs differ" in text
            _, _, tail = text.partition("Traceback:")
            lines = [line.strip() for line in (tail or text).splitlines() if line.strip()]
            if differs:  # pytest's diff of (committed == this run): "+" the committed line, "-" this run's
                lines = [SIDES[line[:2]] + line[2:] for line in lines if line[:2] in SIDES]
            found.append((notebook, case.get("name", ""), "\n".join(lines[:DIFF_LINES]), differs))
    return found


def run_setting(setting: Setting, notebooks: list[Path], keep: bool = False) -> Outcome:
    """Run `notebooks` (paths in the checkout) under `setting` on a fresh copy, each from an empty cache when the
    setting says alone."""
    outcome = Outcome(setting)
    with contextlib.ExitStack() as stack:
        folder = Path(tempfile.mkdtemp(prefix="bertlook-portability-"))
        if not keep:
            stack.callback(shutil.rmtree, folder, ignore_errors=True)
        copy = checkout_copy(folder)
        env = setting.env(copy)
        outcome.kernel_used = kernel_in_use(env)
        groups = [[path] for path in notebooks] if setting.alone else [notebooks]
        for group in groups:
            if setting.alone:
                shutil.rmtree(copy / "data" / "cache", ignore_errors=True)
            junit = folder / "junit.xml"
            for path in group:
                start = time.perf_counter()
                subprocess.run([sys.executable, "-m", "pytest", *NBVAL, f"--junitxml={junit}",
                                str(path.resolve().relative_to(ROOT))], cwd=copy, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                outcome.seconds[path.stem] = round(time.perf_counter() - start, 1)
                for notebook, cell, text, differs in failures(junit):
                    (outcome.differences if differs else outcome.errors).append((notebook, cell, text))
    return outcome


def report(outcomes: list[Outcome], notebooks: list[Path]) -> str:
    """The sweep's markdown report: settings, seconds, and every differing checked output."""
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown CPU") if Path("/proc/cpuinfo").exists() else "unknown CPU"
    lines = ["# Portability sweep", "",
             f"`python -m tools.portability` on {os.cpu_count()} cores ({cpu}), {time.strftime('%Y-%m-%d')}: "
             f"{len(notebooks)} notebooks from an empty cache per setting, checked by nbval as `make nbval` does.", "",
             "| setting | kernels used | notebooks | differing outputs | other failures | minutes |",
             "|---|---|---:|---:|---:|---:|"]
    for outcome in outcomes:
        lines.append(f"| {outcome.setting} | {outcome.kernel_used} | {len(outcome.seconds)} | "
                     f"{len(outcome.differences)} | {len(outcome.errors)} | "
                     f"{sum(outcome.seconds.values()) / 60:.1f} |")
    for outcome in outcomes:
        lines += ["", f"## {outcome.setting}", ""]
        lines += [f"- {name}: {seconds:.0f} s" for name, seconds in outcome.seconds.items()]
        for title, found in (("differs", outcome.differences), ("fails", outcome.errors)):
            for notebook, cell, text in found:
                lines += ["", f"{notebook}, {cell} {title}:", "", "```", text, "```"]
        if not outcome.differences and not outcome.errors:
            lines += ["", "Every checked output is as committed."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--kernels", nargs="+", choices=KERNELS, default=["avx2"])
    parser.add_argument("--threads", nargs="+", type=int, default=[2])
    parser.add_argument("--alone", action="store_true", help="each notebook from its own empty cache")
    parser.add_argument("--report", type=Path, help="write the markdown report here (else print it)")
    parser.add_argument("--keep", action="store_true", help="keep the copies (and their caches) for a look")
    args = parser.parse_args(argv)
    if any(t < 1 for t in args.threads):
        parser.error(f"--threads must be at least 1, got {args.threads}")
    notebooks = [path.resolve() for path in args.notebooks]
    outcomes = []
    for kernel in args.kernels:
        for threads in args.threads:
            setting = Setting(kernel, threads, args.alone)
            print(f"running {len(notebooks)} notebooks: {setting}", flush=True)
            outcome = run_setting(setting, notebooks, args.keep)
            print(f"  {len(outcome.differences)} differing outputs, {len(outcome.errors)} other failures, "
                  f"{sum(outcome.seconds.values()) / 60:.1f} min", flush=True)
            outcomes.append(outcome)
    text = report(outcomes, notebooks)
    if args.report:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(text)
    else:
        print(text)
    return 1 if any(o.differences or o.errors for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
