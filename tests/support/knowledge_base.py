"""The knowledge base the answering tests ask questions of, the questions, a trace lookup.

Five short documents indexed by ``tests.support.factories.indexed_collection``
(the ``kb`` fixture of tests/query builds it).
"""

from __future__ import annotations

from typing import Any

from tests.support.factories import Doc

# A small knowledge base. The refund passage shares no word with the
# "money returned" question (only the vector leg can find it); ERR-4471 is
# one code among look-alikes (only the keyword leg pins it down exactly).
KB_DOCS = [
    Doc(
        location="/kb/refunds.md",
        title="Refund policy",
        chunks=[
            "Customers can request a refund within 30 days of purchase. "
            "Refunds are issued to the original payment method within five business days.",
            "Gift cards and downloadable software licences are not refundable once activated.",
        ],
    ),
    Doc(
        location="/kb/errors.md",
        title="Error reference",
        chunks=[
            "ERR-4471: the backup volume is full. Free disk space on the target volume and run "
            "the backup job again.",
            "ERR-4472: the backup server is unreachable. Check the network connection and the "
            "firewall rules.",
            "ERR-4470: the backup configuration file is invalid. Validate it with backupctl check.",
        ],
        pages=[3, 3, 4],
    ),
    Doc(
        location="/kb/errors-general.md",
        title="About error codes",
        chunks=[
            "What does an error code mean? Every error code names one failure and the action "
            "that fixes it; look the code up in the error reference.",
            "Error codes that start with ERR are shown in the status bar and written to the log.",
        ],
    ),
    Doc(
        location="/kb/server.md",
        title="Server operations",
        chunks=[
            "To reboot the application server, stop the service with systemctl stop appserver "
            "and start it again with systemctl start appserver.",
            "The server writes its logs to /var/log/appserver; rotate them weekly.",
        ],
    ),
    Doc(
        location="/kb/shipping.md",
        title="Shipping",
        chunks=[
            "Orders ship within two business days from our warehouse in Rotterdam.",
            "International deliveries take five to ten days depending on customs.",
        ],
    ),
]

REFUND_QUESTION = "How many days do customers have to request a refund?"
UNRELATED_QUESTION = "What is the boiling point of mercury at sea level?"


def step(run: Any, stage: str) -> dict[str, Any]:
    """The trace step that ``stage`` wrote on ``run``."""
    return next(s for s in run.trace if s["stage"] == stage)
