"""Draw (or check) the hand-checked sample of silver-parse arcs: data/parsecheck/arcs.csv.

    python -m tools.parsecheck_sample            # write the sample, keeping every judgement already made
    python -m tools.parsecheck_sample --check    # exit 1 unless the stored sample is what the code draws
    python -m tools.parsecheck_sample --show 0:25   # print arcs 0..24 with their whole parsed sentence

The sample is `parsecheck.draw_sample(parses.parsed_sentences(2000, 0))`: the sentences notebook 04 scores
(parsed once by spaCy, then read from data/cache), 22 arcs of each of Table 1's 14 relations, seed 0.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bertlook_utils import parsecheck, parses

N_SENTENCES, PARSE_SEED = 2000, 0


def drawn() -> list[parsecheck.Arc]:
    return parsecheck.draw_sample(parses.parsed_sentences(N_SENTENCES, PARSE_SEED))


def show(arcs: list[parsecheck.Arc], start: int, stop: int) -> None:
    """Each arc with its sentence's whole parse (index word tag head relation), for judging."""
    by_id = {s.id: s for s in parses.parsed_sentences(N_SENTENCES, PARSE_SEED, progress=False)}
    for k in range(start, min(stop, len(arcs))):
        a = arcs[k]
        s = by_id[a.sentence_id]
        print(f"=== [{k}] {a.sentence_id}  ARC: {a.dep} {a.dep_word} --{a.relation}--> {a.head} {a.head_word}")
        print("    " + "  ".join(f"{i}{s.words[i - 1]}<-{h}/{r}" for i, (h, r) in
                                 enumerate(zip(s.heads, s.relations), 1)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--path", type=Path, default=parsecheck.DEFAULT_PATH)
    ap.add_argument("--check", action="store_true", help="compare the stored sample with a fresh draw")
    ap.add_argument("--show", metavar="START:STOP", help="print these arcs of the stored sample in context")
    args = ap.parse_args(argv)
    if args.show:
        start, _, stop = args.show.partition(":")
        show(parsecheck.read_sample(args.path), int(start), int(stop))
        return 0
    arcs = drawn()
    if args.check:
        stored = parsecheck.read_sample(args.path)
        if stored != arcs:
            print(f"{args.path} differs from the sample the code draws ({len(stored)} stored, {len(arcs)} drawn)")
            return 1
        print(f"{args.path}: the stored sample is the one drawn ({len(arcs)} arcs)")
        return 0
    kept = parsecheck.write_sample(arcs, args.path)
    print(f"wrote {len(arcs)} arcs to {args.path} ({kept} kept their judgement)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
