"""The one parameter vocabulary (fedviz.params): every place that reads a value takes the same words."""

import dataclasses

import pytest

from fedviz.algorithms import ALGORITHMS, get_algorithm
from fedviz.cli import parse_settings
from fedviz.data.partition import PARTITION_SPEC, PARTITIONERS, ParamSpec, make_partitioner, parse_spec
from fedviz.data.presets import PRESET_SPEC, parse_preset_spec, preset_config
from fedviz.data.synthetic import CONFIG_PARAMS
from fedviz.errors import ParameterError
from fedviz.params import FALSE_WORDS, TRUE_WORDS, Param, SpecGrammar, param_table, parse_options
from fedviz.runner.config import LINK_PARAMS, from_query

EVERY_PARAM = ([(name, p) for name, cls in ALGORITHMS.items() for p in cls.params]
               + [(name, p) for name, cls in PARTITIONERS.items() for p in cls.params.values()]
               + [(cls.__name__, p) for cls, table in CONFIG_PARAMS.items() for p in table.values()]
               + [("link", p) for p in LINK_PARAMS.values()])


def test_one_record_for_every_owner():
    assert ParamSpec is Param
    assert all(isinstance(p, Param) for _, p in EVERY_PARAM)
    # Kinds written as types (the partitioners' style) are stored as the names the algorithms use.
    assert Param("k", int, 1, "h").kind == "int" and Param("b", bool, True, "h").kind == "bool"
    with pytest.raises(TypeError):
        Param("x", "complex", 0, "h")


@pytest.mark.parametrize("owner, p", EVERY_PARAM, ids=[f"{o}.{p.name}" for o, p in EVERY_PARAM])
def test_every_default_is_valid_and_survives_text(owner, p):
    assert p.help and p.range_text()
    assert p.validate(p.default, owner) == p.default
    assert p.parse(p.format(p.default), owner) == p.default


def test_generator_params_are_the_config_fields_with_their_defaults():
    for cls, table in CONFIG_PARAMS.items():
        fields = dataclasses.fields(cls)
        assert [f.name for f in fields] == list(table)
        assert all(table[f.name].default == f.default for f in fields)


# -- the same words everywhere ------------------------------------------------------------------------
@pytest.mark.parametrize("word", TRUE_WORDS + FALSE_WORDS + tuple(w.upper() for w in TRUE_WORDS))
def test_boolean_words_are_the_same_in_every_place(word):
    want = word.lower() in TRUE_WORDS
    # a partition spec, a preset spec, a link, the command line's --set
    assert make_partitioner(f"dirichlet:self_balancing={word}", n_nodes=3).self_balancing is want
    assert parse_preset_spec(f"iid?bias_feature={word}")[1] == {"bias_feature": want}
    config, problems = from_query({"algorithms": "fsvrg", "fsvrg.local_stepsize": word, "tune": word})
    assert problems == [] and config.hyper("fsvrg").get("local_stepsize", True) is want and config.tune is want
    assert parse_settings([f"fsvrg.local_stepsize={word}"], ["fsvrg"])["fsvrg"]["local_stepsize"] is want


def test_link_with_local_stepsize_off_is_accepted():
    """The case of the issue: refused by the link while the partition spec took the same word."""
    config, problems = from_query({"algorithms": "fsvrg", "fsvrg.local_stepsize": "off"})
    assert problems == [] and config.hyper("fsvrg") == {"local_stepsize": False}


@pytest.mark.parametrize("text, value", [("10", 10), ("1e1", 10), ("10.0", 10), (" 7 ", 7)])
def test_integer_words(text, value):
    for parsed in (make_partitioner(f"dirichlet:min_size={text}", n_nodes=2).min_size,
                   parse_preset_spec(f"iid?n_words={text}")[1]["n_words"],
                   from_query({"iterations": text})[0].iterations,
                   parse_settings([f"dane.local_passes={text}"], ["dane"])["dane"]["local_passes"]):
        assert parsed == value and type(parsed) is int


