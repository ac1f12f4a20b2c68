"""``python -m memory_hub_tools.cli``: the ``memory-hub`` command."""

from memory_hub_tools.cli import main

raise SystemExit(main())
