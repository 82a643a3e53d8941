"""The door-parity suite: one table of scenarios through every door (DESIGN §3, "seven
doors, one house"), on SQLite and PostgreSQL.

    terms.py        the words: outcome classes, doors, operations, actors, setups, numbers
    table.py        the scenarios, what each door offers (OFFERS) and takes (TAKES)
    surfaces.py     every command, tool and route, and its operation (or why it is none)
    world.py        a store per door and backend, and the runs built in it via the SDK
    dump.py         every row of every table (and file) of a store, to compare
    driver.py       what a door's driver is; the inputs every driver writes its own way
    doors_local.py  the SDK, `with waypost.run`, the CLI and its stop hook
    doors_mcp.py    MCP over stdio and over HTTP, through the official client
    doors_web.py    the HTTP API, the board and the HTTP stop hook, on a real server
    doors.py        the driver of each door
    named.py        what a refusal's next step names exists at its door (a tool, a route)
    conftest.py     one world and driver per door and backend, for the session
    test_parity.py  every scenario at every door that offers it
    test_completeness.py  a door or operation missing from the table fails here
    test_takeovers.py     a late worker's claim, and what a fenced process is told, per door
    test_handoff.py       the whole handoff end to end at each door: same answers, same store
    test_next_steps.py    every verb, and the handoff's refusals, as each door's tool or route
"""
