"""Importing this module warms the importing process up as a lowering fork server.

A compile worker with the warm-up on puts it last in its fork server's preload list
(:data:`~pteforge.server.jobs.warmup.FORK_SERVER_WARM_UP`): ``multiprocessing`` runs nothing
of ours in a fork server but those imports. Nothing else imports it.
"""

from pteforge.server.jobs.warmup import warm_up_fork_server

warm_up_fork_server()
