#!/usr/bin/env python3
"""Draws the chaos benchmark's picture from its own output.

    python3 docs/benchmarks/draw_chaos.py [CHAOS_JSON] [SVG]
    python3 docs/benchmarks/draw_chaos.py --table [CHAOS_JSON]

CHAOS_JSON is the `chaos.json` the benchmark writes (default docs/benchmarks/chaos.json);
SVG is the picture (default: beside it, chaos.svg). For each shape of job, a row: on the
left the step the training reached over the run's time, with the faults marked where they
were dealt and the seconds each cost (see fault_costs()); on the right a bar of where the time
went, as eto's ledger counts it, with the productive share from the ledger and from the
training's own step log. With --table it prints instead, as Markdown, what each kind of
fault cost each shape.

Python's standard library only, so that anyone can redraw it.
"""

import json
import os
import sys
from xml.sax.saxutils import escape

BUCKETS = [
    ("productive", "#2e7d32"),
    ("waiting", "#9e9e9e"),
    ("startUp", "#1565c0"),
    ("reformation", "#f9a825"),
    ("checkpoint", "#6a1b9a"),
    ("retrained", "#c62828"),
    ("other", "#5d4037"),
]
FAULT_MARKS = {
    "force-deleted": ("D", "#c62828"),
    "evicted": ("E", "#ef6c00"),
    "node warned": ("W", "#6a1b9a"),
    "below minimum": ("M", "#37474f"),
}
WIDTH = 1000
ROW = 120
TOP = 70
CHART_LEFT, CHART_WIDTH = 230, 440
BAR_LEFT, BAR_WIDTH = 700, 280
MAX_POINTS = 800


def percent(ratio):
    return "-" if ratio is None else f"{100 * ratio:.1f} %"


def advances(steps):
    """The times at which the training first reached a step higher than any before, in order."""
    times, highest = [], None
    for when, step in sorted(steps):
        if highest is None or step > highest:
            times.append(when)
            highest = step
    return times


