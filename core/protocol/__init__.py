"""Wire-exact Op / Event / Part models of the c2 protocol (docs/protocol.md, docs/api.md).

Owns the JSON shapes only: tagged unions, enums, snapshots. No I/O, no behaviour beyond
(de)serialization. One module per part of the vocabulary: `values` (enums, ids, the execution
policy), `ops` (client -> core, and the prompt documents they carry), `state` (activity,
transcript parts, agent-reported state, the session snapshot) and `events` (core -> client).
"""
