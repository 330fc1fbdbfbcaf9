"""nsqctl's benchmarks: scripts run as modules from the repository root
(``python -m bench.bench_cli``), so they import their shared code (``bench._common``) and
the test helpers (``tests.helpers``) as packages, without editing ``sys.path``."""
