"""The committed completions/ and man/ match what the current CLI generates."""

from __future__ import annotations

from pathlib import Path

from nsqctl.cli.gendocs import generate, roff_text

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


def test_man_pages_list_the_options_with_placeholders() -> None:
    """Every option is in its page (click-man's own walker dropped them all once typer
    carried its own click), values with a placeholder and flags with none."""
    pages = {p.name: text for p, text in generate(ROOT).items() if p.suffix == ".1"}
    pub = pages["nsqctl-pub.1"]
    assert "\\-\\-nsqd\\fP ADDR" in pub and "\\-\\-batch\\fP N" in pub
    assert "\\fB\\-\\-binary\\fP\n" in pub
    assert "\\-\\-tls\\-ca\\fP FILE" in pages["nsqctl.1"]
    for name, text in pages.items():
        for placeholder in ("<str>", "<int", "<float", "<bool>", "<path>", "<list"):
            assert placeholder not in text, f"{name} shows a type placeholder {placeholder}"


def test_completion_answers_through_the_real_entry_point() -> None:
    import subprocess

    from tests.helpers.cli import NSQCTL, clean_env

    env = clean_env({"_NSQCTL_COMPLETE": "complete_bash", "COMP_WORDS": "nsqctl pu"})
    env["COMP_CWORD"] = "1"
    out = subprocess.run([NSQCTL], env=env, capture_output=True, timeout=30, check=False)
    assert out.returncode == 0 and out.stdout.split() == [b"pub"]


def test_completion_of_a_lazily_loaded_command_options() -> None:
    import subprocess

    from tests.helpers.cli import NSQCTL, clean_env

    env = clean_env({"_NSQCTL_COMPLETE": "complete_bash", "COMP_WORDS": "nsqctl pub T --sha"})
    env["COMP_CWORD"] = "3"
    out = subprocess.run([NSQCTL], env=env, capture_output=True, timeout=30, check=False)
    assert out.returncode == 0 and out.stdout.split() == [b"--shard", b"--shard-field"]


def test_help_lines_troff_would_read_as_requests_are_kept() -> None:
    """A help line starting with ``'`` or ``.`` is a troff request (the line vanishes from
    the page); ``\\&`` before it keeps it text. Backslashes print as themselves."""
    assert roff_text("one\n'quoted' two\n.dot\nback\\n") == (
        "one\n\\&'quoted' two\n\\&.dot\nback\\en"
    )
