"""Output for people and machines: text, JSON, Markdown, CI annotations."""
