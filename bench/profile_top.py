"""Summarise py-spy's collapsed stacks (``py-spy record --format raw``): where the samples went.

Prints the functions with the most samples *inclusive* (the function or anything it called
was on the CPU) and *self* (the function itself), as a share of all samples. Frames are keyed
by function and file (line numbers dropped), so one function's lines add up. ``--match``
limits the inclusive list to files whose path contains one of the given strings (e.g.
``agentcore/,studio/``); ``--under FUNC`` keeps only the stacks that pass through a function
whose name contains FUNC, so a share reads "of the time inside FUNC".

``--callers FUNC`` lists who calls the functions whose name contains FUNC (the first such
frame in each stack, and the frame above it), with their shares.

    python bench/profile_top.py profile.txt [--top 30] [--match agentcore/,studio/] [--under run]
    python bench/profile_top.py profile.txt --callers urljoin
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


def frame_key(frame: str) -> str:
    match = FRAME.match(frame.strip())
    if not match:
        return frame.strip()
    path = match.group("file")
    for marker in ("site-packages/", "/lib/python3", "/wt-bench/", "/main/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{match.group('func')} ({path})"


def load(
    paths: list[Path], under: str | None, callers_of: str | None = None
) -> tuple[int, Counter[str], Counter[str], Counter[str]]:
    total = 0
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    callers: Counter[str] = Counter()
    for path in paths:
        for line in path.read_text(errors="replace").splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack or not count.isdigit():
                continue
            frames = [frame_key(f) for f in stack.split(";") if f and not f.startswith(("process ", "thread "))]
            if under is not None:
                at = next((i for i, f in enumerate(frames) if under in f.split(" (")[0]), None)
                if at is None:
                    continue
                frames = frames[at:]
            n = int(count)
            total += n
            for key in set(frames):
                inclusive[key] += n
            if frames:
                own[frames[-1]] += n
            if callers_of is not None:
                at = next((i for i, f in enumerate(frames) if callers_of in f.split(" (")[0]), None)
                if at is not None:
                    callers[f"{frames[at - 1] if at else '<root>'}  →  {frames[at]}"] += n
    return total, inclusive, own, callers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--match", default="", help="comma-separated path fragments for the inclusive list")
    parser.add_argument("--under", help="only stacks through a function whose name contains this")
    parser.add_argument("--callers", help="list the callers of functions whose name contains this")
    args = parser.parse_args()
    total, inclusive, own, callers = load(args.files, args.under, args.callers)
    if not total:
        raise SystemExit("no samples")
    if args.callers:
        print(f"{total} samples; callers of {args.callers!r}:")
        for key, n in callers.most_common(args.top):
            print(f"  {100 * n / total:5.1f}%  {key}")
        return
    matches = [m for m in args.match.split(",") if m]
    print(f"{total} samples" + (f" under {args.under!r}" if args.under else ""))
    print("\ninclusive (function and its callees):")
    shown = 0
    for key, n in inclusive.most_common():
        if matches and not any(m in key for m in matches):
            continue
        print(f"  {100 * n / total:5.1f}%  {key}")
        shown += 1
        if shown >= args.top:
            break
    print("\nself (the function's own code):")
    for key, n in own.most_common(args.top):
        print(f"  {100 * n / total:5.1f}%  {key}")


if __name__ == "__main__":
    main()
