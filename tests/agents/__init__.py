"""Test agents: real ACP subprocesses driven by directives in the prompt text."""
