"""Browser pages of the corpus: collections, members, uploads, jobs, sources, quarantine.

Views parse the form, call one service or selector and render. A collection the
user may not read is a 404 (its existence does not leak); a lacking role for an
action is a message on the page, never an error page. Requests sent by htmx get
the page's named partial instead of the whole page.
"""

from collections_app.views.collections import (
    collection_create_view,
    collection_delete_view,
    collection_detail,
    collection_edit,
    collection_list,
    collection_members,
    collection_web_fallback,
    home,
)
from collections_app.views.quarantine import quarantine_list, quarantine_review_view
from collections_app.views.sources import (
    collection_add_urls,
    collection_upload,
    job_detail,
    source_detail,
    source_download,
    source_reingest_view,
    source_remove_view,
)

__all__ = [
    "collection_add_urls",
    "collection_create_view",
    "collection_delete_view",
    "collection_detail",
    "collection_edit",
    "collection_list",
    "collection_members",
    "collection_upload",
    "collection_web_fallback",
    "home",
    "job_detail",
    "quarantine_list",
    "quarantine_review_view",
    "source_detail",
    "source_download",
    "source_reingest_view",
    "source_remove_view",
]
