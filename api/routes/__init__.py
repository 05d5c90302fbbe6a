"""HTTP routers: thin adapters that parse, call one Services/engine method, map the result."""
