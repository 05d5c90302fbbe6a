"""c2: the api/ and core/ folders of the repository, installed as the packages c2.api and c2.core.

`c2/api` and `c2/core` are links to those folders so that a checkout, mypy and the editable
install all see the same module names as a wheel does (docs/decisions.md, "One c2 namespace").
"""
