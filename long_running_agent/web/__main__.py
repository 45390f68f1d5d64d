"""`python -m long_running_agent.web`: serve the dev UI, ADK's API and the approver inbox."""

import sys

from .server import main

sys.exit(main())
