"""Both clients are configured one way: a frozen options object (``ConsumerOptions``,
``ProducerOptions``) whose numeric fields each declare their accepted values once (a
:class:`nsqctl.bounds.Bound`), checked once, when the options are made; the client takes
it as ``options=`` and has no keyword of its own for any of its fields. No server is
needed: nothing here connects."""

from __future__ import annotations

import dataclasses
import inspect
import math
from pathlib import Path
from typing import Any

import pytest

import nsqctl
from nsqctl.bounds import Bound
from nsqctl.consumer.options import CONSUMER_BOUNDS
from nsqctl.producer.options import PRODUCER_BOUNDS
from tests.helpers.mypy_snippet import mypy_errors

NSQD = "127.0.0.1:1"  # a closed port: nothing is contacted

#: (options type, its bounds, the client, the client's arguments besides options)
CLIENTS: list[tuple[type[Any], dict[str, Bound], type[Any], tuple[Any, ...]]] = [
    (nsqctl.ConsumerOptions, CONSUMER_BOUNDS, nsqctl.Consumer, ("t", "c")),
    (nsqctl.ProducerOptions, PRODUCER_BOUNDS, nsqctl.Producer, ()),
]
#: numeric fields without a bound, and why: any integer seeds a random generator
UNBOUNDED = {"seed"}


def outside(bound: Bound) -> list[object]:
    """Values just outside ``bound`` (and of the wrong kind)."""
    step = 1 if bound.integer else 0.5
    values: list[object] = [bound.minimum if bound.above else bound.minimum - step]
    if bound.maximum is not None:
        values.append(bound.maximum + step)
    values += [math.nan, math.inf, "1", True]
    if bound.integer:
        values.append(bound.minimum + 1.5)
    if not bound.optional:
        values.append(None)
    specials = {value for value, _ in bound.special}
    return [v for v in values if not (isinstance(v, int | float) and v in specials)]


REFUSED = [
    pytest.param(options, name, value, id=f"{options.__name__}.{name}={value!r}")
    for options, bounds, _client, _args in CLIENTS
    for name, bound in bounds.items()
    for value in outside(bound)
]


@pytest.mark.parametrize(("options", "name", "value"), REFUSED)
def test_every_bound_refuses_what_is_outside_it_naming_the_setting(
    options: type[Any], name: str, value: object
) -> None:
    with pytest.raises(nsqctl.ConfigError) as caught:
        options(**{name: value})
    assert caught.value.setting == name
    assert f"bad {name}" in str(caught.value) and "--" not in str(caught.value)


@pytest.mark.parametrize(("options", "bounds"), [(o, b) for o, b, _c, _a in CLIENTS])
def test_every_numeric_field_declares_its_bound_and_the_defaults_are_inside(
    options: type[Any], bounds: dict[str, Bound]
) -> None:
    numeric = {
        f.name
        for f in dataclasses.fields(options)
        if {"int", "float"} & set(str(f.type).replace("|", " ").split())
    }
    assert numeric - UNBOUNDED == set(bounds)
    defaults = options()
    for name, bound in bounds.items():
        value = getattr(defaults, name)
        assert bound.accepts(value) or (value is None and bound.optional), name


@pytest.mark.parametrize(
    ("options", "values", "setting"),
    [
        (nsqctl.ConsumerOptions, {"reconnect_initial": 5.0, "reconnect_max": 1.0}, "reconnect_max"),
        (nsqctl.ConsumerOptions, {"partitions": [0, -1]}, "partitions"),
        (nsqctl.ConsumerOptions, {"partitions": "01"}, "partitions"),
        (nsqctl.ConsumerOptions, {"ordered": True, "start": "earliest"}, "start"),
        (nsqctl.ConsumerOptions, {"ordered": "yes"}, "ordered"),
        (nsqctl.ConsumerOptions, {"threads": "yes"}, "threads"),
        (nsqctl.ConsumerOptions, {"auto_touch": 1}, "auto_touch"),
        (nsqctl.ConsumerOptions, {"threads": True}, "concurrency"),  # how many: not guessed
        (nsqctl.ProducerOptions, {"max_backoff": 0.05}, "max_backoff"),  # below backoff 0.1
        (nsqctl.ProducerOptions, {"hash": "md5"}, "hash"),
    ],
)
def test_values_that_cannot_work_together_are_refused_naming_the_setting(
    options: type[Any], values: dict[str, Any], setting: str
) -> None:
    with pytest.raises(nsqctl.ConfigError) as caught:
        options(**values)
    assert caught.value.setting == setting
    assert "--" not in str(caught.value)


