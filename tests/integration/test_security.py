"""Security (issue 6, point 6).

(i) Uploads are only parsed: live pickle, NumPy and Python payloads are refused as malformed
    and their side effect never happens; a static scan finds no deserialiser or evaluator
    anywhere in fedviz/, pages/ or app.py.
(ii) No path a user supplies is opened: the link's ``data=`` only names presets, and an
    upload's file name is a label; both are checked with real files that would load if
    they were opened, and with a spy on every way of opening a file.
(iii) Query-string values are validated like widget values: every key, with values out of
    its range, is reported by name and ignored; values at the edge of the range render.
(iv) The upload size limit is configured, and Streamlit reads it.
"""

from __future__ import annotations

import ast
import builtins
import io
import os
import pickle
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import fedviz.data.build as build_module
from fedviz import ui
from fedviz.algorithms import ALGORITHMS
from fedviz.data.build import DataSpec, build
from fedviz.data.settings import DATA_SETTINGS, settings_of, with_settings
from fedviz.errors import DataFormatError, ParameterError
from fedviz.runner.config import DEFAULT_DATA, LINK_KEYS, MAX_ITERATIONS, RunConfig, from_query, to_query

from conftest import DATA, ROOT, plain
from settings_values import other_value, outside, text
from test_uploads import HEART, NAME, cli_main, data_page, upload

APP = str(ROOT / "app.py")
REAL_FILE = DATA / "heart_scale"  # a path that loads if anything opens it


# ------------------------------------------------------------------------------------------ (i) parse only

