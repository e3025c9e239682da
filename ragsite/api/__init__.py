"""The REST API: collections, sources, ingestion jobs, quarantine, query and query runs.

Views are thin: they parse input with a serializer, call one service or
selector of the apps, and render. Per-collection permissions are checked by
``ragsite.api.access``; app exceptions become clear 4xx/5xx answers in
``ragsite.api.errors``.
"""
