"""The kit's command line: fill the cache (alone, or sharded across processes by an existing launcher), fine-tune,
look after the cache and its packs, and grade submitted notebooks.

    python -m bertlook_utils.cli extract --segments 1000                          # one process
    torchrun --standalone --nproc_per_node=2 -m bertlook_utils.cli extract --segments 1000
    torchrun --nnodes=2 --nproc_per_node=2 --rdzv-id=JOB --rdzv-backend=c10d --rdzv-endpoint=HOST:29500 \\
        -m bertlook_utils.cli extract --cache-dir /shared/cache ...               # on each of two machines

Under a launcher every process joins a gloo process group; `extract.reduce` then gives process r of w the
blocks b with b % w == r, writes them into the shared cache and waits for the others, and every process
merges the same blocks. The notebooks (and `make run`) afterwards find every result in the cache. Each
process prints its time, how many inputs it computed (and how fast) and restored from the cache, and its peak
memory; with several analyses each counts its own inputs.

    python -m bertlook_utils.cli finetune                                         # notebooks 08-10's models

    python -m bertlook_utils.cli cache info                                       # entries and their size
    python -m bertlook_utils.cli cache prune --older-than 30 --dry-run            # what pruning would remove
    python -m bertlook_utils.cli cache pack build/bertlook-cache.tar.gz           # one file to hand out
    python -m bertlook_utils.cli cache unpack bertlook-cache.tar.gz --digest SHA  # a student fills the cache

    python -m bertlook_utils.cli grade submitted/*/00/00_tour.ipynb --csv grades.csv   # the grade of record

`grade` runs each submitted notebook's solution cells in a process of their own and judges their answers outside
it (`lab.exercises.grading`): per notebook, ✓ or ✗ and the checker's message for each exercise, and the points.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import time
from datetime import timedelta
from pathlib import Path

from .core import cache, cache_pack as packs
from .core.cache import DEFAULT_CACHE_DIR
from .engine.extract import BLOCK_SIZE, process_group
from .core.models import model_name

ANALYSES = ("surface", "clustering")


def read_items(path: Path) -> list:
    """A JSON list whose items are texts or [a, b] pairs of texts."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, list) or not data:
        raise SystemExit(f"{path}: expected a non-empty JSON list of texts or [a, b] pairs")
    items = []
    for i, item in enumerate(data):
        if isinstance(item, str):
            items.append(item)
        elif isinstance(item, list) and len(item) == 2 and all(isinstance(t, str) for t in item):
            items.append(tuple(item))
        else:
            raise SystemExit(f"{path}: item {i} is neither a text nor an [a, b] pair of texts: {item!r:.80}")
    return items


def _segments(tokenizer, n: int, seeds: list[int], cache_dir: Path) -> list:
    """`n` segments for each seed, one seed after the other (the corpus gives about 3,500 per seed)."""
    from .data.corpora import make_segments

    return [s for seed in seeds for s in make_segments(tokenizer, n, seed, cache_dir=cache_dir)]


def _join_launcher() -> tuple[int, int]:
    """Join the process group a launcher (torchrun, accelerate launch) describes; (rank, world size)."""
    import torch.distributed as dist

    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():
        dist.init_process_group("gloo", timeout=timedelta(hours=2))
    return process_group()


def extract(args: argparse.Namespace) -> None:
    import torch.distributed as dist

    from .analyses import clustering, surface
    from .core.intervene import reads_only
    from .core.models import load_encoder

    rank, world = _join_launcher()
    encoder = load_encoder(args.model)
    if rank > 0:
        dist.barrier()  # process 1 builds (and caches) the inputs first
    items = read_items(args.items) if args.items else _segments(encoder.tokenizer, args.segments, args.seeds,
                                                                  args.cache_dir)
    if rank == 0 and world > 1:
        dist.barrier()
    options = dict(cache_dir=args.cache_dir, batch_size=args.batch_size, block_size=args.block_size,
                   progress=rank == 0)
    computed = []  # the batch sizes of the forward passes: restored blocks never reach the model
    counter = encoder.model.register_forward_pre_hook(reads_only(
        lambda module, positional, named: computed.append(len(named["input_ids"]))), with_kwargs=True)
    started = time.perf_counter()
    for name in args.analyses:
        if name == "surface":
            surface.analyse(encoder, items, **options)
        else:
            clustering.analyse(encoder, items, **options)
    seconds = time.perf_counter() - started
    counter.remove()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    done, total = sum(computed), len(items) * len(args.analyses)
    work = (f"{done} computed ({done / seconds:.1f} inputs/s), {total - done} restored from the cache" if done else
            f"all {total} restored from the cache")
    print(f"process {rank + 1} of {world}: {' + '.join(args.analyses)} of {encoder.name} over {len(items)} inputs "
          f"in {seconds:.1f} s: {work}, peak memory {peak_mb:.0f} MB", flush=True)
    if world > 1:
        dist.destroy_process_group()