class TouchOnUnpickle:
    """Unpickling this object calls ``open(path, "w")``: the file's existence proves it was unpickled."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def _pickle(marker: Path) -> bytes:
    return pickle.dumps(TouchOnUnpickle(marker), protocol=pickle.HIGHEST_PROTOCOL)


def _pickle_text(marker: Path) -> bytes:
    return pickle.dumps(TouchOnUnpickle(marker), protocol=0)  # the ASCII protocol: looks like text


def _npy(marker: Path) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.array([TouchOnUnpickle(marker)], dtype=object), allow_pickle=True)
    return buffer.getvalue()


def _expression(marker: Path) -> bytes:
    return f"__import__('pathlib').Path({str(marker)!r}).touch()\n".encode()


def _expression_label(marker: Path) -> bytes:
    """A LIBSVM row whose label is an expression that evaluates to 1 after touching the marker."""
    return f"__import__('pathlib').Path({str(marker)!r}).touch()or(1) 1:0.5\n-1 2:1\n".encode()


PAYLOADS = {  # name -> (builder, how the payload would run if something deserialised or evaluated it)
    "pickle": (_pickle, lambda b: pickle.loads(b)),
    "pickle protocol 0": (_pickle_text, lambda b: pickle.loads(b)),
    "npy with a pickled object": (_npy, lambda b: np.load(io.BytesIO(b), allow_pickle=True)),
    "Python expression": (_expression, lambda b: exec(b.decode())),
    "expression as a label": (_expression_label, lambda b: eval(b.split()[0].decode())),
}


@pytest.mark.parametrize("kind", PAYLOADS)
def test_payloads_are_live(kind, tmp_path):
    """The payloads below are real: deserialising or evaluating one does touch its marker file."""
    make, run = PAYLOADS[kind]
    marker = tmp_path / "touched"
    run(make(marker))
    assert marker.exists()


@pytest.mark.parametrize("kind", PAYLOADS)
def test_payloads_are_refused_as_malformed_and_never_run(kind, tmp_path):
    make, _ = PAYLOADS[kind]
    marker = tmp_path / "touched"
    payload = make(marker)
    # The data layer,
    with pytest.raises(DataFormatError) as info:
        build(DataSpec(source=payload, name=NAME))
    assert info.value.line == 1 and str(info.value).startswith(f"{NAME}, line 1: ")
    # the command line,
    path = tmp_path / NAME
    path.write_bytes(payload)
    code, out, err = cli_main(["inspect", str(path)])
    assert code == 2 and out == "" and err == f"fedviz: error: {info.value}\n"
    # and the Data page all refuse it with the same message.
    at = data_page()
    upload(at, payload)
    assert not at.exception
    assert [plain(e.value) for e in at.error] == [str(info.value)]
    assert not marker.exists()


# Modules whose loaders run code from the bytes they read: none of them may even be imported.
UNSAFE_MODULES = {"pickle", "_pickle", "cPickle", "marshal", "shelve", "dill", "cloudpickle", "joblib",
                  "jsonpickle"}
UNSAFE_NAMES = {"eval", "exec", "compile", "execfile"}
UNSAFE_ATTRIBUTES = {"read_pickle", "unsafe_load", "unsafe_load_all", "full_load", "full_load_all"}
LOADER_RECEIVERS = {"yaml", "pickle", "marshal", "torch", "joblib", "dill", "cloudpickle", "shelve"}


def unsafe_uses(source: str, filename: str = "<string>") -> list[str]:
    """Every place in ``source`` that could deserialise or evaluate data, as ``file:line: what``."""
    found = []

    def flag(node, what):
        found.append(f"{filename}:{node.lineno}: {what}")

    def literal(node) -> bool:
        return isinstance(node, ast.Constant)

    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in UNSAFE_MODULES:
                    flag(node, f"import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] in UNSAFE_MODULES:
                flag(node, f"from {node.module} import ...")
        elif isinstance(node, ast.Name) and node.id in UNSAFE_NAMES:
            flag(node, node.id)  # called or passed around: both evaluate code
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id == "__import__" and not (node.args and literal(node.args[0])):
                flag(node, "__import__ of a computed name")
            if isinstance(func, ast.Attribute):
                receiver = func.value.id if isinstance(func.value, ast.Name) else None
                if func.attr in UNSAFE_ATTRIBUTES:
                    flag(node, f".{func.attr}()")
                elif func.attr in ("load", "loads", "load_all") and receiver in LOADER_RECEIVERS:
                    flag(node, f"{receiver}.{func.attr}()")
                elif receiver == "os" and (func.attr in ("system", "popen") or func.attr.startswith(("exec", "spawn"))):
                    flag(node, f"os.{func.attr}()")
                elif func.attr == "import_module" and not (node.args and literal(node.args[0])):
                    flag(node, "import_module of a computed name")
            for kw in node.keywords:
                if kw.arg in ("allow_pickle", "shell") and not (literal(kw.value) and not kw.value.value):
                    flag(node, f"{kw.arg}=...")
    return found


def test_the_scanner_finds_every_unsafe_form():
    bad = '''
import pickle
from marshal import loads
import yaml, numpy as np, subprocess, os, importlib
x = eval(text)
exec(code)
run = eval
compile(src, "f", "exec")
yaml.load(text)
yaml.unsafe_load(text)
np.load(f, allow_pickle=True)
np.load(f, allow_pickle=flag)
df.read_pickle(path)
subprocess.run(cmd, shell=True)
os.system(cmd)
os.execv(a, b)
__import__(name)
importlib.import_module(name)
torch.load(f)
'''
    found = unsafe_uses(bad)
    lines = sorted({int(f.split(":")[1]) for f in found})
    assert lines == [2, 3] + list(range(5, 20)), found  # every line but the harmless imports on line 4
    good = '''
import json, re, numpy as np, subprocess, importlib, yaml
json.load(f); re.compile("x"); np.load(f); np.load(f, allow_pickle=False); yaml.safe_load(t)
subprocess.run(["ls"], shell=False); subprocess.run(["ls"], env={})
__import__("fedviz.bench", fromlist=["main"]); importlib.import_module("fedviz")
'''
    assert unsafe_uses(good) == []


def test_no_code_path_deserialises_or_evaluates():
    sources = [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py")), *sorted((ROOT / "fedviz").rglob("*.py"))]
    assert ROOT / "fedviz" / "data" / "libsvm.py" in sources and len(sources) > 40
    found = [f for path in sources for f in unsafe_uses(path.read_text(), str(path.relative_to(ROOT)))]
    assert found == []


# ------------------------------------------------------------------------------------------ (ii) no user path opened

@pytest.fixture
def opened(monkeypatch):
    """Every path opened (through open, io.open or os.open) while the test runs, resolved; and
    every source handed to the file loader."""
    seen: dict[str, list] = {"paths": [], "loader": []}
    real_open, real_os_open = builtins.open, os.open

    def remember(file):
        if isinstance(file, (str, bytes, os.PathLike)):
            seen["paths"].append(os.path.realpath(os.fsdecode(file)))

    def spy_open(file, *args, **kwargs):
        remember(file)
        return real_open(file, *args, **kwargs)

    def spy_os_open(path, *args, **kwargs):
        remember(path)
        return real_os_open(path, *args, **kwargs)

    def spy_loader(real):
        def load(source, *args, **kwargs):
            seen["loader"].append(source)
            return real(source, *args, **kwargs)
        return load

    monkeypatch.setattr(builtins, "open", spy_open)
    monkeypatch.setattr(io, "open", spy_open)
    monkeypatch.setattr(os, "open", spy_os_open)
    monkeypatch.setattr(build_module, "load_libsvm", spy_loader(build_module.load_libsvm))
    return seen


def _hostile_data_values() -> list[str]:
    real = str(REAL_FILE)
    rel = os.path.relpath(REAL_FILE)
    assert Path(rel).is_file() and REAL_FILE.is_file()  # each would load if opened
    return [real, rel, "file://" + real, "preset:" + real, "preset:../../x", "/etc/passwd",
            "google-plus-small/../../../etc/passwd", "heart_scale", "~/.bashrc", "upload"]


@pytest.mark.parametrize("value", _hostile_data_values())
def test_link_data_cannot_name_a_file(value, opened):
    config, problems = from_query({"data": value})
    assert len(problems) == 1 and problems[0].startswith("data: "), problems
    assert config == RunConfig() and config.data == DEFAULT_DATA
    assert opened == {"paths": [], "loader": []}


def test_link_data_naming_a_real_file_is_refused_on_the_page(opened):
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params["data"] = str(REAL_FILE)
    at.run()
    at.switch_page("pages/data.py")
    at.run()
    assert not at.exception
    assert any(w.value.startswith("Ignored a setting from the link: `data: ") for w in at.warning)
    assert at.session_state["config"].data == DEFAULT_DATA
    assert {m.label: m.value for m in at.metric}["features d"] != "13"  # the default preset, not heart_scale
    assert str(REAL_FILE.resolve()) not in opened["paths"]
    assert opened["loader"] == []
    # The control: the spy does see the loader open a path it is given (as the CLI does).
    build(DataSpec(source=str(REAL_FILE)))
    assert str(REAL_FILE.resolve()) in opened["paths"] and opened["loader"] == [str(REAL_FILE)]


def test_upload_names_are_never_paths(opened):
    at = data_page()
    # Bad content named after a good file: the content is what is read.
    upload(at, b"x 1:1\n", name=str(REAL_FILE))
    assert [plain(e.value) for e in at.error] == [
        f"{REAL_FILE}, line 1: the label is not a number (token 'x')"]
    # Good content named after a file that does not exist: it loads.
    upload(at, HEART, name="/no/such/dir/../../etc/passwd")
    assert not at.exception and not at.error
    assert {m.label: m.value for m in at.metric}["features d"] == "13"
    assert opened["loader"] and all(isinstance(source, bytes) for source in opened["loader"])
    assert str(REAL_FILE.resolve()) not in opened["paths"] and "/etc/passwd" not in opened["paths"]


# ------------------------------------------------------------------------------------------ (iii) query values

#: Out-of-range values for every key of the link but the hyperparameters (generated below).
BAD_VALUES = {
    "data": ["nope", "google-plus-small?nodes=0", "google-plus-small?label_noise=2", "upload", ""],
    "partition": ["nope", "dirichlet:alpha=0", "shards:classes_per_node=0", "iid:nodes=3"],
    "nodes": ["0", "1000001", "-3", "2.5", "nan", "inf", "abc", ""],
    "data_seed": ["-1", "4294967296", "0.5", "x"],
    "loss": ["hinge", "", "../logistic"],
    "lam": ["0", "-1", "nan", "inf", "1e400", "abc"],
    "algorithms": ["nope", ",", "gd,nope"],
    "iterations": ["0", str(MAX_ITERATIONS + 1), "-5", "1.5", "abc", "1e400"],
    "seed": ["-1", "4294967296", "0.5"],
    "test_fraction": ["1", "-0.1", "nan", "abc", ""],
    "split": ["shuffled", "", "RANDOM"],
    "unseen": ["1", "1.5", "-0.2", "nan", "abc", ""],
    "deal_test": ["2", "maybe", ""],
    "tune": ["2", "maybe", ""],
    "sweep": ["2", "maybe", ""],
}
# Every data setting's out-of-range values from its Param as well (fedviz.data.settings), so that a setting the
# table gains is covered here without an edit.
for _name, _p in DATA_SETTINGS.items():
    BAD_VALUES[_name] = list(dict.fromkeys(BAD_VALUES.get(_name, []) + [text(_p, v) for v in outside(_p)]))
#: A config that differs from the default in every field the link carries (a data setting the table gains: at a
#: value of its range other than its default).
_DATA = DataSpec(source="preset:identical-nodes", partition="iid", nodes=5, seed=3, test_fraction=0.3,
                 split="chronological", unseen=0.2, deal_test=True)
FULL = RunConfig(data=with_settings(_DATA, {name: other_value(p) for name, p in DATA_SETTINGS.items()
                                            if settings_of(_DATA)[name] == p.default}),
                 loss="squared", lam=0.1, algorithms=(("gd", (("stepsize", 0.5),)),), iterations=5, seed=2,
                 tune=True, sweep=True)


def test_every_link_key_is_covered():
    query = to_query(FULL)
    assert from_query(query) == (FULL, [])  # every key is read back
    assert set(query) - {"gd.stepsize"} == set(BAD_VALUES) == set(LINK_KEYS)


@pytest.mark.parametrize("key, says", [
    ("iteratons", "not a setting a link can carry (data, partition"),  # a typo must not silently mean 30
    ("Seed", "not a setting a link can carry"),
    ("gd.stepsiz", "gd has no hyperparameter 'stepsiz' (it has: stepsize"),
    ("gd.", "gd has no hyperparameter ''"),
    ("dane.mu", "not a hyperparameter of a chosen algorithm (gd)"),
])
def test_unknown_link_key_is_reported_and_the_rest_kept(key, says):
    config, problems = from_query({"algorithms": "gd", "iterations": "7", key: "50"})
    assert len(problems) == 1 and problems[0].startswith(f"{key}: {says}"), problems
    assert config == RunConfig(algorithms=(("gd", ()),), iterations=7)


@pytest.mark.parametrize("key, value", [(k, v) for k, values in BAD_VALUES.items() for v in values])
def test_bad_link_value_is_reported_by_key_and_ignored(key, value):
    config, problems = from_query({key: value})
    assert len(problems) == 1 and problems[0].startswith(f"{key}: "), problems
    assert config == RunConfig()
    # The rest of the link is kept.
    config, problems = from_query({key: value, "loss": "squared"} if key != "loss" else {key: value, "seed": "7"})
    assert len(problems) == 1
    assert (config.loss == "squared") if key != "loss" else (config.seed == 7)


def _bad_hyper_values(p) -> list[tuple[str, tuple]]:
    """Values outside a hyperparameter's range, from its own metadata, each with its marks."""
    if p.kind == "bool":
        return [("maybe", ()), ("2", ())]
    if p.kind == "choice":
        return [("nope", ()), ("", ())]
    out = ["abc", "nan", ""]
    if p.kind == "int":
        out += ["1.5"] + ([str(int(p.low) - 1)] if p.low is not None else []) + \
            ([str(int(p.high) + 1)] if p.high is not None else [])
        # 'inf' and '1e400' once crashed the page: int(float('inf')) raises OverflowError.
        return [(v, ()) for v in out + ["inf", "1e400"]]
    out.append("inf")
    if p.low is not None:
        out.append(repr(float(p.low)) if p.low_open else repr(float(p.low) - 1))
    if p.high is not None:
        out.append(repr(float(p.high)) if p.high_open else repr(float(p.high) + 1))
    return [(v, ()) for v in out]


