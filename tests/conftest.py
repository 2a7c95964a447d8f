"""Shared test fixtures: where the official vectors live."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("LADLE_SHARED", ROOT.parent / "shared"))
VECTORS = SHARED / "vectors"


def load_vectors(name: str) -> Any:
    """Load a vector file from ../shared/vectors (relative path, e.g. 'vmb/x.json')."""
    with (VECTORS / name).open() as fh:
        return json.load(fh)
