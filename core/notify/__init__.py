"""Notifications when an agent needs you (issue 15, part 3): webhooks and Web Push."""