HYPER_CASES = [pytest.param(name, p.name, value, marks=marks, id=f"{name}.{p.name}={value}")
               for name, cls in ALGORITHMS.items() for p in cls.params for value, marks in _bad_hyper_values(p)]


@pytest.mark.parametrize("name, param, value", HYPER_CASES)
def test_bad_link_hyperparameter_is_reported_by_key_and_ignored(name, param, value):
    key = f"{name}.{param}"
    loss = ALGORITHMS[name].losses[0]  # a loss the algorithm supports (the primal method: squared only)
    config, problems = from_query({"algorithms": name, key: value, "loss": loss})
    assert len(problems) == 1 and problems[0].startswith(f"{key}: parameter {key}="), problems
    assert config == RunConfig(algorithms=((name, ()),), loss=loss)


@pytest.mark.parametrize("name, param, value", HYPER_CASES)
def test_a_bad_hyperparameter_is_told_the_range_its_help_shows(name, param, value):
    """The range in the error and in the help (``python -m fedviz algorithms``, the widgets' tooltips) are one
    text: 'abc' and -1 for a stepsize were told 'float in (0, inf)' and 'number > 0' before."""
    p = next(p for p in ALGORITHMS[name].params if p.name == param)
    with pytest.raises(ParameterError) as err:
        p.parse(value, name)
    assert err.value.allowed == p.range_text()