def cache_info(args: argparse.Namespace) -> None:
    try:
        count, size = cache.usage(args.cache_dir)
    except ValueError as error:
        raise SystemExit(f"--cache-dir {error}") from error
    print(f"{args.cache_dir}: {count} entries, {size / 2**20:.1f} MiB")


def cache_prune(args: argparse.Namespace) -> None:
    try:
        found = cache.prune(args.cache_dir, args.older_than, args.dry_run)
    except PermissionError as error:
        raise SystemExit(f"--cache-dir {args.cache_dir} is not writable ({error}); prune it as its owner") from error
    except ValueError as error:
        raise SystemExit(f"--cache-dir {error}") from error
    verb = "would remove" if args.dry_run else "removed"
    for path, size in found.items():
        print(f"{verb} {path.name} ({size:,} bytes)")
    freed = sum(found.values())
    print(f"{verb} {len(found)} files from {args.cache_dir}: {freed / 2**20:.1f} MiB ({freed:,} bytes)")


def _model_record(model: str | None) -> dict[str, str]:
    """`cache_pack.model_record` of `model` (the default model when None) as this machine loads it ($BERTLOOK_DEVICE,
    $BERTLOOK_PRECISION): what its entries are keyed by."""
    from .core.models import load_encoder

    return packs.model_record(load_encoder(model))


def cache_pack(args: argparse.Namespace) -> None:
    manifest = packs.pack(args.cache_dir, args.archive, _model_record(args.model))
    print(f"packed {manifest['files']} files ({manifest['bytes'] / 2**20:.1f} MiB before compression) from "
          f"{args.cache_dir} into {args.archive} ({args.archive.stat().st_size / 2**20:.1f} MiB), filled for "
          "{name} on {device} in {precision}".format(**manifest["model"]))
    print(f"sha256 {packs.file_digest(args.archive)}: publish it beside the pack, so that a class can check what it "
          "unpacks (make cache-unpack DIGEST=...)")


def cache_unpack(args: argparse.Namespace) -> None:
    try:
        done = packs.unpack(args.archive, args.cache_dir, args.digest)
    except (ValueError, OSError) as error:
        raise SystemExit(str(error)) from error
    print(f"unpacked {done.written} files into {args.cache_dir} ({done.kept} were there already)")
    print(f"sha256 {done.digest}: " + ("the published one" if args.digest else
                                       "compare it with the one your teacher published (a pack is trusted input; "
                                       "pass DIGEST=... to have it checked)"))
    for folder, missing in done.incomplete.items():
        print(f"warning: {args.cache_dir / folder} was there already but lacks {', '.join(missing)} (an earlier unpack "
              "was interrupted): remove that folder and unpack again")
    why = packs.serves(done.manifest.get("model"), _model_record(args.model))
    if why:
        print(f"warning: {why}")


def finetune(args: argparse.Namespace) -> None:
    from .lab import classroom

    start = time.perf_counter()
    count = classroom.finetune_all(args.model)
    print(f"{count} fine-tuned models in the cache ({time.perf_counter() - start:.0f} s)")


def grade(args: argparse.Namespace) -> None:
    from .lab.exercises import POINTS, grading

    rows, refused = [], []
    for path in args.notebooks:
        try:
            grades = grading.grade(path, args.model)
        except grading.KitChanged as error:
            raise SystemExit(str(error)) from error
        except ValueError as error:
            refused.append(str(error))
            continue
        print(path)
        for g in grades:
            print(f"  {'✓' if g.passed else '✗'} {g.message}".replace("\n", "\n    "))
        print(f"  {sum(g.points for g in grades)} of {POINTS * len(grades)} points")
        rows += [(path, g.exercise, g.points, POINTS, g.message) for g in grades]
    if args.csv:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        with open(args.csv, "w", newline="", encoding="utf-8") as file:
            csv.writer(file).writerows([("notebook", "exercise", "points", "max", "message"), *rows])
    if refused:
        raise SystemExit("not graded:\n" + "\n".join(refused))


