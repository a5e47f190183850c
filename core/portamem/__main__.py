"""``python -m portamem`` runs the CLI."""

from .cli import main

raise SystemExit(main())
