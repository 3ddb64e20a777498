"""`python -m pi_memory`: the same CLI as the `pi-memory` console script."""

from .frontends.cli.main import main

main()
