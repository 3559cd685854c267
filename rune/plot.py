"""Training curves from metrics logs (`rune.metrics.Logger` files) as a PNG.

    python -m rune.plot run.jsonl -o curves.png
    python -m rune.plot base.jsonl wide.jsonl -o compare.png --size 1200x800 --metrics loss accuracy

One subplot per metric with the step along x; several files overlay, one line
each, labelled by file name. Needs matplotlib (`pip install 'rune[plot]'`);
it draws with the Agg renderer and leaves pyplot's state alone.
"""
import argparse
import math
import numbers
import os
import sys

from . import metrics as metrics_log
from .errors import ArgumentError

__all__ = ["curves", "figure", "plot", "main"]

INSTALL_HINT = "pip install 'rune[plot]'"
DPI = 100


def curves(columns, names=None):
    """{metric: (steps, values)} of a log read by `rune.metrics.read`: what a plot draws.

    columns: {key: list per line}, as `rune.metrics.read` returns (it must hold "step").
    names: the metrics to keep, in this order (default: every key with a number,
        in the log's order). Lines without a number for a metric are left out of its
        series; NaN stays (the line breaks there).
    """
    if "step" not in columns:
        raise ArgumentError(f"rune.plot.curves: the log has no 'step' key (keys: {sorted(columns)})")
    steps = columns["step"]
    wanted = [k for k in columns if k != "step"] if names is None else list(names)
    series = {}
    for name in wanted:
        values = columns.get(name, [])
        pairs = [(s, float(v)) for s, v in zip(steps, values)
                 if isinstance(v, numbers.Real) and not isinstance(v, bool)]
        if pairs or names is not None:
            series[name] = ([s for s, _ in pairs], [v for _, v in pairs])
    return series


def _figure_class():
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError(f"rune.plot needs matplotlib, which is not installed: {INSTALL_HINT}") from None
    return Figure


def plot(paths, output, *, size=(1000, 600), names=None):
    """Draw the logs at `paths` into the PNG `output`: one subplot per metric, one line per log.

    paths: metrics log files (`rune.metrics.Logger`); a single path may be a str.
    output: the image file to write.
    size: (width, height) of the image in pixels.
    names: the metrics to draw (default: every numeric key of any log).
    """
    figure(paths, size=size, names=names).savefig(output, dpi=DPI, format="png")
    return output


def figure(paths, *, size=(1000, 600), names=None):
    """The matplotlib Figure that `plot` saves (to show it elsewhere or add to it).

    paths: metrics log files (`rune.metrics.Logger`); a single path may be a str.
    size: (width, height) of the figure in pixels.
    names: the metrics to draw (default: every numeric key of any log).
    """
    Figure = _figure_class()
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    labels = [os.path.basename(os.fspath(p)) for p in paths]
    if len(set(labels)) < len(labels):   # run1/log.jsonl and run2/log.jsonl: the paths tell them apart
        labels = [os.fspath(p) for p in paths]
    logs = [_read(p) for p in paths]
    present = list(dict.fromkeys(k for columns in logs for k in curves(columns)))
    if not present:
        raise ArgumentError(f"rune.plot: no numeric metric to draw in {', '.join(map(os.fspath, paths))}")
    unknown = [n for n in names or () if n not in present]
    if unknown:
        raise ArgumentError(f"rune.plot: no metric {', '.join(map(repr, unknown))} in "
                            f"{', '.join(map(os.fspath, paths))}; the metrics there: {', '.join(present)}")
    runs = [(label, curves(columns, names)) for label, columns in zip(labels, logs)]
    shown = list(names) if names is not None else present
    width, height = size
    columns = min(len(shown), 3)
    rows = math.ceil(len(shown) / columns)
    drawing = Figure(figsize=(width / DPI, height / DPI), dpi=DPI, layout="constrained")
    axes = drawing.subplots(rows, columns, squeeze=False).ravel()
    for ax, name in zip(axes, shown):
        for label, series in runs:
            if name in series:
                steps, values = series[name]
                ax.plot(steps, values, label=label, linewidth=1.2)
        ax.set_title(name)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if len(runs) > 1:
            ax.legend(fontsize="small")
    for ax in axes[len(shown):]:
        ax.set_visible(False)
    return drawing


def _read(path):
    """The columns of the log at `path`, or an ArgumentError naming the file: missing,
    not text, empty, not JSON lines or without steps."""
    where = os.fspath(path)
    if not os.path.isfile(where):
        raise ArgumentError(f"rune.plot: no such log file: {where}")
    try:
        columns = metrics_log.read(where)
    except UnicodeDecodeError:
        raise ArgumentError(f"rune.plot: {where} is not a text file (expected JSON lines from "
                            f"rune.metrics.Logger)") from None
    if not columns:
        raise ArgumentError(f"rune.plot: the log {where} is empty")
    if "step" not in columns:
        raise ArgumentError(f"rune.plot: the log {where} has no 'step' key (its keys: {', '.join(columns)}); "
                            f"expected a log written by rune.metrics.Logger")
    return columns


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (no usage block), exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _size(text):
    width, _, height = text.lower().partition("x")
    if not (width.isdigit() and height.isdigit()) or int(width) < 1 or int(height) < 1:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT in pixels, such as 1000x600, got {text!r}")
    return int(width), int(height)


def main(argv=None):
    """`python -m rune.plot`: parse the command line `argv` and write the image.
    Returns 0 when written, 2 for a mistake in the command or its logs (one line
    on stderr), 1 when matplotlib is missing."""
    parser = _Parser(prog="python -m rune.plot", description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+", help="metrics logs (JSON lines from rune.metrics.Logger)")
    parser.add_argument("-o", "--output", default="curves.png", help="the PNG to write (default curves.png)")
    parser.add_argument("--size", type=_size, default=(1000, 600), help="WIDTHxHEIGHT in pixels")
    parser.add_argument("--metrics", nargs="+", help="the metrics to draw (default: all)")
    args = parser.parse_args(argv)
    try:
        plot(args.logs, args.output, size=args.size, names=args.metrics)
    except ImportError as e:
        print(f"{parser.prog}: {e}", file=sys.stderr)
        return 1
    except (ArgumentError, OSError) as e:   # a wrong log, metric or output path: the user's to fix
        message = str(e).removeprefix("rune.plot: ")
        print(f"{parser.prog}: error: {message}", file=sys.stderr)
        return 2
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
