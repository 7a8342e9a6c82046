"""What crosses a boundary: input shapes, list queries, JSON conversion, response presenters, YAML.

REST, MCP, the CLI and the library all read and write through these modules, so a field is named,
checked and shown the same way whichever door it came in by.
"""
