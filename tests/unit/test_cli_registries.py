"""The command line's choices and lists against the registries that define them (issue 29, each
concept defined once): every entry of each registry is named in its command's ``--help`` and accepted
by the parser, and a name that is in no registry is refused.  The registries are walked, so a new loss,
split, built-in experiment, scale or protocol is checked here without an edit; the oracles are the
registries themselves and what they build (a loss object, a built-in's grid), read independently of
the parser.
"""

import json
import math
import re

import numpy as np
import pytest

from fedviz import bench, cli
from fedviz.bench import figure2
from fedviz.algorithms import ALGORITHMS
from fedviz.data.split import SPLITS
from fedviz.experiments import builtin
from fedviz.personal.report import DEFAULT_LAMBDAS
from fedviz.problems.losses import LOSSES, MULTICLASS_LOSSES, loss_choices, make_loss

#: The subcommands that take the data options (``cli.add_data_arguments``), each with what it needs besides.
DATA_COMMANDS = {"inspect": [], "run": ["--algorithms", "gd"], "export": ["--out", "x.svm"], "personalise": []}
NOT_A_NAME = "no-such-entry"


@pytest.fixture(autouse=True)
def _wide_help(monkeypatch):
    """argparse wraps help at the terminal's width, and may break a name at its hyphen; one long line
    per option keeps every name whole."""
    monkeypatch.setenv("COLUMNS", "10000")


def _subparser(command):
    parser = cli.build_parser()
    return next(a for a in parser._actions if a.dest == "command").choices[command]


def _help(command) -> str:
    return _subparser(command).format_help()


def _option_help(command, flag) -> str:
    """What ``--help`` shows for ``flag``: its line (with the choices) and the help text argparse puts
    on the lines below it, joined."""
    lines = _help(command).splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(flag + " "))
    block = [lines[start]]
    for line in lines[start + 1:]:
        if not line.startswith(" " * 3) or line.strip().startswith("-"):
            break
        block.append(line)
    return " ".join(" ".join(block).split())


def _parse(*argv):
    return cli.build_parser().parse_args(list(argv))


def _refused(*argv) -> str:
    with pytest.raises(cli._UsageError) as e:
        _parse(*argv)
    return str(e.value)


def test_the_registries_are_not_empty():
    """Each walk below would pass vacuously over an empty registry."""
    assert LOSSES and MULTICLASS_LOSSES and SPLITS and builtin.BUILTINS and builtin.SCALES
    assert figure2.PROTOCOLS and figure2.LINES and bench.SCALES and ALGORITHMS


# ----------------------------------------------------------------------------------- losses
@pytest.mark.parametrize("command", DATA_COMMANDS)
def test_every_loss_of_the_registry_is_offered_and_taken(command):
    names = [*LOSSES, *MULTICLASS_LOSSES]
    line = _option_help(command, "--loss")
    for name in names:
        assert make_loss(name).name == name                     # the registry's own entry
        assert re.search(rf"[{{,]{re.escape(name)}[,}}]", line), (command, name, line)
        args = _parse(command, "data.svm", *DATA_COMMANDS[command], "--loss", name)
        assert args.loss == name
    assert "must be one of" not in line
    assert "invalid choice" in _refused(command, "data.svm", *DATA_COMMANDS[command], "--loss", NOT_A_NAME)


def test_the_loss_help_names_the_defaults_the_data_get():
    """The sentence is the data's default (cli.loss_from_args → loss_choices), not a copy of it."""
    line = _option_help("run", "--loss")
    multi, binary = loss_choices(True)[0], loss_choices(False)[0]
    assert f"default: {multi} for a file of more than two classes" in line
    assert f"else {binary};" in line
    for name in MULTICLASS_LOSSES:
        assert name in line.split(";")[-1]                      # "<multiclass losses> takes such files only"


def test_the_algorithms_json_lists_each_algorithms_losses_from_the_registry(capsys):
    assert cli.main(["algorithms", "--json"]) == 0
    listed = {row["name"]: row["losses"] for row in json.loads(capsys.readouterr().out)}
    assert set(listed) == set(ALGORITHMS)
    for name, cls in ALGORITHMS.items():
        takes_multiclass = cls.softmax_refusal() is None
        assert listed[name] == list(cls.losses) + (list(MULTICLASS_LOSSES) if takes_multiclass else [])
        assert set(listed[name]) <= set(LOSSES) | set(MULTICLASS_LOSSES)


