from __future__ import annotations

import pytest

from collections_app.services import collection_create

GUIDE = """# Install guide

The installer for Linux needs 2 GB of free disk space and a 64-bit processor.

## Troubleshooting

If the installer stops with error ERR-4471, the download was corrupted; run it again.
"""

FAQ_HTML = """<html><body><nav>menu</nav><main><h1>FAQ</h1>
<p>Refunds are possible within 30 days of purchase.</p>
<p>Support answers e-mails within two working days.</p></main><footer>foot</footer></body></html>"""

PRICES = "Product,Price,Currency\nBasic plan,10,EUR\nPro plan,25,EUR\n"


@pytest.fixture
def corpus(tmp_path):
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "guide.md").write_text(GUIDE)
    (root / "faq.html").write_text(FAQ_HTML)
    (root / "prices.csv").write_text(PRICES)
    return root


@pytest.fixture
def collection(db, user):
    return collection_create(name="Docs", slug="docs", user=user)
