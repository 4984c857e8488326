"""``python -m agentcore.testing --port 8765 [--script responses.json]``: run the fake provider server."""

from agentcore.testing.fake_server import main

main()
