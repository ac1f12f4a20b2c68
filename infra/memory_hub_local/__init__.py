"""The local stack and command-line tools of Memory Hub (never deployed)."""