def pace(times):
    """The training's usual time per step: the median time between two advances."""
    gaps = sorted(later - earlier for earlier, later in zip(times, times[1:]))
    return gaps[len(gaps) // 2] if gaps else 0.0


def stall(times, usual, start, end):
    """Seconds the training stood still from `start` to `end` beyond its usual time per step:
    for each advance in that span, the time since the one before (from `start` at the
    earliest) less `usual`. Steps trained again do not advance, so they count as stood still."""
    total = 0.0
    for earlier, later in zip(times, times[1:]):
        if start < later <= end:
            total += max(0.0, later - max(earlier, start) - usual)
    return total


def fault_costs(run):
    """What each fault of `run` cost, in the order dealt: the seconds the training stood still
    (see stall()) from the fault until the next one, or the run's end."""
    times = advances(run["steps"])
    usual = pace(times)
    faults = run["faults"]
    ends = [fault["at"] for fault in faults[1:]] + [run["seconds"]]
    return [stall(times, usual, fault["at"], end) for fault, end in zip(faults, ends)]


def costs(run):
    """Each kind of fault of `run` with what its faults cost (see fault_costs())."""
    by_kind = {}
    for fault, cost in zip(run["faults"], fault_costs(run)):
        by_kind.setdefault(fault["fault"], []).append(cost)
    return by_kind


def table(report):
    """What each kind of fault cost each shape, as a Markdown table: the mean in seconds, and
    how many there were; and when the first step came."""
    kinds = list(FAULT_MARKS)
    lines = [
        "| shape | first step | " + " | ".join(kinds) + " |",
        "|---|---|" + "---|" * len(kinds),
    ]
    for run in report["runs"]:
        first = min((when for when, _ in run["steps"]), default=None)
        by_kind = costs(run)
        cells = []
        for kind in kinds:
            seen = by_kind.get(kind, [])
            cells.append(f"{sum(seen) / len(seen):.1f} s ({len(seen)})" if seen else "-")
        started = "-" if first is None else f"{first:.0f} s"
        lines.append(f"| {run['title']} | {started} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def thinned(steps, seconds):
    """At most MAX_POINTS points, the last of each slice of time, in time order."""
    slices = {}
    for at, step in sorted(steps):
        slices[int(at / seconds * MAX_POINTS) if seconds else 0] = (at, step)
    return [slices[key] for key in sorted(slices)]


def row(run, index, out):
    y0 = TOP + index * ROW
    height = ROW - 40
    seconds = run["seconds"] or 1.0
    steps = run["steps"]
    highest = max([step for _, step in steps] + [1])
    out.append(f'<text x="10" y="{y0 + 18}" class="title">{escape(run["title"])}</text>')
    ledger, truth = run["ledger"], run["truth"]
    out.append(
        f'<text x="10" y="{y0 + 38}">ledger {percent(ledger["ratio"])}</text>'
        f'<text x="10" y="{y0 + 54}">step log {percent(truth["ratio"])}</text>'
        f'<text x="10" y="{y0 + 70}">trained twice: {truth["retrainedSteps"]} steps</text>'
    )
    out.append(
        f'<rect x="{CHART_LEFT}" y="{y0}" width="{CHART_WIDTH}" height="{height}" class="frame"/>'
    )
    x = lambda at: CHART_LEFT + CHART_WIDTH * min(max(at / seconds, 0.0), 1.0)
    y = lambda step: y0 + height - height * step / highest
    for fault, cost in zip(run["faults"], fault_costs(run)):
        mark, colour = FAULT_MARKS.get(fault["fault"], ("?", "#000"))
        fx = x(fault["at"])
        said = f"{cost:.0f}"
        out.append(
            f'<line x1="{fx:.1f}" y1="{y0}" x2="{fx:.1f}" y2="{y0 + height}" stroke="{colour}" class="fault"/>'
            f'<text x="{fx + 2:.1f}" y="{y0 + 11}" fill="{colour}" class="mark">{mark}</text>'
            f'<text x="{fx + 2:.1f}" y="{y0 + 22}" fill="{colour}" class="cost">{said}</text>'
        )
    points = " ".join(f"{x(at):.1f},{y(step):.1f}" for at, step in thinned(steps, seconds))
    if points:
        out.append(f'<polyline points="{points}" class="steps"/>')
    out.append(
        f'<text x="{CHART_LEFT + CHART_WIDTH}" y="{y0 + height + 14}" class="axis" text-anchor="end">{seconds / 60:.0f} min</text>'
        f'<text x="{CHART_LEFT - 4}" y="{y0 + 10}" class="axis" text-anchor="end">{highest}</text>'
        f'<text x="{CHART_LEFT - 4}" y="{y0 + height}" class="axis" text-anchor="end">0</text>'
    )
    buckets = ledger["buckets"]
    total = sum(buckets.get(name, 0.0) for name, _ in BUCKETS) or 1.0
    left = BAR_LEFT
    for name, colour in BUCKETS:
        width = BAR_WIDTH * buckets.get(name, 0.0) / total
        if width > 0:
            out.append(
                f'<rect x="{left:.1f}" y="{y0 + 20}" width="{width:.1f}" height="30" fill="{colour}">'
                f'<title>{name}: {buckets.get(name, 0.0):.0f} s</title></rect>'
            )
        left += width
    lost = sorted(
        ((buckets.get(name, 0.0), name) for name, _ in BUCKETS if name != "productive"),
        reverse=True,
    )
    said = ", ".join(f"{name} {value:.0f} s" for value, name in lost[:3] if value >= 0.5)
    out.append(f'<text x="{BAR_LEFT}" y="{y0 + 66}" class="axis">{escape(said)}</text>')


def draw(report):
    runs = report["runs"]
    height = TOP + ROW * len(runs) + 40
    # Runs of several lengths (shapes measured in separate runs) say so; each row's axis
    # shows its own.
    lengths = sorted({round((run["seconds"] or 0.0) / 60.0) for run in runs})
    length = " to ".join(f"{minutes:.0f}" for minutes in lengths[:: max(len(lengths) - 1, 1)])
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">',
        "<style>.title{font-weight:bold;font-size:13px}.frame{fill:#fafafa;stroke:#bbb}"
        ".steps{fill:none;stroke:#2e7d32;stroke-width:1.5}.fault{stroke-dasharray:3,3}"
        ".mark{font-size:10px;font-weight:bold}.cost{font-size:9px}.axis{font-size:10px;fill:#555}</style>",
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="10" y="22" class="title">Goodput under a fault every {report["everySeconds"]:.0f} s '
        f'for {length or "{:.0f}".format(report["minutes"])} min ({escape(report.get("image", ""))})</text>',
    ]
    legend = " · ".join(f"{mark} {name}" for name, (mark, _) in FAULT_MARKS.items())
    out.append(
        f'<text x="{CHART_LEFT}" y="42" class="axis">step over time; faults: {escape(legend)}; '
        "under each, the seconds it stood still after it</text>"
    )
    left = CHART_LEFT
    for name, colour in BUCKETS:
        out.append(
            f'<rect x="{left}" y="49" width="10" height="10" fill="{colour}"/>'
            f'<text x="{left + 13}" y="58" class="axis">{name}</text>'
        )
        left += 13 + 7 * len(name) + 8
    for index, run in enumerate(runs):
        row(run, index, out)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    as_table = argv[1:2] == ["--table"]
    args = argv[2:] if as_table else argv[1:]
    source = args[0] if args else os.path.join(here, "chaos.json")
    if as_table:
        with open(source) as report:
            sys.stdout.write(table(json.load(report)))
        return
    target = args[1] if len(args) > 1 else os.path.join(os.path.dirname(source), "chaos.svg")
    with open(source) as report:
        picture = draw(json.load(report))
    with open(target, "w") as svg:
        svg.write(picture)
    print(f"drew {target}")


if __name__ == "__main__":
    main(sys.argv)
