"""One style per run: colour, dash and marker, shared by every figure of fedviz.

Colour follows the algorithm's *family* (FSVRG and naive FSVRG are one family, CoCoA and CoCoA+
another), so that like methods look alike; every further run of a family in the same figure —
an ablation variant, the same method on another partition, another stepsize — gets its own
lightness (and a hue turned by at most 40°), dash and marker, so that no two runs of one figure are drawn alike.  The first run of
a family keeps the paper's Figure 2 style where it has one (Section 4: FSVRG green circles, GD
diamonds, CoCoA+ triangles, FSVRGR red stars).

:func:`run_styles` is deterministic: the k-th run of a family (in the order given) always gets
the k-th variant of the family's style.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

__all__ = ["DASHES", "MARKERS", "Style", "family", "run_styles", "shade", "turn"]


@dataclass(frozen=True)
class Style:
    """How one run is drawn: a colour ("#rrggbb"), a Plotly line dash and a Plotly marker symbol."""

    color: str
    dash: str
    marker: str

    def line(self, width: float = 2) -> dict:
        return dict(color=self.color, dash=self.dash, width=width)


#: Dashes of the variants of a family, in order (the first run: solid).
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
#: Markers the variants cycle through after the family's own (all drawn by the PNG export too).
MARKERS = ("circle", "square", "diamond", "triangle-up", "triangle-down", "x", "star", "cross", "pentagon",
           "hexagon", "triangle-left", "triangle-right")
#: Lightness of the k-th variant: 0 the family's colour, < 0 towards black, > 0 towards white.
_SHADES = (0.0, -0.35, 0.35, -0.1, 0.6, -0.55, 0.2, -0.7, 0.7)
#: Hue turn of the k-th variant, in degrees: small enough to stay in the family's hue, enough that two
#: dark variants (the 2nd and the 4th) do not read as one colour.
_TURNS = (0, 25, -25, -40, 40, 12, -12, 0, 0)

# Family of each registered algorithm (registry name or title) and of the paper's labels.
_FAMILY = {
    "fsvrg": "fsvrg", "naive-fsvrg": "fsvrg", "naive fsvrg": "fsvrg", "fsvrgr": "fsvrgr",
    "gd": "gd", "cocoa-plus": "cocoa", "cocoa+": "cocoa", "cocoa": "cocoa", "cocoa (averaging)": "cocoa",
    "dane": "dane", "one-shot": "one-shot", "one-shot averaging": "one-shot",
    "primal-method": "primal", "primal method (alg. 5)": "primal", "dual-method": "dual",
    "dual method (alg. 6)": "dual", "fedavg": "fedavg", "fedprox": "fedprox", "scaffold": "scaffold",
    "svrg": "svrg", "svrg (centralised)": "svrg", "sgd": "sgd", "sgd (centralised)": "sgd",
}
#: (colour, marker) of each family; the paper's Figure 2 ones where it has them.
_HUES = {
    "fsvrg": ("#2ca02c", "circle"), "fsvrgr": ("#d62728", "star"), "gd": ("#17becf", "diamond"),
    "cocoa": ("#9467bd", "triangle-up"), "dane": ("#8c564b", "square"), "fedavg": ("#1f77b4", "circle"),
    "fedprox": ("#ff7f0e", "square"), "scaffold": ("#e377c2", "diamond"), "svrg": ("#7f7f7f", "x"),
    "sgd": ("#bcbd22", "cross"), "one-shot": ("#393b79", "pentagon"), "primal": ("#637939", "hexagon"),
    "dual": ("#843c39", "triangle-down"),
}
#: Colours of runs whose family is unknown, each a family of its own (none is a family's colour).
_SPARE = ("#17a589", "#b7950b", "#a04000", "#5b2c6f", "#1b4f72", "#7b241c", "#117864", "#6e2c00")


def family(algorithm: str | None) -> str | None:
    """The family of an algorithm's registry name or title (None when unknown)."""
    if not algorithm:
        return None
    return _FAMILY.get(str(algorithm).strip().lower())


def turn(color: str, degrees: float) -> str:
    """``color`` ("#rrggbb") with its hue turned by ``degrees`` (lightness and saturation kept)."""
    import colorsys

    c = color.lstrip("#")
    h, l, sat = colorsys.rgb_to_hls(*(int(c[i:i + 2], 16) / 255 for i in (0, 2, 4)))
    r, g, b = colorsys.hls_to_rgb((h + degrees / 360) % 1.0, l, sat)
    return "#" + "".join(f"{round(v * 255):02x}" for v in (r, g, b))


def shade(color: str, t: float) -> str:
    """``color`` ("#rrggbb") mixed towards white (t > 0) or black (t < 0) by |t|."""
    c = color.lstrip("#")
    rgb = [int(c[i:i + 2], 16) for i in (0, 2, 4)]
    target = 255 if t > 0 else 0
    mixed = [round(v + (target - v) * abs(t)) for v in rgb]
    return "#" + "".join(f"{v:02x}" for v in mixed)


def run_styles(runs: Mapping[str, str | None] | Iterable[tuple[str, str | None]]) -> dict[str, Style]:
    """A :class:`Style` per run label: ``runs`` maps each label to its algorithm (registry name or
    title; None or unknown: a family of its own).

    The first run of a family gets the family's colour, a solid line and its marker; the k-th
    gets the k-th lightness, dash and marker after it, so that within a figure no two runs share
    (colour, dash, marker) — and a reader can tell six FSVRG variants apart.  A label that is
    itself a known family (e.g. "FSVRGR", the paper's label) is styled as that family.
    """
    items = list(runs.items()) if isinstance(runs, Mapping) else [tuple(r) for r in runs]
    out: dict[str, Style] = {}
    seen: dict[str, int] = {}
    extra: dict[str, tuple[str, str]] = {}  # families of unknown runs, in order of appearance
    for label, algorithm in items:
        if label in out:
            continue
        fam = family(label) if family(label) == "fsvrgr" else family(algorithm) or family(label)
        if fam is None:
            fam = f"?{label}"
        if fam not in _HUES and fam not in extra:
            n = len(extra)
            extra[fam] = (shade(_SPARE[n % len(_SPARE)], _SHADES[n // len(_SPARE) % len(_SHADES)]),
                          MARKERS[n % len(MARKERS)])
        color, marker = _HUES.get(fam) or extra[fam]
        k = seen.get(fam, 0)
        seen[fam] = k + 1
        if k:
            color = shade(turn(color, _TURNS[k % len(_TURNS)]), _SHADES[k % len(_SHADES)])
            start = MARKERS.index(marker) if marker in MARKERS else 0
            marker = MARKERS[(start + k) % len(MARKERS)]
        out[label] = Style(color=color, dash=DASHES[k % len(DASHES)], marker=marker)
    return out
