"""``python -m service serve``: the same as ``sift serve``."""

import sys

from service.cli import main

sys.exit(main())
