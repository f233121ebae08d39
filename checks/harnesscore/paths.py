"""Where the checkout's parts are (the package is installed editable from it)."""

from __future__ import annotations

import os

REPO_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC_DIR = os.path.join(REPO_DIR, 'src')
#: Where the systems' references files live unless ReFrame's reference prefix
#: (``RFM_REFERENCE_PREFIX``; ReFrame 4.10.4's configuration schema does not
#: accept ``general/reference_prefix`` yet) says otherwise.
REFERENCES_DIR = os.path.join(REPO_DIR, 'config', 'references')
