"""Studio's session host: the only part of Studio that opens and drives agent runtimes.

Nothing is imported here, so importing one module of the package never pulls in another. The
modules import each other in one direction only, from the bottom up (``tests/studio/
test_import_graph.py`` fails on any circle):

``contract``   the types the host publishes and is driven through (errors, configs, states, ports)
``live``       the in-progress turn of each conversation, keyed by the runtime's ``request_id``
``state``      one open store: its runtime, views and what each view must re-render
``fold``       the one pure fold from agentcore's typed events to state changes and effects
``stream_windows`` how wide the runtimes' stream windows are for the turns streaming at once (and their count)
``effects``    the effects that write Studio's tables (through ``studio.services``)
``publisher``  rendering the changed regions (``studio.pages``) and sending them to the watchers
``factory``    opening a runtime for a store
``commands``   sending a session command to an open store's runtime, reading its transcript
``session_host`` the host itself: commands, the lease task that drives a runtime, opening/closing
``leases``     worker mode: which live worker holds which session (database leases)
``routing``    reaching the host: in this process, or in the worker that holds the session
``local_layer`` the channel layer the default single-machine Studio's processes share (no Redis)
``supervisor`` ``manage.py studio``: daphne plus one session-host worker per core, supervised
"""
