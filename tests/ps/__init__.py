"""Parameter-server tests (a package: its file names repeat those of tests/core)."""
