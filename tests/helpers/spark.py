"""One SparkSession for the whole test session (Spark starts slowly).

Import the fixture into a test module: ``from tests.helpers.spark import spark  # noqa: F401``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from nsqctl.pipeline.spark import spark_session

TEST_MASTER = "local[2]"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = spark_session(TEST_MASTER, "nsqctl-tests")
    yield session
    session.stop()
