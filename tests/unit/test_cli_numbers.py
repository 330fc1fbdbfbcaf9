"""The numeric option types (:mod:`nsqctl.cli.numbers`): whatever string an operator
types, a value within the option's bounds or one line saying what it must be; never nan,
inf, a traceback, or a value outside the bounds."""

from __future__ import annotations

import math

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st

from nsqctl.cli.numbers import (
    MAX_SECONDS,
    MIN_POLL_INTERVAL,
    Number,
    poll_interval,
    rate,
    seconds,
    size,
)
from tests.helpers.cli import assert_one_line_error, run_main

PARSERS = {
    "interval": poll_interval(),
    "window": seconds(zero=True),
    "drain-interval": seconds(minimum=0.1),
    "rotate": seconds(minimum=0.01, maximum=50.0),
    "rate": rate(),
    "megabytes": size("megabytes", minimum=0.001),
}

#: strings that look like numbers, beside arbitrary text, so both branches are exercised
NUMBERISH = st.one_of(
    st.text(),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats().map(str),
    st.integers().map(str),
    st.sampled_from(["nan", "-nan", "NaN", "inf", "-inf", "Infinity", "1e999", "-0", " 2 ", "1_0"]),
)


def _within(parser: Number, value: float) -> bool:
    low = value > parser.minimum if parser.above else value >= parser.minimum
    return low and (parser.maximum is None or value <= parser.maximum)


@pytest.mark.parametrize("name", list(PARSERS))
@given(text=NUMBERISH)
def test_any_string_is_a_value_within_bounds_or_one_line(name: str, text: str) -> None:
    parser = PARSERS[name]
    try:
        value = parser(text)
    except typer.BadParameter as err:
        message = err.format_message()
        assert "\n" not in message and "\r" not in message
        assert parser.expected() in message
        return
    assert math.isfinite(value) and _within(parser, value), (text, value)


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e999", "-1", "0"])
def test_no_duration_or_rate_takes_nan_inf_negatives_or_zero(text: str) -> None:
    for parser in (seconds(), rate()):
        with pytest.raises(typer.BadParameter):
            parser(text)


def test_zero_is_taken_only_where_it_means_something() -> None:
    assert seconds(zero=True)("0") == 0.0
    with pytest.raises(typer.BadParameter, match="> 0"):
        seconds()("0")
    assert seconds()(f"{MAX_SECONDS:.0f}") == MAX_SECONDS
    with pytest.raises(typer.BadParameter, match="at most 31536000"):
        seconds()(f"{MAX_SECONDS + 1:.0f}")


@settings(max_examples=60, deadline=None)
@given(text=NUMBERISH)
def test_any_interval_through_the_cli_is_one_line(text: str) -> None:
    """Through the console script's ``main()``: a refused value is a usage error naming
    the option; a taken one gets as far as the missing cluster. No traceback either way
    (an exception would escape ``run_main``)."""
    proc = run_main("stat", f"--interval={text}")
    line = assert_one_line_error(proc, 2)
    if "HTTP APIs" in line:  # taken: then it was a usable interval
        assert _taken(poll_interval(), text), text
    else:
        assert "--interval" in line, line


@pytest.mark.parametrize(
    ("command", "code"), [("stat", 2), ("top", 2), ("dash", 2), ("check", 3), ("exporter", 2)]
)
def test_no_view_polls_the_cluster_in_a_tight_loop(command: str, code: int) -> None:
    """An interval of a nanosecond was taken, and the view asked every nsqd for its
    /stats as fast as it could (``check`` says bad input as "unknown", 3)."""
    proc = run_main(command, "--interval=1e-9")
    line = assert_one_line_error(proc, code)
    assert "--interval" in line and f">= {MIN_POLL_INTERVAL}" in line, line


@settings(max_examples=60, deadline=None)
@given(text=NUMBERISH)
def test_any_rate_through_the_cli_is_one_line(text: str) -> None:
    proc = run_main("pub", "t", "x", f"--rate={text}")
    line = assert_one_line_error(proc, 2)
    if "no cluster given" in line:  # taken: then it was a usable rate
        assert _taken(rate(), text), text
    else:
        assert "--rate" in line, line


def _taken(parser: Number, text: str) -> bool:
    """Whether ``text`` is a number within the parser's bounds (worked out here apart
    from the parser: float() and the bounds)."""
    try:
        value = float(text)
    except ValueError:
        return False
    return math.isfinite(value) and _within(parser, value)
