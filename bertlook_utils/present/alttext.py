"""Alt text for a figure, read from what it draws.

Its titles and axis labels, and the numbers of its lines, bars, error bars, heatmaps and points (where each series
starts, ends and peaks; the highest cell of a map): a reader who cannot see the picture hears its headline with the
values the picture shows.

`headline(target, text)`: a figure function attaches the sentence that says what its figure shows (computed from
the results it draws) to the Figure or to one Axes; `describe(fig)` joins the headlines with what it reads from
each panel. The notebooks show it as the image's alt text (`viz.figure_html`), and the PNG carries it too.
"""
from __future__ import annotations

import re
from typing import Iterable

import numpy as np
from matplotlib.collections import PathCollection, QuadMesh
from matplotlib.container import BarContainer, ErrorbarContainer

HEADLINE = "_bertlook_headline"  # the attribute a figure function's sentence is kept under (Figure or Axes)
MOST_PANELS = 8  # panels read one by one; a grid of more (every head as a thumbnail) is summed up
MOST_SERIES = 4  # lines or bar groups read per panel


def headline(target, text: str):
    """Attach `text` (a sentence computed from the results drawn) to `target`, a Figure or an Axes, as what it
    shows; returns `target`. A second call replaces the first."""
    setattr(target, HEADLINE, " ".join(str(text).split()))
    return target


def number(value: float) -> str:
    """A value as the alt text says it: 3 significant digits, thousands with commas, NaN as "missing"."""
    value = float(value)
    if not np.isfinite(value):
        return "missing" if np.isnan(value) else ("infinity" if value > 0 else "minus infinity")
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _clean(text: str) -> str:
    """Label text as read aloud: mathtext dollars and escapes dropped, whitespace collapsed."""
    text = re.sub(r"\$([^$]*)\$", lambda m: re.sub(r"\\mathdefault\{([^}]*)\}", r"\1", m.group(1))
                  .replace("{", "").replace("}", "").replace("\\", ""), str(text).replace(r"\$", "$"))
    return " ".join(text.split())


def _axis_name(label: str) -> str:
    """An axis label without its parenthesised gloss ("layer (1 = input side)" -> "layer")."""
    return _clean(label).split(" (")[0].strip()


def _numeric(text: str) -> bool:
    return bool(re.fullmatch(r"[−\-+]?(?=[.,]*\d)[\d.,]+(e[−\-+]?\d+)?%?", text))


def _tick_names(ax, axis: str, words_only: bool = True) -> dict[float, str]:
    """Labelled ticks of one axis ({position: text}); with `words_only`, {} where the ticks are numbers."""
    ticks = ax.get_xticks() if axis == "x" else ax.get_yticks()
    labels = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    names = {float(t): _clean(label.get_text()) for t, label in zip(ticks, labels) if label.get_text().strip()}
    return {} if words_only and all(_numeric(name) for name in names.values()) else names


def _at(value: float, names: dict[float, str], axis_name: str) -> str:
    if names:
        nearest = min(names, key=lambda t: abs(t - value))
        if abs(nearest - value) < 0.25:
            return names[nearest]
    return f"{axis_name} {number(value)}".strip()


def _legend_free(label: str) -> bool:
    return not label or label.startswith("_")


def _more(n: int, what: str) -> str:
    return f"and {n} more {what}" + ("s" if n > 1 else "")


def _lines(ax, x_name: str, alone: bool) -> list[str]:
    """Each labelled line: where it starts, ends and peaks. Unlabelled lines are references (a diagonal, a zero
    line, a line across the axes), read only when the panel has nothing else and a scale (`alone`), in data units."""
    in_bars = {id(part) for c in ax.containers if isinstance(c, ErrorbarContainer) for part in _parts(c)}
    lines = [line for line in ax.get_lines() if line.get_visible() and len(np.atleast_1d(line.get_xdata())) >= 2
             and id(line) not in in_bars]
    named = [line for line in lines if not _legend_free(line.get_label())]
    lines = named or [line for line in lines if alone and line.get_transform() == ax.transData]
    names = _tick_names(ax, "x")
    said = []
    for line in lines[:MOST_SERIES]:
        x = np.asarray(line.get_xdata(), dtype=float)
        y = np.asarray(line.get_ydata(), dtype=float)
        keep = np.isfinite(x) & np.isfinite(y)
        if not keep.any() or np.ptp(x[keep]) == 0:
            continue
        x, y = x[keep], y[keep]
        top = int(np.argmax(y))
        label = "" if _legend_free(line.get_label()) else _clean(line.get_label()) + ": "
        if line.get_transform() != ax.transData and np.ptp(y) == 0:  # a reference across the axes (axhline)
            said.append(f"{label}{number(y[0])} throughout")
            continue
        text = f"{label}{number(y[0])} at {_at(x[0], names, x_name)} to {number(y[-1])} at {_at(x[-1], names, x_name)}"
        if 0 < top < len(y) - 1:
            text += f", highest {number(y[top])} at {_at(x[top], names, x_name)}"
        said.append(text)
    if len(lines) > MOST_SERIES:
        said.append(_more(len(lines) - MOST_SERIES, "line"))
    return said


