"""Tests with real coding agents (Claude Code, OpenCode) against a fake model."""
