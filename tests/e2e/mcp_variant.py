"""Start the catalog fixture server (``tests/fixtures/mcp_catalog_server.py``) in the variant a
file names: ``python tests/e2e/mcp_variant.py VARIANT_FILE``.

The browser tests configure Studio's ``STUDIO_CATALOGS`` once, when daphne starts; writing
``b`` into the file makes the *next* server process Studio starts offer a changed ``add``
(schema drift), the way an MCP server upgraded under a running Studio would.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_catalog_server.py"

if __name__ == "__main__":
    variant_file = Path(sys.argv[1])
    os.environ["FIXTURE_VARIANT"] = variant_file.read_text().strip() if variant_file.exists() else "a"
    sys.argv = [str(FIXTURE)]
    runpy.run_path(str(FIXTURE), run_name="__main__")
