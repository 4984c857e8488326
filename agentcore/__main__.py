import sys

from agentcore.cli import main

sys.exit(main())