@pytest.mark.parametrize(("options", "bounds", "client", "args"), CLIENTS)
def test_both_clients_take_their_settings_the_same_way(
    options: type[Any], bounds: dict[str, Bound], client: type[Any], args: tuple[Any, ...]
) -> None:
    """``options=`` is the only way in: no field is also a keyword of the client, the
    options object is kept as given (frozen: shared safely), and the defaults apply
    without it."""
    params = inspect.signature(client.__init__).parameters
    assert params["options"].kind is inspect.Parameter.KEYWORD_ONLY
    assert params["options"].annotation == f"{options.__name__} | None"
    assert not {f.name for f in dataclasses.fields(options)} & set(params)
    assert not any(q.kind is inspect.Parameter.VAR_KEYWORD for q in params.values())

    given = options(max_attempts=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        given.max_attempts = 4
    assert client(*args, nsqd_tcp=[NSQD], options=given).options is given
    assert client(*args, nsqd_tcp=[NSQD]).options == options()
    with pytest.raises(TypeError, match="max_attempts"):
        client(*args, nsqd_tcp=[NSQD], max_attempts=3)
    with pytest.raises(nsqctl.ConfigError, match=f"options must be a {options.__name__}") as err:
        client(*args, nsqd_tcp=[NSQD], options={"max_attempts": 3})
    assert err.value.setting == "options"


def test_consumer_set_max_in_flight_checks_the_options_bound() -> None:
    consumer = nsqctl.Consumer("t", "c", nsqd_tcp=[NSQD])
    for value in (-1, 2.5, True):
        with pytest.raises(nsqctl.ConfigError, match="bad max_in_flight") as err:
            consumer.set_max_in_flight(value)  # type: ignore[arg-type]
        assert err.value.setting == "max_in_flight"


MYPY_SNIPPET = """\
import nsqctl

slow = nsqctl.ConsumerOptions(max_in_flght=5)
quick = nsqctl.ProducerOptions(max_attemps=2)
nsqctl.Consumer("t", "c", nsqd_tcp="127.0.0.1:4150", max_in_flight=5)
nsqctl.Producer(nsqd_tcp="127.0.0.1:4150", options=slow)
fine = nsqctl.ConsumerOptions(max_in_flight=5, ordered=True)
"""

#: the modules behind the options and the clients' signatures, analysed for their types
ANALYSED = [
    "nsqctl.consumer",
    "nsqctl.consumer.client",
    "nsqctl.consumer.options",
    "nsqctl.producer",
    "nsqctl.producer.client",
    "nsqctl.producer.options",
]


def test_mypy_strict_rejects_a_misspelt_option_and_an_option_given_to_the_client(
    tmp_path: Path,
) -> None:
    """A misspelt setting fails type-checking where it is written."""
    assert mypy_errors(MYPY_SNIPPET, tmp_path, ANALYSED) == [
        '3 Unexpected keyword argument "max_in_flght" for "ConsumerOptions"; '
        'did you mean "max_in_flight"?  [call-arg]',
        '4 Unexpected keyword argument "max_attemps" for "ProducerOptions"; '
        'did you mean "max_attempts"?  [call-arg]',
        '5 Unexpected keyword argument "max_in_flight" for "Consumer"  [call-arg]',
        '6 Argument "options" to "Producer" has incompatible type "ConsumerOptions"; '
        'expected "ProducerOptions | None"  [arg-type]',
    ]
