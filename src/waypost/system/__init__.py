"""Bounded access to the operating system: commands run under one deadline for their whole
process group, files read only when regular and within a size, HTTP under one overall
deadline. Below the use cases and delivery (both run commands and make requests), above the
pure core.

    process.py  a command under one deadline for its whole process group
    files.py    a regular file read within a size
    web.py      HTTP under one overall deadline
    sockets.py  the listening socket of waypost's servers
    deadlines.py  how long waypost's servers (`serve`, `mcp --http`) wait for a request's
                head and body, and how many connections they hold (uvicorn's h11, bounded)
"""
