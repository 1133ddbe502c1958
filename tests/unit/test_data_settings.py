"""The data settings' one table (fedviz.data.settings), walked: every setting is the DataSpec field of its name,
and the link, the command line and an experiment file take it under that name, in the same range, with the
same words when it is out of range.  The values in and out of range are read off each Param (settings_values),
so a setting added to the table is walked here without a line of test; the Data page's inputs are walked in
tests/integration/test_data_settings_app.py."""

import dataclasses
import math

import numpy as np
import pytest

from fedviz.cli import build_parser, data_spec_from_args, main, setting_flag
from fedviz.data.build import DataSpec, build
from fedviz.data.settings import DATA_SETTINGS, FIRST_SETTINGS, in_identity, settings_of, spec_field, with_settings
from fedviz.data.unseen import unseen_count
from fedviz.errors import ParameterError
from fedviz.experiments.spec import PLAIN_KEYS, Axis, from_mapping
from fedviz.params import Param
from fedviz.runner.config import LINK_KEYS, RunConfig, from_query, to_query

from conftest import DATA
from settings_values import inside, other_value, outside, text

BASE = DataSpec(source="preset:identical-nodes")
WALK_IN = [(name, v) for name, p in DATA_SETTINGS.items() for v in inside(p)]
WALK_OUT = [(name, v) for name, p in DATA_SETTINGS.items() for v in outside(p)]
IDS_IN = [f"{n}={v!r}" for n, v in WALK_IN]
IDS_OUT = [f"{n}={v!r}" for n, v in WALK_OUT]


def _same(a, b) -> bool:
    return a == b and type(a) is type(b) or (isinstance(a, float) and isinstance(b, float) and a == b)


# -- the table and DataSpec ------------------------------------------------------------------------------
def test_every_setting_is_the_dataspec_field_of_its_name_with_the_same_default():
    fields = {f.name: f.default for f in dataclasses.fields(DataSpec)}
    for name, p in DATA_SETTINGS.items():
        assert isinstance(p, Param) and p.help and p.shown_label
        assert spec_field(name) in fields, name
        assert fields[spec_field(name)] == p.default, name
    assert spec_field("data_seed") == "seed"  # the one field named otherwise (DataSpec.seed, before the table)


def test_with_settings_and_settings_of_are_inverse():
    values = {name: other_value(p) for name, p in DATA_SETTINGS.items()}
    spec = with_settings(BASE, values)
    assert settings_of(spec) == values
    assert spec.seed == values["data_seed"] and spec.source == BASE.source
    with pytest.raises(KeyError, match="not data settings: seed"):
        with_settings(BASE, {"seed": 1})


def test_a_stored_identity_holds_a_later_setting_only_when_set():
    """The rule of before the table, ``k not in ("unseen", "deal_test") or v``, for every field; and every new
    setting (outside FIRST_SETTINGS) follows unseen's, so adding one leaves stored hashes as they were."""
    assert set(FIRST_SETTINGS) <= set(DATA_SETTINGS) and {"unseen", "deal_test"}.isdisjoint(FIRST_SETTINGS)
    spec = with_settings(BASE, {name: other_value(p) for name, p in DATA_SETTINGS.items()})
    for field in (f.name for f in dataclasses.fields(DataSpec)):
        for value in (getattr(BASE, field), getattr(spec, field)):
            old = field not in ("unseen", "deal_test") or bool(value)
            assert in_identity(field, value) is old, (field, value)


# -- the ranges' reasons, against arithmetic -------------------------------------------------------------
def test_the_unseen_range_is_below_one_and_the_bound_for_k_is_checked_where_k_is_known():
    """u < 1 is the bound for every K; m = ⌊uK + ½⌋ < K iff u < 1 − 1/(2K) is K's, checked with K.  The link's
    former cap 0.95 was neither: at K = 9 it holds out all nine nodes, at K = 1,000 0.97 leaves 30."""
    assert DATA_SETTINGS["unseen"].range_text() == "number in [0, 1)"
    assert unseen_count(1000, 0.97) == 970  # ⌊970 + ½⌋
    with pytest.raises(ParameterError, match=r"\[0, 0\.9444\) with 9 nodes"):  # 1 − 1/18 < 0.95
        unseen_count(9, 0.95)
    for K in (1, 2, 10, 1000):
        top = math.nextafter(1 - 1 / (2 * K), 0)  # the largest share that leaves a node
        assert unseen_count(K, top) == K - 1 if K > 1 else unseen_count(K, top) == 0


def test_a_test_fraction_below_one_leaves_every_node_a_training_row():
    """⌊f·m_k⌋ < m_k for f < 1: at the largest float below 1 every node of a file keeps one training row."""
    f = math.nextafter(1.0, 0.0)
    spec = DataSpec(str(DATA / "heart_scale"), nodes=10, split="random")
    sizes = np.asarray(build(dataclasses.replace(spec, test_fraction=0.0)).node_sizes)  # m_k
    ds = build(dataclasses.replace(spec, test_fraction=f))
    assert np.array_equal(ds.node_sizes, sizes - np.floor(f * sizes).astype(int)) and ds.node_sizes.min() == 1
    with pytest.raises(ParameterError, match=r"test_fraction=1\.0 .*\[0, 1\)"):
        build(dataclasses.replace(spec, test_fraction=1.0))


