"""``python -m fedviz``: see :mod:`fedviz.cli`."""

from .cli import main

raise SystemExit(main())