def days(text: str) -> float:
    """A number of days, 0 or more (argparse type)."""
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number of days, 0 or more, not {text}")
    return value


def main(argv: list[str] | None = None) -> None:
    summary = __doc__.split("\n\n")[0].replace("\n", " ")
    parser = argparse.ArgumentParser(prog="python -m bertlook_utils.cli", description=summary)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("extract", help="stream attention through an analysis's reducers into the cache")
    run.add_argument("--model", type=model_name, default=model_name(os.environ.get("BERTLOOK_MODEL")),
                     help="Hugging Face name or local folder; 'default' is the embedded model (default: "
                          "$BERTLOOK_MODEL, else the embedded model)")
    run.add_argument("--analyses", nargs="+", choices=ANALYSES, default=["surface"])
    run.add_argument("--segments", type=int, default=1000, help="segments per seed (default 1000)")
    run.add_argument("--seeds", type=int, nargs="+", default=[0])
    run.add_argument("--items", type=Path, help="a JSON list of texts or [a, b] pairs, instead of segments")
    run.add_argument("--batch-size", type=int, default=32)
    run.add_argument("--block-size", type=int, default=BLOCK_SIZE)
    run.set_defaults(handler=extract)
    tune = commands.add_parser("finetune", help="fine-tune every model notebooks 08-10 train, into the cache")
    tune.add_argument("--model", type=model_name, default=model_name(os.environ.get("BERTLOOK_MODEL")),
                      help="as for extract")
    tune.set_defaults(handler=finetune)
    actions = commands.add_parser("cache", help="look at or prune the on-disk cache").add_subparsers(
        dest="action", required=True)
    info = actions.add_parser("info", help="how many entries the cache holds and their size")
    info.set_defaults(handler=cache_info)
    prune = actions.add_parser("prune", help="remove the entries not used for a while and the temporary files "
                                             "that killed writers left")
    prune.add_argument("--older-than", type=days, default=30, metavar="DAYS",
                       help="remove the entries not used for DAYS days (default 30)")
    prune.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    prune.set_defaults(handler=cache_prune)
    packer = actions.add_parser("pack", help="write the cache's entries and fine-tuned models into one file to "
                                             "hand out")
    packer.add_argument("archive", type=Path, help="the file to write (.tar.gz)")
    packer.add_argument("--model", type=model_name, default=model_name(os.environ.get("BERTLOOK_MODEL")),
                        help="the model the cache was filled for, as for extract (on $BERTLOOK_DEVICE)")
    packer.set_defaults(handler=cache_pack)
    unpacker = actions.add_parser("unpack", help="fill the cache from a pack made by this same code")
    unpacker.add_argument("archive", type=Path, help="a file written by `cache pack`")
    unpacker.add_argument("--digest", help="the sha256 `cache pack` printed (published by whoever made the pack): "
                                           "refuse a pack that is not that file")
    unpacker.add_argument("--model", type=model_name, default=model_name(os.environ.get("BERTLOOK_MODEL")),
                          help="the model this machine runs, as for extract: warn when the pack was filled for "
                               "another model, device or precision")
    unpacker.set_defaults(handler=cache_unpack)
    for command in (run, info, prune, packer, unpacker):
        command.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    grader = commands.add_parser("grade", help="grade submitted notebooks outside the learners' kernels (the grade "
                                               "of record)")
    grader.add_argument("notebooks", type=Path, nargs="+", help="submitted notebooks, named as handed out "
                                                                "(NN_*.ipynb)")
    grader.add_argument("--csv", type=Path, help="also write every grade to this file: notebook, exercise, points, "
                                                 "max, message")
    grader.add_argument("--model", type=model_name, default=model_name(os.environ.get("BERTLOOK_MODEL")),
                        help="as for extract: the model the real cases read")
    grader.set_defaults(handler=grade)
    args = parser.parse_args(argv)
    args.handler(args)


if __name__ == "__main__":
    main()
