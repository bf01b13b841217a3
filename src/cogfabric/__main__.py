"""``python -m cogfabric`` runs the command line."""

from cogfabric.cli import main

main()
