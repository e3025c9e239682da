"""The answering pipeline.

``RagQuery → transform → retrieve → fuse → rerank → assemble → generate →
groundedness → RagAnswer``; one module per concept, ``runner`` drives them.
"""
