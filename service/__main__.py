"""``python -m service serve``: the same as the ``sift`` command."""

import sys

from service.client.cli import main

sys.exit(main())
