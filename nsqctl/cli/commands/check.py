"""``nsqctl check``: alert on a cluster's health the way Nagios plugins do.

Exit 0 ok, 1 warning, 2 critical, 3 unknown (the cluster did not answer, a rule could not
be judged (too few polls for a rate, or no nsqlookupd answering for the rules that stand on
its answers), or the rules given were wrong); one line per finding that is not ok, or one
``OK: ...`` line, the first carrying the performance data of the threshold rules after a
``|`` (:mod:`nsqctl.health.perfdata`); ``--json`` for one JSON document. Rules come from
the profile's ``check`` list, then ``--rule``, then the shortcut flags (the last matching
rule of a kind decides per subject); see :mod:`nsqctl.health.spec` for the syntax.
"""

from __future__ import annotations

import asyncio
import json
import sys

import typer

from nsqctl.cli.flags import (
    LookupdOption,
    NsqdHttpOption,
    NsqdOption,
    ProfileOption,
    resolve_cluster,
)
from nsqctl.cli.numbers import poll_interval, seconds
from nsqctl.cli.wording import cli_message, cli_words
from nsqctl.errors import ConfigError, NsqctlError
from nsqctl.health.check import DEFAULT_INTERVAL, DEFAULT_SAMPLES, CheckResult, check_cluster
from nsqctl.health.findings import EXIT_CODES
from nsqctl.health.spec import DEFAULT_RULES, KINDS, RuleSet, parse_threshold, scoped
from nsqctl.stats.poller import DEFAULT_TIMEOUT

RuleOption = typer.Option(
    None,
    "--rule",
    "-r",
    metavar="RULE",
    help=(
        "KIND[:TOPIC[/CHANNEL]][=VALUE], repeatable; TOPIC and CHANNEL are globs. KIND: "
        f"{', '.join(KINDS)}. max-* take CRIT or WARN,CRIT; the others warn, crit or off."
    ),
)
TopicGlobOption = typer.Option(
    None,
    "--topic",
    "-t",
    metavar="GLOB",
    help="Scope of the --max-*/--orphan/--poison flags (repeatable).",
)
ChannelGlobOption = typer.Option(
    None,
    "--channel",
    "-c",
    metavar="GLOB",
    help="Scope of the --max-*/--orphan/--poison flags (repeatable).",
)
MaxDepthOption = typer.Option(
    None, "--max-depth", metavar="[WARN,]CRIT", help="Messages waiting on a channel."
)
MaxDrainOption = typer.Option(
    None,
    "--max-time-to-drain",
    metavar="[WARN,]CRIT",
    help="Seconds until a channel is empty at its pace (critical when it is not falling).",
)
MaxRequeueOption = typer.Option(
    None, "--max-requeue-rate", metavar="[WARN,]CRIT", help="Requeues per second on a channel."
)
MaxTimeoutOption = typer.Option(
    None, "--max-timeout-rate", metavar="[WARN,]CRIT", help="Timeouts per second on a channel."
)
OrphanOption = typer.Option(
    None,
    "--orphan",
    metavar="LEVEL",
    help="Severity of a channel growing with no client: warn (default), crit or off.",
)
PoisonOption = typer.Option(
    None,
    "--poison",
    metavar="LEVEL",
    help=(
        "Severity of a channel requeueing the few messages it holds over and over (more "
        "than twice each between the first and last poll): warn, crit or off (the default)."
    ),
)
NoDefaultsOption = typer.Option(
    False,
    "--no-default-rules",
    help=f"Start from no rules instead of {', '.join(DEFAULT_RULES)}.",
)
SamplesOption = typer.Option(
    DEFAULT_SAMPLES, "--samples", "-n", help="Polls to take (rates and orphan need 2 or more)."
)
IntervalOption = typer.Option(
    DEFAULT_INTERVAL, "--interval", "-i", parser=poll_interval(), help="Seconds between polls."
)
TimeoutOption = typer.Option(
    DEFAULT_TIMEOUT,
    "--timeout",
    parser=seconds(),
    help="Seconds before an nsqd counts as down for a poll.",
)


def rule_texts(
    rules: list[str],
    topics: list[str],
    channels: list[str],
    *,
    max_depth: str | None = None,
    max_time_to_drain: str | None = None,
    max_requeue_rate: str | None = None,
    max_timeout_rate: str | None = None,
    orphan: str | None = None,
    poison: str | None = None,
) -> list[str]:
    """The rule strings of the flags in precedence order: ``--rule``, then the shortcuts
    (``--max-depth 100`` over every ``--topic`` x ``--channel`` glob given)."""
    shortcuts = (max_depth, max_time_to_drain, max_requeue_rate, max_timeout_rate, orphan, poison)
    if (topics or channels) and all(v is None for v in shortcuts):
        raise ConfigError(
            "--topic and --channel scope the --max-*, --orphan and --poison flags: give one"
        )
    out = list(rules)
    for kind, flag, value in (
        ("max-depth", "--max-depth", max_depth),
        ("max-time-to-drain", "--max-time-to-drain", max_time_to_drain),
        ("max-requeue-rate", "--max-requeue-rate", max_requeue_rate),
        ("max-timeout-rate", "--max-timeout-rate", max_timeout_rate),
    ):
        if value is not None:
            parse_threshold(value, flag)  # the flag's own name in the message
            out.extend(scoped(kind, value, topics, channels))
    for kind, level in (("orphan", orphan), ("poison", poison)):
        if level is not None:
            if level not in ("warn", "crit", "off"):
                raise ConfigError(f"bad --{kind} {level!r}: give warn, crit or off")
            out.extend(scoped(kind, level, topics, channels))
    return out


