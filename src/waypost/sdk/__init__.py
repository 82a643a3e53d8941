"""The Python SDK's blocks around a worker's job (`waypost.run`, `waypost.arun`), a door
over the use cases like the CLI.

    block.py  `with waypost.run(...) as run:` start or resume, claim, heartbeat, never
              left silently `in_progress`
    aio.py    `async with waypost.arun(...)`: the same block, its calls in a thread
"""
