"""``python -m spack_site``: the same as ``harness-spack-site``."""

import sys

from spack_site import main

sys.exit(main())
