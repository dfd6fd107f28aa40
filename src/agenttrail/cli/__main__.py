"""``python -m agenttrail.cli``: the ``agenttrail`` command."""

import sys

from agenttrail.cli import main

sys.exit(main())
