"""``python -m benchmax.cli``."""

from benchmax.cli import main

main()
