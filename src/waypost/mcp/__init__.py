"""The MCP server (`waypost mcp`, stdio): the use cases as tools and resources, an adapter
like `waypost.cli`. Needs the `mcp` extra (`pip install 'waypost[mcp]'`); importing this
package alone loads nothing of it, so the CLI can name the verb without paying for the SDK.

    server.py   the server: its tools and resources, and the stdio runner
    stdio.py    every line over stdio answered: the ones the SDK cannot decode with an error
    http.py     the same server over streamable HTTP, each call as its bearer token's holder
    worker.py   the worker's tools (start, status, heartbeat, block, unblock, ready, claim,
                resume)
    outputs.py  the worker's durable outputs and proof (artifacts, evidence)
    session.py  who acts, on which store, within which limits (and the epochs held)
    owner.py    the owner's tools (review, approve, request_changes, transfer, cancel,
                retarget, checkpoint_wait: wait until runs need the parent, 50 s per
                call at most)
    gates.py    the gate tools (add_gate: the owner, or the worker; adopt_gate: the owner)
    answers.py  the one map from the exception root to tool errors, and the success shape
    shapes.py   what every tool returns (TypedDicts: the output schemas) and the enumerations

Inside this package the SDK is imported by its absolute name (`mcp`, `mcp.server`), which
resolves to the installed SDK, never to this package (`waypost.mcp`).
"""
