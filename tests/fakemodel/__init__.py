"""A fake model API (Anthropic Messages and OpenAI chat completions) for real-agent tests."""