@pytest.mark.parametrize("text", ["2.5", "abc", "", "inf", "nan", "1e400"])
def test_a_bad_integer_is_told_the_same_range_everywhere(text):
    p = get_algorithm("dane").param("local_passes")
    with pytest.raises(ParameterError) as err:
        p.parse(text, "dane")
    assert err.value.name == "dane.local_passes" and err.value.allowed == p.range_text()
    with pytest.raises(ParameterError) as err:
        make_partitioner(f"topic:max_iter={text}", n_nodes=2)
    assert err.value.allowed == PARTITIONERS["topic"].params["max_iter"].range_text()


def test_none_is_the_word_for_a_derived_or_unset_value():
    assert get_algorithm("gd").param("stepsize").parse("none", "gd") is None
    assert parse_preset_spec("iid?train_size_mean=null")[1] == {"train_size_mean": None}
    with pytest.raises(ParameterError):  # only where None is a value
        get_algorithm("dane").param("eta").parse("none", "dane")


def test_booleans_from_python_are_bools_only():
    """The chosen behaviour where the records differed: from Python, a boolean parameter takes True or False
    (1 and "yes" are text, read by parse); partitioners and generators refused them before, algorithms now do too."""
    p = Param("flag", "bool", False, "h")
    assert p.validate(True, "x") is True and p.parse("yes", "x") is True
    for value in (1, 0, "yes", "true", None):
        with pytest.raises(ParameterError, match="true or false"):
            p.validate(value, "x")
    with pytest.raises(ParameterError, match="fsvrg.local_stepsize"):
        get_algorithm("fsvrg").validate({"local_stepsize": 1})


# -- the grammar -------------------------------------------------------------------------------------
@pytest.mark.parametrize("grammar, spec, want", [
    (PARTITION_SPEC, " dirichlet : alpha = 0.5 , min_size=10, ", ("dirichlet", {"alpha": "0.5", "min_size": "10"})),
    (PARTITION_SPEC, "iid:", ("iid", {})),
    (PRESET_SPEC, "preset:iid?nodes=3&&seed=2", ("iid", {"nodes": "3", "seed": "2"})),
])
def test_grammar_splits_and_joins(grammar, spec, want):
    assert grammar.split(spec) == want
    assert grammar.split(grammar.join(*want)) == want


@pytest.mark.parametrize("grammar, spec, match", [
    (PARTITION_SPEC, "", "non-empty"), (PRESET_SPEC, "  ", "non-empty"),
    (PARTITION_SPEC, "dirichlet:alpha", "key=value pairs joined by ','"),
    (PRESET_SPEC, "iid?=3", "key=value pairs joined by '&'"),
    (PARTITION_SPEC, "dirichlet:alpha=1,alpha=2", "given once"), (PRESET_SPEC, "iid?seed=1&seed=2", "given once"),
])
def test_grammar_errors_are_worded_once(grammar, spec, match):
    with pytest.raises(ParameterError, match=match):
        grammar.split(spec)


def test_parse_spec_is_the_partition_grammar():
    assert parse_spec("shards:classes_per_node=3") == PARTITION_SPEC.split("shards:classes_per_node=3")
    assert isinstance(PARTITION_SPEC, SpecGrammar) and isinstance(PRESET_SPEC, SpecGrammar)


def test_parse_options_lists_the_known_keys():
    table = param_table(Param("a", "int", 1, "h", low=0), Param("b", "float", 0.5, "h"))
    assert parse_options(table, {"a": "3", "b": "1e-3"}, "thing") == {"a": 3, "b": 0.001}
    with pytest.raises(ParameterError) as err:
        parse_options(table, {"c": "1"}, "thing")
    assert err.value.name == "thing key" and err.value.allowed == "one of a, b"
    with pytest.raises(ParameterError, match="takes no parameters"):
        parse_options(param_table(), {"c": "1"}, "thing")


def test_preset_text_values_use_the_generators_params():
    assert preset_config("iid", bias_feature="off").bias_feature is False
    with pytest.raises(ParameterError, match=r"iid\.topics=.*integer in \[1, 10000\]"):
        preset_config("iid", topics="2.5")
