"""The JSON codec of the run history, its exports and the cluster's streamed calls.

Every JSON text fedviz writes about runs goes through :func:`to_json`: the configs,
hyperparameters and data summaries the history (:mod:`.store`) keeps, its JSON export, a job's
fingerprint (:mod:`.job`) and the sink calls a Dask worker streams back (:mod:`.cluster`).  The
output is strict JSON (RFC 8259: no ``NaN`` or ``Infinity`` tokens), so any JSON reader takes it.

What :func:`encode` maps, and what :func:`from_json` gives back:

======================================  ==========================  ================================
value                                   encoded as                  decoded as
======================================  ==========================  ================================
finite ``float``, ``np.floating``       the number (``repr``, so    ``float``, bit for bit
                                        every digit)
NaN                                     ``null``                    ``None`` → :func:`decode_float`
+inf / -inf                             ``"Infinity"`` /            the string → :func:`decode_float`
                                        ``"-Infinity"``
``bool``, ``np.bool_``                  ``true`` / ``false``        ``bool``
``int``, ``np.integer``                 the integer                 ``int``
``str``, ``None``                       itself                      itself
``np.ndarray``                          nested lists, each element  nested lists
                                        encoded as above
``list``, ``tuple``                     a list                      ``list`` (a tuple is not
                                                                    restored)
any ``Mapping``                         an object, keys ``str(k)``  ``dict`` with ``str`` keys
======================================  ==========================  ================================

The non-finite convention is protobuf's JSON mapping.  NaN and ±inf are told apart from ``null``
and the strings only where the reader knows a value is a float (a record's float column, f*):
that is what :func:`decode_float` is for.  Anything else (``bytes``, a dataclass, a set) is not
encoded: :func:`to_json` raises ``TypeError``, so a config that holds raw bytes (an uploaded file)
must be turned into JSON-able values (its name, its fingerprint) by its owner first.
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping

import numpy as np

__all__ = ["encode", "to_json", "from_json", "decode_float"]


def encode(x: Any) -> Any:
    """``x`` made strict-JSON-able (see the table above): NaN → None, ±inf → "Infinity" /
    "-Infinity", numpy scalars and arrays → Python numbers and lists, tuples → lists,
    mapping keys → ``str``.  Values of other types are returned unchanged (and rejected by
    :func:`json.dumps`)."""
    if isinstance(x, float) or isinstance(x, np.floating):
        x = float(x)
        if math.isnan(x):
            return None
        if math.isinf(x):
            return "Infinity" if x > 0 else "-Infinity"
        return x
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.ndarray):
        return [encode(v) for v in x.tolist()]
    if isinstance(x, Mapping):
        return {str(k): encode(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [encode(v) for v in x]
    return x


def to_json(obj: Any, **kwargs) -> str:
    """Strict JSON (``allow_nan=False``, UTF-8 text unescaped) of :func:`encode` (``obj``).

    ``kwargs`` go to :func:`json.dumps` (``indent``, ``sort_keys``).  Raises ``TypeError`` for a
    value JSON cannot represent (bytes, a set, an arbitrary object).
    """
    return json.dumps(encode(obj), allow_nan=False, ensure_ascii=False, **kwargs)


def from_json(text: str) -> Any:
    """The value of a :func:`to_json` text: dicts, lists, str, int, float, bool and None.

    Non-finite floats come back as they were encoded (None, "Infinity", "-Infinity"); apply
    :func:`decode_float` where a float is expected.  Raises :class:`json.JSONDecodeError` for a
    text that is not JSON.
    """
    return json.loads(text)


def decode_float(v) -> float:
    """Undo :func:`encode` for a value known to be a float (a record column, f*):
    None → NaN, "Infinity" → inf, "-Infinity" → -inf, a number → ``float``."""
    if v is None:
        return math.nan
    if v == "Infinity":
        return math.inf
    if v == "-Infinity":
        return -math.inf
    return float(v)
