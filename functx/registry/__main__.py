"""``python -m functx.registry``: print which rules every primitive has."""
from functx.registry import main

main()
