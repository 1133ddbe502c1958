"""The error types fedviz raises on bad input.

Every message says what is wrong and where: a file's line and token, or a
parameter's name, value and allowed range.  The UI and the command line show the
message and never a traceback.
"""

from __future__ import annotations


class FedvizError(Exception):
    """Base class of every error fedviz raises on purpose."""


class DataFormatError(FedvizError, ValueError):
    """Malformed LIBSVM / svmlight input.

    Attributes
    ----------
    line : int or None
        One-based line number in the (decompressed) input, if the error is tied to a line.
    token : str or None
        The offending token, as it appears in the input.
    """

    def __init__(self, message: str, *, line: int | None = None, token: str | None = None,
                 source: str | None = None):
        self.line = line
        self.token = token
        self.source = source
        where = []
        if source:
            where.append(str(source))
        if line is not None:
            where.append(f"line {line}")
        prefix = ", ".join(where)
        text = f"{prefix}: {message}" if prefix else message
        if token is not None:
            shown = token if len(token) <= 40 else token[:37] + "..."
            text += f" (token {shown!r})"
        super().__init__(text)


class ParameterError(FedvizError, ValueError):
    """A parameter outside its allowed range.

    Attributes
    ----------
    name : str
        The parameter's name, e.g. ``"fsvrg.stepsize"``.
    value : object
        The value that was refused.
    allowed : str
        A human-readable description of the allowed range, e.g. ``"> 0"``.
    """

    def __init__(self, name: str, value, allowed: str, hint: str | None = None):
        self.name = name
        self.value = value
        self.allowed = allowed
        text = f"parameter {name}={value!r} is out of range: allowed {allowed}"
        if hint:
            text += f"; {hint}"
        super().__init__(text)
