"""The layers of fedviz (docs/architecture.md): every import inside ``fedviz/`` points down.

Each module of ``fedviz/`` is parsed (never imported) and every import in it is checked: at the top,
inside a function, under ``if TYPE_CHECKING``, and the literal-string forms
(``importlib.import_module("fedviz.…")``, ``__import__("fedviz.…")``).  A module may import its own
unit (the top-level package or module it belongs to) and any unit of a lower layer; nothing of its
own layer (siblings stay independent) and nothing above.  The table below is the one
docs/architecture.md describes.  Inside a unit cut into rooms (:data:`ROOMS`), the same rule holds between
its rooms.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import ROOT

#: The layers, lowest first.  A unit is ``fedviz.X`` for a top-level package or module X; ``fedviz``
#: itself (its ``__init__``: the version) is the floor.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("fedviz", "errors", "markup"),  # imports nothing of fedviz
    ("validation",),                 # one spec grammar, range checks
    ("params",),                     # the parameter record
    ("data",),                       # data sets, readers, generators, partitioners, the split
    ("problems",),                   # losses, f(w), the optimum, smoothness constants
    ("algorithms",),                 # the algorithms and their kernels
    ("personal", "properties"),      # personalised models (exact Local, Ditto, fine-tuning, APFL); the paper's properties measured
    ("runner",),                     # running a job: execution, its history, the cluster, serving
    ("experiments", "learn"),        # studies built on runs: grids of runs, the Learn pages' computations
    ("plots",),                      # figures of runs, experiments and the Learn views
    ("bench",),                      # the benchmarks, Figure 2 and the reports the CLI dispatches to
    ("cli", "ui"),                   # the front ends: terminal, Streamlit adapter
    ("__main__",),                   # python -m fedviz
)
LAYER = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}

#: The rooms of a unit that is a package of several jobs, on floors, lowest first (docs/architecture.md, "The
#: rooms of a unit"): each room is a subpackage or module of the unit; ``·`` is the unit's loose modules not
#: named.  A module imports its own room and lower floors only; the package's ``__init__`` (:data:`FRONT`)
#: is its front door, above every room: it may re-export any of them, and no room imports it.
ROOMS: dict[str, tuple[tuple[str, ...], ...]] = {
    "runner": (("·",), ("history",), ("cluster",), ("serve",)),
    "ui": (("state", "page", "pernode", "sessions"), ("loaders", "widgets"), ("live",)),
    "bench": (("_common",), ("cluster", "pernode", "softmax", "personal", "scaling", "concurrency", "figure2", "stepsize_check",
                            "tuning_report", "default_grid"), ("speed",)),
    "cli": (("arguments",), ("data", "run", "experiment", "personalise")),
}
FRONT = "__init__"

#: The heavy third-party libraries and the only places in fedviz/ that import them (a unit, or one module).
THIRD_PARTY = {
    "streamlit": ("fedviz.ui",),
    "plotly": ("fedviz.plots",),
    "matplotlib": ("fedviz.plots",),
    "playwright": ("fedviz.plots",),
    "dask": ("fedviz.runner.cluster", "fedviz.experiments.driver", "fedviz.bench"),
    "distributed": ("fedviz.runner.cluster", "fedviz.experiments.driver", "fedviz.bench"),
}
#: Of those, the ones imported inside functions only (importing a fedviz module never imports them).
LAZY = ("dask", "distributed")

PACKAGE = ROOT / "fedviz"


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def unit_of(module: str) -> str:
    """'fedviz.runner.cluster' -> 'runner'; 'fedviz' -> 'fedviz'."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def imports(source: str, module: str, is_package: bool, modules: set[str]):
    """(line, target module, the import as written) for every import of a ``fedviz`` module in ``source``."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "fedviz":
                    yield node.lineno, alias.name, f"import {alias.name}"
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "fedviz":
                continue
            written = f"from {'.' * node.level}{node.module or ''} import " + ", ".join(a.name for a in node.names)
            for alias in node.names:
                # `from fedviz import properties` imports the module fedviz.properties, not the package
                sub = f"{target}.{alias.name}"
                yield node.lineno, (sub if sub in modules else target), written
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str) and node.args[0].value.split(".")[0] == "fedviz"
              and ((isinstance(node.func, ast.Name) and node.func.id == "__import__")
                   or (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"))):
            yield node.lineno, node.args[0].value, ast.unparse(node)


def room_of(module: str, packages: set[str]) -> str | None:
    """The room of ``module`` in its unit's :data:`ROOMS` ('fedviz.runner.history.store' -> 'history',
    'fedviz.runner.loop' -> '·', 'fedviz.runner' -> '__init__'); None if the table places it nowhere (a
    subpackage or a module it does not name, in a unit without loose modules)."""
    parts = module.split(".")
    if len(parts) == 2:
        return FRONT
    named = {room for floor in ROOMS[parts[1]] for room in floor}
    if parts[2] in named:
        return parts[2]
    loose = len(parts) == 3 and module not in packages
    return "·" if loose and "·" in named else None


def floor_of(unit: str, room: str) -> int:
    floors = ROOMS[unit]
    return len(floors) if room == FRONT else next(i for i, floor in enumerate(floors) if room in floor)


def room_violation(module: str, target: str, packages: set[str]) -> str | None:
    """Why ``module`` may not import ``target`` of its own unit (None: it may)."""
    unit = unit_of(module)
    here, there = room_of(module, packages), room_of(target, packages)
    if here is None or there is None or here == there or here == FRONT:
        return None  # an unplaced module is reported by the test of the table itself
    if there == FRONT:
        return f"{unit}'s front door (its __init__) is above every room, {here} included"
    a, b = floor_of(unit, here), floor_of(unit, there)
    if b < a:
        return None
    where = "the same floor as" if a == b else "a floor above"
    return f"{unit}'s room {there} (floor {b}) is {where} {here} (floor {a})"


def violations(sources: dict[str, tuple[str, bool]]) -> list[str]:
    """Every import in ``sources`` ({module: (source, is_package)}) that does not point down, in words."""
    modules = set(sources)
    packages = {m for m, (_, is_package) in sources.items() if is_package}
    out = []
    for module, (source, is_package) in sorted(sources.items()):
        here = unit_of(module)
        for line, target, written in sorted(set(imports(source, module, is_package, modules))):
            there = unit_of(target)
            if there == here:
                why = room_violation(module, target, packages) if here in ROOMS else None
                if why:
                    out.append(f"{module}:{line} `{written}`: {why}")
                continue
            if there not in LAYER:
                out.append(f"{module}:{line} `{written}`: {there} is in no layer of the table")
            elif LAYER[there] >= LAYER[here]:
                where = "the same layer as" if LAYER[there] == LAYER[here] else "a layer above"
                out.append(f"{module}:{line} `{written}`: {there} (layer {LAYER[there]}) is {where} "
                           f"{here} (layer {LAYER[here]})")
    return out


def fedviz_sources() -> dict[str, tuple[str, bool]]:
    return {module_name(p): (p.read_text(encoding="utf-8"), p.name == "__init__.py")
            for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_unit_of_fedviz_has_a_layer_and_every_layer_entry_exists():
    units = {unit_of(m) for m in fedviz_sources()}
    assert sorted(units - set(LAYER)) == [], "place these in LAYERS (and in docs/architecture.md)"
    assert sorted(set(LAYER) - units) == [], "LAYERS names units fedviz/ no longer has"


def test_every_module_of_a_unit_with_rooms_is_in_a_room_and_every_room_exists():
    sources = fedviz_sources()
    packages = {m for m, (_, is_package) in sources.items() if is_package}
    unplaced = sorted(m for m in sources if unit_of(m) in ROOMS and room_of(m, packages) is None)
    assert unplaced == [], "place these in ROOMS (and in docs/architecture.md)"
    found = {(unit_of(m), room_of(m, packages)) for m in sources if unit_of(m) in ROOMS}
    named = {(unit, room) for unit, floors in ROOMS.items() for floor in floors for room in floor}
    assert sorted(named - found) == [], "ROOMS names rooms fedviz/ no longer has"


def test_no_import_in_fedviz_goes_up_or_sideways():
    found = violations(fedviz_sources())
    assert found == [], "imports against the layers:\n" + "\n".join(found)


@pytest.mark.parametrize("module, is_package, source, expected", [
    # a function-local import up a layer, written relatively
    ("fedviz.runner.manager", False, "def f():\n    from ..experiments.cluster import get_client\n",
     ["fedviz.runner.manager:2 `from ..experiments.cluster import get_client`: experiments (layer 8) is a "
      "layer above runner (layer 7)"]),
    # a package's __init__ resolves `.` to itself; a sibling of the same layer is refused too
    ("fedviz.learn", True, "from .drift import x\nfrom ..experiments import spec\n",
     ["fedviz.learn:2 `from ..experiments import spec`: experiments (layer 8) is the same layer as learn (layer 8)"]),
    # the string forms and a name imported from the package that is a module
    ("fedviz.data.build", False,
     "import importlib\nimportlib.import_module('fedviz.plots')\nfrom fedviz import properties, __version__\n",
     ["fedviz.data.build:2 `importlib.import_module('fedviz.plots')`: plots (layer 9) is a layer above data (layer 3)",
      "fedviz.data.build:3 `from fedviz import properties, __version__`: properties (layer 6) is a layer above "
      "data (layer 3)"]),
    # down, and within the unit: nothing to say
    ("fedviz.cli", False, "from .runner import iterate\nfrom fedviz.cli import x\nimport numpy\n", []),
    # inside a unit with rooms: a floor module may not import a room above it, nor a room its front door
    ("fedviz.runner.loop", False, "from .history import store\nfrom .job import Job\n",
     ["fedviz.runner.loop:1 `from .history import store`: runner's room history (floor 1) is a floor above · "
      "(floor 0)"]),
    ("fedviz.ui.widgets", False, "from . import live, loaders\nfrom .. import ui\nfrom .state import seeded\n",
     ["fedviz.ui.widgets:1 `from . import live, loaders`: ui's room live (floor 2) is a floor above widgets "
      "(floor 1)",
      "fedviz.ui.widgets:1 `from . import live, loaders`: ui's room loaders (floor 1) is the same floor as "
      "widgets (floor 1)",
      "fedviz.ui.widgets:2 `from .. import ui`: ui's front door (its __init__) is above every room, widgets "
      "included"]),
])
def test_the_check_reports_module_line_and_import(module, is_package, source, expected):
    sources = {module: (source, is_package), "fedviz.properties": ("", False), "fedviz.ui.live": ("", False),
               "fedviz.ui.loaders": ("", False), "fedviz.runner.history.store": ("", False),
               "fedviz.runner.history": ("", True), "fedviz.ui": ("", True)}
    assert violations(sources) == expected


def third_party(source: str):
    """(line, library, at the module's top level?) for every absolute import of a non-fedviz library."""
    tree = ast.parse(source)
    local = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
             for n in ast.walk(f) if n is not f}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            yield node.lineno, name.split(".")[0], id(node) not in local