def _bars(ax, x_name: str, y_name: str) -> list[str]:
    containers = [c for c in ax.containers if isinstance(c, BarContainer) and len(c.patches)]
    said = []
    for container in containers[:MOST_SERIES]:
        horizontal = container.orientation == "horizontal"
        values = np.asarray(container.datavalues, dtype=float)
        if horizontal:
            where = [p.get_y() + p.get_height() / 2 for p in container.patches]
        else:
            where = [p.get_x() + p.get_width() / 2 for p in container.patches]
        names = _tick_names(ax, "y" if horizontal else "x")
        labels = [_at(w, names, y_name if horizontal else x_name) or str(i + 1) for i, w in enumerate(where)]
        group = "" if _legend_free(container.get_label()) else _clean(container.get_label()) + ": "
        finite = np.isfinite(values)
        if not finite.any():
            continue
        if len(values) <= 6:
            said.append(group + ", ".join(f"{name} {number(v)}" for name, v in zip(labels, values)))
        else:
            hi = int(np.nanargmax(values))
            lo = int(np.nanargmin(values))
            said.append(f"{group}{len(values)} bars, highest {number(values[hi])} at {labels[hi]}, lowest "
                        f"{number(values[lo])} at {labels[lo]}")
    if len(containers) > MOST_SERIES:
        said.append(_more(len(containers) - MOST_SERIES, "group") + " of bars")
    return said


def _parts(container: ErrorbarContainer) -> list:
    data_line, caps, _ = container.lines
    return [part for part in (data_line, *caps) if part is not None]


def _errorbars(ax, x_name: str, y_name: str) -> list[str]:
    """Each labelled set of estimates with error bars: its values where it has few, else where it starts, ends and
    peaks (the value, not the interval)."""
    said = []
    bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer) and not _legend_free(c.get_label())]
    for container in bars[:MOST_SERIES]:
        data_line, _, ranges = container.lines
        if data_line is not None:
            x, y = (np.asarray(v, dtype=float) for v in data_line.get_data())
        elif ranges:  # fmt="none": the estimate is the middle of each bar
            middle = np.array([segment.mean(axis=0) for segment in ranges[0].get_segments()], dtype=float)
            x, y = (middle[:, 0], middle[:, 1]) if len(middle) else (np.array([]), np.array([]))
        else:
            continue
        horizontal = container.has_xerr and not container.has_yerr
        where, value = (y, x) if horizontal else (x, y)
        names = _tick_names(ax, "y" if horizontal else "x")
        axis = y_name if horizontal else x_name
        keep = np.isfinite(where) & np.isfinite(value)
        where, value = where[keep], value[keep]
        if not len(value):
            continue
        label = _clean(container.get_label()) + ": "
        if len(value) <= 6:
            said.append(label + ", ".join(f"{number(v)} at {_at(w, names, axis)}" for w, v in zip(where, value)))
        else:
            top = int(np.argmax(value))
            said.append(f"{label}{len(value)} estimates, {number(value[0])} at {_at(where[0], names, axis)} to "
                        f"{number(value[-1])} at {_at(where[-1], names, axis)}, highest {number(value[top])} at "
                        f"{_at(where[top], names, axis)}")
    return said


def _cell(position: int, names: dict[float, str], axis_name: str, fallback: str) -> str:
    """A map's row or column as read aloud: its axis name and tick label ("layer 3"), a word quoted ("“cat”")."""
    name = names.get(float(position))
    if name is None:
        return f"{axis_name or fallback} {position + 1}"
    return f"{axis_name} {name}".strip() if _numeric(name) else f"{axis_name or fallback} “{name}”"


def _maps(ax) -> list[str]:
    said = []
    arrays = [image.get_array() for image in ax.images]
    arrays += [mesh.get_array() for mesh in ax.collections if isinstance(mesh, QuadMesh)]
    for array in arrays[:1]:
        values = np.ma.filled(np.ma.asarray(array, dtype=float), np.nan)
        if values.ndim != 2 or not np.isfinite(values).any():
            continue
        rows, cols = values.shape
        r, c = np.unravel_index(int(np.nanargmax(values)), values.shape)
        row = _cell(int(r), _tick_names(ax, "y", words_only=False), _axis_name(ax.get_ylabel()), "row")
        col = _cell(int(c), _tick_names(ax, "x", words_only=False), _axis_name(ax.get_xlabel()), "column")
        said.append(f"a {rows} by {cols} map from {number(np.nanmin(values))} to {number(np.nanmax(values))}, "
                    f"highest at ({row}, {col})")
    return said


def _named_lines(ax) -> bool:
    return any(not _legend_free(line.get_label()) for line in ax.get_lines())


