"""The MCP server (stdio and streamable HTTP): the use cases as tools (an adapter like
`waypost.cli`; it maps the exception root to tool errors in one place). Not built yet:
`waypost mcp` lands here.
"""
