"""nbgrader's exchange, where a course has none (it collects from an LMS).

formgrader builds nbgrader's NbGraderAPI at every request, and that lists the exchange to
learn whether there is one: nbgrader's lister logs a missing exchange folder as CRITICAL
("Unwritable directory, please contact your instructor: /usr/local/share/nbgrader/
exchange", nbgrader's default Exchange.root), once a request, though formgrader then only
shows its own note that release and collect through the exchange are off. The repository's
nbgrader_config.py makes Listing nbgrader's lister for the course: where Exchange.root is
nbgrader's default and that folder does not exist, the exchange is simply absent (a debug
line, and the ExchangeError formgrader expects). A root the course configures
(c.Exchange.root) that cannot be written is still nbgrader's CRITICAL, and every transfer
(release, fetch, submit: ARGS=--exchange) still fails as nbgrader's does; collect, which
reads the exchange itself (tools/instructor/inbound.py), stops naming the inbound folder
it lacks.
"""

import os

from nbgrader.exchange import ExchangeError
from nbgrader.exchange.default import Exchange, ExchangeList


class Listing(ExchangeList):
    """nbgrader's `list` of the exchange, quiet where the course has no exchange."""

    def ensure_root(self):
        default = Exchange.class_traits()["root"].default_value
        if self.root == default and not os.path.exists(self.root):
            message = f"no nbgrader exchange (c.Exchange.root: {self.root} does not exist)"
            self.log.debug(message)
            raise ExchangeError(message)
        super().ensure_root()
