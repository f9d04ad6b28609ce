"""``python -m capshim.cli``: the same entry point as the ``capshim`` command."""

import sys

from capshim.cli.app import main

sys.exit(main())
