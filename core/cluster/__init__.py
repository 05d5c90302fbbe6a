"""Several c2 instances on one PostgreSQL database (issue 18): membership with leases, live
fan-out of the shared event log, session ownership and forwarding. See docs/decisions.md
"Scale-out"."""
