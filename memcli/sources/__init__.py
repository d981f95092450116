"""Sources of memories beyond typed text: notes (Markdown and text files), folders of them
kept in step with a bank (`mem sync`), and other tools' exports (`mem import --from`)."""

# The formats `mem import --from` reads (sources/importers.py); here so that the CLI can
# list them without importing the readers.
IMPORT_FORMATS = ("chatgpt", "claude", "mem0", "mcp-memory", "jsonl")
