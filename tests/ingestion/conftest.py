from __future__ import annotations

import pytest

from collections_app.embedding import get_embedder
from tests.support.documents import INSTALL

FAQ_HTML = """<html><body><nav>menu</nav><main><h1>FAQ</h1>
<p>Refunds are possible within 30 days of purchase.</p>
<p>Support answers e-mails within two working days.</p></main><footer>foot</footer></body></html>"""

PRICES = "Product,Price,Currency\nBasic plan,10,EUR\nPro plan,25,EUR\n"


@pytest.fixture
def corpus(tmp_path):
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "guide.md").write_text(INSTALL)
    (root / "faq.html").write_text(FAQ_HTML)
    (root / "prices.csv").write_text(PRICES)
    return root


@pytest.fixture(scope="module")
def embedder():
    """The default embedding model and its tokenizer (the chunking tests)."""
    return get_embedder()
