"""Shared test setup: the run history goes to a temporary file, never the user's data directory."""

import os
import tempfile
from pathlib import Path

# Before anything imports fedviz.runner: the process-wide manager reads FEDVIZ_DB once.
os.environ.setdefault("FEDVIZ_DB", str(Path(tempfile.mkdtemp(prefix="fedviz-tests-")) / "runs.sqlite"))

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
