"""`python -m ladle` is the same as the `ladle` console script."""

import sys

from ladle.cli import main

sys.exit(main())