def test_bad_link_values_are_warnings_on_the_page():
    """All at once, through the real page: one warning per bad key, and the defaults in force."""
    query = {"data": "/etc/passwd", "partition": "nope", "nodes": "0", "data_seed": "-1", "loss": "hinge",
             "lam": "-1", "algorithms": "gd,nope", "iterations": "0", "seed": "-1", "fsvrg.stepsize": "-1",
             "gd.stepsize": "abc", "dane.mu": "1", "frobnicate": "1"}
    at = AppTest.from_file(APP, default_timeout=180)
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    at.switch_page("pages/run.py")
    at.run()
    assert not at.exception
    warnings = [w.value for w in at.warning]
    named = {key for key in query for w in warnings if w.startswith(f"Ignored a setting from the link: `{key}: ")}
    assert named == set(query), warnings
    assert at.session_state["config"] == RunConfig()
    assert dict(at.query_params) == {}  # the address bar now shows the link of the defaults in force


def test_a_link_with_a_typo_is_rewritten_to_the_settings_in_force():
    at = AppTest.from_file(APP, default_timeout=180)
    for key, value in {"algorithms": "gd", "iterations": "50", "iteratons": "7", "gd.stepsiz": "3"}.items():
        at.query_params[key] = value
    at.run()
    at.switch_page("pages/run.py")
    at.run()
    assert len(at.warning) == 2 and not at.exception
    assert dict(at.query_params) == {"algorithms": "gd", "iterations": "50"}