def test_third_party_tells_a_function_local_import_from_a_top_level_one():
    source = ("import dask.config\nif True:\n    import plotly\nclass A:\n    def f(self):\n"
              "        from distributed import Client\nfrom . import x\n")
    assert sorted(third_party(source)) == [(1, "dask", True), (3, "plotly", True), (6, "distributed", False)]


def test_streamlit_plotly_and_dask_stay_in_their_corners():
    found = []
    for module, (source, _) in sorted(fedviz_sources().items()):
        for line, library, at_top in third_party(source):
            allowed = THIRD_PARTY.get(library)
            if allowed is None:
                continue
            if not any(module == a or module.startswith(a + ".") for a in allowed):
                found.append(f"{module}:{line} imports {library} (only {', '.join(allowed)} may)")
            elif at_top and library in LAZY:
                found.append(f"{module}:{line} imports {library} at its top level (only inside functions)")
    assert found == [], "\n".join(found)


def test_the_architecture_page_shows_this_table():
    """docs/architecture.md's table of layers lists the same units in the same layers as LAYERS."""
    import re

    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \| ([^|]*) \|", text, flags=re.M)
    assert [int(n) for n, _ in rows] == list(range(len(LAYERS)))
    assert [tuple(re.findall(r"`([^`]+)`", units)) for _, units in rows] == list(LAYERS)


def test_the_architecture_page_shows_the_rooms():
    """docs/architecture.md's table of rooms lists the same rooms on the same floors as ROOMS."""
    import re

    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)` \| (\d+) \| ([^|]*) \|", text, flags=re.M)
    shown: dict[str, list] = {}
    for unit, floor, rooms in rows:
        shown.setdefault(unit, []).append((int(floor), tuple(re.findall(r"`([^`]+)`", rooms))))
    assert shown == {unit: list(enumerate(floors)) for unit, floors in ROOMS.items()}