# ----------------------------------------------------------------------------------- splits
@pytest.mark.parametrize("split", SPLITS)
def test_every_split_method_is_offered_and_taken(split):
    assert split in _option_help("inspect", "--split")
    assert _parse("inspect", "data.svm", "--split", split).split == split


def test_a_split_method_outside_the_registry_is_refused():
    assert "--split" in _refused("inspect", "data.svm", "--split", NOT_A_NAME)


# ------------------------------------------------------------------------ built-in experiments
@pytest.mark.parametrize("name", builtin.BUILTINS)
def test_every_builtin_is_named_in_the_help_and_resolves_at_every_scale(name, tmp_path):
    from fedviz.cli.experiment import resolve
    from fedviz.runner.history.store import RunStore

    target_help = next(a.help for a in _subparser("experiment")._actions if a.dest == "target")
    assert name in target_help
    store = RunStore(tmp_path / "history.sqlite")
    try:
        for scale in builtin.SCALES:
            args = _parse("experiment", name, "--scale", scale)
            assert (args.target, args.scale) == (name, scale)
            got = resolve(args.target, store, args.scale)
            assert got.content_hash == builtin.BUILTINS[name].experiment(scale).content_hash
    finally:
        store.close()


def test_the_help_lists_every_builtin_and_only_those():
    target_help = next(a.help for a in _subparser("experiment")._actions if a.dest == "target")
    listed = re.search(r"a built-in \(([^)]*)\)", target_help).group(1).split(", ")
    assert listed == list(builtin.BUILTINS)


def test_the_experiment_scales_are_the_builtins_and_another_is_refused():
    line = _option_help("experiment", "--scale")
    assert all(scale in line for scale in builtin.SCALES)
    assert _parse("experiment", "x").scale == builtin.SCALES[0]
    assert "invalid choice" in _refused("experiment", "x", "--scale", NOT_A_NAME)


# -------------------------------------------------------------------------- figure2 and bench
def test_figure2_offers_its_protocols_and_names_its_lines():
    line = _option_help("figure2", "--protocol")
    for protocol in figure2.PROTOCOLS:
        assert protocol in line and _parse("figure2", "--protocol", protocol).protocol == protocol
    assert "invalid choice" in _refused("figure2", "--protocol", NOT_A_NAME)
    grid = figure2.PAPER_GRID
    assert list(grid) == list(range(grid[0], grid[-1] + 1))   # "k = a..b" says every k between
    assert f"k = {grid[0]}..{grid[-1]}," in line
    parser = cli.build_parser()
    command_help = next(a for a in parser._actions if a.dest == "command")._choices_actions
    text = next(a.help for a in command_help if a.dest == "figure2")
    assert all(label in text for label, _, _ in figure2.LINES)


def test_bench_offers_its_scales_with_their_node_counts():
    line = _option_help("bench", "--scale")
    for scale, nodes in bench.SCALES.items():
        assert f"{scale} K = {nodes:,}" in line and _parse("bench", "--scale", scale).scale == scale
    assert "invalid choice" in _refused("bench", "--scale", NOT_A_NAME)


def test_bench_help_gives_the_rows_per_node_of_the_preset():
    """'about 217 training rows each' is the google-plus preset's n/K, whatever K (Section 4.1's data)."""
    from fedviz.data.presets import make_preset

    ds = make_preset("google-plus", nodes=bench.SCALES["small"])
    assert round(ds.n / ds.n_nodes) == 217 and "about 217 training rows each" in _option_help("bench", "--scale")


# ------------------------------------------------------------------------------- personalise
def test_the_lambdas_help_describes_the_default_grid():
    line = _option_help("personalise", "--lambdas")
    inner = np.array([x for x in DEFAULT_LAMBDAS if 0.0 < x < math.inf])
    assert (0.0 in DEFAULT_LAMBDAS) and (math.inf in DEFAULT_LAMBDAS)
    assert f"default: 0, {inner.size} values from {inner.min():g} to {inner.max():g}" in line
    # "evenly spaced on a log scale": the grid's values are rounded to 3 significant digits, so each
    # log10 step is the same to within twice that rounding, log10(1 + 5e-3) ≈ 2.2e-3.
    steps = np.diff(np.log10(inner))
    assert "evenly spaced on a log scale, and inf" in line
    assert np.ptp(steps) <= 2 * math.log10(1 + 5e-3)


# ------------------------------------------------------------------------------- the commands
def test_the_module_docstring_names_every_command():
    parser = cli.build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    first = cli.__doc__.splitlines()[0]
    assert set(re.search(r"fedviz ([\w|-]+)``", first).group(1).split("|")) == set(commands)
