"""`python -m convtbc_py` is the `convtbc` command."""

import sys

from .cli import main

sys.exit(main())