# -- the link ------------------------------------------------------------------------------------------------
def test_the_link_keys_are_the_table_in_its_order():
    assert LINK_KEYS[1:1 + len(DATA_SETTINGS)] == tuple(DATA_SETTINGS)


@pytest.mark.parametrize("name, value", WALK_IN, ids=IDS_IN)
def test_the_link_carries_every_value_in_range(name, value):
    config = RunConfig(data=with_settings(BASE, {name: value}))
    query = to_query(config)
    assert (name in query) == (value != DATA_SETTINGS[name].default)
    back, problems = from_query(query)
    assert problems == [] and back == config
    assert _same(settings_of(back.data)[name], value) or value is None


@pytest.mark.parametrize("name, value", WALK_OUT, ids=IDS_OUT)
def test_the_link_refuses_every_value_out_of_range_naming_it_and_the_range(name, value):
    p = DATA_SETTINGS[name]
    config, problems = from_query({name: text(p, value), "iterations": "7"})
    assert len(problems) == 1 and problems[0].startswith(f"{name}: "), problems
    if p.kind != "spec":  # a spec's reader names what in it is wrong (the partitioner, or its option)
        assert f"parameter {name}=" in problems[0] and problems[0].endswith(f"allowed {p.range_text()}")
    assert config == RunConfig(iterations=7)  # dropped, the rest kept


# -- the command line ------------------------------------------------------------------------------------
def _args(*argv):
    return build_parser().parse_args(["inspect", "preset:identical-nodes", *map(str, argv)])


@pytest.mark.parametrize("name, value", WALK_IN, ids=IDS_IN)
def test_the_command_line_takes_every_value_in_range(name, value):
    p, flag = DATA_SETTINGS[name], setting_flag(name)
    argv = [flag if value else "--no-" + flag[2:]] if p.kind == "bool" else [flag, text(p, value)]
    got = settings_of(data_spec_from_args(_args(*argv)))[name]
    assert _same(got, value), (got, value)


def test_the_command_line_without_a_flag_is_the_table_default_and_the_data_seed_follows_seed():
    spec = data_spec_from_args(_args("--seed", "5"))
    assert {k: v for k, v in settings_of(spec).items() if k != "data_seed"} == \
        {name: p.default for name, p in DATA_SETTINGS.items() if name != "data_seed"}
    assert spec.seed == 5 and data_spec_from_args(_args("--seed", "5", "--data-seed", "2")).seed == 2


@pytest.mark.parametrize("name, value", [(n, v) for n, v in WALK_OUT if DATA_SETTINGS[n].kind != "bool"],
                         ids=[i for (n, _), i in zip(WALK_OUT, IDS_OUT) if DATA_SETTINGS[n].kind != "bool"])
def test_the_command_line_refuses_every_value_out_of_range_with_exit_2_naming_it_and_the_range(name, value, capsys):
    """(A boolean is a flag, --deal-test or --no-deal-test: there is no value to be out of range.)"""
    p = DATA_SETTINGS[name]
    assert main(["inspect", "preset:identical-nodes", setting_flag(name), text(p, value)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"argument {setting_flag(name)}: parameter " in err, err
    if p.kind != "spec":
        assert f"parameter {name}=" in err and err.endswith(f"allowed {p.range_text()}"), err


def test_the_command_line_help_is_the_tables(capsys):
    with pytest.raises(SystemExit):
        main(["inspect", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for name, p in DATA_SETTINGS.items():
        assert setting_flag(name) in shown and " ".join(p.help.split()) in shown, name
        if p.kind != "bool":
            assert f"Allowed: {p.range_text()}." in shown, name


# -- an experiment file ------------------------------------------------------------------------------------
def _experiment(**keys):
    return from_mapping({"name": "walk", "data": "preset:identical-nodes", "algorithm": [{"name": "gd"}], **keys})


@pytest.mark.parametrize("name, value", WALK_IN, ids=IDS_IN)
def test_an_experiment_file_takes_every_value_in_range_as_written(name, value):
    if value is None:
        return  # TOML has no null: a key left out is the default
    exp = _experiment(**{name: value})
    got = exp.data_seed if name == "data_seed" else settings_of(exp.data)[name]
    assert _same(got, value), (got, value)
    if name != "data_seed":  # the seeds own the data seed; every other setting may be varied on an axis
        assert name in PLAIN_KEYS
        Axis.of(name, [value])


@pytest.mark.parametrize("name, value", WALK_OUT, ids=IDS_OUT)
def test_an_experiment_file_refuses_every_value_out_of_range_naming_its_key_and_the_range(name, value):
    p = DATA_SETTINGS[name]
    with pytest.raises(ParameterError) as err:
        _experiment(**{name: value})
    assert err.value.name.startswith(f"experiment.{name}")
    if p.kind != "spec":
        assert err.value.name == f"experiment.{name}" and err.value.allowed == p.range_text()
    if name != "data_seed":
        with pytest.raises(ParameterError) as err:
            Axis.of(name, [value])
        assert err.value.name.startswith(f"axis {name!r}.values[0].{name}")
        if p.kind != "spec":
            assert err.value.allowed == p.range_text()


def test_the_data_seed_is_no_axis_key():
    assert "data_seed" not in PLAIN_KEYS
    with pytest.raises(ParameterError, match="one of partition, nodes"):
        Axis.of("data_seed", [1])
