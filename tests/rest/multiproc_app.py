"""An app factory for uvicorn worker processes in tests (`--factory`): the data API over the
index named by LADLE_TEST_DB. This module holds no tests."""

from __future__ import annotations

import os

from starlette.applications import Starlette

from rest.app import create_app
from rest.config import RestConfig

DB_ENV = "LADLE_TEST_DB"


def app() -> Starlette:
    return create_app(RestConfig(db_path=os.environ[DB_ENV], rate_limit=0, warm=False))
