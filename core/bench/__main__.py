"""``python -m memory_ext.bench``: the benchmark commands without the ``memext`` front end."""

import sys

from .cli import main

sys.exit(main())
