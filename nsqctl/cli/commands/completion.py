"""``nsqctl completion SHELL``: print the shell's completion script, the way kubectl and
gh do, so an installed nsqctl (pip, pipx, a wheel) needs no file copied from a clone."""

from __future__ import annotations

import typer

SHELLS = ("bash", "zsh", "fish")


def _shells(incomplete: str) -> list[str]:
    return [s for s in SHELLS if s.startswith(incomplete)]


def completion(
    shell: str = typer.Argument(
        ..., metavar="SHELL", help="bash, zsh or fish.", autocompletion=_shells
    ),
) -> None:
    """Print the completion script for SHELL.

    bash: eval "$(nsqctl completion bash)" in ~/.bashrc.
    zsh: nsqctl completion zsh > "${fpath[1]}/_nsqctl" (then start a new shell).
    fish: nsqctl completion fish > ~/.config/fish/completions/nsqctl.fish
    """
    # a plain str checked here, not a click Choice: its error lists the choices over lines
    if shell not in SHELLS:
        raise typer.BadParameter(f"{shell!r} is not one of {', '.join(SHELLS)}", param_hint="SHELL")
    from nsqctl.cli.gendocs import completion_script

    typer.echo(completion_script(shell), nl=False)
