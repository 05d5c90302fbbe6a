"""HTTP only: app factory, routes, SSE, auth routes, problem+json mapping, CLI."""