def profile_rules(profile: str | None) -> tuple[str, ...]:
    """The ``check`` rules of the profile in use, if any."""
    if profile is None:
        return ()
    from nsqctl.profiles import load_config

    return load_config().profile(profile).check


def build_rules(profile: str | None, no_defaults: bool, texts: list[str]) -> RuleSet:
    return RuleSet.parse([*profile_rules(profile), *texts], defaults=not no_defaults)


def rules_from_flags(
    profile: str | None,
    no_defaults: bool,
    rules: list[str] | None,
    topics: list[str] | None,
    channels: list[str] | None,
    **shortcuts: str | None,
) -> RuleSet:
    """The rules of a command that takes the check flags (check, exporter): the profile's,
    then ``--rule``, then the shortcut flags, given by their keyword names."""
    texts = rule_texts(rules or [], topics or [], channels or [], **shortcuts)
    return build_rules(profile, no_defaults, texts)


def report(result: CheckResult, as_json: bool) -> None:
    """The verdict, the library's words in a finding (an action as `topic_delete(T)`)
    spelt as the CLI user types them (:func:`cli_words`)."""
    if as_json:
        document = result.to_json()
        for finding in document["findings"]:
            finding["message"] = cli_words(finding["message"])
        sys.stdout.write(json.dumps(document) + "\n")
    else:
        for line in result.lines():
            typer.echo(cli_words(line))


def check(
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    nsqd_http: list[str] = NsqdHttpOption,
    profile: str | None = ProfileOption,
    rule: list[str] = RuleOption,
    topic: list[str] = TopicGlobOption,
    channel: list[str] = ChannelGlobOption,
    max_depth: str | None = MaxDepthOption,
    max_time_to_drain: str | None = MaxDrainOption,
    max_requeue_rate: str | None = MaxRequeueOption,
    max_timeout_rate: str | None = MaxTimeoutOption,
    orphan: str | None = OrphanOption,
    poison: str | None = PoisonOption,
    no_default_rules: bool = NoDefaultsOption,
    samples: int = SamplesOption,
    interval: float = IntervalOption,
    timeout: float = TimeoutOption,
    as_json: bool = typer.Option(False, "--json", help="One JSON document with every finding."),
) -> None:
    """Alert on cluster health: exit 0 ok, 1 warning, 2 critical, 3 unknown.

    One line per finding that is not ok (or one OK line); the first line is Nagios's
    status line, the performance data of the --max-* rules after its `|`: with
    --max-depth 100,200, 'TOPIC/CHANNEL depth'=150;100;200;0 (also time_to_drain in s,
    requeue_rate and timeout_rate; U when not measured).

    Besides the rules asked, node-down, no-leader, isr, not-seen (an original topic
    whose every nsqd is down: nobody can read it or publish to it where it lives; only a
    warning when nsqlookupd lists it with no producer, since it may then be on the nsqds
    down or a registration left behind), leftover (a warning: an nsqd holds a redesign
    topic nsqlookupd has no meta for, data a deleted topic left behind on an nsqd down
    during the delete; judged instead of no-leader for it, with what removes it) and
    orphan are on by default.

    A rule that could not be judged is an UNKNOWN finding, saying what was not seen and
    why: the rates and orphan with fewer than 2 polls, and, when no nsqlookupd answers,
    no-leader and isr (redesign) and not-seen (original), which need its topic list and
    meta. The exit is the worst finding's: critical, then warning, then unknown (3), so
    a known outage is never hidden behind what could not be checked.
    """
    try:
        if samples < 1:
            raise ConfigError(f"bad --samples {samples}: must be >= 1")
        sel = resolve_cluster(lookupd, nsqd, profile, nsqd_http, require="http")
        rules = rules_from_flags(
            sel.profile,
            no_default_rules,
            rule,
            topic,
            channel,
            max_depth=max_depth,
            max_time_to_drain=max_time_to_drain,
            max_requeue_rate=max_requeue_rate,
            max_timeout_rate=max_timeout_rate,
            orphan=orphan,
            poison=poison,
        )
        result = asyncio.run(
            check_cluster(
                sel.lookupd,
                sel.nsqd_http,
                rules,
                samples=samples,
                interval=interval,
                timeout=timeout,
            )
        )
    except NsqctlError as err:
        # Nagios reads anything but 0-2 as "could not check": a bad rule or flag too.
        typer.echo(f"nsqctl: error: {cli_message(err)}", err=True)
        raise typer.Exit(EXIT_CODES["unknown"]) from None
    report(result, as_json)
    raise typer.Exit(result.exit_code)
