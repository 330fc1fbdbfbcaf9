"""The ``nsqctl`` console script: the collector paused for the imports (see
:mod:`nsqctl.cli.collector`), then :func:`nsqctl.cli.app.main`."""

from __future__ import annotations

from nsqctl.cli.collector import imports_done, pause_for_imports


def main() -> None:
    pause_for_imports()
    try:
        from nsqctl.cli.app import main as run_app
    except BaseException:
        imports_done()
        raise
    run_app()


if __name__ == "__main__":  # ``python -X importtime -m nsqctl.cli.startup tail ...``
    main()
