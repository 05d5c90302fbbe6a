"""Search across every session (issue 15, part 1): tokens, the query syntax, snippets and the
service the API calls; the index itself is maintained by core/store/search.py."""
