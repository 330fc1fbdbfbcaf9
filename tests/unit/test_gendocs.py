"""The committed completions/ and man/ match what the current CLI generates."""

from __future__ import annotations

from pathlib import Path

from nsqctl.cli.gendocs import generate

ROOT = Path(__file__).resolve().parents[2]


def test_completions_and_man_pages_are_up_to_date() -> None:
    expected = generate(ROOT)
    stale = [
        str(p.relative_to(ROOT))
        for p, text in expected.items()
        if not p.exists() or p.read_text() != text
    ]
    extra = sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "man").glob("*.1") if p not in expected
    )
    hint = "run `python -m nsqctl.cli.gendocs` and commit the result"
    assert not stale, f"stale generated files {stale}: {hint}"
    assert not extra, f"man pages for commands that no longer exist {extra}: {hint}"


def test_every_command_has_a_man_page() -> None:
    pages = {p.name for p in generate(ROOT) if p.suffix == ".1"}
    for name in ("nsqctl.1", "nsqctl-pub.1", "nsqctl-tail.1", "nsqctl-sandbox-up.1"):
        assert name in pages


def test_completion_answers_through_the_real_entry_point() -> None:
    import os
    import subprocess

    env = dict(os.environ, _NSQCTL_COMPLETE="complete_bash", COMP_WORDS="nsqctl pu", COMP_CWORD="1")
    out = subprocess.run(["nsqctl"], env=env, capture_output=True, timeout=30, check=False)
    assert out.returncode == 0 and out.stdout.split() == [b"pub"]
