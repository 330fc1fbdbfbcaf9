"""``nsqctl completion SHELL``: print the shell's completion script, the way kubectl and
gh do, so an installed nsqctl (pip, pipx, a wheel) needs no file copied from a clone."""

from __future__ import annotations

from enum import StrEnum

import typer


class Shell(StrEnum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def completion(
    shell: Shell = typer.Argument(..., help="bash, zsh or fish."),
) -> None:
    """Print the completion script for SHELL.

    bash: eval "$(nsqctl completion bash)" in ~/.bashrc.
    zsh: nsqctl completion zsh > "${fpath[1]}/_nsqctl" (then start a new shell).
    fish: nsqctl completion fish > ~/.config/fish/completions/nsqctl.fish
    """
    from nsqctl.cli.gendocs import completion_script

    typer.echo(completion_script(shell.value), nl=False)
