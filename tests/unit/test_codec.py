"""The history's JSON codec (fedviz.runner.codec): strict JSON out, exact floats back, NaN and ±inf in
protobuf's convention, numpy values as plain numbers.  The expectations are written out by hand or
come from the json module and float's own representation, not from the codec."""

import dataclasses
import json
import math
import struct

import numpy as np
import pytest

from fedviz.data.build import DataSpec
from fedviz.runner.codec import decode_float, encode, from_json, to_json
from fedviz.runner.config import RunConfig


def _strict(text: str):
    """Parse as RFC 8259 JSON: the NaN / Infinity tokens Python accepts by default are refused."""
    def refuse(token):
        raise AssertionError(f"non-standard JSON token {token}")
    return json.loads(text, parse_constant=refuse)


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def test_non_finite_floats_follow_the_protobuf_convention():
    text = to_json({"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "x": 1.5})
    assert _strict(text) == {"nan": None, "inf": "Infinity", "-inf": "-Infinity", "x": 1.5}
    assert "NaN" not in text


def test_decode_float_undoes_the_encoding_of_every_float():
    values = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.5, 5e-324, 2.2250738585072014e-308,
              1.7976931348623157e308, 0.1 + 0.2]
    back = [decode_float(v) for v in from_json(to_json(values))]
    for x, y in zip(values, back):
        if math.isnan(x):
            assert math.isnan(y)
        else:
            assert _bits(y) == _bits(x)   # bit for bit: -0.0 keeps its sign, subnormals their last bit


def test_finite_floats_round_trip_bit_for_bit():
    rng = np.random.default_rng(7)
    xs = np.concatenate([rng.standard_normal(200) * 10.0 ** rng.integers(-300, 300, 200),
                         rng.random(200)])
    back = from_json(to_json(xs))
    assert [_bits(v) for v in back] == [_bits(float(x)) for x in xs]


def test_numpy_scalars_become_plain_numbers():
    encoded = encode({"f64": np.float64(0.1), "f32": np.float32(0.1), "i64": np.int64(2**62 + 1),
                      "i8": np.int8(-3), "b": np.bool_(True), "nan32": np.float32("nan")})
    assert encoded == {"f64": 0.1, "f32": 0.10000000149011612, "i64": 4611686018427387905,
                       "i8": -3, "b": True, "nan32": None}
    assert [type(encoded[k]) for k in ("f64", "f32", "i64", "i8", "b")] == [float, float, int, int, bool]
    assert from_json(to_json(np.int64(2**62 + 1))) == 2**62 + 1


def test_arrays_become_nested_lists_with_the_float_convention_inside():
    a = np.array([[1.0, np.nan], [np.inf, -2.5]])
    assert _strict(to_json(a)) == [[1.0, None], ["Infinity", -2.5]]
    assert from_json(to_json(np.arange(4, dtype=np.int32).reshape(2, 2))) == [[0, 1], [2, 3]]
    assert from_json(to_json(np.array([True, False]))) == [True, False]


def test_nested_tuples_and_mappings():
    value = {"algorithms": (("fsvrg", (("stepsize", 2.0),)), ("gd", ())), 3: {"deep": (1, (np.float64(-0.5),))}}
    expected = {"algorithms": [["fsvrg", [["stepsize", 2.0]]], ["gd", []]], "3": {"deep": [1, [-0.5]]}}
    assert _strict(to_json(value)) == expected
    assert from_json(to_json(value)) == expected


def test_text_is_kept_as_written():
    value = {"λ": "upload:données.svm", "quote": 'a "b" \\ c', "newline": "x\ny"}
    text = to_json(value)
    assert "λ" in text and "données" in text          # not \u-escaped
    assert from_json(text) == value == json.loads(json.dumps(value))


def test_keyword_arguments_reach_json_dumps():
    value = {"b": 1, "a": [1, 2]}
    assert to_json(value, indent=1, sort_keys=True) == json.dumps(value, indent=1, sort_keys=True)


@pytest.mark.parametrize("bad", [b"+1 1:0.5\n", {1, 2}, object(), DataSpec(source=b"+1 1:0.5\n", name="tiny")])
def test_values_json_cannot_hold_are_refused(bad):
    """Raw bytes (an upload's content), sets and objects are refused, not written as something else."""
    with pytest.raises(TypeError):
        to_json({"value": bad})


def test_a_config_with_an_uploaded_file_is_stored_by_name():
    """The history stores RunConfig.as_json, in which an upload is 'upload:NAME', not its bytes."""
    data = DataSpec(source=b"+1 1:0.5\n-1 2:1\n", name="tiny.svm", test=b"+1 1:1\n", test_name="tiny.t",
                    nodes=2, test_fraction=None)
    config = dataclasses.replace(RunConfig(), data=data)
    stored = from_json(to_json(config.as_json()))
    assert stored["data"]["source"] == "upload:tiny.svm"
    assert stored["data"]["test"] == "upload:tiny.t"
    assert stored["data"]["nodes"] == 2
    assert stored == json.loads(json.dumps(config.as_json()))


def test_from_json_reports_text_that_is_not_json():
    with pytest.raises(json.JSONDecodeError):
        from_json("{not json")