def test_link_values_at_the_edge_of_their_range_render():
    """The largest value the link accepts is one the page's widgets accept too (no widget error)."""
    query = {"data": "identical-nodes", "partition": "iid", "nodes": "1000000", "data_seed": str(2**32 - 1),
             "iterations": str(MAX_ITERATIONS), "seed": str(2**32 - 1), "lam": "1e300"}
    for page in ("pages/data.py", "pages/run.py"):
        at = AppTest.from_file(APP, default_timeout=180)
        for key, value in query.items():
            at.query_params[key] = value
        at.run()
        at.switch_page(page)
        at.run()
        assert not at.exception, (page, at.exception)
        # The one warning due: a million nodes over 4,000 rows leave nodes of one row (the data's own
        # small-node sentence), which is the data speaking, not a widget refusing the value.
        assert not at.error, (page, [plain(e.value) for e in at.error])
        assert [w.value for w in at.warning if "nodes hold fewer than" not in w.value] == [], page
        config = at.session_state["config"]
        assert (config.data.nodes, config.data.seed, config.iterations, config.seed, config.lam) == \
            (10**6, 2**32 - 1, MAX_ITERATIONS, 2**32 - 1, 1e300), page


# ------------------------------------------------------------------------------------------ (iv) the upload limit

def test_upload_limit_is_configured_and_streamlit_reads_it():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] == ui.MAX_UPLOAD_MB
    shown = subprocess.run([sys.executable, "-m", "streamlit", "config", "show"], cwd=ROOT, capture_output=True,
                           text=True, timeout=120).stdout
    # Streamlit says where each value it uses comes from: this one from the project's file.
    assert re.search(r"^# The value below was set in \S*/\.streamlit/config\.toml\n"
                     rf"maxUploadSize = {ui.MAX_UPLOAD_MB}$", shown, re.MULTILINE), shown
    # Uploads need the session's XSRF token: the protection is on (Streamlit's default, not overridden).
    assert re.search(r"^(# )?enableXsrfProtection = true$", shown, re.MULTILINE)
    assert not re.search(r"^enableXsrfProtection = false$", shown, re.MULTILINE)


def test_a_link_asking_for_a_huge_data_set_is_a_sentence_not_gigabytes(monkeypatch):
    """Issue 21: ``?data=google-plus-small%3Fnodes%3D200000`` was built in the page's thread (still building
    after 120 s at 1.9 GB).  Its size is estimated from the node sizes and refused before a row is drawn."""
    from fedviz.data import build as build_mod

    monkeypatch.setattr(build_mod, "make_preset", lambda *a, **k: pytest.fail("built despite the budget"))
    for page in ("pages/data.py", "pages/run.py"):
        at = AppTest.from_file(APP, default_timeout=180)
        at.query_params["data"] = "google-plus-small?nodes=200000"
        at.run()
        at.switch_page(page)
        at.run()
        assert not at.exception, page
        assert any("over this server's budget" in plain(e.value) and "FEDVIZ_MAX_ENTRIES" in plain(e.value)
                   for e in at.error), (page, [plain(e.value) for e in at.error])
