"""c2 test suite."""
