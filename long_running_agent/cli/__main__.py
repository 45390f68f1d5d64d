"""`python -m long_running_agent.cli`: the `expenses` command, for a copy of the project with no console script."""

import sys

from .entry import main

sys.exit(main())
