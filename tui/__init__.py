"""kb's terminal UI (Textual). Uses kb's public API only; nothing in kb imports this package."""
