"""The `attnrank` command line: entry point (main.py), shared argument types, output, one module per command."""
