"""tsrec's tests: a regular package, so that ``tests.shared_data`` and ``tests.saved_models`` are this
repository's even where another distribution installs a top-level ``tests`` package (pytest puts the
repository root first on ``sys.path`` for a package's modules; tests/test_layout.py checks it)."""