def _points(ax, x_name: str, y_name: str) -> list[str]:
    """Each set of points; unlabelled points beside labelled lines are those lines' raw data (dots per head under a
    line of layer means) and are left to the lines."""
    said = []
    sets = [c for c in ax.collections if isinstance(c, PathCollection)]
    if _named_lines(ax):
        sets = [c for c in sets if not _legend_free(c.get_label())]
    for points in sets[:MOST_SERIES]:
        xy = np.asarray(points.get_offsets(), dtype=float)
        xy = xy[np.isfinite(xy).all(axis=1)] if xy.ndim == 2 else xy[:0]
        if len(xy) < 2:
            continue
        label = "" if _legend_free(points.get_label()) else _clean(points.get_label()) + ": "
        text = f"{label}{len(xy)} points"
        scaled = len(ax.get_xticks()) and len(ax.get_yticks())  # a map without ticks (MDS) has no scale to read
        if scaled and x_name and y_name and np.ptp(xy[:, 0]) > 0 and np.ptp(xy[:, 1]) > 0:
            r = np.corrcoef(xy[:, 0], xy[:, 1])[0, 1]
            text += f", {x_name} from {number(xy[:, 0].min())} to {number(xy[:, 0].max())}, {y_name} from " \
                    f"{number(xy[:, 1].min())} to {number(xy[:, 1].max())} (correlation {number(r)})"
        said.append(text)
    return said


def _kind(ax) -> str:
    if ax.images or any(isinstance(c, QuadMesh) for c in ax.collections):
        return "heatmap"
    if any(isinstance(c, BarContainer) for c in ax.containers):
        return "bar chart"
    if any(isinstance(c, PathCollection) for c in ax.collections) and not _named_lines(ax):
        return "scatter plot"
    if ax.get_lines():
        return "line chart" if ax.axison else "diagram"  # lines drawn without axes: arcs, attention lines
    return ""


def panel(ax) -> str:
    """What one Axes shows: its headline if a figure function gave one, else its title, kind and axes, and the
    numbers read from its lines, bars, map or points."""
    own = getattr(ax, HEADLINE, "")
    title = _clean(" ".join(t for t in (ax.get_title("left"), ax.get_title(), ax.get_title("right")) if t))
    x_name, y_name = _axis_name(ax.get_xlabel()), _axis_name(ax.get_ylabel())
    kind = _kind(ax)
    what = kind
    if kind and y_name and kind != "heatmap":
        what += f" of {y_name}" + (f" by {x_name}" if x_name else "")
    elif kind and x_name and kind != "heatmap":
        what += f" of {x_name}"
    facts = _maps(ax) + _bars(ax, x_name, y_name) + _errorbars(ax, x_name, y_name) + _points(ax, x_name, y_name)
    scaled = ax.axison and len(ax.get_xticks()) and len(ax.get_yticks())  # lines on a drawing are not data
    facts += _lines(ax, x_name, alone=not facts and bool(scaled))
    parts = [p for p in (own, ": ".join(p for p in (title, what) if p)) if p]
    text = ". ".join(parts)
    return text + ("; " + "; ".join(facts) if facts else "")


def _shown_axes(fig) -> list:
    """The Axes that draw something (colour bars and empty spacers left out), in reading order."""
    def draws(ax) -> bool:
        return bool(ax.axison or ax.images or ax.collections or ax.lines or ax.patches or getattr(ax, HEADLINE, ""))

    return [ax for ax in fig.get_axes() if ax.get_visible() and ax.get_label() != "<colorbar>" and draws(ax)]


def _joined(sentences: Iterable[str]) -> str:
    text = ". ".join(s[0].upper() + s[1:] for s in (s.strip().rstrip(". ") for s in sentences) if s)
    return text + "." if text else ""


def describe(fig) -> str:
    """The alt text of `fig`: its headline (if a figure function gave one), its title, then each panel (`panel`);
    for a grid of more than MOST_PANELS panels, or panels under the figure's own headline, how many and the first
    ones' titles."""
    suptitle = _clean(fig._suptitle.get_text()) if getattr(fig, "_suptitle", None) is not None else ""
    axes = _shown_axes(fig)
    heads = [getattr(fig, HEADLINE, ""), suptitle]
    if len(axes) > MOST_PANELS or (len(axes) > 1 and heads[0]):  # a grid, or panels the headline sums up
        titles = [t for t in (_clean(ax.get_title()) for ax in axes) if t]
        kinds = sorted({_kind(ax) for ax in axes} - {""})
        body = [f"a grid of {len(axes)} panels ({', '.join(kinds) or 'drawings'})"
                + (f", the first titled {', '.join(titles[:4])}" if titles else "")]
    elif len(axes) > 1:
        body = [f"{len(axes)} panels"] + [f"Panel {i + 1}, {panel(ax)}" for i, ax in enumerate(axes)]
    else:
        body = [panel(ax) for ax in axes]
    return _joined(heads + body) or "A figure with no labelled content."
