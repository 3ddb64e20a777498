"""`python -m pi_memory`: the same CLI as the `pi-memory` console script."""

from .cli import main

main()
